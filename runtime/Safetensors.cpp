#include "runtime/Safetensors.h"
#include "runtime/AtomicFile.h"
#include "runtime/Checked.h"
#include "runtime/JsonFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <unistd.h>

namespace cleave::runtime {
namespace {

// Headers larger than this are not weight files (the reference library uses
// the same bound); it also keeps a corrupt length from allocating gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

Status readExact(std::ifstream &in, const std::string &path, void *dst, size_t bytes) {
  char *p = static_cast<char *>(dst);
  // Chunks keep a multi-gigabyte read within std::streamsize and show progress
  // to the OS page cache rather than one huge request.
  constexpr size_t kChunk = 64u << 20;
  while (bytes > 0) {
    size_t n = std::min(bytes, kChunk);
    in.read(p, static_cast<std::streamsize>(n));
    if (static_cast<size_t>(in.gcount()) != n)
      return CLEAVE_ERROR(path, ": unexpected end of file");
    p += n;
    bytes -= n;
  }
  return {};
}

Status parseEntry(const std::string &path, const std::string &name,
                  const nlohmann::json &value, SafetensorsEntry *entry) {
  std::string where = path + ": tensor '" + excerpt(name) + "'";
  if (!value.is_object())
    return CLEAVE_ERROR(where, " is not an object");
  auto dtype = value.find("dtype");
  auto shape = value.find("shape");
  auto offsets = value.find("data_offsets");
  if (dtype == value.end() || !dtype->is_string())
    return CLEAVE_ERROR(where, " has no dtype");
  std::optional<DType> parsed = parseSafetensorsDType(dtype->get<std::string>());
  if (!parsed)
    return CLEAVE_ERROR(where, " has unsupported dtype '", dtype->get<std::string>(), "'");
  if (shape == value.end() || !shape->is_array())
    return CLEAVE_ERROR(where, " has no shape");
  entry->name = name;
  entry->desc.dtype = *parsed;
  for (const nlohmann::json &d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return CLEAVE_ERROR(where, " has a bad shape ", jsonExcerpt(*shape));
    entry->desc.shape.push_back(d.get<int64_t>());
  }
  CLEAVE_RETURN_IF_ERROR(checkTensorSize(entry->desc, where));
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
    return CLEAVE_ERROR(where, " has bad data_offsets");
  entry->begin = (*offsets)[0].get<uint64_t>();
  entry->end = (*offsets)[1].get<uint64_t>();
  if (entry->end < entry->begin || entry->end - entry->begin != entry->desc.bytes())
    return CLEAVE_ERROR(where, " (", describe(entry->desc.shape, entry->desc.dtype),
                        ") needs ", entry->desc.bytes(), " bytes but data_offsets [",
                        entry->begin, ", ", entry->end, ") give ",
                        entry->end >= entry->begin ? entry->end - entry->begin : 0);
  return {};
}

} // namespace

const SafetensorsEntry *SafetensorsIndex::find(const std::string &name) const {
  // Indexes read from files are looked up by name (a file may hold millions
  // of tensors); ones assembled by hand are scanned.
  if (byName.size() == entries.size()) {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : &entries[it->second];
  }
  for (const SafetensorsEntry &e : entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

static Status readSafetensorsIndexImpl(const std::string &path, SafetensorsIndex *index) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot open: ", std::strerror(errno));
  const uint64_t fileBytes = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  unsigned char lengthBytes[8];
  if (fileBytes < 8 || !in.read(reinterpret_cast<char *>(lengthBytes), 8))
    return CLEAVE_ERROR(path, ": truncated: shorter than the 8-byte header length");
  uint64_t headerBytes = 0;
  for (int i = 7; i >= 0; --i)
    headerBytes = (headerBytes << 8) | lengthBytes[i];
  if (headerBytes > kMaxHeaderBytes || headerBytes > fileBytes - 8)
    return CLEAVE_ERROR(path, ": header length ", headerBytes, " exceeds the file (",
                        fileBytes, " bytes): truncated or not a safetensors file");
  std::string header(headerBytes, '\0');
  CLEAVE_RETURN_IF_ERROR(readExact(in, path, header.data(), header.size()));

  nlohmann::json json;
  Status parsed = parseJson(header, path + ": header", &json);
  if (!parsed.ok() && json.is_discarded())
    return CLEAVE_ERROR(path, ": header is not a JSON object (not valid JSON)");
  if (!parsed.ok())
    return parsed;
  if (!json.is_object())
    return CLEAVE_ERROR(path, ": header is not a JSON object");

  SafetensorsIndex result;
  result.path = path;
  result.dataOffset = 8 + headerBytes;
  result.dataBytes = fileBytes - result.dataOffset;
  for (auto it = json.begin(); it != json.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object())
        return CLEAVE_ERROR(path, ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string())
          return CLEAVE_ERROR(path, ": __metadata__ value '", excerpt(m.key()), "' is not a string");
        result.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    SafetensorsEntry entry;
    CLEAVE_RETURN_IF_ERROR(parseEntry(path, it.key(), *it, &entry));
    result.entries.push_back(std::move(entry));
  }
  std::sort(result.entries.begin(), result.entries.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
            });

  for (size_t i = 0; i < result.entries.size(); ++i)
    result.byName.emplace(result.entries[i].name, i);
  // The data must be covered exactly: no overlap, no hole, nothing after.
  size_t covered = 0;
  for (const SafetensorsEntry &e : result.entries) {
    if (e.begin < covered)
      return CLEAVE_ERROR(path, ": tensor '", excerpt(e.name), "' overlaps the tensor before it");
    if (e.begin > covered)
      return CLEAVE_ERROR(path, ": a hole of ", e.begin - covered,
                          " bytes precedes tensor '", excerpt(e.name), "'");
    covered = e.end;
  }
  if (covered > result.dataBytes)
    return CLEAVE_ERROR(path, ": truncated: the header describes ", covered,
                        " bytes of data, the file holds ", result.dataBytes);
  if (covered < result.dataBytes)
    return CLEAVE_ERROR(path, ": oversized: ", result.dataBytes - covered,
                        " bytes follow the last tensor");
  *index = std::move(result);
  return {};
}

Status readSafetensorsIndex(const std::string &path, SafetensorsIndex *index) {
  return catchExceptions(path, [&] { return readSafetensorsIndexImpl(path, index); });
}

Status readSafetensorsData(const SafetensorsIndex &index, void *dst) {
  std::ifstream in(index.path, std::ios::binary);
  if (!in)
    return CLEAVE_ERROR(index.path, ": cannot open: ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(index.dataOffset));
  return readExact(in, index.path, dst, index.dataBytes);
}

Status readSafetensorsTensor(const SafetensorsIndex &index,
                             const SafetensorsEntry &entry, void *dst) {
  std::ifstream in(index.path, std::ios::binary);
  if (!in)
    return CLEAVE_ERROR(index.path, ": cannot open: ", std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(index.dataOffset + entry.begin));
  return readExact(in, index.path, dst, entry.end - entry.begin);
}

Status writeSafetensors(const std::string &path,
                        const std::vector<SafetensorsTensor> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  std::vector<const SafetensorsTensor *> order;
  for (const SafetensorsTensor &t : tensors)
    order.push_back(&t);
  std::stable_sort(order.begin(), order.end(),
                   [](const SafetensorsTensor *a, const SafetensorsTensor *b) {
                     return dtypeBytes(a->desc.dtype) > dtypeBytes(b->desc.dtype);
                   });

  // The header is written entry by entry, in file order: an ordered JSON
  // object looks each key up one by one, quadratic in the tensor count.
  std::string text = "{";
  if (!metadata.empty())
    text += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  size_t offset = 0;
  std::set<std::string> written;
  for (const SafetensorsTensor *t : order) {
    if (!written.insert(t->name).second || t->name == "__metadata__")
      return CLEAVE_ERROR(path, ": tensor '", t->name, "' is written twice");
    size_t bytes = t->desc.bytes();
    nlohmann::ordered_json entry = {{"dtype", safetensorsDTypeName(t->desc.dtype)},
                                    {"shape", t->desc.shape},
                                    {"data_offsets", {offset, offset + bytes}}};
    text += (text.size() > 1 ? "," : "") + nlohmann::json(t->name).dump() + ":" + entry.dump();
    offset += bytes;
  }
  text += "}";
  // Pad with spaces so the data starts 8-byte aligned in the file.
  text.append((8 - text.size() % 8) % 8, ' ');

  return writeFileAtomically(path, [&](std::ostream &out) {
    uint64_t length = text.size();
    unsigned char lengthBytes[8];
    for (int i = 0; i < 8; ++i)
      lengthBytes[i] = static_cast<unsigned char>(length >> (8 * i));
    out.write(reinterpret_cast<const char *>(lengthBytes), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafetensorsTensor *t : order)
      out.write(static_cast<const char *>(t->data),
                static_cast<std::streamsize>(t->desc.bytes()));
    return Status();
  });
}

} // namespace cleave::runtime
