//===- FuseAttention.cpp - form cleave.attention from its unfused ops -----===//
//
// The importer writes attention as PyTorch spells it: a product of queries
// and transposed keys, a scale, maybe a mask filled with -inf, a softmax over
// the keys, dropout (the identity in plans) and a product with the values.
// Every op of that chain materializes a [B, H, Sq, Sk] tensor. This pass
// replaces the chain by one cleave.attention, whose kernel never stores the
// scores, when it can prove the two compute the same thing:
//   - every intermediate value has the chain as its only user;
//   - the scale is a scalar constant (mul or div, on the scores or on q or k);
//   - the mask, if any, is a `where` choosing a -inf scalar (or a finite
//     one at most -1e9, when no query has every key hidden), and its
//     condition evaluates, element by element, to the causal pattern
//     (key j hidden from query i exactly when j > i + Sk - Sq) or to no mask
//     at all. The condition is evaluated from constants and from buffers
//     whose data the caller supplies (a registered tril buffer); a mask that
//     cannot be evaluated, or any other pattern, leaves the chain alone.
//
//===----------------------------------------------------------------------===//

#include "dialects/cleave/CleaveDialect.h"
#include "passes/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Debug.h"

#include <cmath>
#include <cstring>
#include <optional>

#define DEBUG_TYPE "cleave-fuse-attention"

namespace mlir::cleave {
#define GEN_PASS_DEF_FUSEATTENTION
#include "passes/Passes.h.inc"

namespace {

RankedTensorType tensorType(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

/// The highest finite mask fill taken as hiding a key (-1e9, as models write
/// it; torch.finfo(dtype).min is lower still).
constexpr double kLowestFiniteFill = -1e9;

/// The value of a single-element float constant (a 0-d or all-ones-shape
/// splat), or nullopt.
std::optional<double> scalarConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  if (!constant || tensorType(v).getNumElements() != 1)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  return dense.getValues<APFloat>()[0].convertToDouble();
}

//===----------------------------------------------------------------------===//
// Evaluating a mask element by element.
//===----------------------------------------------------------------------===//

/// Evaluates elements of small integer, boolean and float computations on
/// constants and supplied buffers, as doubles (i1 as 0 or 1). Each element
/// is computed from the ops' definitions, index by index, so no
/// intermediate tensor is built.
class MaskEvaluator {
public:
  explicit MaskEvaluator(const ParamDataLookup &paramData) : paramData(paramData) {}

  /// The element of `v` at `index`, or nullopt when some op on the way is
  /// not one this evaluator knows, or data is missing.
  std::optional<double> at(Value v, ArrayRef<int64_t> index) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt; // a function argument: not known at compile time
    auto type = tensorType(v);
    if (auto constant = dyn_cast<ConstantOp>(def))
      return constantAt(constant, index);
    if (auto param = dyn_cast<ParamOp>(def))
      return paramAt(param, index);
    if (auto slice = dyn_cast<SliceOp>(def)) {
      SmallVector<int64_t> from(index);
      from[slice.getDim()] = slice.getStart() + index[slice.getDim()] * slice.getStep();
      return at(slice.getInput(), from);
    }
    if (auto reshape = dyn_cast<ReshapeOp>(def))
      return at(reshape.getInput(), delinearize(linearize(index, type.getShape()),
                                                tensorType(reshape.getInput()).getShape()));
    if (auto permute = dyn_cast<PermuteOp>(def)) {
      SmallVector<int64_t> from(index.size());
      for (auto [i, dim] : llvm::enumerate(permute.getDims()))
        from[dim] = index[i];
      return at(permute.getInput(), from);
    }
    if (auto broadcast = dyn_cast<BroadcastToOp>(def))
      return at(broadcast.getInput(), broadcastIndex(broadcast.getInput(), index));
    if (auto cast = dyn_cast<CastOp>(def)) {
      auto x = at(cast.getInput(), index);
      if (!x)
        return std::nullopt;
      Type to = type.getElementType();
      if (to.isInteger(1))
        return *x != 0 ? 1.0 : 0.0;
      return llvm::isa<FloatType>(to) ? *x : std::trunc(*x);
    }
    if (auto negation = dyn_cast<NotOp>(def)) {
      auto x = at(negation.getInput(), index);
      return x ? std::optional<double>(*x == 0 ? 1.0 : 0.0) : std::nullopt;
    }
    if (auto tril = dyn_cast<TrilOp>(def))
      return triangleAt(tril.getInput(), index, tril.getDiagonal(), /*lower=*/true);
    if (auto triu = dyn_cast<TriuOp>(def))
      return triangleAt(triu.getInput(), index, triu.getDiagonal(), /*lower=*/false);
    if (auto compare = dyn_cast<CompareOp>(def)) {
      auto lhs = at(compare.getLhs(), broadcastIndex(compare.getLhs(), index));
      auto rhs = lhs ? at(compare.getRhs(), broadcastIndex(compare.getRhs(), index)) : std::nullopt;
      if (!rhs)
        return std::nullopt;
      return comparison(compare.getPredicate(), *lhs, *rhs) ? 1.0 : 0.0;
    }
    LLVM_DEBUG(llvm::dbgs() << "  mask: cannot evaluate " << def->getName() << "\n");
    return std::nullopt;
  }

  /// The index into `operand` of an element at `index` of a result it
  /// broadcasts to: trailing dims align, size-1 dims stretch.
  static SmallVector<int64_t> broadcastIndex(Value operand, ArrayRef<int64_t> index) {
    ArrayRef<int64_t> shape = tensorType(operand).getShape();
    SmallVector<int64_t> from(shape.size());
    size_t offset = index.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d)
      from[d] = shape[d] == 1 ? 0 : index[offset + d];
    return from;
  }

private:
  static int64_t linearize(ArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
    int64_t linear = 0;
    for (auto [i, size] : llvm::zip_equal(index, shape))
      linear = linear * size + i;
    return linear;
  }

  static SmallVector<int64_t> delinearize(int64_t linear, ArrayRef<int64_t> shape) {
    SmallVector<int64_t> index(shape.size());
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      index[d] = shape[d] == 0 ? 0 : linear % shape[d];
      linear = shape[d] == 0 ? 0 : linear / shape[d];
    }
    return index;
  }

  static bool comparison(ComparePredicate predicate, double a, double b) {
    switch (predicate) {
    case ComparePredicate::eq:
      return a == b;
    case ComparePredicate::ne:
      return a != b;
    case ComparePredicate::lt:
      return a < b;
    case ComparePredicate::le:
      return a <= b;
    case ComparePredicate::gt:
      return a > b;
    case ComparePredicate::ge:
      return a >= b;
    }
    return false;
  }

  std::optional<double> triangleAt(Value input, ArrayRef<int64_t> index, int64_t diagonal,
                                   bool lower) {
    int64_t row = index[index.size() - 2], col = index.back();
    bool kept = lower ? col - row <= diagonal : col - row >= diagonal;
    if (!kept)
      return 0.0;
    return at(input, index);
  }

  static std::optional<double> constantAt(ConstantOp constant, ArrayRef<int64_t> index) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense)
      return std::nullopt;
    int64_t linear = dense.isSplat() ? 0 : linearize(index, dense.getType().getShape());
    Type et = dense.getElementType();
    if (llvm::isa<FloatType>(et))
      return dense.getValues<APFloat>()[linear].convertToDouble();
    if (et.isInteger(1))
      return dense.getValues<bool>()[linear] ? 1.0 : 0.0;
    if (llvm::isa<IntegerType>(et))
      return static_cast<double>(dense.getValues<APInt>()[linear].getSExtValue());
    return std::nullopt;
  }

  std::optional<double> paramAt(ParamOp param, ArrayRef<int64_t> index) {
    // Only buffers: a trained parameter changes after the plan is made.
    if (!param.getBuffer() || !paramData)
      return std::nullopt;
    const void *data = paramData(param.getName());
    if (!data)
      return std::nullopt;
    auto type = tensorType(param.getResult());
    int64_t linear = linearize(index, type.getShape());
    Type et = type.getElementType();
    auto read = [&](auto element) -> double {
      std::memcpy(&element, static_cast<const char *>(data) + linear * sizeof(element),
                  sizeof(element));
      return static_cast<double>(element);
    };
    if (et.isF32())
      return read(float());
    if (et.isInteger(64))
      return read(int64_t());
    if (et.isInteger(32))
      return read(int32_t());
    if (et.isInteger(1))
      return read(uint8_t()) != 0 ? 1.0 : 0.0;
    return std::nullopt; // bf16/f16 masks: not read here
  }

  const ParamDataLookup &paramData;
};

enum class MaskKind { None, Causal };

bool isSplatConstant(Value v) {
  auto constant = v.getDefiningOp<ConstantOp>();
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return dense && dense.isSplat();
}

/// Whether each element of `v` depends on its column minus its row only:
/// splats, tril and triu of such values, slices of them with step 1, and
/// elementwise ops whose operands are splats or such values over the same
/// last two dims. A mask made in forward (`ones(T, T).tril()`) is one, and
/// one element per diagonal then decides it, not all T * T.
bool dependsOnDiagonalOnly(Value v, int depth = 0) {
  if (depth > 32)
    return false;
  if (isSplatConstant(v))
    return true;
  Operation *def = v.getDefiningOp();
  auto type = tensorType(v);
  if (!def || type.getRank() < 2)
    return false;
  auto sameGrid = [&](Value operand) {
    if (isSplatConstant(operand))
      return true;
    auto operandType = tensorType(operand);
    return operandType.getRank() >= 2 &&
           operandType.getShape().take_back(2) == type.getShape().take_back(2) &&
           dependsOnDiagonalOnly(operand, depth + 1);
  };
  if (auto tril = dyn_cast<TrilOp>(def))
    return sameGrid(tril.getInput());
  if (auto triu = dyn_cast<TriuOp>(def))
    return sameGrid(triu.getInput());
  if (auto compare = dyn_cast<CompareOp>(def))
    return sameGrid(compare.getLhs()) && sameGrid(compare.getRhs());
  if (auto negation = dyn_cast<NotOp>(def))
    return sameGrid(negation.getInput());
  if (auto cast = dyn_cast<CastOp>(def))
    return sameGrid(cast.getInput());
  if (auto broadcast = dyn_cast<BroadcastToOp>(def))
    return sameGrid(broadcast.getInput());
  if (auto slice = dyn_cast<SliceOp>(def))
    return slice.getStep() == 1 && dependsOnDiagonalOnly(slice.getInput(), depth + 1);
  return false;
}

/// What `masked` (true where a score is replaced by -inf), broadcast to
/// scores of shape [B, H, Sq, Sk], hides: nothing, exactly the causal
/// pattern (j > i + Sk - Sq for every batch and head), or something else
/// (nullopt, also when it cannot be evaluated).
std::optional<MaskKind> classifyMask(Value masked, bool negated, ArrayRef<int64_t> scores,
                                     const ParamDataLookup &paramData) {
  ArrayRef<int64_t> shape = tensorType(masked).getShape();
  if (shape.size() > scores.size())
    return std::nullopt;
  const int64_t queries = scores[2], keys = scores[3];
  // The leading (batch, head) indices the condition actually varies over.
  SmallVector<int64_t> leading(scores.begin(), scores.end() - 2);
  size_t offset = scores.size() - shape.size();
  for (size_t d = 0; d < leading.size(); ++d)
    if (d < offset || shape[d - offset] == 1)
      leading[d] = 1;
  MaskEvaluator evaluator(paramData);
  bool anyMasked = false, allCausal = true;
  if (shape.size() >= 2 && shape.take_back(2) == scores.take_back(2) &&
      dependsOnDiagonalOnly(masked)) {
    // One element per diagonal t = j - i decides the whole mask.
    SmallVector<int64_t> index(shape.size(), 0);
    for (int64_t t = 1 - queries; t < keys; ++t) {
      index[shape.size() - 2] = std::max<int64_t>(0, -t);
      index[shape.size() - 1] = index[shape.size() - 2] + t;
      auto value = evaluator.at(masked, index);
      if (!value)
        return std::nullopt;
      bool hidden = (*value != 0) != negated;
      anyMasked |= hidden;
      allCausal &= hidden == (t > keys - queries);
    }
    if (anyMasked && !allCausal)
      return std::nullopt;
    return anyMasked ? MaskKind::Causal : MaskKind::None;
  }
  SmallVector<int64_t> index(scores.size(), 0);
  int64_t leadingCount = 1;
  for (int64_t size : leading)
    leadingCount *= size;
  for (int64_t l = 0; l < leadingCount; ++l) {
    for (int64_t d = static_cast<int64_t>(leading.size()) - 1, rest = l; d >= 0; --d) {
      index[d] = rest % leading[d];
      rest /= leading[d];
    }
    for (int64_t i = 0; i < queries; ++i) {
      for (int64_t j = 0; j < keys; ++j) {
        index[2] = i;
        index[3] = j;
        auto value = evaluator.at(masked, MaskEvaluator::broadcastIndex(masked, index));
        if (!value)
          return std::nullopt;
        bool hidden = (*value != 0) != negated;
        bool causallyHidden = j > i + keys - queries;
        anyMasked |= hidden;
        allCausal &= hidden == causallyHidden;
        if (anyMasked && !allCausal)
          return std::nullopt; // neither pattern: stop early
      }
    }
  }
  if (!anyMasked)
    return MaskKind::None;
  return MaskKind::Causal;
}

//===----------------------------------------------------------------------===//
// Matching the chain.
//===----------------------------------------------------------------------===//

/// A matched attention: the values the fused op reads, and the ops it
/// replaces.
struct AttentionMatch {
  Value q, k, v;
  bool causal = false;
  double scale = 1.0;
  bool transposeRhs = false; // k must be transposed from the matmul's rhs
  MatmulOp output;           // matmul(probabilities, v): the op replaced
  SmallVector<Operation *> replaced;
};

/// If `v` is a single-use mul or div by a scalar constant, multiplies the
/// factor into `scale`, records the op and returns its other operand.
Value peelScale(Value v, double &scale, SmallVectorImpl<Operation *> &replaced) {
  while (v.hasOneUse()) {
    Operation *def = v.getDefiningOp();
    if (auto mul = dyn_cast_or_null<MulOp>(def)) {
      Value other;
      std::optional<double> factor;
      if ((factor = scalarConstant(mul.getRhs())))
        other = mul.getLhs();
      else if ((factor = scalarConstant(mul.getLhs())))
        other = mul.getRhs();
      if (!factor || other.getType() != v.getType())
        return v;
      scale *= *factor;
      replaced.push_back(def);
      v = other;
    } else if (auto div = dyn_cast_or_null<DivOp>(def)) {
      auto divisor = scalarConstant(div.getRhs());
      if (!divisor || *divisor == 0 || div.getLhs().getType() != v.getType())
        return v;
      scale /= *divisor;
      replaced.push_back(def);
      v = div.getLhs();
    } else {
      return v;
    }
  }
  return v;
}

bool swapsLastTwo(PermuteOp permute) {
  ArrayRef<int64_t> dims = permute.getDims();
  int64_t rank = static_cast<int64_t>(dims.size());
  for (int64_t d = 0; d < rank - 2; ++d)
    if (dims[d] != d)
      return false;
  return rank >= 2 && dims[rank - 2] == rank - 1 && dims[rank - 1] == rank - 2;
}

/// Matches the chain that ends in `softmax`; nullopt (with the reason in
/// the debug log) when it is not an attention this pass can prove.
std::optional<AttentionMatch> matchAttention(SoftmaxOp softmax, const ParamDataLookup &paramData) {
  auto reject = [&](const char *why) -> std::optional<AttentionMatch> {
    LLVM_DEBUG(llvm::dbgs() << "not fused at " << softmax.getLoc() << ": " << why << "\n");
    return std::nullopt;
  };
  auto scoresType = tensorType(softmax.getInput());
  if (scoresType.getRank() != 4)
    return reject("scores are not [batch, heads, queries, keys]");
  if (static_cast<int64_t>(softmax.getDim()) != 3)
    return reject("the softmax is not over the keys (the last dim)");
  ArrayRef<int64_t> scores = scoresType.getShape();
  AttentionMatch match;

  // Forward from the softmax: dropouts (identities in plans), then the
  // product with v.
  Value probabilities = softmax.getResult();
  match.replaced.push_back(softmax);
  while (true) {
    if (!probabilities.hasOneUse())
      return reject("the probabilities have another user");
    Operation *user = *probabilities.getUsers().begin();
    if (auto dropout = dyn_cast<DropoutOp>(user)) {
      match.replaced.push_back(dropout);
      probabilities = dropout.getResult();
      continue;
    }
    auto matmul = dyn_cast<MatmulOp>(user);
    if (!matmul || matmul.getLhs() != probabilities)
      return reject("the probabilities do not feed a matmul with v");
    match.output = matmul;
    match.v = matmul.getRhs();
    break;
  }
  auto vType = tensorType(match.v);
  if (vType.getRank() != 4 || vType.getDimSize(0) != scores[0] ||
      vType.getDimSize(1) != scores[1] || vType.getDimSize(2) != scores[3])
    return reject("v is not [batch, heads, keys, head_dim] of the scores' batch and heads");

  // Backward from the softmax: an optional -inf mask, scales, the product.
  Value x = softmax.getInput();
  if (!x.hasOneUse())
    return reject("the scores have another user");
  if (auto where = x.getDefiningOp<WhereOp>()) {
    // -inf, or a finite fill so low (the dtype's lowest, -1e9) that the
    // softmax gives a hidden key exp(fill - row max) = exactly 0 in f32 for
    // any score above fill + 104.
    auto isMaskFill = [](Value v) {
      auto c = scalarConstant(v);
      return c && *c <= kLowestFiniteFill;
    };
    Value kept;
    Value fill;
    bool negated = false;
    if (isMaskFill(where.getOnTrue())) {
      kept = where.getOnFalse();
      fill = where.getOnTrue();
    } else if (isMaskFill(where.getOnFalse())) {
      kept = where.getOnTrue();
      fill = where.getOnFalse();
      negated = true; // the condition says which scores stay
    } else {
      return reject("the where does not fill with -inf or a value at most -1e9");
    }
    if (kept.getType() != where.getType())
      return reject("the mask broadcasts the scores to a larger shape");
    auto kind = classifyMask(where.getCondition(), negated, scores, paramData);
    if (!kind)
      return reject("the mask is not provably causal");
    // A row with every key hidden is NaN under -inf but uniform under a
    // finite fill: a finite fill is only the same when each query keeps one.
    if (!std::isinf(*scalarConstant(fill)) && *kind == MaskKind::Causal &&
        scores[2] > scores[3])
      return reject("a finite fill with more queries than keys hides every key of a row");
    match.causal = *kind == MaskKind::Causal;
    match.replaced.push_back(where);
    x = kept;
  }
  x = peelScale(x, match.scale, match.replaced);
  if (!x.hasOneUse())
    return reject("the scores have another user");
  auto product = x.getDefiningOp<MatmulOp>();
  if (!product)
    return reject("the scores are not a matmul");
  match.replaced.push_back(product);
  // Scales of q or of k (before or after its transpose) fold in too.
  match.q = peelScale(product.getLhs(), match.scale, match.replaced);
  Value kT = peelScale(product.getRhs(), match.scale, match.replaced);
  if (auto permute = kT.getDefiningOp<PermuteOp>(); permute && swapsLastTwo(permute)) {
    if (permute.getResult().hasOneUse())
      match.replaced.push_back(permute);
    match.k = peelScale(permute.getInput(), match.scale, match.replaced);
  } else {
    match.k = kT;
    match.transposeRhs = true;
  }
  auto qType = tensorType(match.q);
  auto kShape = tensorType(match.k).getShape();
  if (qType.getRank() != 4 || qType.getShape().take_front(3) != scores.drop_back())
    return reject("q is not [batch, heads, queries, head_dim] of the scores' batch and heads");
  int64_t headDim = qType.getDimSize(3);
  SmallVector<int64_t> expectedK = {scores[0], scores[1], match.transposeRhs ? headDim : scores[3],
                                    match.transposeRhs ? scores[3] : headDim};
  if (kShape != ArrayRef<int64_t>(expectedK))
    return reject("k is not [batch, heads, keys, head_dim] of the scores' batch and heads");
  Type et = qType.getElementType();
  if (tensorType(match.k).getElementType() != et || vType.getElementType() != et ||
      scoresType.getElementType() != et)
    return reject("q, k, v and the scores differ in element type");
  if (match.causal && scores[3] < scores[2])
    return reject("a causal mask with fewer keys than queries hides whole rows");
  if (!std::isfinite(match.scale))
    return reject("the scale is not finite");
  return match;
}

/// Erases `op` and then every op that fed it and is left without users and
/// without side effects (the mask's slices and comparisons, a transposed k).
void eraseWithDeadProducers(Operation *op) {
  SmallVector<Operation *> worklist = {op};
  while (!worklist.empty()) {
    Operation *next = worklist.pop_back_val();
    if (!next->use_empty() || !isMemoryEffectFree(next))
      continue;
    SmallVector<Operation *> producers;
    for (Value operand : next->getOperands())
      if (Operation *def = operand.getDefiningOp())
        producers.push_back(def);
    next->erase();
    for (Operation *def : producers)
      if (!llvm::is_contained(worklist, def))
        worklist.push_back(def);
  }
}

struct FuseAttentionPass : impl::FuseAttentionBase<FuseAttentionPass> {
  FuseAttentionPass() = default;
  explicit FuseAttentionPass(ParamDataLookup paramData) : paramData(std::move(paramData)) {}

  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    for (SoftmaxOp softmax : softmaxes) {
      auto match = matchAttention(softmax, paramData);
      if (!match)
        continue;
      OpBuilder b(match->output);
      Location loc = match->output.getLoc();
      Value k = match->k;
      if (match->transposeRhs) {
        auto type = tensorType(k);
        SmallVector<int64_t> shape(type.getShape());
        std::swap(shape[2], shape[3]);
        k = b.create<PermuteOp>(loc, RankedTensorType::get(shape, type.getElementType()), k,
                                b.getDenseI64ArrayAttr({0, 1, 3, 2}));
      }
      auto attention =
          b.create<AttentionOp>(loc, match->output.getType(), match->q, k, match->v,
                                b.getBoolAttr(match->causal), b.getF64FloatAttr(match->scale));
      LLVM_DEBUG(llvm::dbgs() << "fused " << match->replaced.size() + 1 << " ops into " << attention
                              << "\n");
      match->output.getResult().replaceAllUsesWith(attention.getResult());
      // The replaced ops in reverse order (users before producers), then
      // whatever only they fed.
      eraseWithDeadProducers(match->output);
      ++fused;
    }
  }

  ParamDataLookup paramData;
};

} // namespace

std::unique_ptr<Pass> createFuseAttention(ParamDataLookup paramData) {
  return std::make_unique<FuseAttentionPass>(std::move(paramData));
}

} // namespace mlir::cleave
