#include "cli/Args.h"
#include "runtime/Plan.h"

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace cleave {

int usageError(const std::string &message, const char *usage) {
  std::fflush(stdout);
  std::fprintf(stderr, "cleave: error: %s\n\n%s", message.c_str(), usage);
  return 1;
}

bool optionValue(int argc, char **argv, int &i, const char *name, const char **value) {
  size_t n = std::strlen(name);
  if (std::strncmp(argv[i], name, n) != 0)
    return false;
  if (argv[i][n] == '=') {
    *value = argv[i] + n + 1;
    return true;
  }
  if (argv[i][n] != '\0')
    return false;
  *value = i + 1 < argc ? argv[++i] : nullptr;
  return true;
}

bool parseInteger(const char *text, int64_t &out, int64_t min, int64_t max) {
  if (!text || !*text || std::strchr(" \t\n+", *text))
    return false;
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < min || value > max)
    return false;
  out = value;
  return true;
}

std::string selfPath() {
  char buffer[4096];
  ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, n) : std::string("cleave");
}

std::string findOnPath(const std::string &program) {
  const char *path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return "";
}

std::string findMpirun() {
  // A runtime bundle (scripts/bundle-runtime.sh) puts its relocated Open MPI
  // launcher beside the executable; it wins over whatever PATH holds.
  std::string self = selfPath();
  size_t slash = self.rfind('/');
  if (slash != std::string::npos) {
    std::string beside = self.substr(0, slash + 1) + "mpirun";
    if (access(beside.c_str(), X_OK) == 0)
      return beside;
  }
  return findOnPath("mpirun");
}

std::vector<std::string> mpirunEnvironment() {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e)
    env.push_back(*e);
  const char *defaults[][2] = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
                               {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
                               {"OMPI_MCA_plm", "isolated"}};
  for (auto &[name, value] : defaults)
    if (!std::getenv(name))
      env.push_back(std::string(name) + "=" + value);
  return env;
}

bool launchedAsRanks() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char *v = std::getenv(name); v && std::atoi(v) > 1)
      return true;
  return false;
}

int localRank() {
  const char *v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return v ? std::max(0, std::atoi(v)) : 0;
}

int localRanks() {
  const char *v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return v ? std::max(1, std::atoi(v)) : 1;
}

namespace {
pid_t launchedJob = 0;
void forwardSignal(int sig) {
  if (launchedJob > 0)
    kill(-launchedJob, sig);
}
} // namespace

int launchLocal(int ranks, const std::vector<std::string> &args) {
  std::string mpirun = findMpirun();
  if (mpirun.empty()) {
    std::fprintf(stderr, "cleave: error: --local needs mpirun, which is neither beside this "
                         "executable nor on PATH (install openmpi-bin)\n");
    return 1;
  }
  std::vector<std::string> argv = {mpirun,       "-np",    std::to_string(ranks),
                                   "--oversubscribe", "--bind-to", "none",
                                   selfPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env = mpirunEnvironment();
  std::vector<char *> cArgv, cEnv;
  for (std::string &a : argv)
    cArgv.push_back(a.data());
  cArgv.push_back(nullptr);
  for (std::string &e : env)
    cEnv.push_back(e.data());
  cEnv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    std::fprintf(stderr, "cleave: error: cannot start mpirun: %s\n", std::strerror(errno));
    return 1;
  }
  if (pid == 0) {
    setpgid(0, 0);
    execve(cArgv[0], cArgv.data(), cEnv.data());
    _exit(127);
  }
  setpgid(pid, pid);
  launchedJob = pid;
  struct sigaction action {};
  action.sa_handler = forwardSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  launchedJob = 0;
  kill(-pid, SIGKILL); // a rank mpirun left behind
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (code != 0)
    std::fprintf(stderr, "cleave: error: the %d-rank run failed (mpirun exit status %d)\n", ranks,
                 code);
  return code;
}

int launchPlanRanks(int ranks, const std::string &planDir, const std::string &command,
                    const std::vector<std::string> &rankArgs, const char *usage) {
  if (launchedAsRanks())
    return usageError("--local starts ranks itself; under mpirun leave it out", usage);
  int64_t devices = 0;
  runtime::Status status = runtime::readPlanDeviceCount(planDir, &devices);
  if (status.ok() && devices != ranks)
    status = CLEAVE_ERROR("the plan has ", devices, " devices; --local ", ranks, " would start ",
                          ranks, " ranks");
  // The whole plan is read once here, so a damaged one is one error before
  // any rank starts rather than one from every rank after mpirun's start-up.
  runtime::Plan plan;
  if (status.ok())
    status = runtime::loadPlan(planDir, &plan);
  if (!status.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "cleave: error: %s\n", status.prepend(planDir).message().c_str());
    return 1;
  }
  std::vector<std::string> args = {command};
  args.insert(args.end(), rankArgs.begin(), rankArgs.end());
  return launchLocal(ranks, args);
}

std::string strprintf(const char *format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0)
    std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  return out;
}

void printTiming(const char *what, double seconds) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::fprintf(stderr, "cleave: %s took %.2f s, peak memory %.1f MiB\n", what, seconds,
               usage.ru_maxrss / 1024.0);
}

} // namespace cleave
