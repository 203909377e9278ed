//===- Checked.h - Overflow-safe sizes, counts and offsets from files ------===//
//
// Plans, weight shards, checkpoints and training data are untrusted: every
// size, count and offset read from them goes through these helpers before it
// is multiplied, added, allocated or looped over. A value that does not fit
// in int64_t is an error, never a wrapped number (a [2^62] f32 tensor must not
// "fit" in 0 bytes). All loaders share them: Plan.cpp, PlanVerify.cpp,
// Safetensors.cpp, train/Checkpoint.cpp and train/TrainingData.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cleave::runtime {

/// The largest tensor a file may describe: 2^60 bytes (an exbibyte). Far past
/// any memory, and small enough that a few such sizes add without wrapping.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 60;
/// The most dimensions a shape in a file may have (PyTorch allows 64).
constexpr size_t kMaxRank = 64;

/// a * b, or nothing when either is negative or the product exceeds int64_t.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

/// a + b, or nothing when either is negative or the sum exceeds int64_t.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &out))
    return std::nullopt;
  return out;
}

/// The product of `values` (a shape, a mesh), or nothing on overflow or a
/// negative value.
template <typename Range> std::optional<int64_t> checkedProduct(const Range &values) {
  int64_t n = 1;
  for (int64_t v : values) {
    std::optional<int64_t> next = checkedMul(n, v);
    if (!next)
      return std::nullopt;
    n = *next;
  }
  return n;
}

/// Whether [offset, offset + length) lies within [0, limit), computed without
/// wrapping.
inline bool spanWithin(int64_t offset, int64_t length, int64_t limit) {
  return offset >= 0 && length >= 0 && limit >= 0 && offset <= limit &&
         length <= limit - offset;
}
inline bool spanWithin(uint64_t offset, uint64_t length, uint64_t limit) {
  return offset <= limit && length <= limit - offset;
}

/// A shape and dtype read from a file (`where` names it): every dimension
/// non-negative, at most kMaxRank of them, and the byte size at most
/// kMaxTensorBytes, so that desc.numel() and desc.bytes() are exact after.
inline Status checkTensorSize(const TensorDesc &desc, const std::string &where) {
  if (desc.shape.size() > kMaxRank)
    return CLEAVE_ERROR(where, ": ", desc.shape.size(), " dimensions (at most ", kMaxRank, ")");
  for (int64_t d : desc.shape)
    if (d < 0)
      return CLEAVE_ERROR(where, ": negative dimension ", d);
  std::optional<int64_t> numel = checkedProduct(desc.shape);
  std::optional<int64_t> bytes =
      numel ? checkedMul(*numel, static_cast<int64_t>(dtypeBytes(desc.dtype))) : std::nullopt;
  if (!bytes || *bytes > kMaxTensorBytes)
    return CLEAVE_ERROR(where, ": ", describe(desc.shape, desc.dtype), " is larger than ",
                        kMaxTensorBytes, " bytes (its size does not fit in 64 bits or is "
                        "past any memory)");
  return {};
}

/// A non-negative decimal integer of 1 to 18 digits (so it fits in int64_t),
/// nothing otherwise: no sign, no spaces, no exponent.
inline std::optional<int64_t> parseDecimal(std::string_view text) {
  if (text.empty() || text.size() > 18)
    return std::nullopt;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

/// At most `limit` characters of `text`, cut with "..." and the full length,
/// for quoting untrusted values in an error without echoing them whole.
inline std::string excerpt(std::string_view text, size_t limit = 80) {
  if (text.size() <= limit)
    return std::string(text);
  return std::string(text.substr(0, limit)) + "... (" + std::to_string(text.size()) +
         " characters)";
}

} // namespace cleave::runtime
