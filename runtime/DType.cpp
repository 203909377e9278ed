#include "runtime/DType.h"

namespace cleave::runtime {
namespace {
struct DTypeInfo {
  DType dtype;
  size_t bytes;
  const char *planName;
  const char *safetensorsName;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, 4, "f32", "F32"}, {DType::BF16, 2, "bf16", "BF16"},
    {DType::F16, 2, "f16", "F16"}, {DType::I64, 8, "i64", "I64"},
    {DType::I32, 4, "i32", "I32"}, {DType::I1, 1, "i1", "BOOL"},
};
const DTypeInfo &info(DType dtype) { return kDTypes[static_cast<int>(dtype)]; }
} // namespace

size_t dtypeBytes(DType dtype) { return info(dtype).bytes; }
const char *dtypeName(DType dtype) { return info(dtype).planName; }
const char *safetensorsDTypeName(DType dtype) { return info(dtype).safetensorsName; }

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &i : kDTypes)
    if (name == i.planName)
      return i.dtype;
  return std::nullopt;
}

std::optional<DType> parseSafetensorsDType(std::string_view name) {
  for (const DTypeInfo &i : kDTypes)
    if (name == i.safetensorsName)
      return i.dtype;
  return std::nullopt;
}

} // namespace cleave::runtime
