//===- Backend.cpp - What every backend shares ---------------------------===//

#include "runtime/Backend.h"

namespace cleave::runtime {

Status Backend::copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t width,
                         size_t rows) {
  for (size_t r = 0; r < rows; ++r)
    CLEAVE_RETURN_IF_ERROR(copyOnDevice(static_cast<char *>(dst) + r * dstPitch,
                                        static_cast<const char *>(src) + r * srcPitch, width));
  return {};
}

Status Backend::createCopyQueue(std::unique_ptr<CopyQueue> *) {
  return CLEAVE_ERROR("spilled plans (pool host) run on the CPU backend only for now: the ",
                      name(), " backend has no queue for host copies");
}

} // namespace cleave::runtime
