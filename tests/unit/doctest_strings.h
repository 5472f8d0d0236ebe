// Force-included into every unit-test source but main.cpp (tests/CMakeLists.txt). doctest
// prints a C string given to a *_MESSAGE macro, CAPTURE or a CHECK's operands as a pointer
// (0x7f...) unless each test wraps it in std::string, so a failure's aicf_last_error() showed an
// address instead of the error. These specialisations print `const char *` and `char *` as the
// text they point to ("{null string}" for null); comparisons are unchanged (still of pointers).
#pragma once

#include <doctest/doctest.h>

namespace doctest {

template <>
struct StringMaker<const char *> {
  static String convert(const char *s) { return s ? String(s) : String("{null string}"); }
};
template <>
struct StringMaker<char *> {
  static String convert(const char *s) { return StringMaker<const char *>::convert(s); }
};

} // namespace doctest
