// stderr as a std::ostream, written through <cstdio> (library code does not include
// <iostream>): where the pass manager and the pipeline print IR and timings by default.
#pragma once

#include <cstdio>
#include <ostream>
#include <streambuf>

namespace aicf {

class StderrBuf : public std::streambuf {
protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof())
      std::fputc(c, stderr);
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char *s, std::streamsize n) override {
    return static_cast<std::streamsize>(std::fwrite(s, 1, static_cast<size_t>(n), stderr));
  }
};

inline std::ostream &stderrStream() {
  static StderrBuf buf;
  static std::ostream os(&buf);
  return os;
}

} // namespace aicf
