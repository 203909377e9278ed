//===- AtomicFile.h - Files that appear complete or not at all ------------===//
//
// Writes go to a temporary file beside the target, which is renamed over it
// only once everything is written: a failed write never leaves a truncated
// file, and an earlier file stays until the new one is whole.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Status.h"

#include <functional>
#include <ostream>
#include <string>

namespace cleave::runtime {

/// Calls `write` on a binary stream to a temporary file, then renames it to
/// `path`. `write` may return an error to abandon the file.
Status writeFileAtomically(const std::string &path,
                           const std::function<Status(std::ostream &)> &write);

/// The same, for a file whose whole content is `text`.
Status writeFileAtomically(const std::string &path, const std::string &text);

} // namespace cleave::runtime
