#include "cost/OpCost.h"

namespace cleave::cost {

std::string_view opClassName(OpClass opClass) { return kOpClassNames[static_cast<int>(opClass)]; }

std::optional<OpClass> parseOpClass(std::string_view name) {
  for (int i = 0; i < kNumOpClasses; ++i)
    if (kOpClassNames[i] == name)
      return static_cast<OpClass>(i);
  return std::nullopt;
}

} // namespace cleave::cost
