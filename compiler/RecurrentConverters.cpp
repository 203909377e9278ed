//===- RecurrentConverters.cpp - RNN, LSTM and GRU unrolled over time -----===//
//
// aten::rnn_tanh / rnn_relu / lstm / gru (nn.RNN, nn.LSTM, nn.GRU) and their
// single-step cells, spelled as core ops. The sequence length is static, so
// each layer and direction is unrolled: the input projection of every step
// is one `linear` over the whole sequence, then each step adds the hidden
// state's projection and applies the gates, as PyTorch's CPU kernels do
// (gate order i, f, g, o for LSTM; r, z, n for GRU, whose n gate applies r to
// the hidden projection with its bias). Gradients, costs and sharding follow
// from the core ops. Packed sequences, LSTM projections (proj_size) and
// dropout between layers while training are refused with the reason.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "dialects/cleave/CleaveBuilder.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
namespace jit = torch::jit;
namespace c = mlir::cleave;

namespace cleave::importer {
namespace {

using Inputs = ArrayRef<Val>;
using Result = FailureOr<std::vector<Val>>;
using c::typeOf;

enum class Cell { Tanh, Relu, Lstm, Gru };

int64_t gatesOf(Cell cell) {
  return cell == Cell::Lstm ? 4 : cell == Cell::Gru ? 3 : 1;
}

const char *nameOf(Cell cell) {
  switch (cell) {
  case Cell::Tanh:
    return "rnn_tanh";
  case Cell::Relu:
    return "rnn_relu";
  case Cell::Lstm:
    return "lstm";
  case Cell::Gru:
    return "gru";
  }
  return "rnn";
}

/// One layer-direction's weights: w_ih [G·H, I], w_hh [G·H, H], biases
/// [G·H] or null.
struct Weights {
  Value wIh, wHh, bIh, bHh;
};

struct Rnn : c::CleaveBuilder {
  Importer &imp;
  Cell cell;
  int64_t hidden;
  Rnn(Importer &imp, Cell cell, int64_t hidden)
      : c::CleaveBuilder{imp.builder, imp.loc()}, imp(imp), cell(cell), hidden(hidden) {}

  Value linear(Value x, Value w, Value bias) { return make<c::LinearOp>(x, w, bias); }
  Value gate(Value x, int64_t k) {
    int64_t last = typeOf(x).getRank() - 1;
    return make<c::SliceOp>(x, last, k * hidden, (k + 1) * hidden, int64_t(1));
  }
  Value sigmoid(Value x) { return make<c::SigmoidOp>(x); }
  Value tanh(Value x) { return make<c::TanhOp>(x); }

  /// One step from the input's projection `gx` [B, G·H] (its bias added):
  /// the new hidden state, and for LSTM the new cell state in `c`.
  Value step(Value gx, Value h, Value &cState, const Weights &w) {
    Value gh = linear(h, w.wHh, w.bHh);
    switch (cell) {
    case Cell::Tanh:
      return tanh(add(gx, gh));
    case Cell::Relu:
      return make<c::ReluOp>(add(gx, gh));
    case Cell::Lstm: {
      Value s = add(gx, gh);
      Value i = sigmoid(gate(s, 0)), f = sigmoid(gate(s, 1)), g = tanh(gate(s, 2)),
            o = sigmoid(gate(s, 3));
      cState = add(mul(f, cState), mul(i, g));
      return mul(o, tanh(cState));
    }
    case Cell::Gru: {
      Value r = sigmoid(add(gate(gx, 0), gate(gh, 0)));
      Value z = sigmoid(add(gate(gx, 1), gate(gh, 1)));
      Value n = tanh(add(gate(gx, 2), mul(r, gate(gh, 2))));
      return add(n, mul(z, sub(h, n))); // (1 - z)·n + z·h
    }
    }
    return h;
  }
};

/// Checks a weight's shape; reports at the node.
LogicalResult expectShape(Importer &imp, Value v, ArrayRef<int64_t> shape, const char *what,
                          int64_t layer) {
  if (typeOf(v).getShape() == shape)
    return success();
  auto diag = imp.error();
  diag << what << " of layer " << layer << " is " << typeOf(v) << ", expected [";
  llvm::interleave(shape, diag, ", ");
  diag << "]";
  return failure();
}

/// rnn_tanh / rnn_relu / gru(input, hx, params, has_biases, num_layers,
/// dropout, train, bidirectional, batch_first) and lstm(input, hx[h, c], ...).
Converter sequence(Cell cell) {
  return [cell](Importer &imp, jit::Node *node, Inputs in) -> Result {
    if (node->schema().overload_name() == "data" || in.size() != 9) {
      imp.error() << "packed sequences are not supported: pass the padded batch (the "
                     "sequence length is static in a traced model)";
      return failure();
    }
    auto x = imp.tensor(in[0]);
    auto params = imp.list(in[2]);
    auto hasBiases = imp.boolean(in[3]);
    auto layers = imp.integer(in[4]);
    auto dropout = imp.real(in[5]);
    auto train = imp.boolean(in[6]);
    auto bidirectional = imp.boolean(in[7]);
    auto batchFirst = imp.boolean(in[8]);
    if (failed(x) || failed(params) || failed(hasBiases) || failed(layers) ||
        failed(dropout) || failed(train) || failed(bidirectional) || failed(batchFirst))
      return failure();
    std::vector<Value> states; // h0 (and c0 for LSTM)
    if (cell == Cell::Lstm) {
      auto hx = imp.list(in[1]);
      if (failed(hx))
        return failure();
      if (hx->size() != 2) {
        imp.error() << "expected the LSTM state (h0, c0), got " << hx->size() << " tensors";
        return failure();
      }
      for (const Val &v : *hx) {
        auto t = imp.tensor(v);
        if (failed(t))
          return failure();
        states.push_back(*t);
      }
    } else {
      auto h0 = imp.tensor(in[1]);
      if (failed(h0))
        return failure();
      states.push_back(*h0);
    }
    if (*train && *dropout > 0 && *layers > 1) {
      imp.error() << nameOf(cell) << ": dropout " << *dropout
                  << " between layers while training is not supported; train with dropout=0 "
                     "or trace in eval mode";
      return failure();
    }
    auto xt = typeOf(*x);
    if (!llvm::isa<FloatType>(xt.getElementType()) || (xt.getRank() != 3 && xt.getRank() != 2)) {
      imp.error() << nameOf(cell) << " needs a float [T, B, I] (or [B, T, I], or unbatched "
                                     "[T, I]) input, got "
                  << xt;
      return failure();
    }
    bool unbatched = xt.getRank() == 2;
    int64_t dirs = *bidirectional ? 2 : 1, perLayer = *hasBiases ? 4 : 2;
    int64_t hiddenSize = typeOf(states[0]).getShape().back();
    if (int64_t(params->size()) != *layers * dirs * perLayer) {
      imp.error() << nameOf(cell) << ": " << params->size() << " weights for " << *layers
                  << " layers" << (dirs == 2 ? " in both directions" : "")
                  << (cell == Cell::Lstm ? " (LSTM projections, proj_size > 0, are not "
                                           "supported)"
                                         : "");
      return failure();
    }
    Rnn b(imp, cell, hiddenSize);
    // Time-major [T, B, I] throughout.
    Value seq = *x;
    if (unbatched)
      seq = b.reshape(seq, {xt.getDimSize(0), 1, xt.getDimSize(1)});
    else if (*batchFirst)
      seq = b.permute(seq, {1, 0, 2});
    int64_t steps = typeOf(seq).getDimSize(0), batch = typeOf(seq).getDimSize(1);
    SmallVector<int64_t> stateShape{*layers * dirs, batch, hiddenSize};
    for (Value &s : states) {
      if (typeOf(s).getElementType() != xt.getElementType()) {
        imp.error() << nameOf(cell) << ": initial state " << typeOf(s) << " and input " << xt
                    << " differ in dtype";
        return failure();
      }
      if (unbatched && typeOf(s).getRank() == 2)
        s = b.reshape(s, stateShape);
      if (typeOf(s).getShape() != ArrayRef<int64_t>(stateShape)) {
        imp.error() << nameOf(cell) << ": initial state " << typeOf(s) << " does not fit "
                    << *layers * dirs << " layer-directions of batch " << batch << " and "
                    << hiddenSize << " hidden features";
        return failure();
      }
    }
    int64_t g = gatesOf(cell);
    std::vector<Value> finalH, finalC;
    for (int64_t layer = 0; layer < *layers; ++layer) {
      int64_t inFeatures = typeOf(seq).getDimSize(2);
      std::vector<Value> outputs;
      for (int64_t dir = 0; dir < dirs; ++dir) {
        int64_t base = (layer * dirs + dir) * perLayer;
        Weights w;
        auto weight = [&](int64_t i) { return imp.tensor((*params)[base + i]); };
        auto wIh = weight(0), wHh = weight(1);
        if (failed(wIh) || failed(wHh) ||
            failed(expectShape(imp, *wIh, {g * hiddenSize, inFeatures}, "w_ih", layer)) ||
            failed(expectShape(imp, *wHh, {g * hiddenSize, hiddenSize}, "w_hh", layer)))
          return failure();
        w.wIh = *wIh;
        w.wHh = *wHh;
        if (*hasBiases) {
          auto bIh = weight(2), bHh = weight(3);
          if (failed(bIh) || failed(bHh) ||
              failed(expectShape(imp, *bIh, {g * hiddenSize}, "b_ih", layer)) ||
              failed(expectShape(imp, *bHh, {g * hiddenSize}, "b_hh", layer)))
            return failure();
          w.bIh = *bIh;
          w.bHh = *bHh;
        }
        for (Value v : {w.wIh, w.wHh, w.bIh, w.bHh})
          if (v && typeOf(v).getElementType() != xt.getElementType()) {
            imp.error() << nameOf(cell) << ": weights of " << typeOf(v)
                        << " and an input of " << xt << " differ in dtype";
            return failure();
          }
        int64_t at = layer * dirs + dir;
        auto stateOf = [&](Value s) {
          return b.reshape(b.make<c::SliceOp>(s, int64_t(0), at, at + 1, int64_t(1)),
                           {batch, hiddenSize});
        };
        Value h = stateOf(states[0]);
        Value cState = cell == Cell::Lstm ? stateOf(states[1]) : Value();
        // Every step's input projection in one linear: [T, B, G·H].
        Value projected = b.linear(seq, w.wIh, w.bIh);
        std::vector<Value> hs(steps);
        for (int64_t k = 0; k < steps; ++k) {
          int64_t t = dir == 0 ? k : steps - 1 - k;
          Value gx = b.reshape(b.make<c::SliceOp>(projected, int64_t(0), t, t + 1, int64_t(1)),
                               {batch, g * hiddenSize});
          h = b.step(gx, h, cState, w);
          hs[t] = b.reshape(h, {1, batch, hiddenSize});
        }
        outputs.push_back(steps == 1 ? hs[0] : b.make<c::ConcatOp>(hs, int64_t(0)));
        finalH.push_back(b.reshape(h, {1, batch, hiddenSize}));
        if (cState)
          finalC.push_back(b.reshape(cState, {1, batch, hiddenSize}));
      }
      seq = dirs == 1 ? outputs[0] : b.make<c::ConcatOp>(outputs, int64_t(2));
    }
    auto joined = [&](std::vector<Value> &parts) {
      Value all = parts.size() == 1 ? parts[0] : b.make<c::ConcatOp>(parts, int64_t(0));
      return unbatched ? b.reshape(all, {*layers * dirs, hiddenSize}) : all;
    };
    Value out = seq;
    if (unbatched)
      out = b.reshape(out, {steps, dirs * hiddenSize});
    else if (*batchFirst)
      out = b.permute(out, {1, 0, 2});
    std::vector<Val> results{Val::ofTensor(out), Val::ofTensor(joined(finalH))};
    if (cell == Cell::Lstm)
      results.push_back(Val::ofTensor(joined(finalC)));
    return results;
  };
}

/// rnn_tanh_cell / rnn_relu_cell / gru_cell(input, hx, w_ih, w_hh, b_ih,
/// b_hh) and lstm_cell(input, hx[h, c], ...): one step.
Converter single(Cell cell) {
  return [cell](Importer &imp, jit::Node *, Inputs in) -> Result {
    auto x = imp.tensor(in[0]);
    auto wIh = imp.tensor(in[2]), wHh = imp.tensor(in[3]);
    if (failed(x) || failed(wIh) || failed(wHh))
      return failure();
    Value h, cState;
    if (cell == Cell::Lstm) {
      auto hx = imp.list(in[1]);
      if (failed(hx))
        return failure();
      if (hx->size() != 2) {
        imp.error() << "expected the LSTM state (h, c), got " << hx->size() << " tensors";
        return failure();
      }
      auto h0 = imp.tensor((*hx)[0]), c0 = imp.tensor((*hx)[1]);
      if (failed(h0) || failed(c0))
        return failure();
      h = *h0;
      cState = *c0;
    } else if (imp.isNone(in[1])) {
      h = Value();
    } else {
      auto h0 = imp.tensor(in[1]);
      if (failed(h0))
        return failure();
      h = *h0;
    }
    Weights w{*wIh, *wHh, Value(), Value()};
    for (int i : {4, 5}) {
      if (imp.isNone(in[i]))
        continue;
      auto bias = imp.tensor(in[i]);
      if (failed(bias))
        return failure();
      (i == 4 ? w.bIh : w.bHh) = *bias;
    }
    auto xt = typeOf(*x);
    int64_t g = gatesOf(cell), hiddenSize = typeOf(w.wHh).getShape().back();
    if (!llvm::isa<FloatType>(xt.getElementType()) || (xt.getRank() != 2 && xt.getRank() != 1)) {
      imp.error() << nameOf(cell) << "_cell needs a float [B, I] or [I] input, got " << xt;
      return failure();
    }
    bool unbatched = xt.getRank() == 1;
    int64_t batch = unbatched ? 1 : xt.getDimSize(0), inFeatures = xt.getShape().back();
    if (failed(expectShape(imp, w.wIh, {g * hiddenSize, inFeatures}, "w_ih", 0)) ||
        failed(expectShape(imp, w.wHh, {g * hiddenSize, hiddenSize}, "w_hh", 0)))
      return failure();
    for (Value v : {w.bIh, w.bHh})
      if (v && failed(expectShape(imp, v, {g * hiddenSize}, "bias", 0)))
        return failure();
    for (Value v : {w.wIh, w.wHh, w.bIh, w.bHh})
      if (v && typeOf(v).getElementType() != xt.getElementType()) {
        imp.error() << nameOf(cell) << "_cell: weights of " << typeOf(v) << " and an input of "
                    << xt << " differ in dtype";
        return failure();
      }
    Rnn b(imp, cell, hiddenSize);
    Value input = b.reshape(*x, {batch, inFeatures});
    if (!h)
      h = b.splat(0, RankedTensorType::get({batch, hiddenSize}, xt.getElementType()));
    for (Value *s : {&h, &cState})
      if (*s) {
        if (typeOf(*s).getElementType() != xt.getElementType()) {
          imp.error() << nameOf(cell) << "_cell: state " << typeOf(*s) << " and input " << xt
                      << " differ in dtype";
          return failure();
        }
        if (typeOf(*s).getNumElements() != batch * hiddenSize) {
          imp.error() << nameOf(cell) << "_cell: state " << typeOf(*s) << " does not fit batch "
                      << batch << " and " << hiddenSize << " hidden features";
          return failure();
        }
        *s = b.reshape(*s, {batch, hiddenSize});
      }
    Value next = b.step(b.linear(input, w.wIh, w.bIh), h, cState, w);
    SmallVector<int64_t> shape{batch, hiddenSize};
    if (unbatched)
      shape = {hiddenSize};
    std::vector<Val> results{Val::ofTensor(b.reshape(next, shape))};
    if (cell == Cell::Lstm)
      results.push_back(Val::ofTensor(b.reshape(cState, shape)));
    return results;
  };
}

/// pack_padded_sequence: the batch's lengths are data, so every shape after
/// it is; refused at the line.
Result packedSequence(Importer &imp, jit::Node *, Inputs) {
  imp.error() << "packed sequences are not supported: pass the padded batch to the RNN "
                 "(the lengths of a packed sequence are data, and every shape after them "
                 "would depend on them); mask the padded steps instead";
  return failure();
}

} // namespace

void addRecurrentConverters(llvm::StringMap<Converter> &r) {
  r["aten::rnn_tanh"] = sequence(Cell::Tanh);
  r["aten::rnn_relu"] = sequence(Cell::Relu);
  r["aten::lstm"] = sequence(Cell::Lstm);
  r["aten::gru"] = sequence(Cell::Gru);
  r["aten::rnn_tanh_cell"] = single(Cell::Tanh);
  r["aten::rnn_relu_cell"] = single(Cell::Relu);
  r["aten::lstm_cell"] = single(Cell::Lstm);
  r["aten::gru_cell"] = single(Cell::Gru);
  r["aten::_pack_padded_sequence"] = packedSequence;
}

} // namespace cleave::importer
