//===- CleaveOps.cpp - verifiers, type inference and folders --------------===//

#include "dialects/cleave/CleaveDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::cleave;

namespace {

RankedTensorType tensorType(Value value) {
  return llvm::cast<RankedTensorType>(value.getType());
}

/// Checks that a (non-negative) dim attribute names a dim of `rank`.
LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank,
                        llvm::StringRef what = "dim") {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << what << " " << dim
                             << " is out of range for rank " << rank;
  return success();
}

/// Checks that a spatial (height, width) attribute has two entries >= `min`.
LogicalResult checkPair(std::optional<Location> loc, llvm::StringRef name,
                        ArrayRef<int64_t> pair, int64_t min) {
  if (pair.size() != 2)
    return emitOptionalError(loc, name, " must have 2 entries (height, width), got ",
                             pair.size());
  if (pair[0] < min || pair[1] < min)
    return emitOptionalError(loc, name, " entries must be >= ", min);
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Values.
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError("needs a non-empty parameter name");
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Elementwise.
//===----------------------------------------------------------------------===//

LogicalResult CompareOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  return inferBroadcastType(
      loc, {adaptor.getLhs().getType(), adaptor.getRhs().getType()}, {},
      IntegerType::get(context, 1), types);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  return inferBroadcastType(
      loc, {adaptor.getOnTrue().getType(), adaptor.getOnFalse().getType()},
      {adaptor.getCondition().getType()}, nullptr, types);
}

LogicalResult CastOp::verify() {
  if (tensorType(getInput()).getShape() != tensorType(getResult()).getShape())
    return emitOpError("changes the shape: ") << getInput().getType() << " to "
                                              << getResult().getType();
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

template <typename TriangleOp>
static LogicalResult verifyTriangle(TriangleOp op) {
  if (tensorType(op.getInput()).getRank() < 2)
    return op.emitOpError("needs a tensor of rank >= 2");
  return success();
}
LogicalResult TrilOp::verify() { return verifyTriangle(*this); }
LogicalResult TriuOp::verify() { return verifyTriangle(*this); }

//===----------------------------------------------------------------------===//
// Contractions and layers.
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto lhs = llvm::cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = llvm::cast<RankedTensorType>(adaptor.getRhs().getType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOptionalError(loc, "matmul operands need rank >= 2, got ", lhs,
                             " and ", rhs);
  if (lhs.getElementType() != rhs.getElementType())
    return emitOptionalError(loc, "matmul operands have different element types");
  ArrayRef<int64_t> a = lhs.getShape(), b = rhs.getShape();
  if (a.back() != b[b.size() - 2])
    return emitOptionalError(loc, "matmul contraction dims differ: ", lhs, " x ",
                             rhs);
  auto batch = broadcastShapes({a.drop_back(2), b.drop_back(2)});
  if (!batch)
    return emitOptionalError(loc, "matmul batch dims do not broadcast: ", lhs,
                             " x ", rhs);
  batch->push_back(a[a.size() - 2]);
  batch->push_back(b.back());
  types.push_back(RankedTensorType::get(*batch, lhs.getElementType()));
  return success();
}

LogicalResult LinearOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto input = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  auto weight = llvm::cast<RankedTensorType>(adaptor.getWeight().getType());
  if (input.getRank() < 1 || weight.getRank() != 2)
    return emitOptionalError(loc, "linear needs input rank >= 1 and a 2-D weight");
  if (input.getShape().back() != weight.getDimSize(1))
    return emitOptionalError(loc, "linear input features ", input.getShape().back(),
                             " differ from weight ", weight, " (expected [out, in])");
  if (input.getElementType() != weight.getElementType())
    return emitOptionalError(loc, "linear input and weight element types differ");
  if (Value bias = adaptor.getBias()) {
    auto biasType = llvm::cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != weight.getDimSize(0) ||
        biasType.getElementType() != weight.getElementType())
      return emitOptionalError(loc, "linear bias ", biasType,
                               " does not match the weight's out features ",
                               weight.getDimSize(0));
  }
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = weight.getDimSize(0);
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto weight = llvm::cast<RankedTensorType>(adaptor.getWeight().getType());
  auto indices = llvm::cast<RankedTensorType>(adaptor.getIndices().getType());
  if (weight.getRank() != 2)
    return emitOptionalError(loc, "embedding table must be 2-D [rows, dim], got ",
                             weight);
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(weight.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, weight.getElementType()));
  return success();
}

/// Checks an optional affine operand (`weight`/`bias`) of a normalization.
static LogicalResult verifyAffine(Operation *op, Value value, llvm::StringRef name,
                                  ArrayRef<int64_t> shape, Type elementType) {
  if (!value)
    return success();
  auto type = tensorType(value);
  if (type.getShape() != shape || type.getElementType() != elementType)
    return op->emitOpError() << name << " has type " << type << ", expected shape ["
                             << shape << "] of " << elementType;
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto input = tensorType(getInput());
  ArrayRef<int64_t> normalized = getNormalizedShape();
  if (normalized.empty() || normalized.size() > size_t(input.getRank()) ||
      input.getShape().take_back(normalized.size()) != normalized)
    return emitOpError("normalized_shape [")
           << normalized << "] must be the trailing dims of " << input;
  // Any eps, as PyTorch: a negative one may make rsqrt(var + eps) NaN.
  Type et = input.getElementType();
  if (failed(verifyAffine(*this, getWeight(), "weight", normalized, et)) ||
      failed(verifyAffine(*this, getBias(), "bias", normalized, et)))
    return failure();
  return success();
}

LogicalResult BatchNormOp::verify() {
  auto input = tensorType(getInput());
  if (input.getRank() < 2)
    return emitOpError("input must be [N, C, ...], got ") << input;
  int64_t channels[] = {input.getDimSize(1)};
  Type et = input.getElementType();
  if (failed(verifyAffine(*this, getMean(), "mean", channels, et)) ||
      failed(verifyAffine(*this, getVar(), "var", channels, et)) ||
      failed(verifyAffine(*this, getWeight(), "weight", channels, et)) ||
      failed(verifyAffine(*this, getBias(), "bias", channels, et)))
    return failure();
  if (getEps().convertToDouble() < 0)
    return emitOpError("eps must be >= 0");
  return success();
}

template <typename NormalizeOp>
static LogicalResult verifyNormalizeAlongDim(NormalizeOp op) {
  return verifyDim(op, op.getDimAttr().getInt(), tensorType(op.getInput()).getRank());
}
LogicalResult SoftmaxOp::verify() { return verifyNormalizeAlongDim(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifyNormalizeAlongDim(*this); }

LogicalResult mlir::cleave::verifyIndexReduction(Operation *op, int64_t dim) {
  auto input = tensorType(op->getOperand(0));
  if (failed(verifyDim(op, dim, input.getRank())))
    return failure();
  // PyTorch refuses it too: an empty dim has no extremum to index.
  if (input.getDimSize(dim) == 0)
    return op->emitOpError() << "cannot take an extremum over the empty dim " << dim << " of "
                             << input;
  return success();
}

LogicalResult mlir::cleave::verifyScan(Operation *op, int64_t dim) {
  return verifyDim(op, dim, tensorType(op->getOperand(0)).getRank());
}

LogicalResult AttentionOp::verify() {
  auto q = tensorType(getQ()), k = tensorType(getK()), v = tensorType(getV());
  auto result = tensorType(getResult());
  for (auto [name, type] : {std::pair<StringRef, RankedTensorType>{"q", q}, {"k", k}, {"v", v}})
    if (type.getRank() != 4)
      return emitOpError() << name << " must be [batch, heads, sequence, head_dim], got " << type;
  if (k.getElementType() != q.getElementType() || v.getElementType() != q.getElementType())
    return emitOpError("q, k and v must have one element type, got ")
           << q << ", " << k << " and " << v;
  ArrayRef<int64_t> qs = q.getShape(), ks = k.getShape(), vs = v.getShape();
  if (ks.take_front(2) != qs.take_front(2) || vs.take_front(2) != qs.take_front(2))
    return emitOpError("q, k and v must have the same batch and heads (dims 0 and 1), got ")
           << q << ", " << k << " and " << v;
  if (ks[3] != qs[3])
    return emitOpError("k's head dim ") << ks[3] << " differs from q's " << qs[3];
  if (vs[2] != ks[2])
    return emitOpError("v has ") << vs[2] << " keys (dim 2), k has " << ks[2];
  if (ks[2] == 0)
    return emitOpError("needs at least one key: a query that sees no key has no softmax");
  if (getCausal() && ks[2] < qs[2])
    return emitOpError("causal attention needs at least as many keys as queries, got ")
           << ks[2] << " keys for " << qs[2]
           << " queries: query i sees keys j <= i + (keys - queries), so the first "
           << qs[2] - ks[2] << " would see none";
  double scale = getScale().convertToDouble();
  if (!std::isfinite(scale))
    return emitOpError("scale must be finite, got ") << scale;
  auto expected = RankedTensorType::get({qs[0], qs[1], qs[2], vs[3]}, q.getElementType());
  if (result != expected)
    return emitOpError("result must be ")
           << expected << " ([batch, heads, queries, v's head dim]), got " << result;
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling.
//===----------------------------------------------------------------------===//

LogicalResult mlir::cleave::inferConvolutionType(std::optional<Location> loc, int64_t nd,
                                                 Value inputValue,
                                   Value weightValue, Value bias, ArrayRef<int64_t> stride,
                                   ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                                   int64_t groups, SmallVectorImpl<Type> &types) {
  std::string name = "conv" + std::to_string(nd) + "d";
  auto input = llvm::cast<RankedTensorType>(inputValue.getType());
  auto weight = llvm::cast<RankedTensorType>(weightValue.getType());
  if (input.getRank() != nd + 2 || weight.getRank() != nd + 2)
    return emitOptionalError(
        loc, name, " needs a ", nd + 2, "-D input ",
        nd == 2 ? "[N, C, H, W] and a 4-D weight [F, C/groups, KH, KW]"
                : "[N, C, D, H, W] and a 5-D weight [F, C/groups, KD, KH, KW]",
        ", got ", input, " and ", weight);
  const char *dims = nd == 2 ? "(height, width)" : "(depth, height, width)";
  for (auto [what, list, min] : {std::tuple{"stride", stride, 1}, {"padding", padding, 0},
                                 {"dilation", dilation, 1}}) {
    if (int64_t(list.size()) != nd)
      return emitOptionalError(loc, what, " must have ", nd, " entries ", dims, ", got ",
                               list.size());
    for (int64_t v : list)
      if (v < min)
        return emitOptionalError(loc, what, " entries must be >= ", min);
  }
  int64_t channels = input.getDimSize(1), filters = weight.getDimSize(0);
  if (groups < 1 || channels % groups || filters % groups ||
      weight.getDimSize(1) * groups != channels)
    return emitOptionalError(loc, name, ": ", channels, " input channels, ", filters,
                             " filters of depth ", weight.getDimSize(1),
                             " do not fit groups = ", groups);
  if (input.getElementType() != weight.getElementType())
    return emitOptionalError(loc, name, " input and weight element types differ");
  if (bias) {
    auto biasType = llvm::cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != filters ||
        biasType.getElementType() != weight.getElementType())
      return emitOptionalError(loc, name, " bias ", biasType, " must be [", filters,
                               "] of the weight's element type");
  }
  SmallVector<int64_t> shape = {input.getDimSize(0), filters};
  for (int64_t i = 0; i < nd; ++i) {
    int64_t out = windowOutputSize(input.getDimSize(2 + i), weight.getDimSize(2 + i),
                                   stride[i], padding[i], dilation[i], false);
    if (out < 1)
      return emitOptionalError(loc, name, " kernel is larger than the padded input");
    shape.push_back(out);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  return inferConvolutionType(loc, 2, adaptor.getInput(), adaptor.getWeight(),
                              adaptor.getBias(), adaptor.getStride(), adaptor.getPadding(),
                              adaptor.getDilation(), adaptor.getGroupsAttr().getInt(), types);
}

LogicalResult FusedConv2dOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                              Adaptor adaptor, SmallVectorImpl<Type> &types) {
  return inferConvolutionType(loc, 2, adaptor.getInput(), adaptor.getWeight(),
                              adaptor.getBias(), adaptor.getStride(), adaptor.getPadding(),
                              adaptor.getDilation(), adaptor.getGroupsAttr().getInt(), types);
}

LogicalResult FusedConv2dOp::verify() {
  if (Value residual = getResidual(); residual && residual.getType() != getResult().getType())
    return emitOpError() << "residual " << residual.getType() << " must have the result's type "
                         << getResult().getType();
  auto value = [](FloatAttr a) {
    return a ? std::optional<double>(a.getValueAsDouble()) : std::nullopt;
  };
  std::optional<double> lo = value(getMinAttr()), hi = value(getMaxAttr());
  if ((lo && std::isnan(*lo)) || (hi && std::isnan(*hi)))
    return emitOpError() << "clamp bounds must be numbers";
  if (lo && hi && *lo > *hi)
    return emitOpError() << "min " << *lo << " is above max " << *hi;
  return success();
}

/// Result type of a pooling window over the spatial dims of NCHW `input`.
static LogicalResult inferPoolType(std::optional<Location> loc, Type inputType,
                                   ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
                                   ArrayRef<int64_t> padding,
                                   ArrayRef<int64_t> dilation, bool ceilMode,
                                   SmallVectorImpl<Type> &types) {
  auto input = llvm::cast<RankedTensorType>(inputType);
  if (input.getRank() != 4)
    return emitOptionalError(loc, "pooling needs a 4-D input [N, C, H, W], got ",
                             input);
  if (failed(checkPair(loc, "kernel", kernel, 1)) ||
      failed(checkPair(loc, "stride", stride, 1)) ||
      failed(checkPair(loc, "padding", padding, 0)) ||
      failed(checkPair(loc, "dilation", dilation, 1)))
    return failure();
  SmallVector<int64_t> shape(input.getShape().take_front(2));
  for (int i = 0; i < 2; ++i) {
    if (2 * padding[i] > kernel[i])
      return emitOptionalError(loc, "pooling padding must be at most half the kernel");
    int64_t out = windowOutputSize(input.getDimSize(2 + i), kernel[i], stride[i],
                                   padding[i], dilation[i], ceilMode);
    if (out < 1)
      return emitOptionalError(loc, "pooling kernel is larger than the padded input");
    shape.push_back(out);
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult MaxPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  return inferPoolType(loc, adaptor.getInput().getType(), adaptor.getKernel(),
                       adaptor.getStride(), adaptor.getPadding(),
                       adaptor.getDilation(), adaptor.getCeilMode(), types);
}

LogicalResult AvgPool2dOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  int64_t unitDilation[] = {1, 1};
  return inferPoolType(loc, adaptor.getInput().getType(), adaptor.getKernel(),
                       adaptor.getStride(), adaptor.getPadding(), unitDilation,
                       adaptor.getCeilMode(), types);
}

LogicalResult AdaptiveAvgPool2dOp::inferReturnTypes(MLIRContext *,
                                                    std::optional<Location> loc,
                                                    Adaptor adaptor,
                                                    SmallVectorImpl<Type> &types) {
  auto input = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getRank() != 4)
    return emitOptionalError(loc, "adaptive_avg_pool2d needs a 4-D input, got ",
                             input);
  if (failed(checkPair(loc, "output_size", adaptor.getOutputSize(), 1)))
    return failure();
  SmallVector<int64_t> shape(input.getShape().take_front(2));
  llvm::append_range(shape, adaptor.getOutputSize());
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement.
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Layout changes across a group
//===----------------------------------------------------------------------===//

namespace {

/// The group is one the mesh defines; each (dim, blocks) names a dim of the
/// tensor that `blocks` divides. At global shapes the result has the
/// operand's type; at per-rank shapes (after -cleave-local-shapes) `grown`
/// is the dim the op makes `n` times larger and `shrunk` the one it makes `n`
/// times smaller, for one group size `n`, every other dim unchanged.
LogicalResult verifyLayoutChange(Operation *op, StringRef group,
                                 ArrayRef<std::pair<int64_t, int64_t>> splits,
                                 std::optional<int64_t> grown, std::optional<int64_t> shrunk) {
  if (group != "tp" && group != "dp")
    return op->emitOpError("group must be \"tp\" or \"dp\", got \"") << group << "\"";
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  for (auto [dim, blocks] : splits) {
    if (dim < 0 || dim >= in.getRank())
      return op->emitOpError("dim ") << dim << " is out of range for " << in;
    for (RankedTensorType type : {in, out})
      if (blocks < 1 || type.getDimSize(dim) % blocks != 0)
        return op->emitOpError("blocks ")
               << blocks << " does not divide dim " << dim << " of size " << type.getDimSize(dim);
  }
  if (in == out)
    return success();
  auto mismatch = [&] {
    return op->emitOpError("result type ")
           << out << " is not the operand's " << in << " with the dims the op changes changed";
  };
  if (in.getElementType() != out.getElementType() || in.getRank() != out.getRank() ||
      (!grown && !shrunk))
    return mismatch();
  int64_t ranks = 0; // the group size the two types imply
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t big = in.getDimSize(d), small = out.getDimSize(d);
    if (grown && d == *grown)
      std::swap(big, small);
    else if (!(shrunk && d == *shrunk)) {
      if (big != small)
        return mismatch();
      continue;
    }
    if (small < 1 || big % small != 0 || (ranks && big / small != ranks))
      return mismatch();
    ranks = big / small;
  }
  return success();
}

} // namespace

LogicalResult AllReduceOp::verify() {
  return verifyLayoutChange(*this, getGroup(), {}, std::nullopt, std::nullopt);
}
LogicalResult AllGatherOp::verify() {
  return verifyLayoutChange(*this, getGroup(), {{getDim(), getBlocks()}}, getDim(), std::nullopt);
}
LogicalResult ReduceScatterOp::verify() {
  return verifyLayoutChange(*this, getGroup(), {{getDim(), getBlocks()}}, std::nullopt, getDim());
}
LogicalResult ShardOp::verify() {
  return verifyLayoutChange(*this, getGroup(), {{getDim(), getBlocks()}}, std::nullopt, getDim());
}
LogicalResult AllToAllOp::verify() {
  if (getFromDim() == getToDim())
    return emitOpError("from_dim and to_dim are both ") << getToDim();
  return verifyLayoutChange(*this, getGroup(),
                            {{getFromDim(), getFromBlocks()}, {getToDim(), getToBlocks()}},
                            getFromDim(), getToDim());
}

LogicalResult DropoutOp::verify() {
  double p = getP().convertToDouble();
  if (!(p > 0.0 && p < 1.0))
    return emitOpError("p must be in (0, 1), got ") << p;
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto input = tensorType(getInput()), result = tensorType(getResult());
  if (input.getNumElements() != result.getNumElements())
    return emitOpError("changes the element count: ") << input << " to " << result;
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type: ") << input << " to " << result;
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  // reshape(reshape(x)) is one reshape of x.
  if (auto producer = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(producer.getInput());
    return getResult();
  }
  if (auto dense = llvm::dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(tensorType(getResult()));
  return {};
}

LogicalResult PermuteOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &types) {
  auto input = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (int64_t(dims.size()) != input.getRank())
    return emitOptionalError(loc, "permute needs ", input.getRank(), " dims, got ",
                             dims.size());
  SmallVector<bool> seen(dims.size(), false);
  SmallVector<int64_t> shape;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= input.getRank() || seen[dim])
      return emitOptionalError(loc, "permute dims [", dims,
                               "] are not a permutation of 0..", input.getRank() - 1);
    seen[dim] = true;
    shape.push_back(input.getDimSize(dim));
  }
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

OpFoldResult PermuteOp::fold(FoldAdaptor) {
  for (auto [i, dim] : llvm::enumerate(getDims()))
    if (int64_t(i) != dim)
      return {};
  return getInput();
}

LogicalResult BroadcastToOp::verify() {
  auto input = tensorType(getInput()), result = tensorType(getResult());
  if (input.getElementType() != result.getElementType())
    return emitOpError("changes the element type");
  if (input.getRank() > result.getRank())
    return emitOpError("cannot drop dims: ") << input << " to " << result;
  auto broadcast = broadcastShapes({input.getShape(), result.getShape()});
  if (!broadcast || ArrayRef<int64_t>(*broadcast) != result.getShape())
    return emitOpError("cannot broadcast ") << input << " to " << result;
  return success();
}

OpFoldResult BroadcastToOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  if (auto dense = llvm::dyn_cast_if_present<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(tensorType(getResult()),
                                  dense.getSplatValue<Attribute>());
  return {};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto input = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  int64_t dim = adaptor.getDimAttr().getInt();
  int64_t start = adaptor.getStartAttr().getInt();
  int64_t end = adaptor.getEndAttr().getInt();
  int64_t step = adaptor.getStepAttr() ? adaptor.getStepAttr().getInt() : 1;
  if (dim < 0 || dim >= input.getRank())
    return emitOptionalError(loc, "slice dim ", dim, " is out of range for ", input);
  int64_t size = input.getDimSize(dim);
  if (start < 0 || start > end || end > size || step < 1)
    return emitOptionalError(loc, "slice [", start, ":", end, ":", step,
                             "] is not within dim ", dim, " of size ", size,
                             " (needs 0 <= start <= end <= size, step >= 1)");
  SmallVector<int64_t> shape(input.getShape());
  // Written so that a huge step cannot overflow.
  shape[dim] = end == start ? 0 : 1 + (end - start - 1) / step;
  types.push_back(RankedTensorType::get(shape, input.getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  if (adaptor.getInputs().empty())
    return emitOptionalError(loc, "concat needs at least one input");
  auto first = llvm::cast<RankedTensorType>(adaptor.getInputs().front().getType());
  int64_t dim = adaptor.getDimAttr().getInt();
  if (dim < 0 || dim >= first.getRank())
    return emitOptionalError(loc, "concat dim ", dim, " is out of range for ", first);
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (Value input : adaptor.getInputs()) {
    auto type = llvm::cast<RankedTensorType>(input.getType());
    bool fits = type.getRank() == first.getRank() &&
                type.getElementType() == first.getElementType();
    for (int64_t i = 0; fits && i < type.getRank(); ++i)
      fits = i == dim || type.getDimSize(i) == first.getDimSize(i);
    if (!fits)
      return emitOptionalError(loc, "concat inputs ", first, " and ", type,
                               " differ outside dim ", dim);
    shape[dim] += type.getDimSize(dim);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Indexing.
//===----------------------------------------------------------------------===//

/// The index of a gather or scatter: the input's rank, `dim` a dim of it
/// (0 for a 0-d input, as PyTorch), no larger than the input outside `dim`.
static LogicalResult verifyIndexAlongDim(Operation *op, RankedTensorType input,
                                         RankedTensorType index, int64_t dim) {
  if (index.getRank() != input.getRank())
    return op->emitOpError() << "index " << index << " must have the input's rank "
                             << input.getRank();
  if (!(input.getRank() == 0 && dim == 0) &&
      failed(verifyDim(op, dim, input.getRank())))
    return failure();
  for (int64_t d = 0; d < input.getRank(); ++d)
    if (d != dim && index.getDimSize(d) > input.getDimSize(d))
      return op->emitOpError() << "index " << index << " is larger than the input " << input
                               << " in dim " << d;
  return success();
}

LogicalResult GatherOp::verify() {
  auto input = tensorType(getInput()), index = tensorType(getIndex());
  if (failed(verifyIndexAlongDim(*this, input, index, getDim())))
    return failure();
  auto result = tensorType(getResult());
  if (result.getShape() != index.getShape() ||
      result.getElementType() != input.getElementType())
    return emitOpError() << "result " << result << " must have the index's shape and the "
                         << "input's element type";
  return success();
}

LogicalResult ScatterOp::verify() {
  auto input = tensorType(getInput()), index = tensorType(getIndex());
  auto src = tensorType(getSrc());
  if (failed(verifyIndexAlongDim(*this, input, index, getDim())))
    return failure();
  if (src.getShape() != index.getShape() || src.getElementType() != input.getElementType())
    return emitOpError() << "src " << src << " must have the index's shape and the input's "
                         << "element type";
  if (getReduce() == ScatterReduce::mean && input.getElementType().isInteger(1))
    return emitOpError() << "mean of i1 elements is not defined (PyTorch refuses it)";
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra on batches of matrices.
//===----------------------------------------------------------------------===//

namespace {
/// Checks that `value` (called `name`) is a batch of matrices: rank >= 2.
LogicalResult verifyMatrices(Operation *op, Value value, StringRef name) {
  if (tensorType(value).getRank() < 2)
    return op->emitOpError() << name << " " << value.getType()
                             << " must be a matrix or a batch of matrices (rank >= 2)";
  return success();
}

/// Checks that `result` is `expected` (element type and shape), saying what
/// it was built from.
LogicalResult verifyResultShape(Operation *op, Value result, StringRef name,
                                ArrayRef<int64_t> shape, Type elementType) {
  auto type = tensorType(result);
  if (type.getShape() != shape || type.getElementType() != elementType)
    return op->emitOpError() << name << " " << type << " must be "
                             << RankedTensorType::get(shape, elementType);
  return success();
}
} // namespace

LogicalResult LuFactorOp::verify() {
  if (failed(verifyMatrices(*this, getInput(), "input")))
    return failure();
  auto input = tensorType(getInput());
  ArrayRef<int64_t> shape = input.getShape();
  SmallVector<int64_t> batch(shape.drop_back(2));
  int64_t m = shape[shape.size() - 2], n = shape.back();
  SmallVector<int64_t> pivots = batch;
  pivots.push_back(std::min(m, n));
  Type i32 = IntegerType::get(getContext(), 32);
  if (failed(verifyResultShape(*this, getLu(), "lu", shape, input.getElementType())) ||
      failed(verifyResultShape(*this, getPivots(), "pivots", pivots, i32)) ||
      failed(verifyResultShape(*this, getInfo(), "info", batch, i32)))
    return failure();
  return success();
}

LogicalResult LuPivotsToPermutationOp::verify() {
  auto pivots = tensorType(getPivots());
  if (pivots.getRank() < 1)
    return emitOpError() << "pivots " << pivots << " must have rank >= 1";
  int64_t k = pivots.getShape().back();
  if (static_cast<int64_t>(getRows()) < k)
    return emitOpError() << "rows " << getRows() << " must be at least the " << k
                         << " pivots";
  SmallVector<int64_t> shape(pivots.getShape());
  shape.back() = getRows();
  return verifyResultShape(*this, getPermutation(), "permutation", shape,
                           IntegerType::get(getContext(), 64));
}

LogicalResult CholeskyOp::verify() {
  if (failed(verifyMatrices(*this, getInput(), "input")))
    return failure();
  auto input = tensorType(getInput());
  ArrayRef<int64_t> shape = input.getShape();
  if (shape.back() != shape[shape.size() - 2])
    return emitOpError() << "input " << input << " must hold square matrices";
  if (failed(verifyResultShape(*this, getResult(), "result", shape, input.getElementType())))
    return failure();
  return verifyResultShape(*this, getInfo(), "info", shape.drop_back(2),
                           IntegerType::get(getContext(), 32));
}

LogicalResult TriangularSolveOp::verify() {
  if (failed(verifyMatrices(*this, getA(), "a")) || failed(verifyMatrices(*this, getB(), "b")))
    return failure();
  auto a = tensorType(getA()), b = tensorType(getB());
  ArrayRef<int64_t> as = a.getShape(), bs = b.getShape();
  int64_t n = as.back();
  if (as[as.size() - 2] != n)
    return emitOpError() << "a " << a << " must hold square matrices";
  if (bs[bs.size() - 2] != n)
    return emitOpError() << "b " << b << " must have " << n << " rows, as a's matrices";
  if (a.getElementType() != b.getElementType())
    return emitOpError() << "a " << a << " and b " << b << " must have one element type";
  auto batch = broadcastShapes({as.drop_back(2), bs.drop_back(2)});
  if (!batch)
    return emitOpError() << "batch dims of a " << a << " and b " << b << " do not broadcast";
  batch->append({n, bs.back()});
  return verifyResultShape(*this, getResult(), "result", *batch, a.getElementType());
}

#define GET_OP_CLASSES
#include "dialects/cleave/CleaveOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Special functions.
//===----------------------------------------------------------------------===//

LogicalResult PolygammaOp::verify() {
  // I64Attr reads back unsigned: the order as the attribute spells it.
  const int64_t n = static_cast<int64_t>(getN());
  if (n < 0)
    return emitOpError("order n must be non-negative, got ") << n;
  return success();
}

LogicalResult OrthogonalPolynomialOp::verify() {
  static const char *const families[] = {
      "chebyshev_t", "chebyshev_u", "chebyshev_v", "chebyshev_w",
      "shifted_chebyshev_t", "shifted_chebyshev_u", "shifted_chebyshev_v", "shifted_chebyshev_w",
      "hermite_h", "hermite_he", "laguerre_l", "legendre_p"};
  for (const char *family : families)
    if (getFamily() == family)
      return success();
  return emitOpError("unknown polynomial family '") << getFamily() << "'";
}
