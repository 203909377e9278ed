//===- Kernel.h - The contract between the executor and a kernel ----------===//
//
// A backend turns each instruction into a KernelFn once, at load: the builder
// validates operand dtypes, shapes and attributes (a bad plan fails before
// anything runs) and captures what it parsed. The executor then calls the
// function with data pointers only.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Attributes.h"
#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <functional>
#include <optional>
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace cleave::runtime {

/// What an instruction declares, seen at load time.
struct KernelSignature {
  std::string kernel;
  /// std::nullopt for an optional operand that is absent (a linear's bias).
  std::vector<std::optional<TensorDesc>> inputs;
  std::vector<TensorDesc> outputs;
  /// Bytes of arena scratch the plan reserved for this instruction.
  size_t scratchBytes = 0;
  Attributes attrs;
  /// Per input (empty: none): a weight that no instruction writes and no
  /// other instruction reads while the executor lives (a forward-only
  /// program's weights). The kernel may rewrite it once, in place, into a
  /// layout of its own of the same size (the CPU conv2d's prepacked
  /// weights).
  std::vector<bool> ownedConstants;

  bool ownsConstant(size_t input) const {
    return input < ownedConstants.size() && ownedConstants[input];
  }
};

/// Data pointers of one call, in the order of the signature; nullptr for an
/// absent optional input. Outputs never alias inputs.
struct KernelCall {
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
  void *scratch = nullptr;
};

using KernelFn = std::function<Status(const KernelCall &)>;

/// Validates `signature` and, if it is well-formed, stores the prepared
/// kernel in `*fn`.
using KernelBuilder = Status (*)(const KernelSignature &signature, KernelFn *fn);

/// The kernels that move data between ranks (a CommBackend's).
inline constexpr std::string_view kCommKernels[] = {"all_reduce", "all_gather", "reduce_scatter",
                                                    "all_to_all", "send",       "recv"};

/// Whether `kernel` moves data between ranks; reports count its time as
/// communication.
inline bool isCommKernel(std::string_view kernel) {
  return std::find(std::begin(kCommKernels), std::end(kCommKernels), kernel) !=
         std::end(kCommKernels);
}

/// The copies between the host pool and the arena of a spilled plan
/// (docs/plan-format.md, "Spilling to host memory"): the executor issues
/// them on the backend's CopyQueue, not as kernels.
inline bool isCopyKernel(std::string_view kernel) {
  return kernel == "prefetch" || kernel == "spill";
}

/// The collectives: every rank of the kernel's `group` ("tp" or "dp") runs
/// them together.
inline bool isCollective(std::string_view kernel) {
  return kernel == "all_reduce" || kernel == "all_gather" || kernel == "reduce_scatter" ||
         kernel == "all_to_all";
}

/// The kernels that name a `group` of the mesh: the collectives, and
/// `shard`, which keeps this rank's part of a tensor every rank of the
/// group holds whole (its index in the group says which part; nothing is
/// sent). A CommBackend runs them.
inline bool isGroupKernel(std::string_view kernel) {
  return isCollective(kernel) || kernel == "shard";
}

} // namespace cleave::runtime
