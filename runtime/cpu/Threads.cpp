//===- Threads.cpp - one thread count for OpenMP and OpenBLAS -------------===//

#include "runtime/Backend.h"

#include <cblas.h>
#include <omp.h>

namespace cleave::runtime {

void setCpuThreads(int threads) {
  if (threads <= 0)
    return;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int cpuThreads() { return omp_get_max_threads(); }

} // namespace cleave::runtime
