//===- Threads.cpp - the CPU backend's thread count -----------------------===//
//
// Every CPU kernel, GEMMs included (dnnl_sgemm), runs on the OpenMP pool.
//

#include "runtime/Backend.h"

#include <omp.h>

namespace cleave::runtime {

void setCpuThreads(int threads) {
  if (threads <= 0)
    return;
  omp_set_num_threads(threads);
}

int cpuThreads() { return omp_get_max_threads(); }

} // namespace cleave::runtime
