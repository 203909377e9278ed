//===- PlanVerify.h - Do a plan's ranks compose into one computation? -----===//
//
// loadPlan checks each file of a plan; verifyPlan checks that the programs of
// a multi-device plan work together (docs/plan-format.md, "cleave verify"):
//   - layout-change instructions have shapes consistent with their group's
//     size (all_gather grows its dim n-fold, reduce_scatter shrinks it, ...);
//   - every parameter's weight shards cover it exactly once in each stage
//     that reads it, and every parameter is read somewhere;
//   - simulating every rank through its stage's schedule slots, each recv
//     meets the send of its tag and microbatch from the expected slot with
//     the same shape, each collective is entered by its whole tp or dp group
//     with the same kernel, attributes and input, nothing waits forever and
//     nothing sent is left unreceived.
// Like the runtime, it needs no MLIR; it reads only the loaded Plan.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Plan.h"

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::runtime {

struct VerifyResult {
  /// One line per failure, the first found first: it names the rank and
  /// program, the slot ("forward chunk 1 microbatch 0") and the instruction.
  std::vector<std::string> errors;
  int64_t ranks = 0;
  int64_t programs = 0;
  /// Send/recv pairs matched and group collectives completed over the whole
  /// schedule (every microbatch, every rank).
  int64_t transfers = 0;
  int64_t collectives = 0;

  bool ok() const { return errors.empty(); }
};

/// Verifies `plan`, reporting at most `maxErrors` failures. A plan that
/// loadPlan accepted never makes it crash or loop; a hand-built Plan with
/// dangling buffer ids or phases gets an error, too.
VerifyResult verifyPlan(const Plan &plan, size_t maxErrors = 5);

/// A weight name of a plan: `PATH` (held whole) or `PATH[split(DIM) T/N]` /
/// `PATH[split(DIM, blocks=B) T/N]` (part T of N along DIM, of each of B
/// blocks).
struct WeightShard {
  std::string parameter;
  bool split = false;
  int64_t dim = 0, blocks = 1, part = 0, parts = 1;
};

/// Parses `name`; false when it has a bracket that is not a split.
bool parseWeightShard(const std::string &name, WeightShard *out);

/// Whether weight `name` is a tp rank's part of tensor `tensor`
/// (`tensor[split(...) t/n]`, parsed into `out`). Cheap for other names.
bool isPartOf(const std::string &name, const std::string &tensor, WeightShard *out);

} // namespace cleave::runtime
