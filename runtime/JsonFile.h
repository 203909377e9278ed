//===- JsonFile.h - JSON from untrusted files, parsed within limits -------===//
//
// Plans, checkpoints and safetensors headers are JSON that anyone may have
// written. parseJson refuses nesting deeper than kMaxJsonDepth before the
// parser runs, so no later walk over the value (a dump in an error message, a
// destructor) recurses deeper than that; errors quote values through
// jsonExcerpt, never whole. Nothing here throws.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace cleave::runtime {

/// The deepest nesting of arrays and objects a file may have. Plans nest 6
/// levels, checkpoints 5; a safetensors header 3.
constexpr int kMaxJsonDepth = 32;

/// Parses `text`, read from `where` (a file), into *out: an error names the
/// byte offset of nesting past kMaxJsonDepth, or says the text is not JSON.
Status parseJson(std::string_view text, const std::string &where, nlohmann::json *out);

/// The whole of the file at `path` (a job.json, a checkpoint's `latest`):
/// an error names the file and the system's reason.
Status readTextFile(const std::string &path, std::string *out);

/// A bounded excerpt of `value`'s JSON text, for error messages.
std::string jsonExcerpt(const nlohmann::json &value, size_t limit = 80);

} // namespace cleave::runtime
