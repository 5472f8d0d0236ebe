#include "support/cli_util.h"

#include "support/diagnostics.h"

#include <charconv>
#include <iostream>

namespace aicf {

static bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size();
}

std::pair<std::string, std::vector<int64_t>> parseShapeFlag(const std::string &text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError(cat("bad --shape '", text, "': expected NAME=D0xD1x... (e.g. x=2x64x256)"));
  std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
  std::vector<int64_t> shape;
  size_t start = 0;
  while (!dims.empty() && start <= dims.size()) {
    size_t x = dims.find('x', start);
    std::string part = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
    int64_t d;
    if (!parseInt(part, d) || d < 0)
      throw UserError(cat("bad --shape '", text, "': '", part, "' is not a dimension"));
    shape.push_back(d);
    if (x == std::string::npos)
      break;
    start = x + 1;
  }
  return {name, shape};
}

std::pair<std::string, int64_t> parseDimFlag(const std::string &text) {
  auto eq = text.find('=');
  int64_t v;
  if (eq == std::string::npos || eq == 0 || !parseInt(text.substr(eq + 1), v) || v < 0)
    throw UserError(cat("bad --dim '", text, "': expected PARAM=VALUE (e.g. batch=2)"));
  return {text.substr(0, eq), v};
}

int runTool(const std::function<int()> &body) {
  try {
    return body();
  } catch (const UserError &e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exitCode();
  } catch (const InternalError &e) {
    std::cerr << e.what() << "\n";
    return 3;
  } catch (const std::exception &e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 3;
  }
}

} // namespace aicf
