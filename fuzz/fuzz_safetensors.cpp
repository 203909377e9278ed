//===- fuzz_safetensors.cpp - The safetensors reader on hostile bytes ----===//
//
// Input: a whole safetensors file. It is read from an in-memory file with
// readSafetensorsIndex; when the index is accepted, every tensor is read
// with readSafetensorsTensor and the whole data section with
// readSafetensorsData, into buffers of the sizes the index claims (the
// index promises they lie inside the file, so they are bounded by the
// input). Seeds: every .safetensors file of fuzz/make-seeds.sh's seeds.
//
//===----------------------------------------------------------------------===//
#include "fuzz/FuzzCommon.h"
#include "runtime/Safetensors.h"

#include <cstring>

using namespace cleave;
namespace fs = std::filesystem;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  std::string out = fuzz::corpusOutput();
  if (out.empty())
    return 0;
  fs::path seeds = fuzz::seedsDir();
  for (const fs::directory_entry &entry : fs::recursive_directory_iterator(seeds))
    if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
      fuzz::writeCorpusEntry(out, fuzz::flatName(fs::relative(entry.path(), seeds)),
                             fuzz::readFile(entry.path()));
  std::exit(0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static fuzz::MemFile file;
  file.set(data, size);
  runtime::SafetensorsIndex index;
  if (!runtime::readSafetensorsIndex(file.path(), &index).ok())
    return 0;
  // What the index claims must hold: entries inside the data section, the
  // data section inside the file.
  if (index.dataOffset > size || index.dataBytes > size - index.dataOffset)
    __builtin_trap();
  for (const runtime::SafetensorsEntry &entry : index.entries) {
    if (entry.begin > entry.end || entry.end > index.dataBytes)
      __builtin_trap();
    if (index.find(entry.name) == nullptr || entry.desc.bytes() != entry.end - entry.begin)
      __builtin_trap();
    std::vector<char> bytes(entry.end - entry.begin);
    if (runtime::readSafetensorsTensor(index, entry, bytes.data()).ok() &&
        std::memcmp(bytes.data(), data + index.dataOffset + entry.begin, bytes.size()) != 0)
      __builtin_trap();
  }
  std::vector<char> all(index.dataBytes);
  (void)runtime::readSafetensorsData(index, all.data());
  return 0;
}
