#include "runtime/JsonFile.h"
#include "runtime/Checked.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cleave::runtime {

Status readTextFile(const std::string &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return CLEAVE_ERROR(path, ": cannot read: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return CLEAVE_ERROR(path, ": cannot read: ", std::strerror(errno));
  *out = text.str();
  return {};
}

Status parseJson(std::string_view text, const std::string &where, nlohmann::json *out) {
  // One pass over the text: the depth of brackets outside strings.
  int depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        return CLEAVE_ERROR(where, ": nested deeper than ", kMaxJsonDepth,
                            " levels at byte ", i, " (not a file cleave wrote)");
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  *out = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded())
    return CLEAVE_ERROR(where, ": not valid JSON");
  return {};
}

std::string jsonExcerpt(const nlohmann::json &value, size_t limit) {
  // Replacement of invalid UTF-8 keeps dump() from throwing.
  return excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), limit);
}

} // namespace cleave::runtime
