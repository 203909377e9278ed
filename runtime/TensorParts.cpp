#include "runtime/TensorParts.h"
#include "runtime/Checked.h"

#include <cstring>

namespace cleave::runtime {
namespace {

/// Walks the contiguous runs of `shard`'s part in a tensor of `shape`:
/// `run(offset in the whole, offset in the part, bytes)`.
template <typename Run>
void forEachRun(const Shape &shape, size_t elementBytes, const WeightShard &shard, Run run) {
  int64_t outer = 1, inner = static_cast<int64_t>(elementBytes);
  for (int64_t d = 0; d < shard.dim; ++d)
    outer *= shape[d];
  for (size_t d = shard.dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const int64_t size = shape[shard.dim];
  const int64_t block = size / shard.blocks, piece = block / shard.parts;
  size_t into = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < shard.blocks; ++k) {
      size_t from = static_cast<size_t>((o * size + k * block + shard.part * piece) * inner);
      size_t bytes = static_cast<size_t>(piece * inner);
      run(from, into, bytes);
      into += bytes;
    }
}

} // namespace

bool canSplit(const Shape &whole, const WeightShard &shard) {
  // blocks and parts come from weight names in files: their product may not fit.
  std::optional<int64_t> pieces = checkedMul(shard.blocks, shard.parts);
  return shard.dim >= 0 && shard.dim < static_cast<int64_t>(whole.size()) && shard.blocks >= 1 &&
         shard.parts >= 1 && shard.part >= 0 && shard.part < shard.parts && pieces &&
         whole[shard.dim] % *pieces == 0;
}

Shape partShape(const Shape &whole, const WeightShard &shard) {
  Shape part = whole;
  part[shard.dim] /= shard.parts;
  return part;
}

std::vector<char> copyPart(const char *whole, const Shape &shape, size_t elementBytes,
                           const WeightShard &shard) {
  std::vector<char> out(static_cast<size_t>(numElements(partShape(shape, shard))) * elementBytes);
  forEachRun(shape, elementBytes, shard, [&](size_t from, size_t into, size_t bytes) {
    std::memcpy(out.data() + into, whole + from, bytes);
  });
  return out;
}

void placePart(const char *part, const Shape &shape, size_t elementBytes,
               const WeightShard &shard, char *whole) {
  forEachRun(shape, elementBytes, shard, [&](size_t into, size_t from, size_t bytes) {
    std::memcpy(whole + into, part + from, bytes);
  });
}

} // namespace cleave::runtime
