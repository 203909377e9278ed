#include "runtime/Attributes.h"

namespace cleave::runtime {

const AttrValue *Attributes::find(std::string_view name) const {
  auto it = values_.find(std::string(name));
  return it == values_.end() ? nullptr : &it->second;
}

Status Attributes::getInt(std::string_view name, int64_t *out) const {
  const AttrValue *v = find(name);
  if (!v)
    return CLEAVE_ERROR("missing attribute '", name, "'");
  if (const int64_t *i = std::get_if<int64_t>(v)) {
    *out = *i;
    return {};
  }
  return CLEAVE_ERROR("attribute '", name, "' must be an integer");
}

Status Attributes::getInt(std::string_view name, int64_t *out, int64_t defaultValue) const {
  if (!find(name)) {
    *out = defaultValue;
    return {};
  }
  return getInt(name, out);
}

Status Attributes::getFloat(std::string_view name, double *out) const {
  const AttrValue *v = find(name);
  if (!v)
    return CLEAVE_ERROR("missing attribute '", name, "'");
  if (const double *d = std::get_if<double>(v)) {
    *out = *d;
    return {};
  }
  if (const int64_t *i = std::get_if<int64_t>(v)) {
    *out = static_cast<double>(*i);
    return {};
  }
  return CLEAVE_ERROR("attribute '", name, "' must be a number");
}

Status Attributes::getBool(std::string_view name, bool *out, bool defaultValue) const {
  const AttrValue *v = find(name);
  if (!v) {
    *out = defaultValue;
    return {};
  }
  if (const bool *b = std::get_if<bool>(v)) {
    *out = *b;
    return {};
  }
  return CLEAVE_ERROR("attribute '", name, "' must be a boolean");
}

Status Attributes::getString(std::string_view name, std::string *out) const {
  const AttrValue *v = find(name);
  if (!v)
    return CLEAVE_ERROR("missing attribute '", name, "'");
  if (const std::string *s = std::get_if<std::string>(v)) {
    *out = *s;
    return {};
  }
  return CLEAVE_ERROR("attribute '", name, "' must be a string");
}

Status Attributes::getString(std::string_view name, std::string *out,
                             const std::string &defaultValue) const {
  if (!find(name)) {
    *out = defaultValue;
    return {};
  }
  return getString(name, out);
}

Status Attributes::getInts(std::string_view name, std::vector<int64_t> *out) const {
  const AttrValue *v = find(name);
  if (!v)
    return CLEAVE_ERROR("missing attribute '", name, "'");
  if (const auto *list = std::get_if<std::vector<int64_t>>(v)) {
    *out = *list;
    return {};
  }
  return CLEAVE_ERROR("attribute '", name, "' must be a list of integers");
}

} // namespace cleave::runtime
