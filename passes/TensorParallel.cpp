//===- TensorParallel.cpp - Splitting one layer across a tp group ---------===//

#include "passes/TensorParallel.h"
#include "dialects/cleave/CleaveDialect.h"
#include "cost/OpTime.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace mlir::cleave {

using ::cleave::cost::Collective;
using ::cleave::runtime::DType;

std::string TensorSharding::str() const {
  switch (kind) {
  case Replicated:
    return "replicated";
  case Partial:
    return "partial";
  case Sharded:
    return blocks == 1 ? llvm::formatv("split({0})", dim).str()
                       : llvm::formatv("split({0}, blocks={1})", dim, blocks).str();
  }
  return "?";
}

std::optional<TensorSharding> TensorSharding::parse(llvm::StringRef text) {
  if (text == "replicated")
    return replicated();
  if (text == "partial")
    return partial();
  if (!text.consume_front("split(") || !text.consume_back(")"))
    return std::nullopt;
  auto [dimText, rest] = text.split(',');
  int dim;
  int64_t blocks = 1;
  if (dimText.trim().getAsInteger(10, dim) || dim < 0)
    return std::nullopt;
  if (!rest.empty()) {
    rest = rest.trim();
    if (!rest.consume_front("blocks=") || rest.getAsInteger(10, blocks) || blocks < 1)
      return std::nullopt;
  }
  return sharded(dim, blocks);
}

FailureOr<TensorSharding> annotatedLayout(Value value) {
  Operation *def = value.getDefiningOp();
  auto layouts = def ? def->getAttrOfType<ArrayAttr>("cleave.sharding") : ArrayAttr();
  if (!layouts)
    return TensorSharding::replicated();
  unsigned index = cast<OpResult>(value).getResultNumber();
  auto text = index < layouts.size() ? dyn_cast<StringAttr>(layouts[index]) : StringAttr();
  std::optional<TensorSharding> layout =
      text ? TensorSharding::parse(text.getValue()) : std::nullopt;
  if (!layout)
    return def->emitError() << "result " << index << ": no layout in cleave.sharding " << layouts;
  return *layout;
}

namespace {

/// A layout packed in 32 bits, so search states are small and hashable.
uint32_t pack(const TensorSharding &s) {
  return uint32_t(s.kind) | uint32_t(s.dim + 1) << 2 | uint32_t(s.blocks) << 10;
}
TensorSharding unpack(uint32_t code) {
  return {TensorSharding::Kind(code & 3), int((code >> 2) & 0xff) - 1, int64_t(code >> 10)};
}

bool isFloat(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

/// A strategy: split factor `factor` across the group (-1: run whole), each
/// rank holding its part of each of `blocks` equal blocks of the factor.
/// Ops are indifferent to how the indices of a parallel or reduced factor are
/// dealt out, so any block count is valid; the ones worth trying are those a
/// neighbour's layout asks for (three for a fused QKV output cut by slices).
struct Strategy {
  int factor = -1;
  int64_t blocks = 1;
  /// Per rank, this strategy's compute (a split op's GEMM is smaller in the
  /// split dim, at that shape's efficiency): the same for every state, so
  /// computed once (analyze).
  ::cleave::cost::PassTime forward, backward;
};

/// The layout a strategy gives one tensor of the rule.
TensorSharding layoutOf(const ShardingRule &rule, const TensorFactors &tensor, const Strategy &st,
                        bool isResult) {
  if (st.factor < 0)
    return TensorSharding::replicated();
  for (auto [d, dim] : llvm::enumerate(tensor)) {
    int64_t blocks = st.blocks;
    for (int factor : dim) {
      if (factor == st.factor)
        return TensorSharding::sharded(int(d), blocks);
      blocks *= rule.factors[factor].size;
    }
  }
  // Not in this tensor: a result of a split reduction is a partial sum; any
  // other tensor is whole on every rank.
  if (isResult && rule.factors[st.factor].kind == FactorKind::Reduction)
    return TensorSharding::partial();
  return TensorSharding::replicated();
}

bool contains(const TensorFactors &tensor, int f) {
  for (const DimFactors &dim : tensor)
    if (llvm::is_contained(dim, f))
      return true;
  return false;
}

struct OpInfo {
  Operation *op;
  ShardingRule rule;
  ::cleave::cost::OpCost cost;
  std::vector<Strategy> strategies; // run whole, then the splits that divide evenly
  std::vector<int> operandIndex; // tracked index of each operand, -1 for weights
  std::vector<int> resultIndex;
  DType dtype;
  double byteScale;
};

/// The GEMM a rank runs when the factor of `factorSize` is split `tp` ways:
/// the dim that is that factor (n for output features or channels, k for
/// input ones, m for tokens, batch for heads) divided by tp, else the first
/// dim made of it with others (m = batch x tokens, k = channels x kernel
/// window). A shape no dim of which holds the factor stays whole.
::cleave::cost::GemmShape splitGemmShape(::cleave::cost::GemmShape shape, int64_t factorSize,
                                         int tp) {
  int64_t *exact[] = {&shape.n, &shape.k, &shape.m, &shape.batch};
  for (int64_t *dim : exact)
    if (*dim == factorSize && *dim % tp == 0) {
      *dim /= tp;
      return shape;
    }
  int64_t *within[] = {&shape.batch, &shape.m, &shape.k, &shape.n};
  for (int64_t *dim : within)
    if (factorSize > 1 && *dim % factorSize == 0 && *dim % tp == 0) {
      *dim /= tp;
      return shape;
    }
  return shape;
}

struct State {
  std::vector<uint32_t> layout; // per tracked value
  double cost = 0;
  std::vector<int16_t> choice; // per op so far
};

class LayerSplitter {
public:
  LayerSplitter(const Layer &layer, const ::cleave::cost::ClusterSpec &cluster,
                const TensorParallelOptions &options)
      : layer(layer), cluster(cluster), options(options) {
    optimizerBandwidth =
        cluster.device.memoryBandwidth *
        cluster.device.efficiency[int(::cleave::cost::OpClass::Elementwise)].memory;
    analyze();
  }

  LayerSplit run() {
    std::vector<State> states(1);
    states[0].layout.assign(tracked.size(), pack(TensorSharding::replicated()));
    for (size_t p = 0; p < ops.size(); ++p) {
      std::map<std::vector<uint32_t>, State> merged;
      for (const State &state : states)
        for (size_t k = 0; k < ops[p].strategies.size(); ++k) {
          State next = state;
          next.cost += apply(p, ops[p].strategies[k], next.layout, nullptr);
          next.choice.push_back(int16_t(k));
          std::vector<uint32_t> key;
          for (int v : liveAfter[p])
            key.push_back(next.layout[v]);
          auto [it, inserted] = merged.try_emplace(std::move(key), std::move(next));
          if (!inserted && next.cost < it->second.cost)
            it->second = std::move(next);
        }
      states.clear();
      for (auto &entry : merged)
        states.push_back(std::move(entry.second));
      std::stable_sort(states.begin(), states.end(),
                       [](const State &a, const State &b) { return a.cost < b.cost; });
      if (int(states.size()) > options.beamWidth)
        states.resize(options.beamWidth);
    }
    // The layer's outputs leave replicated.
    const State *best = nullptr;
    double bestCost = 0;
    for (State &state : states) {
      double cost = state.cost + finish(state.layout, nullptr);
      if (!best || cost < bestCost) {
        best = &state;
        bestCost = cost;
      }
    }
    LayerSplit split = replay(best ? best->choice : std::vector<int16_t>(ops.size(), 0));
    split.objective = bestCost;
    return split;
  }

private:
  void analyze();
  /// One pass of `info`'s op with its work divided `divide` ways, as `cost`
  /// (the op's, or its split GEMM's) runs it.
  ::cleave::cost::PassTime passTime(const OpInfo &info, const ::cleave::cost::PassCost &pass,
                                    double divide, const ::cleave::cost::OpCost &cost) const {
    if (&pass == &info.cost.backward && !options.training)
      return ::cleave::cost::PassTime();
    ::cleave::cost::PassCost scaled = pass;
    scaled.flops /= divide;
    scaled.bytesRead *= info.byteScale / divide;
    scaled.bytesWritten *= info.byteScale / divide;
    return ::cleave::cost::predictPass(cluster.device, cost, scaled, info.dtype);
  }
  double apply(size_t p, const Strategy &st, std::vector<uint32_t> &layout, LayerSplit *out);
  double finish(std::vector<uint32_t> &layout, LayerSplit *out);
  double reshard(Value value, TensorSharding from, TensorSharding to, Operation *before,
                 LayerSplit *out, bool grad);
  double collective(Collective c, bool backward, double bytes, Operation *before,
                    LayerSplit *out);
  LayerSplit replay(const std::vector<int16_t> &choice);

  double bytesOf(Value v) const {
    double bytes = double(tensorBytes(v.getType()));
    return isFloat(v) ? bytes * floatScale(v) : bytes;
  }
  /// Float tensors are costed at the compute dtype's size.
  double floatScale(Value v) const {
    auto element = cast<RankedTensorType>(v.getType()).getElementType();
    return double(::cleave::runtime::dtypeBytes(options.computeDType)) /
           double(element.getIntOrFloatBitWidth() / 8);
  }

  const Layer &layer;
  const ::cleave::cost::ClusterSpec &cluster;
  const TensorParallelOptions &options;
  std::vector<OpInfo> ops;
  llvm::DenseMap<Value, int> trackedIndex;
  std::vector<Value> tracked;
  std::vector<bool> requiresGrad; // per tracked value
  std::vector<bool> leavesLayer;  // per tracked value
  std::vector<std::vector<int>> liveAfter; // per op: tracked values read later
  double optimizerBandwidth = 1; // bytes/s the optimizer step streams at
  llvm::DenseSet<Value> weightsNeedingGrad;
};

void LayerSplitter::analyze() {
  llvm::DenseSet<Operation *> inLayer(layer.ops.begin(), layer.ops.end());
  auto track = [&](Value v) {
    auto [it, inserted] = trackedIndex.try_emplace(v, int(tracked.size()));
    if (inserted) {
      tracked.push_back(v);
      // Activations from outside need gradients (model inputs do not).
      bool grad = false;
      if (Operation *def = v.getDefiningOp(); def && !inLayer.contains(def))
        grad = isFloat(v);
      requiresGrad.push_back(grad);
      leavesLayer.push_back(false);
    }
    return it->second;
  };
  std::vector<int> lastUse;
  for (auto [p, op] : llvm::enumerate(layer.ops)) {
    OpInfo info{op, {}, {}, {}, {}, {}, DType::F32, 1.0};
    info.rule = cast<ShardingOpInterface>(op).getShardingRule();
    auto costly = cast<CostOpInterface>(op);
    info.cost = options.training ? costly.getTrainingCost() : costly.getCost();
    bool anyGrad = false;
    for (Value operand : op->getOperands()) {
      if (isWeight(operand)) {
        info.operandIndex.push_back(-1);
        auto param = operand.getDefiningOp<ParamOp>();
        if (param && !param.getBuffer() && isFloat(operand)) {
          weightsNeedingGrad.insert(operand);
          anyGrad = true;
        }
        continue;
      }
      int index = track(operand);
      info.operandIndex.push_back(index);
      anyGrad |= requiresGrad[index];
      if (int(lastUse.size()) <= index)
        lastUse.resize(index + 1, -1);
      lastUse[index] = int(p);
    }
    for (Value result : op->getResults()) {
      int index = track(result);
      requiresGrad[index] = anyGrad && isFloat(result);
      info.resultIndex.push_back(index);
      for (Operation *user : result.getUsers())
        if (!inLayer.contains(user))
          leavesLayer[index] = true;
    }
    // Dtype and byte scale of the op's compute.
    Value floatValue;
    for (Value v : op->getResults())
      if (isFloat(v))
        floatValue = v;
    info.dtype = floatValue ? options.computeDType : DType::F32;
    info.byteScale = floatValue ? floatScale(floatValue) : 1.0;
    ops.push_back(std::move(info));
  }
  // Block counts the rules' dims ask for: the sizes of the factors major to
  // each factor of a dim made of several.
  std::set<int64_t> blockCounts = {1};
  for (const OpInfo &info : ops) {
    auto collect = [&](llvm::ArrayRef<TensorFactors> tensors) {
      for (const TensorFactors &tensor : tensors)
        for (const DimFactors &dim : tensor) {
          int64_t major = 1;
          for (int f : dim) {
            if (major > 1)
              blockCounts.insert(major);
            major *= info.rule.factors[f].size;
          }
        }
    };
    collect(info.rule.operands);
    collect(info.rule.results);
  }
  for (OpInfo &info : ops) {
    // Strategies: run whole, or split one factor that divides evenly.
    info.strategies.push_back({});
    if (options.tp > 1)
      for (auto [f, factor] : llvm::enumerate(info.rule.factors)) {
        if (factor.kind == FactorKind::NeedReplication)
          continue;
        bool inResult = llvm::any_of(info.rule.results,
                                     [&](const TensorFactors &t) { return contains(t, f); });
        if (!inResult && factor.kind != FactorKind::Reduction)
          continue;
        for (int64_t blocks : blockCounts)
          if (factor.size % (blocks * options.tp) == 0)
            info.strategies.push_back({int(f), blocks});
      }
    for (Strategy &st : info.strategies) {
      ::cleave::cost::OpCost cost = info.cost;
      double divide = 1;
      if (st.factor >= 0) {
        divide = options.tp;
        if (cost.gemm)
          cost.gemm = splitGemmShape(*cost.gemm, info.rule.factors[st.factor].size, options.tp);
      }
      st.forward = passTime(info, info.cost.forward, divide, cost);
      st.backward = passTime(info, info.cost.backward, divide, cost);
    }
  }
  lastUse.resize(tracked.size(), -1);
  llvm::DenseMap<Operation *, int> position;
  for (auto [p, info] : llvm::enumerate(ops))
    position[info.op] = int(p);
  liveAfter.resize(ops.size());
  for (size_t v = 0; v < tracked.size(); ++v) {
    // Live after op p: defined at or before p (outside values from the
    // start) and still to be read after it.
    int end = leavesLayer[v] ? int(ops.size()) : lastUse[v];
    Operation *def = tracked[v].getDefiningOp();
    int first = def && position.count(def) ? position[def] : 0;
    for (int p = first; p < end; ++p)
      liveAfter[p].push_back(int(v));
  }
}

double LayerSplitter::collective(Collective c, bool backward, double bytes,
                                 Operation *before, LayerSplit *out) {
  if (backward && !options.training)
    return 0;
  if (out) {
    out->collectives.push_back({c, backward, bytes, before});
    out->cost.collectives.push_back({c, backward, bytes});
  }
  return ::cleave::planner::tpCollectiveSeconds(cluster, options.tp, c, bytes);
}

double LayerSplitter::reshard(Value value, TensorSharding from, TensorSharding to,
                              Operation *before, LayerSplit *out, bool grad) {
  if (from == to)
    return 0;
  double bytes = bytesOf(value);
  using K = TensorSharding::Kind;
  double seconds = 0;
  if (to.kind == K::Replicated) {
    // Gather the parts or sum the partial results; the gradient comes back
    // whole on every rank and each takes its part for free.
    seconds += collective(from.kind == K::Partial ? Collective::AllReduce : Collective::AllGather,
                          false, bytes, before, out);
  } else if (from.kind == K::Replicated) {
    // Each rank takes its part for free; the parts of the gradient are
    // gathered again.
    if (grad)
      seconds += collective(Collective::AllGather, true, bytes, before, out);
  } else if (from.kind == K::Partial) {
    if (!options.reduceScatter)
      return std::numeric_limits<double>::infinity();
    seconds += collective(Collective::ReduceScatter, false, bytes, before, out);
    if (grad)
      seconds += collective(Collective::AllGather, true, bytes, before, out);
  } else {
    // One split for another: each rank sends what the others now own.
    seconds += collective(Collective::AllToAll, false, bytes / options.tp, before, out);
    if (grad)
      seconds += collective(Collective::AllToAll, true, bytes / options.tp, before, out);
  }
  return seconds;
}

double LayerSplitter::apply(size_t p, const Strategy &st, std::vector<uint32_t> &layout,
                            LayerSplit *out) {
  const OpInfo &info = ops[p];
  int f = st.factor;
  double seconds = 0;
  bool parallelSplit = f >= 0 && info.rule.factors[f].kind == FactorKind::Parallel;
  for (auto [i, operand] : llvm::enumerate(info.op->getOperands())) {
    TensorSharding need = layoutOf(info.rule, info.rule.operands[i], st, false);
    if (out)
      out->operandLayout.back().push_back(need);
    int index = info.operandIndex[i];
    bool grad = index < 0 ? weightsNeedingGrad.contains(operand) : requiresGrad[index];
    if (index < 0) {
      // Weights are laid out as the op needs them, before the run. Training
      // updates every weight a rank holds each step: of two splits equally
      // fast, the one holding less wins (the optimizer's 28 bytes per
      // parameter through memory).
      auto fixed = options.weightLayouts.find(operand);
      if (fixed != options.weightLayouts.end()) {
        // Its layout is fixed (a tied weight): bring it to this op's layout
        // every microbatch.
        if (out)
          out->layout.try_emplace(operand, fixed->second);
        seconds += reshard(operand, fixed->second, need, info.op, out, grad);
      } else if (out) {
        out->layout.try_emplace(operand, need);
      }
      TensorSharding held = fixed != options.weightLayouts.end() ? fixed->second : need;
      if (grad) {
        double elements = double(cast<RankedTensorType>(operand.getType()).getNumElements());
        if (held.kind == TensorSharding::Sharded)
          elements /= options.tp;
        seconds += elements * 28.0 / optimizerBandwidth;
      }
    } else {
      seconds += reshard(operand, unpack(layout[index]), need, info.op, out, grad);
    }
    // Split along a factor this operand lacks, every rank reads it whole and
    // its gradient is a partial sum.
    if (parallelSplit && grad && !contains(info.rule.operands[i], f))
      seconds += collective(Collective::AllReduce, true, bytesOf(operand), info.op, out);
  }
  for (auto [r, index] : llvm::enumerate(info.resultIndex)) {
    TensorSharding layoutR = layoutOf(info.rule, info.rule.results[r], st, true);
    layout[index] = pack(layoutR);
    if (out)
      out->layout[tracked[index]] = layoutR;
  }
  // Compute, divided over the group when a factor is split.
  const ::cleave::cost::PassTime &forward = st.forward;
  const ::cleave::cost::PassTime &backward = st.backward;
  if (out) {
    out->cost.forwardCompute += forward.seconds();
    out->cost.forwardOverhead += forward.overhead;
    out->cost.backwardCompute += backward.seconds();
    out->cost.backwardOverhead += backward.overhead;
    if (info.cost.forward.kernels > 0) {
      ++out->cost.kernelOps;
      out->cost.splitOps += f >= 0;
    }
  }
  return seconds + forward.seconds() + backward.seconds();
}

double LayerSplitter::finish(std::vector<uint32_t> &layout, LayerSplit *out) {
  double seconds = 0;
  for (size_t v = 0; v < tracked.size(); ++v)
    if (leavesLayer[v]) {
      seconds += reshard(tracked[v], unpack(layout[v]), TensorSharding::replicated(), nullptr, out,
                         requiresGrad[v]);
      layout[v] = pack(TensorSharding::replicated());
    }
  return seconds;
}

LayerSplit LayerSplitter::replay(const std::vector<int16_t> &choice) {
  LayerSplit out;
  out.tp = options.tp;
  std::vector<uint32_t> layout(tracked.size(), pack(TensorSharding::replicated()));
  for (size_t p = 0; p < ops.size(); ++p) {
    out.operandLayout.emplace_back();
    apply(p, ops[p].strategies[choice[p]], layout, &out);
  }
  finish(layout, &out);

  // Memory per rank: parameters by the layout their ops gave them, saved
  // activations by the layout they were produced in.
  auto share = [&](Value v) {
    auto it = out.layout.find(v);
    return it != out.layout.end() && it->second.kind == TensorSharding::Sharded ? options.tp : 1;
  };
  for (Operation *op : layer.params) {
    auto param = cast<ParamOp>(op);
    double elements = cast<RankedTensorType>(param.getType()).getNumElements();
    int parts = share(param.getResult());
    if (param.getBuffer())
      out.cost.bufferBytes += double(tensorBytes(param.getType())) / parts;
    else
      out.cost.parameters += elements / parts;
  }
  for (Operation *op : layer.constants)
    out.cost.bufferBytes += double(tensorBytes(op->getResult(0).getType()));
  llvm::DenseSet<Value> saved;
  for (const OpInfo &info : ops) {
    SmallVector<Value> kept;
    cast<CostOpInterface>(info.op).getSavedForBackward(kept);
    double keptBytes = 0;
    for (Value v : kept)
      if (!isWeight(v)) {
        keptBytes += double(tensorBytes(v.getType()));
        if (saved.insert(v).second)
          out.cost.activationBytes += bytesOf(v) / share(v);
      }
    // State the op keeps that is no IR value (a dropout mask), in the
    // layout of its result.
    if (options.training && info.cost.savedBytes > keptBytes && info.op->getNumResults() == 1)
      out.cost.activationBytes += (info.cost.savedBytes - keptBytes) /
                                  share(info.op->getResult(0));
  }
  for (size_t v = 0; v < tracked.size(); ++v) {
    Operation *def = tracked[v].getDefiningOp();
    bool outside = !def || !llvm::is_contained(layer.ops, def);
    if (outside && isFloat(tracked[v]))
      out.cost.inputBytes += bytesOf(tracked[v]);
    if (leavesLayer[v] && isFloat(tracked[v]))
      out.cost.outputBytes += bytesOf(tracked[v]);
  }
  return out;
}

} // namespace

LayerSplit splitLayer(const Layer &layer, const ::cleave::cost::ClusterSpec &cluster,
                      const TensorParallelOptions &options) {
  return LayerSplitter(layer, cluster, options).run();
}

} // namespace mlir::cleave
