#include "support/cli_util.h"

#include "support/checked_math.h"
#include "support/diagnostics.h"

#include <charconv>
#include <iostream>

namespace aicf {

// A dim value of --shape / --dim: a positive decimal integer (digits only, so no sign, space or
// hex) up to the per-tensor element limit; "" when it is one, else why not.
static std::string dimValueProblem(const std::string &s, int64_t &out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos)
    return "is not a positive decimal integer";
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  if (res.ec == std::errc::result_out_of_range ||
      (res.ec == std::errc() && out > kMaxTensorElements))
    return cat("is above the limit of ", kMaxTensorElements, " elements per tensor");
  if (res.ec != std::errc() || res.ptr != s.data() + s.size())
    return "is not a positive decimal integer";
  if (out == 0)
    return "is 0: empty tensors are not supported";
  return "";
}

std::pair<std::string, std::vector<int64_t>> parseShapeFlag(const std::string &text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError(cat("bad --shape '", text, "': expected NAME=D0xD1x... (e.g. x=2x64x256)"), 1);
  std::string name = text.substr(0, eq), dims = text.substr(eq + 1);
  std::vector<int64_t> shape;
  size_t start = 0;
  while (!dims.empty() && start <= dims.size()) {
    size_t x = dims.find('x', start);
    std::string part = dims.substr(start, x == std::string::npos ? std::string::npos : x - start);
    int64_t d;
    if (std::string p = dimValueProblem(part, d); !p.empty())
      throw UserError(cat("bad --shape '", text, "': dim ", shape.size(), " '", part, "' ", p), 1);
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
  if (eq == std::string::npos || eq == 0)
    throw UserError(cat("bad --dim '", text, "': expected PARAM=VALUE (e.g. batch=2)"), 1);
  if (std::string p = dimValueProblem(text.substr(eq + 1), v); !p.empty())
    throw UserError(cat("bad --dim '", text, "': the value ", p), 1);
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
