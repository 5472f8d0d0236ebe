// An enum's spellings, declared once beside the enum, so that its values are parsed from and
// printed as text in one place (the command line's edge, plan.yaml, reports) and compared as
// enums everywhere else. Each enum E declares, next to its definition, a function found by
// argument-dependent lookup:
//   constexpr EnumNames<E, 3> enumNames(E) { return {{{E::Cost, "cost"}, {E::Fuse, "fuse"},
//                                                     {E::Store, "store"}}}; }
// Then enumName(v) prints a value, parseEnum<E>(text) parses one (nothing for an unknown
// spelling), and enumNameSet<E>() lists them as CLI11 lists a set ("{cost,fuse,store}");
// support/cli_parse.h's addEnumOption reads a flag into E with them. Header-only and without
// dependencies: the runtime includes it too.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace aicf {

template <typename E>
struct EnumName {
  E value;
  const char *name;
};

template <typename E, size_t N>
using EnumNames = std::array<EnumName<E>, N>;

// v's spelling; "?" for a value its table lacks (never, for a complete table).
template <typename E>
constexpr const char *enumName(E v) {
  for (const EnumName<E> &n : enumNames(E{}))
    if (n.value == v)
      return n.name;
  return "?";
}

// The value spelled `text` exactly (case matters), or nothing.
template <typename E>
constexpr std::optional<E> parseEnum(std::string_view text) {
  for (const EnumName<E> &n : enumNames(E{}))
    if (text == n.name)
      return n.value;
  return std::nullopt;
}

// "{a,b,c}": every spelling in the table's order, as CLI11 prints a set.
template <typename E>
std::string enumNameSet() {
  std::string out = "{";
  for (const EnumName<E> &n : enumNames(E{}))
    out += (out.size() > 1 ? "," : "") + std::string(n.name);
  return out + "}";
}

} // namespace aicf
