//===- Im2col.h - The column matrix of a CPU conv2d -----------------------===//
//
// conv2d (Contractions.cpp) and its backward kernels
// (TrainingContractions.cpp) lay out one image group as the same im2col
// matrix: one geometry, one im2col, defined in Contractions.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/cpu/ConvScratch.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace cleave::runtime::cpu {

struct ConvGeometry {
  int64_t channels, height, width; // per group: channels = C / groups
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t oh, ow;
};

/// For kernel column j, the output columns [*begin, *end) whose input column
/// ox * sw + j * dw - pw lies inside the image.
inline void validColumns(const ConvGeometry &g, int64_t j, int64_t *begin, int64_t *end) {
  const int64_t off = j * g.dw - g.pw;
  int64_t b = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
  int64_t e = g.width - off <= 0 ? 0 : (g.width - off + g.sw - 1) / g.sw;
  *begin = std::min(b, g.ow);
  *end = std::clamp(e, *begin, g.ow);
}

/// The im2col matrix of one image group: row (c, i, j) holds, for every
/// output position, the input element under kernel tap (i, j) of channel c
/// (zero in the padding).
void im2col(const ConvGeometry &g, const float *image, float *col);

/// Grouped convolutions whose per-(image, group) GEMM is small (the groups
/// of ResNeXt, depthwise ones in the backward kernels; smallGroupGemm)
/// run their `tasks` in parallel, each thread with its own column matrix and
/// single-threaded GEMMs, rather than one small multi-threaded GEMM after
/// another. Those matrices are per-thread heap workspaces, at most
/// kSmallGroupColumns floats each; the plan's scratch holds the one of the
/// sequential path.
inline bool runGroupsAsTasks(const ConvGeometry &g, int64_t groups, int64_t filtersPerGroup,
                             int64_t tasks) {
  return groups > 1 &&
         smallGroupGemm(filtersPerGroup, g.channels * g.kh * g.kw, g.oh * g.ow) &&
         tasks >= omp_get_max_threads() && !omp_in_parallel();
}

} // namespace cleave::runtime::cpu
