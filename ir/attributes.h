// Node attributes: a sorted name -> value map (sorted so printing is deterministic).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace aicf {

enum class AttrKind : uint8_t { Int, Float, String, Ints, Floats, Strings };

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

// Index of each alternative matches AttrKind.
inline AttrKind attrKindOf(const AttrValue &v) {
  return static_cast<AttrKind>(v.index());
}
const char *attrKindName(AttrKind k); // "int", "float", "string", "ints", "floats", "strings"

using AttrMap = std::map<std::string, AttrValue>;

// Prints a float so that parsing it back gives the same double, bit for bit
// (shortest round-trip form; "inf", "-inf", "nan" for the special values).
std::string formatFloat(double v);
std::string formatAttr(const AttrValue &v); // the text-format spelling of a value

} // namespace aicf
