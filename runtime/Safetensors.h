//===- Safetensors.h - Reading and writing safetensors files --------------===//
//
// The format: an 8-byte little-endian header length, a JSON header mapping
// each tensor name to {dtype, shape, data_offsets: [begin, end)} relative to
// the data that follows, and the data. Reading is strict: a file whose
// entries overlap, leave holes, run past the data, or whose length is not
// exactly header + data is rejected, so a truncated or padded weight file
// never loads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Status.h"
#include "runtime/Tensor.h"

#include <map>
#include <string>
#include <vector>

namespace cleave::runtime {

struct SafetensorsEntry {
  std::string name;
  TensorDesc desc;
  /// Byte range inside the data section.
  size_t begin = 0;
  size_t end = 0;
};

struct SafetensorsIndex {
  std::string path;
  /// Sorted by `begin`.
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
  /// File offset of the data section and its size.
  size_t dataOffset = 0;
  size_t dataBytes = 0;

  /// Entry index by name, filled by readSafetensorsIndex.
  std::map<std::string, size_t> byName;

  const SafetensorsEntry *find(const std::string &name) const;
};

/// Reads and validates the header of `path`.
Status readSafetensorsIndex(const std::string &path, SafetensorsIndex *index);

/// Reads the whole data section (index.dataBytes bytes) into `dst`.
Status readSafetensorsData(const SafetensorsIndex &index, void *dst);

/// Reads one tensor's bytes into `dst`.
Status readSafetensorsTensor(const SafetensorsIndex &index,
                             const SafetensorsEntry &entry, void *dst);

struct SafetensorsTensor {
  std::string name;
  TensorDesc desc;
  const void *data = nullptr;
};

/// Writes `tensors` to `path` atomically: a temporary file in the same
/// directory, renamed over `path` once complete. Tensors with wider elements
/// come first, so every tensor's data is aligned to its element size.
Status writeSafetensors(const std::string &path,
                        const std::vector<SafetensorsTensor> &tensors,
                        const std::map<std::string, std::string> &metadata = {});

} // namespace cleave::runtime
