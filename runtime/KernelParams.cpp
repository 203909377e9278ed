//===- KernelParams.cpp - Instruction parsing shared by every backend -----===//

#include "runtime/KernelParams.h"
#include "runtime/WindowShape.h"

#include <cmath>

#include <algorithm>
#include <string>

namespace cleave::runtime {

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

Status parsePoolWindow(const KernelSignature &sig, const TensorDesc &x, bool hasDilation,
                       PoolParams *g) {
  std::vector<int64_t> kernel, stride, padding, dilation = {1, 1};
  bool ceilMode = false;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("kernel", &kernel)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("stride", &stride)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("padding", &padding)));
  if (hasDilation)
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dilation", &dilation)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("ceil_mode", &ceilMode, false)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "kernel", kernel, 1));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "stride", stride, 1));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "padding", padding, 0));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "dilation", dilation, 1));
  for (int i = 0; i < 2; ++i)
    if (2 * padding[i] > kernel[i])
      return CLEAVE_ERROR(sig.kernel, ": padding ", formatList(padding),
                          " must be at most half the kernel ", formatList(kernel));
  g->planes = x.shape[0] * x.shape[1];
  g->h = x.shape[2];
  g->w = x.shape[3];
  g->kh = kernel[0];
  g->kw = kernel[1];
  g->sh = stride[0];
  g->sw = stride[1];
  g->ph = padding[0];
  g->pw = padding[1];
  g->dh = dilation[0];
  g->dw = dilation[1];
  g->oh = windowOutputSize(g->h, g->kh, g->sh, g->ph, g->dh, ceilMode);
  g->ow = windowOutputSize(g->w, g->kw, g->sw, g->pw, g->dw, ceilMode);
  if (g->oh < 1 || g->ow < 1)
    return CLEAVE_ERROR(sig.kernel, ": kernel ", formatList(kernel), " (dilation ",
                        formatList(dilation), ") is larger than the padded input ",
                        describe(x.shape, x.dtype));
  return {};
}

namespace {

/// The one input of a pooling op: present, of an allowed dtype, 4-D.
Status checkPoolInput(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  if (x.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": needs a 4-D input [N, C, H, W], got ",
                        describe(x.shape, x.dtype));
  return {};
}

/// Checks a pooling op's input and output; `hasDilation` is false for
/// avg_pool2d (dilation 1).
Status parsePool(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes, bool hasDilation, PoolParams *g) {
  CLEAVE_RETURN_IF_ERROR(checkPoolInput(sig, backend, dtypes));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(parsePoolWindow(sig, x, hasDilation, g));
  return checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], g->oh, g->ow}},
                     "from the input and the window attributes");
}

} // namespace

Status parseMaxPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out) {
  return parsePool(sig, backend, dtypes, /*hasDilation=*/true, out);
}

Status parseAvgPool2d(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, PoolParams *out, bool *countIncludePad) {
  CLEAVE_RETURN_IF_ERROR(parsePool(sig, backend, dtypes, /*hasDilation=*/false, out));
  return withKernel(sig, sig.attrs.getBool("count_include_pad", countIncludePad, true));
}

Status parseAdaptiveAvgPool2d(const KernelSignature &sig, const char *backend,
                              std::initializer_list<DType> dtypes, AdaptivePoolParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkPoolInput(sig, backend, dtypes));
  const TensorDesc &x = *sig.inputs[0];
  std::vector<int64_t> size;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("output_size", &size)));
  CLEAVE_RETURN_IF_ERROR(checkPair(sig, "output_size", size, 1));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, {x.shape[0], x.shape[1], size[0], size[1]}},
                                     "the input's N and C with output_size"));
  out->planes = x.shape[0] * x.shape[1];
  out->h = x.shape[2];
  out->w = x.shape[3];
  out->oh = size[0];
  out->ow = size[1];
  if (out->planes > 0 && (out->h == 0 || out->w == 0))
    return CLEAVE_ERROR(sig.kernel, ": cannot average an empty plane: input ",
                        describe(x.shape, x.dtype));
  return {};
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

Status parseReduction(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, bool needsElements, ReduceParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  std::vector<int64_t> &dims = out->dims;
  bool &keepdim = out->keepdim;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dims", &dims)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("keepdim", &keepdim, false)));
  std::vector<bool> &reduced = out->reduced;
  reduced.assign(x.shape.size(), false);
  for (int64_t d : dims) {
    CLEAVE_RETURN_IF_ERROR(checkDim(sig, "reduction dim", d, x.rank()));
    if (reduced[d])
      return CLEAVE_ERROR(sig.kernel, ": reduction dim ", d, " appears twice in ",
                          formatList(dims));
    reduced[d] = true;
  }
  Shape outShape;
  int64_t reducedCount = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!reduced[d])
      outShape.push_back(x.shape[d]);
    else {
      reducedCount *= x.shape[d];
      if (keepdim)
        outShape.push_back(1);
    }
  }
  CLEAVE_RETURN_IF_ERROR(
      checkOutput(sig, {x.dtype, outShape},
                  "input reduced over " + formatList(dims) + (keepdim ? " keeping dims" : "")));
  const int64_t outCount = numElements(outShape);
  if (needsElements && reducedCount == 0 && outCount > 0)
    return CLEAVE_ERROR(sig.kernel, ": cannot take the maximum over zero elements (input ",
                        describe(x.shape, x.dtype), ", dims ", formatList(dims), ")");
  out->outCount = outCount;
  out->reducedCount = reducedCount;
  out->groups.clear();
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (x.shape[d] == 1)
      continue;
    if (!out->groups.empty() && out->groups.back().reduced == reduced[d])
      out->groups.back().size *= x.shape[d];
    else
      out->groups.push_back({x.shape[d], reduced[d]});
  }
  return {};
}

Status parseIndexReduction(const KernelSignature &sig, const char *backend,
                           std::initializer_list<DType> dtypes, IndexReduceParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  int64_t dim = 0;
  bool keepdim = false;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("keepdim", &keepdim, false)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
  if (x.shape[dim] == 0)
    return CLEAVE_ERROR(sig.kernel, ": cannot take an extremum over the empty dim ", dim,
                        " of input ", describe(x.shape, x.dtype));
  Shape outShape = x.shape;
  if (keepdim)
    outShape[dim] = 1;
  else
    outShape.erase(outShape.begin() + dim);
  const std::string how = "input reduced over dim " + std::to_string(dim) +
                          (keepdim ? " keeping it" : "");
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, outShape}, how));
  const TensorDesc &indices = sig.outputs[1];
  if (indices != TensorDesc{DType::I64, outShape})
    return CLEAVE_ERROR(sig.kernel, ": indices output is ", describe(indices.shape, indices.dtype),
                        ", expected ", describe(outShape, DType::I64), " (", how, ")");
  out->dim = dim;
  out->keepdim = keepdim;
  out->size = x.shape[dim];
  out->outer = numElements(Shape(x.shape.begin(), x.shape.begin() + dim));
  out->inner = numElements(Shape(x.shape.begin() + dim + 1, x.shape.end()));
  return {};
}

Status parseScan(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes, ScanParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("reverse", &out->reverse, false)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  out->size = x.shape[dim];
  out->outer = numElements(Shape(x.shape.begin(), x.shape.begin() + dim));
  out->inner = numElements(Shape(x.shape.begin() + dim + 1, x.shape.end()));
  return {};
}

Status parseValuesAndIndicesScan(const KernelSignature &sig, const char *backend,
                                 std::initializer_list<DType> dtypes, ScanParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getBool("descending", &out->reverse, false)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  const TensorDesc &indices = sig.outputs[1];
  if (indices != TensorDesc{DType::I64, x.shape})
    return CLEAVE_ERROR(sig.kernel, ": indices output is ", describe(indices.shape, indices.dtype),
                        ", expected ", describe(x.shape, DType::I64), " (the input's shape)");
  out->size = x.shape[dim];
  out->outer = numElements(Shape(x.shape.begin(), x.shape.begin() + dim));
  out->inner = numElements(Shape(x.shape.begin() + dim + 1, x.shape.end()));
  return {};
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

namespace {
/// Checks that operand `name` is a batch of matrices (rank >= 2).
Status checkMatrices(const KernelSignature &sig, const char *name, const TensorDesc &x) {
  if (x.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " ", describe(x.shape, x.dtype),
                        " must be a matrix or a batch of matrices (rank >= 2)");
  return {};
}

/// Checks that output `index` (called `name`) is `expected`.
Status checkNamedOutput(const KernelSignature &sig, size_t index, const char *name,
                        const TensorDesc &expected) {
  const TensorDesc &got = sig.outputs[index];
  if (got != expected)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " output is ", describe(got.shape, got.dtype),
                        ", expected ", describe(expected.shape, expected.dtype));
  return {};
}

Shape batchOf(const Shape &shape) { return Shape(shape.begin(), shape.end() - 2); }
} // namespace

Status parseLuFactor(const KernelSignature &sig, const char *backend,
                     std::initializer_list<DType> dtypes, LuFactorParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkMatrices(sig, "input", x));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  Shape batch = batchOf(x.shape);
  out->m = x.shape[x.rank() - 2];
  out->n = x.shape.back();
  out->batch = numElements(batch);
  Shape pivots = batch;
  pivots.push_back(std::min(out->m, out->n));
  CLEAVE_RETURN_IF_ERROR(checkNamedOutput(sig, 1, "pivots", {DType::I32, pivots}));
  return checkNamedOutput(sig, 2, "info", {DType::I32, batch});
}

Status parsePivotsToPermutation(const KernelSignature &sig, const char *backend,
                                PivotsParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "pivots"));
  const TensorDesc &p = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "pivots", p, {DType::I32, DType::I64}));
  if (p.rank() < 1)
    return CLEAVE_ERROR(sig.kernel, ": pivots ", describe(p.shape, p.dtype),
                        " must have rank >= 1");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("rows", &out->rows)));
  out->k = p.shape.back();
  if (out->rows < out->k)
    return CLEAVE_ERROR(sig.kernel, ": rows ", out->rows, " must be at least the ", out->k,
                        " pivots");
  Shape shape = p.shape;
  shape.back() = out->rows;
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {DType::I64, shape}, "the pivots' batch by rows"));
  out->batch = numElements(Shape(p.shape.begin(), p.shape.end() - 1));
  out->pivotType = p.dtype;
  return {};
}

Status parseCholesky(const KernelSignature &sig, const char *backend,
                     std::initializer_list<DType> dtypes, CholeskyParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkMatrices(sig, "input", x));
  if (x.shape.back() != x.shape[x.rank() - 2])
    return CLEAVE_ERROR(sig.kernel, ": input ", describe(x.shape, x.dtype),
                        " must hold square matrices");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("upper", &out->upper, false)));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  Shape batch = batchOf(x.shape);
  out->n = x.shape.back();
  out->batch = numElements(batch);
  return checkNamedOutput(sig, 1, "info", {DType::I32, batch});
}

Status parseTriangularSolve(const KernelSignature &sig, const char *backend,
                            std::initializer_list<DType> dtypes, TriangularSolveParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "a"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "b"));
  const TensorDesc &a = *sig.inputs[0], &b = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "a", a, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "a", a, "b", b));
  CLEAVE_RETURN_IF_ERROR(checkMatrices(sig, "a", a));
  CLEAVE_RETURN_IF_ERROR(checkMatrices(sig, "b", b));
  const int64_t n = a.shape.back();
  if (a.shape[a.rank() - 2] != n)
    return CLEAVE_ERROR(sig.kernel, ": a ", describe(a.shape, a.dtype),
                        " must hold square matrices");
  if (b.shape[b.rank() - 2] != n)
    return CLEAVE_ERROR(sig.kernel, ": b ", describe(b.shape, b.dtype), " must have ", n,
                        " rows, as a's matrices");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("upper", &out->upper, false)));
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getBool("transpose", &out->transpose, false)));
  CLEAVE_RETURN_IF_ERROR(
      withKernel(sig, sig.attrs.getBool("unitriangular", &out->unitriangular, false)));
  Shape aBatch = batchOf(a.shape), bBatch = batchOf(b.shape);
  auto batch = broadcastShapes({aBatch, bBatch});
  if (!batch)
    return CLEAVE_ERROR(sig.kernel, ": batch dims of a ", describe(a.shape, a.dtype), " and b ",
                        describe(b.shape, b.dtype), " do not broadcast");
  Shape result = *batch;
  result.push_back(n);
  result.push_back(b.shape.back());
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {a.dtype, result}, "the broadcast of a and b"));
  out->n = n;
  out->k = b.shape.back();
  out->batch = numElements(*batch);
  // Each result matrix's a and b matrix, walking the broadcast batch.
  const int64_t rank = static_cast<int64_t>(batch->size());
  auto indexIn = [&](const Shape &operand, int64_t flat) {
    int64_t index = 0, stride = 1;
    const int64_t offset = rank - static_cast<int64_t>(operand.size());
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t size = (*batch)[d], coord = flat % size;
      flat /= size;
      if (d >= offset) {
        int64_t own = operand[d - offset];
        index += (own == 1 ? 0 : coord) * stride;
        stride *= own;
      }
    }
    return index;
  };
  out->aIndex.resize(out->batch);
  out->bIndex.resize(out->batch);
  for (int64_t i = 0; i < out->batch; ++i) {
    out->aIndex[i] = indexIn(aBatch, i);
    out->bIndex[i] = indexIn(bBatch, i);
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

namespace {

/// Checks an optional affine operand of a normalization: present means
/// `shape` of the input's dtype.
Status checkAffine(const KernelSignature &sig, size_t index, const char *name,
                   const TensorDesc &input, const Shape &shape) {
  if (index >= sig.inputs.size() || !sig.inputs[index])
    return {};
  const TensorDesc &t = *sig.inputs[index];
  if (t.dtype != input.dtype || t.shape != shape)
    return CLEAVE_ERROR(sig.kernel, ": ", name, " is ", describe(t.shape, t.dtype), ", expected ",
                        describe(shape, input.dtype));
  return {};
}

/// `anySign`: layer_norm takes a negative eps, as PyTorch (rsqrt of a
/// negative variance + eps is NaN); batch_norm does not.
Status readEps(const KernelSignature &sig, float *eps, bool anySign = false) {
  double value = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getFloat("eps", &value)));
  if (!anySign && !(value >= 0))
    return CLEAVE_ERROR(sig.kernel, ": eps must be >= 0, got ", value);
  *eps = static_cast<float>(value);
  return {};
}

} // namespace

Status parseLayerNorm(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, LayerNormParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  std::vector<int64_t> normalized;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("normalized_shape", &normalized)));
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &out->eps, /*anySign=*/true));
  if (normalized.empty() || normalized.size() > x.shape.size() ||
      !std::equal(normalized.begin(), normalized.end(), x.shape.end() - normalized.size()))
    return CLEAVE_ERROR(sig.kernel, ": normalized_shape ", formatList(normalized),
                        " must be the trailing dims of the input ", describe(x.shape, x.dtype));
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 1, "weight", x, normalized));
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 2, "bias", x, normalized));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  out->d = numElements(normalized);
  out->rows = out->d ? x.numel() / out->d : 0;
  return {};
}

Status parseBatchNorm(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, BatchNormParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 5, 5));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "mean"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "var"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  if (x.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": input must be [N, C, ...], got ",
                        describe(x.shape, x.dtype));
  CLEAVE_RETURN_IF_ERROR(readEps(sig, &out->eps));
  const int64_t channels = x.shape[1];
  const Shape channelShape = {channels};
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 1, "mean", x, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 2, "var", x, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 3, "weight", x, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkAffine(sig, 4, "bias", x, channelShape));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  out->channels = channels;
  out->inner = numElements(Shape(x.shape.begin() + 2, x.shape.end()));
  out->planes = x.shape[0] * channels;
  return {};
}

Status parseSoftmax(const KernelSignature &sig, const char *backend,
                    std::initializer_list<DType> dtypes, SoftmaxParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, x, "same as the input"));
  out->d = x.shape[dim];
  out->outer = numElements(Shape(x.shape.begin(), x.shape.begin() + dim));
  out->inner = numElements(Shape(x.shape.begin() + dim + 1, x.shape.end()));
  return {};
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

Status parseMatmul(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, MatmulParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "lhs"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "rhs"));
  const TensorDesc &a = *sig.inputs[0], &b = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "lhs", a, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "lhs", a, "rhs", b));
  if (a.rank() < 2 || b.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": operands need rank >= 2, got ", describe(a.shape, a.dtype),
                        " and ", describe(b.shape, b.dtype));
  const int64_t m = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1];
  const int64_t k2 = b.shape[b.rank() - 2], n = b.shape[b.rank() - 1];
  if (k != k2)
    return CLEAVE_ERROR(sig.kernel, ": contraction dims differ: ", describe(a.shape, a.dtype),
                        " x ", describe(b.shape, b.dtype), " (", k, " vs ", k2, ")");
  Shape aBatch(a.shape.begin(), a.shape.end() - 2), bBatch(b.shape.begin(), b.shape.end() - 2);
  auto batch = broadcastShapes({aBatch, bBatch});
  if (!batch)
    return CLEAVE_ERROR(sig.kernel, ": batch dims do not broadcast: ", describe(a.shape, a.dtype),
                        " x ", describe(b.shape, b.dtype));
  Shape outShape = *batch;
  outShape.push_back(m);
  outShape.push_back(n);
  CLEAVE_RETURN_IF_ERROR(checkOutput(
      sig, {a.dtype, outShape}, describe(a.shape, a.dtype) + " x " + describe(b.shape, b.dtype)));
  out->m = m;
  out->k = k;
  out->n = n;
  out->aBatch = std::move(aBatch);
  out->bBatch = std::move(bBatch);
  out->batch = std::move(*batch);
  out->batches = numElements(out->batch);
  return {};
}

std::vector<std::pair<int64_t, int64_t>> matmulBatchOffsets(const MatmulParams &p) {
  std::vector<std::pair<int64_t, int64_t>> offsets;
  if (p.batches == 0)
    return offsets;
  offsets.reserve(p.batches);
  BroadcastLayout layout = makeBroadcastLayout(p.batch, {p.aBatch, p.bBatch});
  int64_t rank = static_cast<int64_t>(layout.dims.size());
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < p.batches; ++i) {
    int64_t oa = 0, ob = 0;
    for (int64_t d = 0; d < rank; ++d) {
      oa += index[d] * layout.strides[d][0];
      ob += index[d] * layout.strides[d][1];
    }
    offsets.emplace_back(oa * p.m * p.k, ob * p.k * p.n);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++index[d] < layout.dims[d])
        break;
      index[d] = 0;
    }
  }
  return offsets;
}

Status parseLinear(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, LinearParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "weight"));
  const TensorDesc &x = *sig.inputs[0], &w = *sig.inputs[1];
  const bool hasBias = sig.inputs.size() == 3 && sig.inputs[2].has_value();
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "input", x, "weight", w));
  if (x.rank() < 1 || w.rank() != 2)
    return CLEAVE_ERROR(sig.kernel,
                        ": needs an input of rank >= 1 and a 2-D weight [out, in], got ",
                        describe(x.shape, x.dtype), " and ", describe(w.shape, w.dtype));
  const int64_t k = x.shape.back(), n = w.shape[0];
  if (w.shape[1] != k)
    return CLEAVE_ERROR(sig.kernel, ": input ", describe(x.shape, x.dtype), " has ", k,
                        " features, weight ", describe(w.shape, w.dtype), " expects ", w.shape[1],
                        " (weight is [out, in])");
  if (hasBias) {
    const TensorDesc &bias = *sig.inputs[2];
    CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "weight", w, "bias", bias));
    if (bias.shape != Shape{n})
      return CLEAVE_ERROR(sig.kernel, ": bias ", describe(bias.shape, bias.dtype), " must be [", n,
                          "], the weight's out features");
  }
  Shape outShape = x.shape;
  outShape.back() = n;
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, outShape},
                                     describe(x.shape, x.dtype) + " times the transpose of " +
                                         describe(w.shape, w.dtype)));
  out->m = numElements(Shape(x.shape.begin(), x.shape.end() - 1));
  out->k = k;
  out->n = n;
  out->hasBias = hasBias;
  return {};
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

Status checkReshape(const KernelSignature &sig) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0], &y = sig.outputs[0];
  if (x.dtype != y.dtype || x.numel() != y.numel())
    return CLEAVE_ERROR(sig.kernel, ": cannot reshape ", describe(x.shape, x.dtype), " to ",
                        describe(y.shape, y.dtype),
                        x.dtype != y.dtype ? ": the element type changes"
                                           : ": the element count changes");
  return {};
}

Status parsePermute(const KernelSignature &sig, PermuteParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  std::vector<int64_t> &dims = out->dims;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInts("dims", &dims)));
  if (static_cast<int64_t>(dims.size()) != x.rank())
    return CLEAVE_ERROR(sig.kernel, ": dims ", formatList(dims), " must list ", x.rank(),
                        " dims for input ", describe(x.shape, x.dtype));
  std::vector<bool> seen(dims.size(), false);
  Shape &outShape = out->outShape;
  outShape.clear();
  for (int64_t d : dims) {
    if (d < 0 || d >= x.rank() || seen[d])
      return CLEAVE_ERROR(sig.kernel, ": dims ", formatList(dims), " are not a permutation of 0..",
                          x.rank() - 1);
    seen[d] = true;
    outShape.push_back(x.shape[d]);
  }
  return checkOutput(sig, {x.dtype, outShape}, "the input's dims permuted");
}

Status checkBroadcastTo(const KernelSignature &sig) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0], &y = sig.outputs[0];
  auto shape = broadcastShapes({x.shape, y.shape});
  if (x.dtype != y.dtype || x.rank() > y.rank() || !shape || *shape != y.shape)
    return CLEAVE_ERROR(sig.kernel, ": cannot broadcast ", describe(x.shape, x.dtype), " to ",
                        describe(y.shape, y.dtype),
                        x.dtype != y.dtype ? " (the element type changes)" : "");
  return {};
}

Status parseSliceRange(const KernelSignature &sig, const TensorDesc &x, const char *xName,
                       SliceParams *out) {
  int64_t dim = 0, start = 0, end = 0, step = 1;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("start", &start)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("end", &end)));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("step", &step, 1)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
  const int64_t size = x.shape[dim];
  if (start < 0 || start > end || end > size || step < 1)
    return CLEAVE_ERROR(sig.kernel, ": [", start, ":", end, ":", step, "] is not within dim ", dim,
                        " of size ", size, " of ", xName, describe(x.shape, x.dtype),
                        " (needs 0 <= start <= end <= size, step >= 1)");
  out->dim = dim;
  out->start = start;
  out->end = end;
  out->step = step;
  out->size = size;
  out->count = end == start ? 0 : 1 + (end - start - 1) / step;
  out->outer = numElements(Shape(x.shape.begin(), x.shape.begin() + dim));
  out->inner = numElements(Shape(x.shape.begin() + dim + 1, x.shape.end()));
  return {};
}

Status parseSlice(const KernelSignature &sig, SliceParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &x = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(parseSliceRange(sig, x, "", out));
  Shape outShape = x.shape;
  outShape[out->dim] = out->count;
  return checkOutput(sig, {x.dtype, outShape},
                     "the input with dim " + std::to_string(out->dim) + " sliced");
}

Status parseConcat(const KernelSignature &sig, ConcatParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, SIZE_MAX));
  for (size_t i = 0; i < sig.inputs.size(); ++i)
    if (!sig.inputs[i])
      return CLEAVE_ERROR(sig.kernel, ": input ", i, " is missing");
  const TensorDesc &first = *sig.inputs[0];
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, first.rank()));
  Shape outShape = first.shape;
  outShape[dim] = 0;
  for (size_t i = 0; i < sig.inputs.size(); ++i) {
    const TensorDesc &t = *sig.inputs[i];
    bool compatible = t.dtype == first.dtype && t.rank() == first.rank();
    for (int64_t d = 0; compatible && d < first.rank(); ++d)
      compatible = d == dim || t.shape[d] == first.shape[d];
    if (!compatible)
      return CLEAVE_ERROR(sig.kernel, ": input ", i, " ", describe(t.shape, t.dtype),
                          " does not match input 0 ", describe(first.shape, first.dtype),
                          " outside dim ", dim);
    outShape[dim] += t.shape[dim];
  }
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {first.dtype, outShape},
                                     "the inputs joined along dim " + std::to_string(dim)));
  out->dim = dim;
  out->outer = numElements(Shape(first.shape.begin(), first.shape.begin() + dim));
  out->inner = numElements(Shape(first.shape.begin() + dim + 1, first.shape.end()));
  out->outShape = std::move(outShape);
  return {};
}

Status parseEmbedding(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, EmbeddingParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "weight"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "indices"));
  const TensorDesc &w = *sig.inputs[0], &idx = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "weight", w, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "indices", idx, {DType::I64, DType::I32}));
  if (w.rank() != 2)
    return CLEAVE_ERROR(sig.kernel, ": table must be 2-D [rows, dim], got ",
                        describe(w.shape, w.dtype));
  Shape outShape = idx.shape;
  outShape.push_back(w.shape[1]);
  CLEAVE_RETURN_IF_ERROR(
      checkOutput(sig, {w.dtype, outShape}, "the indices' shape plus the row size"));
  out->sharded = sig.attrs.has("row_offset");
  out->offset = 0;
  if (out->sharded)
    CLEAVE_RETURN_IF_ERROR(sig.attrs.getInt("row_offset", &out->offset));
  out->count = idx.numel();
  out->rows = w.shape[0];
  out->dim = w.shape[1];
  out->wide = idx.dtype == DType::I64;
  return {};
}

//===----------------------------------------------------------------------===//
// Indexing along one dim
//===----------------------------------------------------------------------===//

namespace {

/// The index (input slot 1) against the input (slot 0) along attribute dim.
Status parseIndexAlongDim(const KernelSignature &sig, IndexAlongDim *out) {
  const TensorDesc &x = *sig.inputs[0], &idx = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, "", "index", idx, {DType::I64, DType::I32}));
  int64_t dim = 0;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("dim", &dim)));
  if (idx.rank() != x.rank())
    return CLEAVE_ERROR(sig.kernel, ": index ", describe(idx.shape, idx.dtype),
                        " must have the input's rank ", x.rank());
  if (x.rank() > kMaxIndexRank)
    return CLEAVE_ERROR(sig.kernel, ": rank ", x.rank(), " is above the supported ",
                        kMaxIndexRank);
  IndexAlongDim p;
  if (x.rank() == 0) {
    if (dim != 0)
      return CLEAVE_ERROR(sig.kernel, ": dim ", dim, " is out of range for rank 0");
    p.rank = 1;
    p.indexShape[0] = p.inputShape[0] = 1;
  } else {
    CLEAVE_RETURN_IF_ERROR(checkDim(sig, "dim", dim, x.rank()));
    p.rank = static_cast<int>(x.rank());
    for (int d = 0; d < p.rank; ++d) {
      p.indexShape[d] = idx.shape[d];
      p.inputShape[d] = x.shape[d];
      if (d != dim && idx.shape[d] > x.shape[d])
        return CLEAVE_ERROR(sig.kernel, ": index ", describe(idx.shape, idx.dtype),
                            " is larger than the input ", describe(x.shape, x.dtype), " in dim ",
                            d);
    }
  }
  p.dim = static_cast<int>(dim);
  p.size = p.inputShape[dim];
  p.k = p.indexShape[dim];
  p.lines = p.k == 0 ? 0 : idx.numel() / p.k;
  for (int d = p.dim + 1; d < p.rank; ++d) {
    p.indexStride *= p.indexShape[d];
    p.inputStride *= p.inputShape[d];
  }
  p.wide = idx.dtype == DType::I64;
  *out = p;
  return {};
}

} // namespace

Status parseGather(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, IndexAlongDim *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "index"));
  const TensorDesc &x = *sig.inputs[0], &idx = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(parseIndexAlongDim(sig, out));
  return checkOutput(sig, {x.dtype, idx.shape}, "the index's shape");
}

Status parseScatter(const KernelSignature &sig, const char *backend,
                    std::initializer_list<DType> dtypes, IndexAlongDim *out,
                    ScatterReduceKind *reduce, bool *includeSelf) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "index"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "src"));
  const TensorDesc &x = *sig.inputs[0], &idx = *sig.inputs[1], &src = *sig.inputs[2];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "input", x, "src", src));
  CLEAVE_RETURN_IF_ERROR(parseIndexAlongDim(sig, out));
  if (src.shape != idx.shape)
    return CLEAVE_ERROR(sig.kernel, ": src ", describe(src.shape, src.dtype),
                        " must have the index's shape ", describe(idx.shape, idx.dtype));
  std::string kind;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getString("reduce", &kind, "none")));
  static const std::pair<const char *, ScatterReduceKind> kinds[] = {
      {"none", ScatterReduceKind::None}, {"sum", ScatterReduceKind::Sum},
      {"prod", ScatterReduceKind::Prod}, {"mean", ScatterReduceKind::Mean},
      {"amax", ScatterReduceKind::Amax}, {"amin", ScatterReduceKind::Amin}};
  bool known = false;
  for (const auto &[name, value] : kinds)
    if (kind == name) {
      *reduce = value;
      known = true;
    }
  if (!known)
    return CLEAVE_ERROR(sig.kernel, ": unknown reduce '", kind,
                        "' (none, sum, prod, mean, amax, amin)");
  if (*reduce == ScatterReduceKind::Mean && x.dtype == DType::I1)
    return CLEAVE_ERROR(sig.kernel, ": mean of i1 elements is not defined");
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("include_self", includeSelf, true)));
  return checkOutput(sig, x, "the input's type");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Status checkUnary(const KernelSignature &sig, const char *backend,
                  std::initializer_list<DType> dtypes) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &in = *sig.inputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", in, dtypes));
  return checkOutput(sig, in, "same as the input");
}

Status parseBinary(const KernelSignature &sig, const char *backend,
                   std::initializer_list<DType> dtypes, std::optional<DType> resultType,
                   BroadcastLayout *layout) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 2, 2));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "lhs"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "rhs"));
  const TensorDesc &a = *sig.inputs[0], &b = *sig.inputs[1];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "lhs", a, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "lhs", a, "rhs", b));
  auto shape = broadcastShapes({a.shape, b.shape});
  if (!shape)
    return CLEAVE_ERROR(sig.kernel,
                        ": operand shapes do not broadcast: ", describe(a.shape, a.dtype), " and ",
                        describe(b.shape, b.dtype));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {resultType.value_or(a.dtype), *shape},
                                     "the broadcast of " + describe(a.shape, a.dtype) + " and " +
                                         describe(b.shape, b.dtype)));
  *layout = makeBroadcastLayout(*shape, {a.shape, b.shape});
  return {};
}

Status parseWhere(const KernelSignature &sig, const char *backend,
                  std::initializer_list<DType> dtypes, BroadcastLayout *layout) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "condition"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "on_true"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "on_false"));
  const TensorDesc &c = *sig.inputs[0], &x = *sig.inputs[1], &y = *sig.inputs[2];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "condition", c, {DType::I1}));
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "on_true", x, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "on_true", x, "on_false", y));
  auto shape = broadcastShapes({c.shape, x.shape, y.shape});
  if (!shape)
    return CLEAVE_ERROR(sig.kernel,
                        ": operand shapes do not broadcast: ", describe(c.shape, c.dtype), ", ",
                        describe(x.shape, x.dtype), " and ", describe(y.shape, y.dtype));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, {x.dtype, *shape}, "the broadcast of the operands"));
  *layout = makeBroadcastLayout(*shape, {c.shape, x.shape, y.shape});
  return {};
}

Status checkCast(const KernelSignature &sig, const char *backend,
                 std::initializer_list<DType> dtypes) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &in = *sig.inputs[0];
  const TensorDesc &out = sig.outputs[0];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "input", in, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "output", out, dtypes));
  return checkOutput(sig, {out.dtype, in.shape}, "the input's shape");
}

Status parseTriangle(const KernelSignature &sig, TriangleParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 1, 1));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "input"));
  const TensorDesc &in = *sig.inputs[0];
  if (in.rank() < 2)
    return CLEAVE_ERROR(sig.kernel, ": needs a tensor of rank >= 2, got ",
                        describe(in.shape, in.dtype));
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig, in, "same as the input"));
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getInt("diagonal", &out->diagonal, 0)));
  out->rows = in.shape[in.rank() - 2];
  out->cols = in.shape[in.rank() - 1];
  return {};
}

Status parseAttention(const KernelSignature &sig, const char *backend,
                      std::initializer_list<DType> dtypes, AttentionParams *out) {
  CLEAVE_RETURN_IF_ERROR(checkArity(sig, 3, 3));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 0, "q"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 1, "k"));
  CLEAVE_RETURN_IF_ERROR(requirePresent(sig, 2, "v"));
  const TensorDesc &q = *sig.inputs[0], &k = *sig.inputs[1], &v = *sig.inputs[2];
  CLEAVE_RETURN_IF_ERROR(checkDType(sig, backend, "q", q, dtypes));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "q", q, "k", k));
  CLEAVE_RETURN_IF_ERROR(checkSameDType(sig, "q", q, "v", v));
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4)
    return CLEAVE_ERROR(sig.kernel, ": q, k and v must be 4-D [B, H, S, D], got ",
                        describe(q.shape, q.dtype), ", ", describe(k.shape, k.dtype), " and ",
                        describe(v.shape, v.dtype));
  if (k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] || k.shape[3] != q.shape[3] ||
      v.shape[0] != q.shape[0] || v.shape[1] != q.shape[1] || v.shape[2] != k.shape[2])
    return CLEAVE_ERROR(sig.kernel, ": q ", describe(q.shape, q.dtype), ", k ",
                        describe(k.shape, k.dtype), " and v ", describe(v.shape, v.dtype),
                        " must be [B, H, Sq, D], [B, H, Sk, D] and [B, H, Sk, Dv]");
  CLEAVE_RETURN_IF_ERROR(checkOutput(sig,
                                     {q.dtype, {q.shape[0], q.shape[1], q.shape[2], v.shape[3]}},
                                     "[B, H, Sq, Dv] from q and v"));
  return readAttention(sig, q.shape, k.shape, v.shape, out);
}

Status readAttention(const KernelSignature &sig, const Shape &q, const Shape &k, const Shape &v,
                     AttentionParams *out) {
  AttentionParams p;
  CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getBool("causal", &p.causal, false)));
  // PyTorch's default scale when the plan gives none (the compiler always
  // writes one).
  p.scale = q[3] > 0 ? 1.0 / std::sqrt(static_cast<double>(q[3])) : 1.0;
  if (sig.attrs.has("scale"))
    CLEAVE_RETURN_IF_ERROR(withKernel(sig, sig.attrs.getFloat("scale", &p.scale)));
  p.heads = q[0] * q[1];
  p.queries = q[2];
  p.keys = k[2];
  p.headDim = q[3];
  p.valueDim = v[3];
  *out = p;
  return {};
}

} // namespace cleave::runtime
