//===- CopyQueue.h - The CPU backend's copy queue -------------------------===//
#pragma once

#include "runtime/Backend.h"

#include <memory>

namespace cleave::runtime::cpu {

/// A CopyQueue whose copies run, in issue order, on one thread it owns
/// (memcpy: on the CPU host and device memory are the same). Destroying it
/// finishes the copies issued, then joins the thread. `delaySeconds` makes
/// every copy take that much longer (a slow copy engine, for tests of the
/// executor's ordering).
std::unique_ptr<CopyQueue> createThreadCopyQueue(double delaySeconds = 0);

} // namespace cleave::runtime::cpu
