//===- ProfileComm.h - Measuring collectives for cleave profile -*- C++ -*-===//
//
// `cleave profile` measures the links between ranks on this machine: it runs
// `mpirun -np N cleave profile-comm-worker`, whose ranks time all-reduce,
// all-gather, reduce-scatter, all-to-all and send/recv for messages of 4 KiB
// to 64 MiB, and then fits the alpha-beta model (link latency α, bandwidth
// B) to each collective through the ring formulas the cost model uses:
//
//   all-reduce                             2(n-1)·α + 2(n-1)/n · S/B
//   all-gather, reduce-scatter, all-to-all  (n-1)·α +  (n-1)/n · S/B
//   send/recv                                     α +          S/B
//
// Nothing here needs MLIR; the worker needs MPI only through CleaveComm.
//
//===----------------------------------------------------------------------===//

#ifndef CLEAVE_CLI_PROFILECOMM_H
#define CLEAVE_CLI_PROFILECOMM_H

#include "cli/Args.h"
#include "runtime/Status.h"

#include <functional>
#include <string>
#include <vector>

namespace cleave {

/// One measurement: the median time of `collective` over `ranks` ranks. S =
/// `bytes` is what the formulas above call S: the buffer each rank reduces
/// (all-reduce), the gathered output (all-gather), each rank's input
/// (reduce-scatter), each rank's send buffer (all-to-all), the message
/// (send/recv).
struct CollectiveSample {
  std::string collective; // "all-reduce", "all-gather", "reduce-scatter",
                          // "all-to-all", "send-recv"
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;
};

/// time = intercept + slope·S fitted to one collective's samples (see
/// fitCommProfile), and the link latency and bandwidth its ring formula
/// turns that into.
struct CollectiveFit {
  std::string collective;
  double intercept = 0;        // seconds
  double slope = 0;            // seconds per byte
  double latency = 0;          // α, seconds (0 if the intercept is negative)
  double bandwidth = 0;        // B, bytes/s (0 if the slope is not positive)
  double maxRelativeError = 0; // of the fitted times against the samples
};

struct CommProfile {
  int ranks = 0;
  std::vector<CollectiveSample> samples;
  std::vector<CollectiveFit> fits;
  /// The intra-node link for the cluster spec: the all-reduce fit, since
  /// all-reduce is what the planner's tp and dp groups spend their time in;
  /// send/recv when all-reduce has no usable fit.
  double linkBandwidth = 0; // bytes/s
  double linkLatency = 0;   // seconds
  std::string linkSource;   // the collective the link comes from

  std::string toJson() const;
};

struct CommProfileOptions {
  double minBytes = 4096;
  double maxBytes = 64.0 * 1024 * 1024;
  /// After this the mpirun process group is killed and an error returned.
  int timeoutSeconds = 300;
};

/// Fits every collective in `samples` (each needs two sizes or more) by
/// least squares: the intercept (latency) through the smaller half of the
/// sizes on relative error, the slope (bandwidth) through the larger half on
/// absolute error, since on a CPU cache-resident messages move faster than
/// streamed ones and one line cannot follow both. Pure.
runtime::Status fitCommProfile(const std::vector<CollectiveSample> &samples,
                               int ranks, CommProfile &out);

/// Runs `mpirun -np ranks cleaveBinary profile-comm-worker` and fits its
/// samples; an empty `cleaveBinary` means this process's own executable.
/// `progress` gets one line per collective and size as they are measured. Never
/// hangs: a missing mpirun, a failed worker (with mpirun's stderr) and the
/// timeout are errors.
runtime::Status
profileCollectives(const std::string &cleaveBinary, int ranks,
                   std::function<void(const std::string &)> progress,
                   CommProfile &out, const CommProfileOptions &options = {});


/// `cleave profile-comm-worker --output FILE [--min-bytes N] [--max-bytes N]`,
/// run on every rank by mpirun; rank 0 writes the samples as JSON to FILE.
/// Hidden: profileCollectives is its only caller.
int runProfileCommWorker(int argc, char **argv);

} // namespace cleave

#endif // CLEAVE_CLI_PROFILECOMM_H
