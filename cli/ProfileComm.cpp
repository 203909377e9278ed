//===- ProfileComm.cpp - Measuring collectives for cleave profile ---------===//
//
// The launcher runs mpirun in its own process group, passes the worker's
// progress lines on as they arrive, and kills the group at the timeout. The
// worker times each collective after warmup: every repetition starts at a
// barrier, counts as long as its slowest rank took, and the sample is the
// median over repetitions, so one preempted repetition does not move it.
//
//===----------------------------------------------------------------------===//

#include "cli/ProfileComm.h"

#include "runtime/AtomicFile.h"
#include "runtime/comm/MpiCommunicator.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace cleave {
namespace rt = runtime;
using rt::Status;
using rt::detail::concat;

namespace {

constexpr const char *kCollectives[] = {
    "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send-recv"};

/// time = latency·α + bandwidth·S/B: the ring formulas of the header.
struct RingFactors {
  double latency;
  double bandwidth;
};

bool ringFactors(const std::string &collective, int ranks, RingFactors &f) {
  double steps = ranks - 1;
  if (collective == "all-reduce")
    f = {2 * steps, 2 * steps / ranks};
  else if (collective == "all-gather" || collective == "reduce-scatter" ||
           collective == "all-to-all")
    f = {steps, steps / ranks};
  else if (collective == "send-recv")
    f = {1, 1};
  else
    return false;
  return true;
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%g %s", bytes, units[unit]);
  return text;
}

std::string formatSeconds(double seconds) {
  char text[32];
  if (seconds < 1e-3)
    std::snprintf(text, sizeof(text), "%.1f us", seconds * 1e6);
  else
    std::snprintf(text, sizeof(text), "%.3f ms", seconds * 1e3);
  return text;
}

/// Least-squares line time = a + b·S through `points`, each weighted by
/// 1/t^power: power 0 minimizes absolute error, 2 relative error. Sizes are
/// scaled to [0, 1] to keep the normal equations well conditioned.
bool fitLine(const std::vector<const CollectiveSample *> &points, int power,
             double &a, double &b) {
  double largest = 0;
  for (const CollectiveSample *p : points)
    largest = std::max(largest, p->bytes);
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CollectiveSample *p : points) {
    double w = std::pow(p->seconds, -power), x = p->bytes / largest;
    sw += w;
    sx += w * x;
    sy += w * p->seconds;
    sxx += w * x * x;
    sxy += w * x * p->seconds;
  }
  double determinant = sw * sxx - sx * sx;
  if (!(determinant > 1e-12 * sw * sxx))
    return false;
  double scaledSlope = (sw * sxy - sx * sy) / determinant;
  a = (sy - scaledSlope * sx) / sw;
  b = scaledSlope / largest;
  return true;
}

Status fitCollective(const std::string &collective,
                     std::vector<const CollectiveSample *> points, int ranks,
                     CollectiveFit &fit) {
  RingFactors factors;
  if (!ringFactors(collective, ranks, factors))
    return CLEAVE_ERROR("unknown collective '", collective, "'");
  for (const CollectiveSample *p : points)
    if (!(p->seconds > 0) || !(p->bytes > 0))
      return CLEAVE_ERROR(collective, " sample of ", p->bytes, " bytes and ",
                          p->seconds, " s: sizes and times must be positive");
  std::sort(points.begin(), points.end(),
            [](auto *x, auto *y) { return x->bytes < y->bytes; });
  std::vector<double> sizes;
  for (const CollectiveSample *p : points)
    if (sizes.empty() || p->bytes != sizes.back())
      sizes.push_back(p->bytes);
  if (sizes.size() < 2)
    return CLEAVE_ERROR(collective,
                        ": fitting needs samples at two sizes or more");

  // On a CPU one line cannot follow both ends: messages that fit in cache
  // move several times faster than those that stream from memory. So the
  // latency comes from the smaller half of the sizes (relative error, all
  // small sizes count alike) and the bandwidth from the larger half
  // (absolute error: the largest messages, which dominate a step's time,
  // count most). With one regime, as on GPUs, both halves agree.
  std::vector<const CollectiveSample *> small = points, large = points;
  if (sizes.size() >= 4) {
    double split = sizes[sizes.size() / 2];
    small.clear();
    large.clear();
    for (const CollectiveSample *p : points)
      (p->bytes < split ? small : large).push_back(p);
  }
  double smallA, smallB, largeA, largeB;
  if (!fitLine(small, 2, smallA, smallB) || !fitLine(large, 0, largeA, largeB))
    return CLEAVE_ERROR(collective, ": the samples do not determine a line");

  fit.collective = collective;
  fit.intercept = smallA;
  fit.slope = largeB;
  fit.latency = fit.intercept > 0 ? fit.intercept / factors.latency : 0;
  fit.bandwidth = fit.slope > 0 ? factors.bandwidth / fit.slope : 0;
  fit.maxRelativeError = 0;
  for (const CollectiveSample *p : points) {
    double predicted = fit.intercept + fit.slope * p->bytes;
    fit.maxRelativeError = std::max(
        fit.maxRelativeError, std::abs(predicted - p->seconds) / p->seconds);
  }
  return Status();
}

//===----------------------------------------------------------------------===//
// The worker: one per rank, under mpirun.
//===----------------------------------------------------------------------===//

struct WorkerArgs {
  std::string output;
  double minBytes = 4096;
  double maxBytes = 64.0 * 1024 * 1024;
};

constexpr const char *kWorkerError = "cleave profile-comm-worker: error: ";

bool parseWorkerArgs(int argc, char **argv, WorkerArgs &args,
                     std::string &error) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) {
      error = "missing value after " + arg;
      return false;
    }
    const char *value = argv[++i];
    if (arg == "--output") {
      args.output = value;
    } else if (arg == "--min-bytes" || arg == "--max-bytes") {
      char *end = nullptr;
      double bytes = std::strtod(value, &end);
      if (*end || !(bytes >= 64)) {
        error = arg + " needs a size of 64 bytes or more, got '" + value + "'";
        return false;
      }
      (arg == "--min-bytes" ? args.minBytes : args.maxBytes) = bytes;
    } else {
      error = "unknown option " + arg;
      return false;
    }
  }
  if (args.output.empty())
    error = "--output FILE is required";
  else if (args.minBytes > args.maxBytes)
    error = "--min-bytes is larger than --max-bytes";
  return error.empty();
}

/// Times the collectives over `world` on f32 buffers of up to maxBytes.
class CollectiveBench {
public:
  CollectiveBench(rt::Communicator &world, double maxBytes)
      : world_(world), in_(size_t(maxBytes) / 4 + 1, 1.0f),
        out_(size_t(maxBytes) / 4 + 1, 0.0f) {}

  /// Measures one collective at a nominal size S; rank 0 gets the sample.
  Status measure(const std::string &collective, double nominalBytes,
                 CollectiveSample &sample, int &repetitions) {
    const int ranks = world_.size();
    size_t count = elementsPerCall(collective, nominalBytes);
    sample = {collective, ranks, bytesOf(collective, count), 0};
    if (count == 0)
      return CLEAVE_ERROR(collective, " of ", nominalBytes, " bytes over ",
                          ranks, " ranks is under one element");

    double warmup = 0;
    for (int i = 0, n = nominalBytes >= 16 * 1024 * 1024 ? 1 : 2; i < n; ++i)
      CLEAVE_RETURN_IF_ERROR(timeOnce(collective, count, warmup));
    // Rank 0 picks the repetitions so that every rank runs the same number:
    // about 0.2 s per point, 3 to 100 repetitions.
    int32_t reps =
        int32_t(std::clamp(0.2 / std::max(warmup, 1e-9), 3.0, 100.0));
    CLEAVE_RETURN_IF_ERROR(world_.broadcast(&reps, 1, rt::DType::I32, 0));

    std::vector<int64_t> nanoseconds(reps);
    for (int r = 0; r < reps; ++r) {
      CLEAVE_RETURN_IF_ERROR(world_.barrier());
      double seconds = 0;
      CLEAVE_RETURN_IF_ERROR(timeOnce(collective, count, seconds));
      nanoseconds[r] = int64_t(seconds * 1e9);
    }
    std::vector<int64_t> everyRank(size_t(reps) * ranks);
    CLEAVE_RETURN_IF_ERROR(world_.allGather(
        nanoseconds.data(), everyRank.data(), reps, rt::DType::I64));
    std::vector<double> slowest(reps, 0);
    for (int rank = 0; rank < ranks; ++rank)
      for (int r = 0; r < reps; ++r)
        slowest[r] = std::max(slowest[r], everyRank[rank * reps + r] * 1e-9);
    std::sort(slowest.begin(), slowest.end());
    double median = reps % 2 ? slowest[reps / 2]
                             : (slowest[reps / 2 - 1] + slowest[reps / 2]) / 2;
    // A ping-pong is two messages.
    sample.seconds = collective == "send-recv" ? median / 2 : median;
    repetitions = reps;
    return Status();
  }

private:
  size_t elementsPerCall(const std::string &collective, double bytes) const {
    size_t elements = size_t(bytes) / 4;
    if (collective == "all-reduce" || collective == "send-recv")
      return elements;
    return elements / world_.size(); // one rank's block
  }

  double bytesOf(const std::string &collective, size_t count) const {
    double bytes = double(count) * 4;
    if (collective == "all-reduce" || collective == "send-recv")
      return bytes;
    return bytes * world_.size();
  }

  Status timeOnce(const std::string &collective, size_t count,
                  double &seconds) {
    auto start = std::chrono::steady_clock::now();
    CLEAVE_RETURN_IF_ERROR(run(collective, count));
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return Status();
  }

  Status run(const std::string &collective, size_t count) {
    float *in = in_.data(), *out = out_.data();
    const rt::DType f32 = rt::DType::F32;
    if (collective == "all-reduce")
      return world_.allReduce(in, out, count, f32, rt::ReduceOp::Sum);
    if (collective == "all-gather")
      return world_.allGather(in, out, count, f32);
    if (collective == "reduce-scatter")
      return world_.reduceScatter(in, out, count, f32, rt::ReduceOp::Sum);
    if (collective == "all-to-all")
      return world_.allToAll(in, out, count, f32);
    // Ping-pong between ranks 0 and 1; the others wait at the next barrier.
    if (world_.rank() == 0) {
      CLEAVE_RETURN_IF_ERROR(world_.send(in, count, f32, 1, 0));
      return world_.recv(out, count, f32, 1, 1);
    }
    if (world_.rank() == 1) {
      CLEAVE_RETURN_IF_ERROR(world_.recv(out, count, f32, 0, 0));
      return world_.send(out, count, f32, 0, 1);
    }
    return Status();
  }

  rt::Communicator &world_;
  std::vector<float> in_, out_;
};

nlohmann::ordered_json samplesJson(const std::vector<CollectiveSample> &samples) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const CollectiveSample &s : samples)
    list.push_back({{"collective", s.collective},
                    {"ranks", s.ranks},
                    {"bytes", s.bytes},
                    {"seconds", s.seconds}});
  return list;
}

std::string samplesToJson(int ranks,
                          const std::vector<CollectiveSample> &samples) {
  nlohmann::ordered_json json;
  json["ranks"] = ranks;
  json["samples"] = samplesJson(samples);
  return json.dump(2) + "\n";
}

Status measureAll(rt::Communicator &world, const WorkerArgs &args) {
  if (world.size() < 2)
    return CLEAVE_ERROR("measuring collectives needs 2 ranks or more, got ",
                        world.size(), " (run it through `cleave profile`)");
  CollectiveBench bench(world, args.maxBytes);
  std::vector<CollectiveSample> samples;
  for (const char *collective : kCollectives) {
    for (double bytes = args.minBytes; bytes <= args.maxBytes; bytes *= 4) {
      CollectiveSample sample;
      int repetitions = 0;
      CLEAVE_RETURN_IF_ERROR(
          bench.measure(collective, bytes, sample, repetitions));
      if (world.rank() != 0)
        continue;
      samples.push_back(sample);
      std::printf("%s on %d ranks, %s: %s (median of %d)\n", collective,
                  world.size(), formatBytes(bytes).c_str(),
                  formatSeconds(sample.seconds).c_str(), repetitions);
      std::fflush(stdout);
    }
  }
  if (world.rank() == 0)
    CLEAVE_RETURN_IF_ERROR(
        rt::writeFileAtomically(args.output, samplesToJson(world.size(), samples)));
  return world.barrier();
}

//===----------------------------------------------------------------------===//
// The launcher.
//===----------------------------------------------------------------------===//

} // namespace

namespace {

struct ChildOutcome {
  bool timedOut = false;
  int exitStatus = 0; // waitpid's status
  std::string stderrTail;
};

/// Kills the whole process group: mpirun forwards SIGTERM to its ranks;
/// SIGKILL follows for whatever is left after a grace period.
void killGroup(pid_t pid) {
  kill(-pid, SIGTERM);
  for (int i = 0; i < 50; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) {
      kill(-pid, SIGKILL); // ranks that ignored mpirun's end
      return;
    }
    usleep(100 * 1000);
  }
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

/// Runs argv[0] in its own process group; stdout lines go to `onLine`.
Status runWithTimeout(const std::vector<std::string> &argv, int timeoutSeconds,
                      const std::function<void(const std::string &)> &onLine,
                      ChildOutcome &outcome) {
  std::vector<std::string> env = mpirunEnvironment();
  std::vector<char *> cArgv, cEnv;
  for (const std::string &a : argv)
    cArgv.push_back(const_cast<char *>(a.c_str()));
  cArgv.push_back(nullptr);
  for (const std::string &e : env)
    cEnv.push_back(const_cast<char *>(e.c_str()));
  cEnv.push_back(nullptr);

  int outPipe[2], errPipe[2];
  if (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0)
    return CLEAVE_ERROR("cannot create pipes for mpirun: ",
                        std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0)
    return CLEAVE_ERROR("cannot start mpirun: ", std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    setpgid(0, 0);
    int devNull = open("/dev/null", O_RDONLY);
    dup2(devNull, 0);
    dup2(outPipe[1], 1);
    dup2(errPipe[1], 2);
    execve(cArgv[0], cArgv.data(), cEnv.data());
    const char message[] = "cannot execute mpirun\n";
    (void)!write(2, message, sizeof(message) - 1);
    _exit(127);
  }
  setpgid(pid, pid); // also here, so killGroup never races the child
  close(outPipe[1]);
  close(errPipe[1]);

  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  pollfd fds[2] = {{outPipe[0], POLLIN, 0}, {errPipe[0], POLLIN, 0}};
  std::string pendingLine;
  char chunk[4096];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      outcome.timedOut = true;
      break;
    }
    if (poll(fds, 2, int(std::min<long long>(left, 1000))) < 0 &&
        errno != EINTR)
      break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      ssize_t n = read(fds[i].fd, chunk, sizeof(chunk));
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        continue;
      }
      if (i == 1) {
        outcome.stderrTail.append(chunk, n);
        if (outcome.stderrTail.size() > 64 * 1024)
          outcome.stderrTail.erase(0, outcome.stderrTail.size() - 32 * 1024);
        continue;
      }
      pendingLine.append(chunk, n);
      for (size_t end; (end = pendingLine.find('\n')) != std::string::npos;) {
        std::string line = pendingLine.substr(0, end);
        pendingLine.erase(0, end + 1);
        if (!line.empty() && onLine)
          onLine(line);
      }
    }
  }
  for (pollfd &fd : fds)
    if (fd.fd >= 0)
      close(fd.fd);
  if (!pendingLine.empty() && onLine)
    onLine(pendingLine);

  // Closed pipes do not mean mpirun has exited; keep to the deadline.
  while (!outcome.timedOut) {
    pid_t done = waitpid(pid, &outcome.exitStatus, WNOHANG);
    if (done == pid)
      return Status();
    if (std::chrono::steady_clock::now() >= deadline)
      outcome.timedOut = true;
    else
      usleep(20 * 1000);
  }
  killGroup(pid);
  return Status();
}

/// The worker's own error lines if it printed any, else the stderr tail.
std::string failureDetail(const std::string &stderrText) {
  std::stringstream lines(stderrText);
  std::string line, workerErrors, tail;
  std::vector<std::string> last;
  while (std::getline(lines, line)) {
    if (line.find(kWorkerError) != std::string::npos &&
        workerErrors.find(line) == std::string::npos)
      workerErrors += line + "\n";
    if (!line.empty())
      last.push_back(line);
  }
  if (!workerErrors.empty())
    return workerErrors;
  size_t first = last.size() > 15 ? last.size() - 15 : 0;
  for (size_t i = first; i < last.size(); ++i)
    tail += last[i] + "\n";
  return tail.empty() ? "(mpirun printed nothing on stderr)\n" : tail;
}

Status readSamples(const std::string &path,
                   std::vector<CollectiveSample> &samples) {
  std::ifstream file(path);
  if (!file)
    return CLEAVE_ERROR("the worker wrote no results to ", path);
  try {
    nlohmann::json json = nlohmann::json::parse(file);
    for (const auto &s : json.at("samples"))
      samples.push_back({s.at("collective").get<std::string>(),
                         s.at("ranks").get<int>(), s.at("bytes").get<double>(),
                         s.at("seconds").get<double>()});
  } catch (const std::exception &e) {
    return CLEAVE_ERROR("cannot read the worker's results ", path, ": ",
                        e.what());
  }
  return Status();
}

} // namespace

//===----------------------------------------------------------------------===//

std::string CommProfile::toJson() const {
  nlohmann::ordered_json json;
  json["ranks"] = ranks;
  json["link"] = {{"latency", linkLatency},
                  {"bandwidth", linkBandwidth},
                  {"source", linkSource}};
  json["fits"] = nlohmann::ordered_json::array();
  for (const CollectiveFit &f : fits)
    json["fits"].push_back({{"collective", f.collective},
                            {"intercept", f.intercept},
                            {"slope", f.slope},
                            {"latency", f.latency},
                            {"bandwidth", f.bandwidth},
                            {"max_relative_error", f.maxRelativeError}});
  json["samples"] = samplesJson(samples);
  return json.dump(2) + "\n";
}

Status fitCommProfile(const std::vector<CollectiveSample> &samples, int ranks,
                      CommProfile &out) {
  if (ranks < 2)
    return CLEAVE_ERROR("collective fits need 2 ranks or more, got ", ranks);
  std::map<std::string, std::vector<const CollectiveSample *>> byCollective;
  RingFactors unused;
  for (const CollectiveSample &s : samples) {
    if (!ringFactors(s.collective, ranks, unused))
      return CLEAVE_ERROR("unknown collective '", s.collective,
                          "' in the samples");
    if (s.ranks != ranks)
      return CLEAVE_ERROR(s.collective, " sample on ", s.ranks,
                          " ranks in a profile of ", ranks);
    byCollective[s.collective].push_back(&s);
  }
  if (byCollective.empty())
    return CLEAVE_ERROR("no collective samples to fit");

  CommProfile profile;
  profile.ranks = ranks;
  profile.samples = samples;
  for (const char *collective : kCollectives) {
    auto it = byCollective.find(collective);
    if (it == byCollective.end())
      continue;
    CollectiveFit fit;
    CLEAVE_RETURN_IF_ERROR(fitCollective(collective, it->second, ranks, fit));
    profile.fits.push_back(fit);
  }
  for (const char *source : {"all-reduce", "send-recv"}) {
    for (const CollectiveFit &fit : profile.fits) {
      if (fit.collective == source && fit.bandwidth > 0) {
        profile.linkBandwidth = fit.bandwidth;
        profile.linkLatency = fit.latency;
        profile.linkSource = source;
        break;
      }
    }
    if (!profile.linkSource.empty())
      break;
  }
  if (profile.linkSource.empty())
    return CLEAVE_ERROR("neither all-reduce nor send-recv gave a positive "
                        "bandwidth; the link cannot be measured");
  out = std::move(profile);
  return Status();
}

Status profileCollectives(const std::string &cleaveBinary, int ranks,
                          std::function<void(const std::string &)> progress,
                          CommProfile &out, const CommProfileOptions &options) {
  if (ranks < 2)
    return CLEAVE_ERROR("measuring collectives needs 2 ranks or more, got ",
                        ranks);
  std::string self = cleaveBinary;
  if (self.empty()) {
    char path[4096];
    ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (length <= 0)
      return CLEAVE_ERROR("cannot find the cleave binary (/proc/self/exe): ",
                          std::strerror(errno));
    self.assign(path, length);
  }
  std::string mpirun = findMpirun();
  if (mpirun.empty())
    return CLEAVE_ERROR("measuring collectives needs mpirun, which is neither beside this "
                        "executable nor on PATH (Debian: apt-get install openmpi-bin)");

  const char *tmpdir = std::getenv("TMPDIR");
  std::string output =
      std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/cleave-comm-XXXXXX";
  int fd = mkstemp(output.data());
  if (fd < 0)
    return CLEAVE_ERROR("cannot create a temporary file for the results: ",
                        std::strerror(errno));
  close(fd);

  std::vector<std::string> argv = {mpirun,
                                   "-np",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   self,
                                   "profile-comm-worker",
                                   "--output",
                                   output,
                                   "--min-bytes",
                                   std::to_string((long long)options.minBytes),
                                   "--max-bytes",
                                   std::to_string((long long)options.maxBytes)};
  ChildOutcome outcome;
  Status launched =
      runWithTimeout(argv, options.timeoutSeconds, progress, outcome);
  auto cleanUp = [&] {
    std::remove(output.c_str());
    std::remove((output + ".tmp").c_str());
  };
  if (!launched.ok()) {
    cleanUp();
    return launched;
  }
  std::string command =
      concat("mpirun -np ", ranks, " ", self, " profile-comm-worker");
  if (outcome.timedOut) {
    cleanUp();
    return CLEAVE_ERROR("measuring collectives on ", ranks,
                        " ranks did not finish within ", options.timeoutSeconds,
                        " s; mpirun and its ranks were killed. stderr:\n",
                        failureDetail(outcome.stderrTail));
  }
  if (!WIFEXITED(outcome.exitStatus) || WEXITSTATUS(outcome.exitStatus) != 0) {
    cleanUp();
    std::string how =
        WIFEXITED(outcome.exitStatus)
            ? concat("exited with status ", WEXITSTATUS(outcome.exitStatus))
            : concat("was killed by signal ", WTERMSIG(outcome.exitStatus));
    return CLEAVE_ERROR("measuring collectives failed: `", command, "` ", how,
                        ":\n", failureDetail(outcome.stderrTail));
  }
  std::vector<CollectiveSample> samples;
  Status read = readSamples(output, samples);
  cleanUp();
  CLEAVE_RETURN_IF_ERROR(read);
  return fitCommProfile(samples, ranks, out);
}

int runProfileCommWorker(int argc, char **argv) {
  WorkerArgs args;
  std::string error;
  // Every rank gets the same arguments, so all of them stop here together.
  if (!parseWorkerArgs(argc, argv, args, error)) {
    std::fprintf(stderr, "%s%s\n", kWorkerError, error.c_str());
    return 2;
  }
  std::unique_ptr<rt::Communicator> world;
  Status status = rt::createMpiWorld(&world);
  if (status.ok())
    status = measureAll(*world, args);
  if (status.ok())
    return 0;
  std::fprintf(stderr, "%s%s\n", kWorkerError, status.message().c_str());
  std::fflush(stderr);
  // The other ranks may be waiting in a collective for this one.
  if (world && world->size() > 1)
    world->abortJob(1);
  return 1;
}

} // namespace cleave
