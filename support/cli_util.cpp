#include "support/cli_util.h"

#include "support/checked_math.h"
#include "support/diagnostics.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <ios>
#include <iostream>
#include <new>
#include <set>
#include <tuple>

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
    return "is 0: dims bound on the command line are 1 or more";
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

std::pair<std::string, int64_t> parseDimFlag(const std::string &text, const char *flag) {
  auto eq = text.find('=');
  int64_t v;
  if (eq == std::string::npos || eq == 0)
    throw UserError(cat("bad ", flag, " '", text, "': expected ",
                        std::string(flag) == "--dim" ? "PARAM=VALUE (e.g. batch=2)"
                                                     : "NAME=COUNT (e.g. frames=3)"),
                    1);
  if (std::string(flag) == "--seq" && text.substr(eq + 1) == "0")
    return {text.substr(0, eq), 0}; // an empty sequence
  if (std::string p = dimValueProblem(text.substr(eq + 1), v); !p.empty())
    throw UserError(cat("bad ", flag, " '", text, "': the value ", p), 1);
  return {text.substr(0, eq), v};
}

// "filesystem error: cannot create directories: Not a directory [/a/b]" ->
// "cannot create directories '/a/b': Not a directory": the operation, the path, the OS reason.
static std::string describeFilesystemError(const std::filesystem::filesystem_error &e) {
  std::string what = e.what(), reason = e.code().message();
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0)
    what = what.substr(prefix.size());
  size_t at = what.find(": " + reason);
  std::string op = at == std::string::npos ? what : what.substr(0, at);
  std::string msg = op;
  if (!e.path1().empty())
    msg += cat(" '", e.path1().string(), "'");
  if (!e.path2().empty())
    msg += cat(" -> '", e.path2().string(), "'");
  return at == std::string::npos ? msg : msg + ": " + reason;
}

std::map<std::string, std::vector<int64_t>> parseShapeFlags(const std::vector<std::string> &texts) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const std::string &t : texts) {
    auto [name, shape] = parseShapeFlag(t);
    if (!out.emplace(name, shape).second)
      throw UserError(cat("--shape ", name, " given twice (give each input's shape once)"), 1);
  }
  return out;
}

std::map<std::string, int64_t> parseDimFlags(const std::vector<std::string> &texts,
                                             const char *flag) {
  std::map<std::string, int64_t> out;
  for (const std::string &t : texts) {
    auto [name, value] = parseDimFlag(t, flag);
    if (!out.emplace(name, value).second)
      throw UserError(cat(flag, " ", name, " given twice (give each ",
                          std::string(flag) == "--dim" ? "dim" : "sequence", " once)"),
                      1);
  }
  return out;
}

void parseDimRangeFlags(const std::vector<std::string> &texts,
                        std::map<std::string, int64_t> &fixed, std::vector<DimRange> &ranges) {
  std::vector<std::string> plain;
  std::set<std::string> seen;
  for (const std::string &t : texts) {
    auto eq = t.find('=');
    size_t dots = t.find("..");
    if (eq == std::string::npos || eq == 0 || dots == std::string::npos || dots < eq) {
      plain.push_back(t);
      continue;
    }
    std::string name = t.substr(0, eq);
    auto bad = [&](const std::string &why) {
      return UserError(cat("bad --dim '", t, "': ", why), 1);
    };
    if (!isSymbolName(name))
      throw bad("a dim compiled for a range needs a name of letters, digits and '_' (it names "
                "the dim in the generated code)");
    std::string lo = t.substr(eq + 1, dots - eq - 1), rest = t.substr(dots + 2);
    if (size_t pct = rest.find('%'); pct != std::string::npos)
      throw bad(cat("a range with a step ('", rest.substr(pct, rest.find('@', pct) - pct),
                    "') is not supported yet: a dim that strided windows divide (an image's "
                    "height or width through convs and pools) needs symbolic spatial extents, "
                    "which the conv family does not have; compile a folder per size"));
    size_t at = rest.find('@');
    std::string hi = rest.substr(0, at), opt = at == std::string::npos ? "" : rest.substr(at + 1);
    DimRange r;
    r.name = name;
    for (auto [part, out, what] :
         {std::tuple{lo, &r.min, "minimum"}, std::tuple{hi, &r.max, "maximum"}})
      if (std::string p = dimValueProblem(part, *out); !p.empty())
        throw bad(cat("the ", what, " '", part, "' ", p, " (expected NAME=MIN..MAX[@OPT])"));
    r.opt = r.max;
    if (at != std::string::npos)
      if (std::string p = dimValueProblem(opt, r.opt); !p.empty())
        throw bad(cat("the value to optimise for '", opt, "' ", p));
    if (r.min > r.max)
      throw bad(cat("the minimum ", r.min, " is above the maximum ", r.max));
    if (r.opt < r.min || r.opt > r.max)
      throw bad(cat("the value to optimise for ", r.opt, " is outside ", r.min, "..", r.max));
    if (!seen.insert(name).second)
      throw UserError(cat("--dim ", name, " given twice (give each dim once)"), 1);
    ranges.push_back(r);
  }
  fixed = parseDimFlags(plain);
  for (const auto &[name, v] : fixed)
    if (seen.count(name))
      throw UserError(cat("--dim ", name, " given twice (give each dim once)"), 1);
}

ConstFlag parseConstFlag(const std::string &text) {
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw UserError(
        cat("bad --const '", text, "': expected NAME=FILE.npy or NAME=VALUE (e.g. sr=16000)"), 1);
  ConstFlag f;
  f.name = text.substr(0, eq);
  f.text = text;
  std::string rhs = text.substr(eq + 1);
  if (rhs == "true" || rhs == "false") {
    f.isValue = true;
    f.value = rhs == "true" ? 1.0 : 0.0;
    return f;
  }
  // A number, whole (strtod accepts "nan", "inf" and hex floats too: a value, not a file).
  char *end = nullptr;
  double v = std::strtod(rhs.c_str(), &end);
  if (end && *end == '\0' && !std::isspace(static_cast<unsigned char>(rhs[0]))) {
    f.isValue = true;
    f.value = v;
    return f;
  }
  f.file = rhs;
  return f;
}

std::map<std::string, ConstFlag> parseConstFlags(const std::vector<std::string> &texts) {
  std::map<std::string, ConstFlag> out;
  for (const std::string &t : texts) {
    ConstFlag f = parseConstFlag(t);
    if (!out.emplace(f.name, f).second)
      throw UserError(cat("--const ", f.name, " given twice (bind each input once)"), 1);
  }
  return out;
}

int runTool(const std::function<int()> &body) {
  // Exit codes (docs/safety.md, "Exit codes"): 1 usage (the command line, or a path on it that
  // cannot be used), 2 bad input (a file's contents), 3 only for bugs in aicf.
  try {
    return body();
  } catch (const UserError &e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.exitCode();
  } catch (const std::filesystem::filesystem_error &e) {
    // Folders and files the tools create or read are the user's paths (-o, --output-dir,
    // --input): the path cannot be used, a usage error naming it and the OS reason.
    std::cerr << "error: " << describeFilesystemError(e) << "\n";
    return 1;
  } catch (const std::ios_base::failure &e) {
    std::cerr << "error: cannot read or write a file: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    std::cerr << "error: out of memory (the model or its inputs are too large for this "
                 "machine)\n";
    return 2;
  } catch (const InternalError &e) {
    std::cerr << e.what() << "\n";
    return 3;
  } catch (const std::exception &e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return 3;
  } catch (...) {
    std::cerr << "internal error: unknown exception\n";
    return 3;
  }
}

} // namespace aicf
