//===- Contractions.cpp - matmul, linear, embedding, conv2d ---------------===//
//
// GEMMs go to oneDNN's dnnl_sgemm, which picks its kernels by the CPU's ISA
// at run time (AVX-512 where there is one; OpenBLAS 0.3.21 runs AVX2 kernels
// on CPUs it does not know) and threads with the same OpenMP runtime as our
// loops. It is only ever called from the calling thread, never inside an
// OpenMP region.
// conv2d is im2col + one GEMM per (image, group), with the im2col matrix in
// the instruction's scratch (see ConvScratch.h); small grouped GEMMs run as
// parallel tasks. In a forward-only program, where the kernel owns its
// weight, a convolution larger than 1x1 runs oneDNN's convolution
// primitive instead (ConvPrimitive.h; conv2dUsesPrimitive says which), and
// a linear oneDNN's matmul primitive (LinearPrimitive.h).
// Depthwise convolutions (one input channel per group) are
// memory-bound and have no GEMM worth the name: they run a direct kernel
// over each output plane.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelParams.h"
#include "runtime/cpu/Common.h"
#include "runtime/cpu/ConvPrimitive.h"
#include "runtime/cpu/ConvScratch.h"
#include "runtime/cpu/Im2col.h"
#include "runtime/cpu/LinearPrimitive.h"
#include "runtime/Conv2dContract.h"
#include "runtime/cpu/Registry.h"

#include <dnnl.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

namespace cleave::runtime::cpu {
namespace {

/// C[M,N] = A[M,K] * op(B) (+ C when accumulate), row-major, dense.
void sgemm(bool transB, int64_t m, int64_t n, int64_t k, const float *a, const float *b,
           float *c, bool accumulate) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    if (!accumulate)
      std::memset(c, 0, sizeof(float) * m * n);
    return;
  }
  dnnl_sgemm('N', transB ? 'T' : 'N', m, n, k, 1.0f, a, k, b, transB ? k : n,
             accumulate ? 1.0f : 0.0f, c, n);
}

/// Copies `vec` (cols floats) into each of `rows` rows.
void fillRowsWithVector(float *out, int64_t rows, int64_t cols, const float *vec) {
  parallelRange(rows, cols, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      std::memcpy(out + r * cols, vec, sizeof(float) * cols);
  });
}

/// Fills row r (cols floats) with values[r].
void fillRowsWithScalars(float *out, int64_t rows, int64_t cols, const float *values) {
  parallelRange(rows, cols, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float v = values[r];
      float *row = out + r * cols;
      for (int64_t i = 0; i < cols; ++i)
        row[i] = v;
    }
  });
}

/// fused_conv2d's epilogue over `count` outputs: the residual's elements
/// added (when given), then the clamp; NaN stays NaN, as in PyTorch.
void applyEpilogue(const ConvEpilogue &e, float *out, const float *residual, int64_t count) {
  if (residual)
    for (int64_t i = 0; i < count; ++i)
      out[i] += residual[i];
  if (e.hasMin) {
    const float lo = e.min;
    for (int64_t i = 0; i < count; ++i)
      out[i] = out[i] < lo ? lo : out[i];
  }
  if (e.hasMax) {
    const float hi = e.max;
    for (int64_t i = 0; i < count; ++i)
      out[i] = out[i] > hi ? hi : out[i];
  }
}

/// Row r (cols floats) of `out` = row r of `residual` + values[r] (0
/// without values): the start a GEMM accumulates onto.
void fillRowsWithResidual(float *out, int64_t rows, int64_t cols, const float *residual,
                          const float *values) {
  parallelRange(rows, cols, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const float v = values ? values[r] : 0.0f;
      const float *in = residual + r * cols;
      float *row = out + r * cols;
      for (int64_t i = 0; i < cols; ++i)
        row[i] = in[i] + v;
    }
  });
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// C[M,N] = A[M,K] * B[K,N] over integers, wrapping on overflow as
/// PyTorch's integer matmul (no BLAS has one); rows run in parallel.
template <typename T>
void integerGemm(int64_t m, int64_t n, int64_t k, const T *a, const T *b, T *c) {
  using U = std::make_unsigned_t<T>;
  parallelRange(m, n * k, [&](int64_t begin, int64_t end) {
    std::vector<U> row(n);
    for (int64_t i = begin; i < end; ++i) {
      std::fill(row.begin(), row.end(), U(0));
      for (int64_t p = 0; p < k; ++p) {
        const U av = static_cast<U>(a[i * k + p]);
        const T *brow = b + p * n;
        for (int64_t j = 0; j < n; ++j)
          row[j] += av * static_cast<U>(brow[j]);
      }
      for (int64_t j = 0; j < n; ++j)
        c[i * n + j] = static_cast<T>(row[j]);
    }
  });
}

template <typename T> KernelFn integerMatmul(const MatmulParams &p) {
  std::vector<std::pair<int64_t, int64_t>> offsets = matmulBatchOffsets(p);
  const int64_t m = p.m, k = p.k, n = p.n;
  return [offsets, m, n, k](const KernelCall &call) -> Status {
    const T *a = static_cast<const T *>(call.inputs[0]);
    const T *b = static_cast<const T *>(call.inputs[1]);
    T *c = static_cast<T *>(call.outputs[0]);
    for (size_t i = 0; i < offsets.size(); ++i)
      integerGemm(m, n, k, a + offsets[i].first, b + offsets[i].second, c + i * m * n);
    return {};
  };
}

Status buildMatmul(const KernelSignature &sig, KernelFn *fn) {
  MatmulParams p;
  CLEAVE_RETURN_IF_ERROR(parseMatmul(sig, "cpu", {DType::F32, DType::I64, DType::I32}, &p));
  if (sig.inputs[0]->dtype == DType::I64) {
    *fn = integerMatmul<int64_t>(p);
    return {};
  }
  if (sig.inputs[0]->dtype == DType::I32) {
    *fn = integerMatmul<int32_t>(p);
    return {};
  }
  const int64_t m = p.m, k = p.k, n = p.n;
  // rhs shared by every batch: fold the batches of lhs into its rows.
  if (numElements(p.bBatch) == 1) {
    const int64_t rows = p.batches * m;
    *fn = [rows, n, k](const KernelCall &call) -> Status {
      sgemm(false, rows, n, k, static_cast<const float *>(call.inputs[0]),
            static_cast<const float *>(call.inputs[1]), static_cast<float *>(call.outputs[0]),
            false);
      return {};
    };
    return {};
  }
  // One GEMM per output batch; broadcast operands are read in place.
  std::vector<std::pair<int64_t, int64_t>> offsets = matmulBatchOffsets(p);
  *fn = [offsets, m, n, k](const KernelCall &call) -> Status {
    const float *a = static_cast<const float *>(call.inputs[0]);
    const float *b = static_cast<const float *>(call.inputs[1]);
    float *c = static_cast<float *>(call.outputs[0]);
    for (size_t i = 0; i < offsets.size(); ++i)
      sgemm(false, m, n, k, a + offsets[i].first, b + offsets[i].second, c + i * m * n, false);
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

Status buildLinear(const KernelSignature &sig, KernelFn *fn) {
  LinearParams p;
  CLEAVE_RETURN_IF_ERROR(parseLinear(sig, "cpu", {DType::F32}, &p));
  CLEAVE_RETURN_IF_ERROR(buildPrimitiveLinear(sig, p, fn));
  if (*fn)
    return {};
  const int64_t m = p.m, n = p.n, k = p.k;
  const bool hasBias = p.hasBias;
  *fn = [m, n, k, hasBias](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    float *y = static_cast<float *>(call.outputs[0]);
    if (hasBias)
      fillRowsWithVector(y, m, n, static_cast<const float *>(call.inputs[2]));
    sgemm(true, m, n, k, x, w, y, hasBias);
    return {};
  };
  return {};
}

//===----------------------------------------------------------------------===//
// embedding
//===----------------------------------------------------------------------===//

/// Looks rows up in a table that holds rows [offset, offset + rows) of the
/// whole one. A shard (`sharded`, a vocabulary split over a tp group) gives
/// zeros for the indices other ranks hold, so the group's sum is the lookup;
/// a whole table rejects an index outside it. Rows are copied as bytes
/// (`rowBytes` each), so f32 and bf16 tables take the same path.
template <typename Index>
Status embed(const char *table, const Index *indices, char *out, int64_t count, int64_t rows,
             size_t rowBytes, bool sharded, int64_t offset) {
  if (!sharded)
    for (int64_t i = 0; i < count; ++i)
      if (indices[i] < 0 || indices[i] >= rows)
        return CLEAVE_ERROR("embedding: index ", static_cast<int64_t>(indices[i]),
                            " at position ", i, " is out of range for a table of ", rows,
                            " rows");
  parallelRange(count, static_cast<int64_t>(rowBytes / 4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t row = static_cast<int64_t>(indices[i]) - offset;
      if (row < 0 || row >= rows)
        std::memset(out + i * rowBytes, 0, rowBytes);
      else
        std::memcpy(out + i * rowBytes, table + row * rowBytes, rowBytes);
    }
  });
  return {};
}

Status buildEmbedding(const KernelSignature &sig, KernelFn *fn) {
  EmbeddingParams ep;
  // A gather: bf16 tables are read as they are, not widened.
  CLEAVE_RETURN_IF_ERROR(parseEmbedding(sig, "cpu", {DType::F32, DType::BF16}, &ep));
  const TensorDesc &w = *sig.inputs[0];
  const int64_t count = ep.count, rows = ep.rows, offset = ep.offset;
  const bool sharded = ep.sharded, wide = ep.wide;
  const size_t rowBytes = static_cast<size_t>(ep.dim) * dtypeBytes(w.dtype);
  *fn = [=](const KernelCall &call) -> Status {
    const char *table = static_cast<const char *>(call.inputs[0]);
    char *out = static_cast<char *>(call.outputs[0]);
    if (wide)
      return embed(table, static_cast<const int64_t *>(call.inputs[1]), out, count, rows, rowBytes,
                   sharded, offset);
    return embed(table, static_cast<const int32_t *>(call.inputs[1]), out, count, rows, rowBytes,
                 sharded, offset);
  };
  return {};
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// Below this output width a unit-stride depthwise plane is computed as one
/// flattened row (see depthwiseRows): row by row, most of a short row would
/// be a vector loop's scalar tail.
constexpr int64_t kShortDepthwiseRow = 32;

/// Where a depthwise kernel finds its input plane inside the zero padding:
/// `rows` padded rows of `pitch` columns (those the kernel reaches), each
/// row `rowFloats` floats. With a column stride sw > 1 a row is stored as sw
/// phases of `phase` floats, column c at (c % sw) * phase + c / sw, so that
/// each tap reads consecutive floats for consecutive outputs (a strided
/// read does not vectorize); with sw = 1 a row is its pitch. Tap j of a
/// kernel row reads output column ox at row[ox + tapOffset[j]].
struct DepthwiseLayout {
  int64_t rows = 0, pitch = 0, phase = 0, rowFloats = 0;
  std::vector<int64_t> tapOffset;

  explicit DepthwiseLayout(const ConvGeometry &g)
      : rows((g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1),
        pitch((g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1), phase((pitch + g.sw - 1) / g.sw),
        rowFloats(g.sw * phase) {
    for (int64_t j = 0; j < g.kw; ++j)
      tapOffset.push_back((j * g.dw) % g.sw * phase + (j * g.dw) / g.sw);
  }
};

/// One output plane of a depthwise convolution: out[oy, ox] = bias + sum
/// over taps (i, j) of w[i, j] * padded[oy*sh + i*dh, ox*sw + j*dw], where
/// `padded` is the input plane inside its zero padding, laid out as `l`
/// says, so no tap needs a bounds check. KW > 0 fixes the kernel width at
/// compile time: the taps of a kernel row unroll and each output vector is
/// loaded and stored once per kernel row. Each output adds its taps in the
/// same order on either path.
///
/// With unit strides and short rows, output (oy, ox) is computed at
/// position q = oy * pitch + ox of `flat` (at least (oh - 1) * pitch + ow
/// floats), where tap (i, j) reads padded[q + i*dh*pitch + j*dw]: one long
/// vectorizable loop per kernel row over every output row at once (the
/// (kw - 1) * dw positions between rows are computed and dropped), then the
/// rows are copied out.
template <int KW>
CLEAVE_CLONES void depthwiseRows(const ConvGeometry &g, const DepthwiseLayout &l,
                                 const float *__restrict padded, const float *__restrict w,
                                 float bias, float *__restrict flat, float *__restrict out) {
  const int64_t kw = KW > 0 ? KW : g.kw, ow = g.ow, dw = g.dw, rowFloats = l.rowFloats;
  const int64_t *__restrict off = l.tapOffset.data();
  if (g.sw == 1 && g.sh == 1 && ow < kShortDepthwiseRow) {
    const int64_t span = (g.oh - 1) * rowFloats + ow;
    for (int64_t q = 0; q < span; ++q)
      flat[q] = bias;
    for (int64_t i = 0; i < g.kh; ++i) {
      const float *__restrict base = padded + i * g.dh * rowFloats;
      const float *__restrict taps = w + i * kw;
      for (int64_t q = 0; q < span; ++q) {
        float s = flat[q];
        for (int64_t j = 0; j < kw; ++j)
          s += taps[j] * base[q + j * dw];
        flat[q] = s;
      }
    }
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox)
        out[oy * ow + ox] = flat[oy * rowFloats + ox];
    return;
  }
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    float *__restrict d = out + oy * ow;
    for (int64_t ox = 0; ox < ow; ++ox)
      d[ox] = bias;
    for (int64_t i = 0; i < g.kh; ++i) {
      const float *__restrict row = padded + (oy * g.sh + i * g.dh) * rowFloats;
      const float *__restrict taps = w + i * kw;
      for (int64_t ox = 0; ox < ow; ++ox) {
        float s = d[ox];
        for (int64_t j = 0; j < kw; ++j)
          s += taps[j] * row[ox + off[j]];
        d[ox] = s;
      }
    }
  }
}

/// Splits one padded row `line` (rowFloats floats) into its sw phases at
/// `dst` (DepthwiseLayout): a stride-2 split as one loop of paired loads,
/// which vectorizes.
CLEAVE_CLONES void splitPhases(const DepthwiseLayout &l, int64_t sw, const float *__restrict line,
                               float *__restrict dst) {
  const int64_t phase = l.phase;
  if (sw == 2) {
    float *__restrict even = dst, *__restrict odd = dst + phase;
    for (int64_t m = 0; m < phase; ++m) {
      even[m] = line[2 * m];
      odd[m] = line[2 * m + 1];
    }
    return;
  }
  for (int64_t p = 0; p < sw; ++p)
    for (int64_t m = 0; m < phase; ++m)
      dst[p * phase + m] = line[m * sw + p];
}

/// Copies an H x W plane into a padded plane laid out as `l` says, at (ph,
/// pw), zero around it, cutting what lies beyond the rows and columns the
/// kernel reads. `line` (l.rowFloats floats) stages a padded row before a
/// strided layout splits it into phases.
void padPlane(const ConvGeometry &g, const DepthwiseLayout &l, const float *plane,
              float *padded, float *line) {
  const int64_t copyCols = std::min(g.width, l.pitch - g.pw);
  const int64_t copyRows = copyCols > 0 ? std::clamp(l.rows - g.ph, int64_t{0}, g.height) : 0;
  if (g.sw == 1) {
    std::fill(padded, padded + l.rows * l.rowFloats, 0.0f);
    for (int64_t y = 0; y < copyRows; ++y)
      std::memcpy(padded + (y + g.ph) * l.rowFloats + g.pw, plane + y * g.width,
                  sizeof(float) * copyCols);
    return;
  }
  const int64_t top = std::min(g.ph, l.rows);
  std::fill(padded, padded + top * l.rowFloats, 0.0f);
  std::fill(padded + (top + copyRows) * l.rowFloats, padded + l.rows * l.rowFloats, 0.0f);
  // The staged row's borders stay zero: each row rewrites only its middle.
  std::fill(line, line + l.rowFloats, 0.0f);
  for (int64_t y = 0; y < copyRows; ++y) {
    std::memcpy(line + g.pw, plane + y * g.width, sizeof(float) * copyCols);
    splitPhases(l, g.sw, line, padded + (y + g.ph) * l.rowFloats);
  }
}

/// Depthwise conv2d: output channel f of image n reads input channel
/// f / multiplier alone. Planes run in parallel, each thread padding its
/// input plane into its own buffer (a padded plane, an output plane at the
/// padded pitch for depthwiseRows' flattened path, a staged row).
KernelFn depthwiseConv2d(const ConvGeometry &g, int64_t batch, int64_t filters,
                         int64_t multiplier, bool hasBias, const ConvEpilogue &epilogue) {
  auto rows = depthwiseRows<0>;
  if (g.kw == 3)
    rows = depthwiseRows<3>;
  else if (g.kw == 5)
    rows = depthwiseRows<5>;
  else if (g.kw == 7)
    rows = depthwiseRows<7>;
  // Only the rows and columns the kernel reaches (at most the padded input).
  const DepthwiseLayout l(g);
  return [=](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    const float *bias = hasBias ? static_cast<const float *>(call.inputs[2]) : nullptr;
    const float *residual =
        epilogue.residual ? static_cast<const float *>(call.inputs[3]) : nullptr;
    float *y = static_cast<float *>(call.outputs[0]);
    const int64_t planes = batch * filters, hw = g.height * g.width, ohw = g.oh * g.ow;
    const int64_t taps = g.kh * g.kw;
    auto plane = [&](int64_t t, float *padded) {
      const int64_t n = t / filters, f = t % filters;
      float *flat = padded + l.rows * l.rowFloats, *line = flat + g.oh * l.rowFloats;
      padPlane(g, l, x + (n * (filters / multiplier) + f / multiplier) * hw, padded, line);
      rows(g, l, padded, w + f * taps, bias ? bias[f] : 0.0f, flat, y + t * ohw);
      if (epilogue.any()) // while the plane is in cache
        applyEpilogue(epilogue, y + t * ohw, residual ? residual + t * ohw : nullptr, ohw);
    };
    const int64_t work = planes * (ohw * taps + l.rows * l.rowFloats);
    const int threads = work >= kParallelGrain && !omp_in_parallel()
                            ? static_cast<int>(std::min<int64_t>(omp_get_max_threads(), planes))
                            : 1;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      // The padded plane, the flattened path's output plane, a staged row.
      std::vector<float> padded((l.rows + g.oh + 1) * l.rowFloats);
#pragma omp for schedule(static)
      for (int64_t t = 0; t < planes; ++t)
        plane(t, padded.data());
    }
    return {};
  };
}

/// conv2d, or with an epilogue fused_conv2d (inputs[3]: the residual).
Status buildConvolution(const KernelSignature &sig, const Conv2dParams &params,
                        const ConvEpilogue &epilogue, KernelFn *fn) {
  ConvGeometry g;
  g.channels = params.channels / params.groups;
  g.height = params.height;
  g.width = params.width;
  g.kh = params.kh;
  g.kw = params.kw;
  g.sh = params.sh;
  g.sw = params.sw;
  g.ph = params.ph;
  g.pw = params.pw;
  g.dh = params.dh;
  g.dw = params.dw;
  g.oh = params.oh;
  g.ow = params.ow;
  const bool direct = params.directGemm, hasBias = params.hasBias;
  const int64_t batch = params.batch, groups = params.groups, filters = params.filters;
  const int64_t filtersPerGroup = filters / groups;
  if (groups > 1 && g.channels == 1 && batch * filters > 0 && g.oh * g.ow > 0) {
    *fn = depthwiseConv2d(g, batch, filters, filtersPerGroup, hasBias, epilogue);
    return {};
  }
  if (batch * filters > 0 &&
      conv2dUsesPrimitive(sig.inputs[0]->shape, sig.inputs[1]->shape, sig.outputs[0].shape,
                          groups)) {
    CLEAVE_RETURN_IF_ERROR(buildPrimitiveConv2d(sig, params, epilogue, fn));
    if (*fn)
      return {};
  }
  *fn = [g, direct, batch, groups, filtersPerGroup, hasBias,
         epilogue](const KernelCall &call) -> Status {
    const float *x = static_cast<const float *>(call.inputs[0]);
    const float *w = static_cast<const float *>(call.inputs[1]);
    const float *bias = hasBias ? static_cast<const float *>(call.inputs[2]) : nullptr;
    const float *residual =
        epilogue.residual ? static_cast<const float *>(call.inputs[3]) : nullptr;
    float *y = static_cast<float *>(call.outputs[0]);
    const int64_t hw = g.height * g.width, ohw = g.oh * g.ow;
    const int64_t depth = g.channels * g.kh * g.kw;
    auto task = [&](int64_t n, int64_t grp, float *col) {
      const float *image = x + (n * groups + grp) * g.channels * hw;
      float *out = y + (n * groups + grp) * filtersPerGroup * ohw;
      const float *b = image;
      if (!direct) {
        im2col(g, image, col);
        b = col;
      }
      const float *groupBias = bias ? bias + grp * filtersPerGroup : nullptr;
      // The GEMM accumulates onto the bias and the residual.
      if (residual)
        fillRowsWithResidual(out, filtersPerGroup, ohw,
                             residual + (out - y), groupBias);
      else if (bias)
        fillRowsWithScalars(out, filtersPerGroup, ohw, groupBias);
      sgemm(false, filtersPerGroup, ohw, depth, w + grp * filtersPerGroup * depth, b, out,
            bias != nullptr || residual != nullptr);
    };
    // The clamp: per task where tasks run in parallel, else once over the
    // whole output (one parallel region, not one per image).
    auto clampTask = [&](int64_t t) {
      applyEpilogue(epilogue, y + t * filtersPerGroup * ohw, nullptr, filtersPerGroup * ohw);
    };
    const int64_t tasks = batch * groups;
    if (runGroupsAsTasks(g, groups, filtersPerGroup, tasks)) {
#pragma omp parallel
      {
        std::vector<float> col(direct ? 0 : depth * ohw);
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tasks; ++t) {
          task(t / groups, t % groups, col.data());
          if (epilogue.clamps())
            clampTask(t);
        }
      }
      return {};
    }
    float *col = static_cast<float *>(call.scratch);
    for (int64_t t = 0; t < tasks; ++t)
      task(t / groups, t % groups, col);
    if (epilogue.clamps())
      parallelRange(tasks * filtersPerGroup, ohw, [&](int64_t begin, int64_t end) {
        applyEpilogue(epilogue, y + begin * ohw, nullptr, (end - begin) * ohw);
      });
    return {};
  };
  return {};
}

Status buildConv2d(const KernelSignature &sig, KernelFn *fn) {
  Conv2dParams params;
  CLEAVE_RETURN_IF_ERROR(parseConv2d(sig, "cpu", {DType::F32}, &params));
  return buildConvolution(sig, params, ConvEpilogue(), fn);
}

Status buildFusedConv2d(const KernelSignature &sig, KernelFn *fn) {
  Conv2dParams params;
  ConvEpilogue epilogue;
  CLEAVE_RETURN_IF_ERROR(parseFusedConv2d(sig, "cpu", {DType::F32}, &params, &epilogue));
  return buildConvolution(sig, params, epilogue, fn);
}

} // namespace

void im2col(const ConvGeometry &g, const float *image, float *col) {
  const int64_t rows = g.channels * g.kh * g.kw, ohw = g.oh * g.ow;
  parallelRange(rows, ohw, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t c = r / (g.kh * g.kw), i = (r / g.kw) % g.kh, j = r % g.kw;
      const float *plane = image + c * g.height * g.width;
      float *dst = col + r * ohw;
      const int64_t off = j * g.dw - g.pw;
      int64_t oxBegin, oxEnd;
      validColumns(g, j, &oxBegin, &oxEnd);
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        float *d = dst + oy * g.ow;
        const int64_t iy = oy * g.sh - g.ph + i * g.dh;
        if (iy < 0 || iy >= g.height) {
          std::memset(d, 0, sizeof(float) * g.ow);
          continue;
        }
        const float *src = plane + iy * g.width + off;
        for (int64_t ox = 0; ox < oxBegin; ++ox)
          d[ox] = 0.0f;
        if (g.sw == 1) {
          std::memcpy(d + oxBegin, src + oxBegin, sizeof(float) * (oxEnd - oxBegin));
        } else {
          for (int64_t ox = oxBegin; ox < oxEnd; ++ox)
            d[ox] = src[ox * g.sw];
        }
        for (int64_t ox = oxEnd; ox < g.ow; ++ox)
          d[ox] = 0.0f;
      }
    }
  });
}

void registerContractionKernels(KernelTable &table) {
  table["matmul"] = buildMatmul;
  table["linear"] = buildLinear;
  table["embedding"] = {buildEmbedding, /*takesBf16=*/true};
  table["conv2d"] = buildConv2d;
  table["fused_conv2d"] = buildFusedConv2d;
}

} // namespace cleave::runtime::cpu
