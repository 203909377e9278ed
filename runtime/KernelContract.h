//===- KernelContract.h - Load-time checks shared by every backend --------===//
//
// Each backend's kernel builders validate an instruction completely before
// anything runs, and name the problem. The checks and the broadcasting layout
// live here so that the CPU and CUDA builders agree on the contract and on the
// messages. No backend-specific code.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Kernel.h"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace cleave::runtime {

/// "cuda backend has no bf16 kernel for 'add' yet"; `backend` is "cpu", "cuda".
Status noKernelFor(const char *backend, const std::string &kernel, DType dtype);

/// Rejects negative dims in any operand (shapes come from a plan file),
/// before a builder computes sizes from them.
Status checkShapes(const KernelSignature &sig);

/// Checks the number of input slots (between minInputs and maxInputs) and
/// that there is exactly `outputs` outputs.
Status checkArity(const KernelSignature &sig, size_t minInputs, size_t maxInputs,
                  size_t outputs = 1);

/// Checks that input slot `index` (called `name` in messages) is present.
Status requirePresent(const KernelSignature &sig, size_t index, const char *name);

/// Checks that `desc` (operand `name`) has one of `allowed`. A bf16/f16
/// operand of a kernel that has an f32 version is reported as "no bf16
/// kernel yet" rather than as a wrong dtype.
Status checkDType(const KernelSignature &sig, const char *backend, const char *name,
                  const TensorDesc &desc, std::initializer_list<DType> allowed);

/// Checks that both operands have the same dtype.
Status checkSameDType(const KernelSignature &sig, const char *nameA, const TensorDesc &a,
                      const char *nameB, const TensorDesc &b);

/// Checks that the output is `expected`; `how` says where the expected shape
/// came from ("the broadcast of 2x1xf32 and 3xf32").
Status checkOutput(const KernelSignature &sig, const TensorDesc &expected,
                   const std::string &how = "");

/// Prefixes an attribute error with the kernel name.
Status withKernel(const KernelSignature &sig, Status status);

/// Checks that a dim attribute lies in [0, rank).
Status checkDim(const KernelSignature &sig, const char *attr, int64_t dim, int64_t rank);

/// Checks that a spatial attribute has two entries, each >= min.
Status checkPair(const KernelSignature &sig, const char *attr, const std::vector<int64_t> &pair,
                 int64_t min);

/// "[0, 2, 1]".
std::string formatList(const std::vector<int64_t> &values);

/// numpy broadcast of shapes, or nullopt if they do not broadcast.
std::optional<Shape> broadcastShapes(const std::vector<Shape> &shapes);

/// Row-major strides in elements.
std::vector<int64_t> contiguousStrides(const Shape &shape);

//===----------------------------------------------------------------------===//
// Broadcasting. Operands are dense row-major; a broadcast operand has stride
// 0 along its stretched dims. Dims are coalesced so that common cases become
// one or two dims.
//===----------------------------------------------------------------------===//

constexpr int kMaxOperands = 3;

struct BroadcastLayout {
  int operands = 0;
  /// Coalesced output dims, outermost first; at least one (possibly 1).
  std::vector<int64_t> dims;
  /// strides[d][k]: the stride of operand k along dim d, in elements.
  std::vector<std::array<int64_t, kMaxOperands>> strides;

  int64_t innerSize() const { return dims.back(); }
  int64_t innerStride(int k) const { return strides.back()[k]; }
};

/// The layout of `inputs` broadcast to `output` (which must be their
/// broadcast shape, or a shape they broadcast to).
BroadcastLayout makeBroadcastLayout(const Shape &output, const std::vector<Shape> &inputs);

} // namespace cleave::runtime
