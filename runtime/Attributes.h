//===- Attributes.h - Kernel attributes of one instruction ----------------===//
//
// The "attrs" object of an instruction, parsed once at load. Getters are
// strict: a missing attribute or one of the wrong kind is an error naming it,
// so a bad plan fails at load, before anything runs.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cleave::runtime {

using AttrValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

class Attributes {
public:
  void set(std::string name, AttrValue value) { values_[std::move(name)] = std::move(value); }
  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  const std::map<std::string, AttrValue> &all() const { return values_; }

  Status getInt(std::string_view name, int64_t *out) const;
  Status getInt(std::string_view name, int64_t *out, int64_t defaultValue) const;
  /// Accepts integers too: JSON writes 1.0 as 1.
  Status getFloat(std::string_view name, double *out) const;
  Status getBool(std::string_view name, bool *out, bool defaultValue) const;
  Status getString(std::string_view name, std::string *out) const;
  Status getString(std::string_view name, std::string *out, const std::string &defaultValue) const;
  Status getInts(std::string_view name, std::vector<int64_t> *out) const;

private:
  const AttrValue *find(std::string_view name) const;
  std::map<std::string, AttrValue> values_;
};

} // namespace cleave::runtime
