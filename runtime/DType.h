//===- DType.h - Element types of plan buffers ----------------------------===//
//
// The dtypes of the cleave dialect. Plans name them as the IR does ("f32",
// "i64", "i1"); safetensors files use their own names ("F32", "I64", "BOOL").
// i1 is stored as one byte per element, as PyTorch's bool.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cleave::runtime {

enum class DType : uint8_t { F32, BF16, F16, I64, I32, I1 };

size_t dtypeBytes(DType dtype);
/// The plan (and IR) name: "f32", "bf16", "f16", "i64", "i32", "i1".
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(std::string_view name);
/// The safetensors name: "F32", "BF16", "F16", "I64", "I32", "BOOL".
const char *safetensorsDTypeName(DType dtype);
std::optional<DType> parseSafetensorsDType(std::string_view name);

} // namespace cleave::runtime
