#include "ir/attributes.h"

#include <charconv>
#include <cmath>

namespace aicf {

const char *attrKindName(AttrKind k) {
  switch (k) {
  case AttrKind::Int: return "int";
  case AttrKind::Float: return "float";
  case AttrKind::String: return "string";
  case AttrKind::Ints: return "ints";
  case AttrKind::Floats: return "floats";
  case AttrKind::Strings: return "strings";
  }
  return "?";
}

std::string formatFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  std::string s(buf, res.ptr);
  // Keep floats distinguishable from ints in the text format: 1 -> 1.0
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

static std::string quote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static const char *hex = "0123456789abcdef";
      out += "\\x";
      out += hex[(c >> 4) & 0xf];
      out += hex[c & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string formatAttr(const AttrValue &v) {
  switch (attrKindOf(v)) {
  case AttrKind::Int: return std::to_string(std::get<int64_t>(v));
  case AttrKind::Float: return formatFloat(std::get<double>(v));
  case AttrKind::String: return quote(std::get<std::string>(v));
  case AttrKind::Ints: {
    std::string s = "[";
    const auto &xs = std::get<std::vector<int64_t>>(v);
    for (size_t i = 0; i < xs.size(); ++i)
      s += (i ? ", " : "") + std::to_string(xs[i]);
    return s + "]";
  }
  case AttrKind::Floats: {
    // Typed empty lists need a marker so the parser knows the kind: [] is ints, [:f] floats.
    const auto &xs = std::get<std::vector<double>>(v);
    if (xs.empty())
      return "[:f]";
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i)
      s += (i ? ", " : "") + formatFloat(xs[i]);
    return s + "]";
  }
  case AttrKind::Strings: {
    const auto &xs = std::get<std::vector<std::string>>(v);
    if (xs.empty())
      return "[:s]";
    std::string s = "[";
    for (size_t i = 0; i < xs.size(); ++i)
      s += (i ? ", " : "") + quote(xs[i]);
    return s + "]";
  }
  }
  return "?";
}

} // namespace aicf
