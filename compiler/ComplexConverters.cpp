//===- ComplexConverters.cpp - STFT, iSTFT and the complex values between -===//
//
// cleave has no complex dtype. A complex tensor of shape S is held as the
// real tensor [S..., 2] (real, imaginary), as torch.view_as_real lays it
// out, in a Val marked `complex`. Only the ops below take one: the
// producers `stft` and `view_as_complex`, the shape queries, `view` and
// `reshape`, `slice`, zero padding, `contiguous`/`clone`, and the consumers
// `view_as_real` and `istft`; any other op on a complex tensor is refused at
// its line, naming it. This covers spectrogram models (torchaudio's HDemucs:
// stft, then real/imaginary parts as channels, then istft).
//
// The transforms are matmuls with constant DFT bases (a frame of n_fft
// samples against n_fft/2 + 1 frequencies, or n_fft two-sided), exact in
// f32 up to rounding: stft frames the signal with one constant-index gather,
// windows it and projects it; istft projects back (onesided, an irfft: the
// DC and Nyquist bins' imaginary parts ignored, the others doubled), windows,
// overlaps and adds the frames (a gather of the frames covering each sample
// and a sum), and divides by the window's squared overlap, as PyTorch 1.13's
// SpectralOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/TorchImporter.h"
#include "dialects/cleave/CleaveBuilder.h"

#include "llvm/ADT/StringMap.h"

#include <ATen/ATen.h>

#include <cmath>

using namespace mlir;
namespace jit = torch::jit;
namespace c = mlir::cleave;

namespace cleave::importer {
namespace {

using Inputs = ArrayRef<Val>;
using Result = FailureOr<std::vector<Val>>;
using c::typeOf;

Result complexResult(Value v) { return std::vector<Val>{Val::ofComplex(v)}; }

/// The complex shape of a complex Val (its real tensor without the last dim).
SmallVector<int64_t> complexShape(const Val &v) {
  ArrayRef<int64_t> real = typeOf(v.tensor).getShape();
  return SmallVector<int64_t>(real.drop_back());
}

/// The window as n_fft values (a window of win_length centered in n_fft, as
/// PyTorch pads it; none is rectangular), known at compile time.
FailureOr<at::Tensor> windowOf(Importer &imp, const Val &arg, int64_t nFft, int64_t winLength) {
  at::Tensor window;
  if (imp.isNone(arg)) {
    window = at::ones({winLength}, at::kDouble);
  } else if (arg.isConstant() && arg.constant.isTensor()) {
    window = arg.constant.toTensor().to(at::kDouble);
  } else {
    imp.error() << "the window must be known at compile time (torch.hann_window(n) and the "
                   "like are); a window computed from the model's tensors is not supported";
    return failure();
  }
  if (window.dim() != 1 || window.size(0) != winLength || winLength > nFft || winLength < 1) {
    imp.error() << "expected a window of win_length " << winLength << " <= n_fft " << nFft
                << ", got " << window.sizes();
    return failure();
  }
  int64_t left = (nFft - winLength) / 2;
  return at::constant_pad_nd(window, {left, nFft - winLength - left}, 0);
}

/// stft(self, n_fft, hop_length, win_length, window, normalized, onesided,
/// return_complex) of a real [L] or [B, L] signal (center padding is the
/// caller's: torch.stft pads before calling the op): [B, F, T] complex, F
/// = n_fft / 2 + 1 (onesided, the default) or n_fft.
Result stft(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  auto nFft = imp.integer(in[1]);
  if (failed(x) || failed(nFft))
    return failure();
  auto hop = imp.optionalInteger(in[2]), win = imp.optionalInteger(in[3]);
  auto normalized = imp.boolean(in[5]);
  if (failed(hop) || failed(win) || failed(normalized))
    return failure();
  bool onesided = true, returnComplex = true;
  for (auto [index, flag] : {std::pair{6, &onesided}, {7, &returnComplex}})
    if (in.size() > size_t(index) && !imp.isNone(in[index])) {
      auto given = imp.boolean(in[index]);
      if (failed(given))
        return failure();
      *flag = *given;
    }
  auto xt = typeOf(*x);
  int64_t n = *nFft, h = hop->value_or(n / 4), w = win->value_or(n);
  if (!llvm::isa<FloatType>(xt.getElementType()) || (xt.getRank() != 1 && xt.getRank() != 2)) {
    imp.error() << "stft takes a real [L] or [B, L] float signal, got " << xt;
    return failure();
  }
  bool unbatched = xt.getRank() == 1;
  int64_t b = unbatched ? 1 : xt.getDimSize(0), length = xt.getShape().back();
  if (n < 1 || h < 1 || n > length) {
    imp.error() << "stft: n_fft " << n << " and hop " << h << " do not fit a signal of "
                << length << " samples";
    return failure();
  }
  auto window = windowOf(imp, in[4], n, w);
  if (failed(window))
    return failure();
  int64_t frames = 1 + (length - n) / h, freqs = onesided ? n / 2 + 1 : n;
  Type et = xt.getElementType();
  c::CleaveBuilder bld{imp.builder, imp.loc()};
  // Every frame's samples, one gather: [B, T·n] -> [B, T, n].
  at::Tensor positions = (at::arange(frames, at::kLong).mul(h).unsqueeze(1) +
                          at::arange(n, at::kLong).unsqueeze(0))
                             .flatten();
  auto index = imp.constantTensor(positions);
  if (failed(index))
    return failure();
  Value signal = imp.reshape(*x, {b, length});
  auto gathered = imp.create<c::IndexSelectOp>(RankedTensorType::get({b, frames * n}, et), signal,
                                               *index, int64_t(1));
  if (failed(gathered))
    return failure();
  // The basis [n, F·2]: column (f, 0) is w_j cos(2π f j / n), (f, 1) is
  // -w_j sin(...); the window and the normalization are folded into it.
  at::Tensor j = at::arange(n, at::kDouble).unsqueeze(1), f = at::arange(freqs, at::kDouble);
  at::Tensor angle = j * f.unsqueeze(0) * (2.0 * M_PI / double(n));
  double scale = *normalized ? 1.0 / std::sqrt(double(n)) : 1.0;
  at::Tensor basis = at::stack({at::cos(angle), -at::sin(angle)}, 2)
                         .mul(window->unsqueeze(1).unsqueeze(2))
                         .mul(scale)
                         .reshape({n, freqs * 2})
                         .to(at::kFloat);
  auto basisValue = imp.constantTensor(basis);
  if (failed(basisValue))
    return failure();
  auto spectrum = imp.create<c::MatmulOp>(imp.reshape(*gathered, {b, frames, n}),
                                          imp.cast(*basisValue, et));
  if (failed(spectrum))
    return failure();
  // [B, T, F, 2] -> [B, F, T, 2].
  Value z = bld.permute(imp.reshape(*spectrum, {b, frames, freqs, 2}), {0, 2, 1, 3});
  if (unbatched)
    z = imp.reshape(z, {freqs, frames, 2});
  if (!returnComplex)
    return std::vector<Val>{Val::ofTensor(z)};
  return complexResult(z);
}

/// istft(self, n_fft, hop_length, win_length, window, center, normalized,
/// onesided, length, return_complex) of a complex [F, T] or [B, F, T]
/// onesided spectrogram: the real signal [B, length].
Result istft(Importer &imp, jit::Node *, Inputs in) {
  // A real [..., 2] spectrogram is PyTorch's deprecated spelling of a complex one.
  Val spectrogram = in[0];
  if (!spectrogram.complex) {
    auto real = imp.tensor(spectrogram);
    if (failed(real))
      return failure();
    auto rt = typeOf(*real);
    if (rt.getRank() < 3 || rt.getShape().back() != 2 ||
        !llvm::isa<FloatType>(rt.getElementType())) {
      imp.error() << "istft takes a complex spectrogram, or its real form [..., 2], got " << rt;
      return failure();
    }
    spectrogram = Val::ofComplex(*real);
  }
  Value z = spectrogram.tensor;
  SmallVector<int64_t> shape = complexShape(spectrogram);
  auto nFft = imp.integer(in[1]);
  auto hop = imp.optionalInteger(in[2]), win = imp.optionalInteger(in[3]);
  auto center = imp.boolean(in[5]), normalized = imp.boolean(in[6]);
  auto length = imp.optionalInteger(in[8]);
  auto returnComplex = imp.boolean(in[9]);
  if (failed(nFft) || failed(hop) || failed(win) || failed(center) || failed(normalized) ||
      failed(length) || failed(returnComplex))
    return failure();
  // Onesided unless said otherwise or the spectrogram has all n_fft bins, as PyTorch.
  std::optional<bool> onesidedArg;
  if (!imp.isNone(in[7])) {
    auto onesided = imp.boolean(in[7]);
    if (failed(onesided))
      return failure();
    onesidedArg = *onesided;
  }
  if (*returnComplex) {
    imp.error() << "istft with return_complex=True is not supported";
    return failure();
  }
  int64_t n = *nFft, h = hop->value_or(n / 4), w = win->value_or(n);
  if (shape.size() != 2 && shape.size() != 3) {
    imp.error() << "istft takes a [F, T] or [B, F, T] spectrogram";
    return failure();
  }
  bool unbatched = shape.size() == 2;
  int64_t b = unbatched ? 1 : shape[0], freqs = shape[shape.size() - 2],
          frames = shape.back();
  bool onesided = onesidedArg.value_or(freqs != n);
  if (freqs != (onesided ? n / 2 + 1 : n) || h < 1 || h > n) {
    imp.error() << "istft needs " << (onesided ? n / 2 + 1 : n) << " frequencies for n_fft " << n
                << (onesided ? " (onesided)" : " (two-sided)") << ", got " << freqs
                << ", and a hop in [1, n_fft], got " << h;
    return failure();
  }
  auto window = windowOf(imp, in[4], n, w);
  if (failed(window))
    return failure();
  Type et = typeOf(z).getElementType();
  c::CleaveBuilder bld{imp.builder, imp.loc()};
  // [B, F, T, 2] -> [B, T, F·2], times the inverse basis [F·2, n] with the
  // window and the normalization folded in.
  Value spec = imp.reshape(bld.permute(imp.reshape(z, {b, freqs, frames, 2}), {0, 2, 1, 3}),
                           {b, frames, freqs * 2});
  at::Tensor f = at::arange(freqs, at::kDouble).unsqueeze(1), j = at::arange(n, at::kDouble);
  at::Tensor angle = f * j.unsqueeze(0) * (2.0 * M_PI / double(n));
  // An irfft: the bins up to n / 2 stand for their conjugate mirrors too, so
  // those with a mirror count twice. A two-sided spectrogram's other bins
  // are ignored, as PyTorch's real istft slices them off.
  int64_t half = n / 2 + 1;
  at::Tensor weight = at::zeros({freqs, 1}, at::kDouble);
  weight.slice(0, 0, half).fill_(2.0);
  weight[0] = 1.0;
  if (n % 2 == 0)
    weight[half - 1] = 1.0;
  double scale = (*normalized ? std::sqrt(double(n)) : 1.0) / double(n);
  at::Tensor inverse = at::stack({at::cos(angle) * weight, -at::sin(angle) * weight}, 1)
                           .mul(window->unsqueeze(0).unsqueeze(0))
                           .mul(scale)
                           .reshape({freqs * 2, n})
                           .to(at::kFloat);
  auto inverseValue = imp.constantTensor(inverse);
  if (failed(inverseValue))
    return failure();
  auto framesValue = imp.create<c::MatmulOp>(spec, imp.cast(*inverseValue, et));
  if (failed(framesValue))
    return failure();
  // Overlap-add: output sample i sums frame t's sample i - t·h over the at
  // most ceil(n / h) frames covering it, one gather of those (the others
  // read an appended zero) and a sum.
  int64_t total = n + h * (frames - 1), cover = (n + h - 1) / h;
  std::vector<int64_t> sources(total * cover, frames * n);
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = t * h + j, slot = 0;
      while (sources[i * cover + slot] != frames * n)
        ++slot;
      sources[i * cover + slot] = t * n + j;
    }
  auto padded = imp.create<c::ConcatOp>(
      ValueRange{imp.reshape(*framesValue, {b, frames * n}), imp.splat(0, et, {b, 1})},
      int64_t(1));
  auto sourceIndex = imp.constantTensor(at::tensor(sources, at::kLong));
  if (failed(padded) || failed(sourceIndex))
    return failure();
  auto spread = imp.create<c::IndexSelectOp>(RankedTensorType::get({b, total * cover}, et),
                                             *padded, *sourceIndex, int64_t(1));
  if (failed(spread))
    return failure();
  Value sum = bld.reduceSum(imp.reshape(*spread, {b, total, cover}), {2}, false);
  Value signal = imp.reshape(sum, {b, total});
  // The window's squared overlap, known now; PyTorch refuses where it
  // vanishes inside the kept range.
  at::Tensor squared = window->pow(2);
  at::Tensor envelope = at::zeros({total}, at::kDouble);
  for (int64_t t = 0; t < frames; ++t)
    envelope.slice(0, t * h, t * h + n).add_(squared);
  int64_t start = *center ? n / 2 : 0;
  int64_t end = length->has_value() ? start + **length : (*center ? total - n / 2 : total);
  int64_t kept = std::min(end, total);
  if (end < start) {
    imp.error() << "istft: length " << (length->has_value() ? **length : 0)
                << " leaves no samples";
    return failure();
  }
  if (kept > start && envelope.slice(0, start, kept).abs().min().item<double>() < 1e-11) {
    imp.error() << "istft: the window's overlap-add vanishes somewhere (PyTorch's \"window "
                   "overlap add min\" check); use a window and hop whose frames overlap";
    return failure();
  }
  auto cropped = imp.create<c::SliceOp>(signal, int64_t(1), start, kept, int64_t(1));
  auto divisor = imp.constantTensor(envelope.slice(0, start, kept).to(at::kFloat).clone());
  if (failed(cropped) || failed(divisor))
    return failure();
  auto y = imp.create<c::DivOp>(*cropped, imp.cast(*divisor, et));
  if (failed(y))
    return failure();
  Value out = *y;
  if (end > total) {
    auto padded = imp.create<c::PadOp>(RankedTensorType::get({b, end - start}, et), out,
                                       imp.builder.getDenseI64ArrayAttr({0, end - total}),
                                       imp.builder.getStringAttr("constant"),
                                       imp.builder.getF64FloatAttr(0.0));
    if (failed(padded))
      return failure();
    out = *padded;
  }
  if (unbatched)
    out = imp.reshape(out, {end - start});
  return std::vector<Val>{Val::ofTensor(out)};
}

/// view_as_complex(self [..., 2]): the same tensor, now complex.
Result viewAsComplex(Importer &imp, jit::Node *, Inputs in) {
  auto x = imp.tensor(in[0]);
  if (failed(x))
    return failure();
  auto xt = typeOf(*x);
  if (xt.getRank() < 1 || xt.getShape().back() != 2 || !llvm::isa<FloatType>(xt.getElementType())) {
    imp.error() << "view_as_complex takes a float tensor whose last dim is 2, got " << xt;
    return failure();
  }
  return complexResult(*x);
}

/// The ops that take a complex operand, on its real form.
Result complexOp(Importer &imp, jit::Node *node, const std::string &kind, Inputs in) {
  const Val &self = in[0];
  SmallVector<int64_t> shape = complexShape(self);
  int64_t rank = shape.size();
  auto normalizeDim = [&](const Val &v) -> FailureOr<int64_t> {
    auto d = imp.integer(v);
    if (failed(d))
      return failure();
    int64_t dim = *d < 0 ? *d + rank : *d;
    if (dim < 0 || dim >= rank) {
      imp.error() << "dim " << *d << " is out of range for a complex tensor of rank " << rank;
      return failure();
    }
    return dim;
  };
  auto realArgs = [&]() {
    std::vector<Val> args(in.begin(), in.end());
    args[0] = Val::ofTensor(self.tensor);
    return args;
  };
  auto complexOf = [&](Result r) -> Result {
    if (failed(r))
      return failure();
    return complexResult(r->front().tensor);
  };
  if (kind == "aten::size") {
    if (in.size() == 1)
      return std::vector<Val>{Val::ofConstant(c10::IValue(std::vector<int64_t>(shape.begin(), shape.end())))};
    auto dim = normalizeDim(in[1]);
    if (failed(dim))
      return failure();
    return std::vector<Val>{Val::ofConstant(c10::IValue(shape[*dim]))};
  }
  if (kind == "prim::shape")
    return std::vector<Val>{Val::ofConstant(c10::IValue(std::vector<int64_t>(shape.begin(), shape.end())))};
  if (kind == "aten::dim")
    return std::vector<Val>{Val::ofConstant(c10::IValue(rank))};
  if (kind == "aten::numel") {
    int64_t numel = 1;
    for (int64_t s : shape)
      numel *= s;
    return std::vector<Val>{Val::ofConstant(c10::IValue(numel))};
  }
  if (kind == "aten::view_as_real")
    return std::vector<Val>{Val::ofTensor(self.tensor)};
  if (kind == "aten::contiguous" || kind == "aten::clone")
    return std::vector<Val>{self};
  if (kind == "aten::view" || kind == "aten::reshape") {
    auto sizes = imp.intList(in[1]);
    if (failed(sizes))
      return failure();
    int64_t numel = 1, known = 1, inferred = -1;
    for (int64_t s : shape)
      numel *= s;
    for (size_t i = 0; i < sizes->size(); ++i) {
      if ((*sizes)[i] == -1 && inferred < 0)
        inferred = i;
      else
        known *= (*sizes)[i];
    }
    if (inferred >= 0 && known > 0)
      (*sizes)[inferred] = numel / known;
    int64_t product = 1;
    for (int64_t s : *sizes)
      product *= s;
    if (product != numel) {
      auto diag = imp.error();
      diag << "cannot view a complex tensor of " << numel << " elements as [";
      llvm::interleaveComma(*sizes, diag);
      diag << "]";
      return failure();
    }
    sizes->push_back(2);
    return complexResult(imp.reshape(self.tensor, *sizes));
  }
  if (kind == "aten::slice") {
    auto dim = normalizeDim(in[1]);
    if (failed(dim))
      return failure();
    std::vector<Val> args = realArgs();
    args[1] = Val::ofConstant(c10::IValue(*dim));
    return complexOf((*findConverter("aten::slice"))(imp, node, args));
  }
  if (kind == "aten::pad" || kind == "aten::constant_pad_nd") {
    auto pads = imp.intList(in[1]);
    if (failed(pads))
      return failure();
    if (kind == "aten::pad" && in.size() > 2 && !imp.isNone(in[2]) &&
        (!in[2].isConstant() || !in[2].constant.isString() ||
         in[2].constant.toStringRef() != "constant")) {
      imp.error() << "a complex tensor pads with zeros only (mode='constant')";
      return failure();
    }
    size_t valueIndex = kind == "aten::pad" ? 3 : 2;
    if (in.size() > valueIndex && !imp.isNone(in[valueIndex])) {
      auto value = imp.real(in[valueIndex]);
      if (failed(value))
        return failure();
      if (*value != 0) {
        imp.error() << "a complex tensor pads with zeros only, got value " << *value;
        return failure();
      }
    }
    std::vector<int64_t> widened{0, 0};
    widened.insert(widened.end(), pads->begin(), pads->end());
    std::vector<Val> args = realArgs();
    args[1] = Val::ofConstant(c10::IValue(widened));
    return complexOf((*findConverter(kind))(imp, node, args));
  }
  if (kind == "aten::istft")
    return istft(imp, node, in);
  imp.error() << "takes a complex tensor, which cleave holds only between stft or "
                 "view_as_complex and view_as_real or istft (with shape queries, view, "
                 "reshape, slice and zero padding in between)";
  return failure();
}

} // namespace

Val Val::ofComplex(mlir::Value v) {
  Val r = ofTensor(v);
  r.complex = true;
  return r;
}

Result convertComplex(Importer &imp, jit::Node *node, const std::string &kind, Inputs in) {
  if (in.empty() || !in[0].complex) {
    imp.error() << "takes a complex tensor as a later operand, which no cleave op does";
    return failure();
  }
  return complexOp(imp, node, kind, in);
}

void addComplexConverters(llvm::StringMap<Converter> &r) {
  r["aten::stft"] = stft;
  r["aten::view_as_complex"] = viewAsComplex;
  r["aten::istft"] = [](Importer &imp, jit::Node *node, Inputs in) -> Result {
    return istft(imp, node, in);
  };
}

} // namespace cleave::importer
