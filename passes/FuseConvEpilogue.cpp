//===- FuseConvEpilogue.cpp - residual add and relu into the convolution --===//
//
// A convolutional network follows most convolutions with a relu or a relu6
// (max then min with scalar constants, as imported), and ends each residual
// block with an add of the block's input: kernels that each read the whole
// activation the convolution just wrote. ResNet-50 at batch 2 spends a tenth
// of its time in them, MobileNet-v2 a fifth. The convolution's kernel can
// apply both while the output is in cache, so this pass replaces
//
//   conv2d -> [add with a tensor of the result's type] -> [relu | max(., 0) [-> min(., c)]]
//
// by one `cleave.fused_conv2d` with the add's other operand as `residual`
// and the clamp's bounds as `min` / `max`, wherever each intermediate result
// has no other user. The fused op takes the position of the chain's last op,
// where every operand is defined. Inference only: the fused op has no
// gradient.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "llvm/Support/Debug.h"

#include <optional>

#define DEBUG_TYPE "cleave-fuse-conv-epilogue"

namespace mlir::cleave {
#define GEN_PASS_DEF_FUSECONVEPILOGUE
#include "passes/Passes.h.inc"

namespace {

/// The value of a splat float constant, of any shape that broadcasts to
/// nothing larger than the other operand's (the op's result type says so).
std::optional<double> splatValue(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// The single user of `v`, if it has exactly one use.
Operation *soleUser(Value v) { return v.hasOneUse() ? *v.getUsers().begin() : nullptr; }

/// For a binary op of `v` and a splat constant whose result has v's type:
/// the constant's value.
template <typename BinaryOp> std::optional<double> boundOf(Operation *op, Value v) {
  auto binary = llvm::dyn_cast_or_null<BinaryOp>(op);
  if (!binary || binary.getResult().getType() != v.getType())
    return std::nullopt;
  Value other = binary.getLhs() == v ? binary.getRhs() : binary.getLhs();
  if (other == v)
    return std::nullopt;
  return splatValue(other);
}

struct Epilogue {
  Value residual;
  std::optional<double> min, max;
  /// The chain's ops after the convolution, in order; the last one's result
  /// is what the fused op replaces.
  SmallVector<Operation *, 3> ops;
};

Epilogue findEpilogue(Conv2dOp conv) {
  Epilogue e;
  Value current = conv.getResult();
  if (auto add = llvm::dyn_cast_or_null<AddOp>(soleUser(current))) {
    Value other = add.getLhs() == current ? add.getRhs() : add.getLhs();
    if (other != current && other.getType() == current.getType() &&
        add.getResult().getType() == current.getType()) {
      e.residual = other;
      e.ops.push_back(add);
      current = add.getResult();
    }
  }
  Operation *next = soleUser(current);
  if (auto relu = llvm::dyn_cast_or_null<ReluOp>(next)) {
    e.min = 0.0;
    e.ops.push_back(relu);
    return e;
  }
  // relu6 and hardtanh(0, c) as imported: max(x, 0) then min(., c).
  std::optional<double> lo = boundOf<MaximumOp>(next, current);
  if (!lo || *lo != 0.0)
    return e;
  e.min = lo;
  e.ops.push_back(next);
  current = next->getResult(0);
  Operation *after = soleUser(current);
  if (std::optional<double> hi = boundOf<MinimumOp>(after, current); hi && *hi >= *lo) {
    e.max = hi;
    e.ops.push_back(after);
  }
  return e;
}

struct FuseConvEpiloguePass : impl::FuseConvEpilogueBase<FuseConvEpiloguePass> {
  void runOnOperation() override {
    SmallVector<Conv2dOp> convs;
    getOperation().walk([&](Conv2dOp conv) { convs.push_back(conv); });
    for (Conv2dOp conv : convs) {
      if (!conv.getResult().getType().getElementType().isF32()) {
        LLVM_DEBUG(llvm::dbgs() << "not f32: " << conv << "\n");
        continue;
      }
      Epilogue e = findEpilogue(conv);
      if (e.ops.empty())
        continue;
      Operation *last = e.ops.back();
      OpBuilder b(last);
      FloatAttr min = e.min ? b.getF64FloatAttr(*e.min) : FloatAttr();
      FloatAttr max = e.max ? b.getF64FloatAttr(*e.max) : FloatAttr();
      auto fused = b.create<FusedConv2dOp>(
          conv.getLoc(), conv.getResult().getType(), conv.getInput(), conv.getWeight(),
          conv.getBias(), e.residual, conv.getStrideAttr(), conv.getPaddingAttr(),
          conv.getDilationAttr(), conv.getGroupsAttr(), min, max);
      // Keep what earlier passes recorded on the convolution (its layer).
      for (NamedAttribute attr : conv->getDiscardableAttrs())
        fused->setAttr(attr.getName(), attr.getValue());
      last->getResult(0).replaceAllUsesWith(fused.getResult());
      for (Operation *op : llvm::reverse(e.ops))
        op->erase();
      conv->erase();
      ++numFused;
    }
  }
};

} // namespace
} // namespace mlir::cleave
