// Errors (docs/safety.md): user errors (a bad model, a bad flag, malformed IR text) are
// distinct from internal errors (compiler bugs). Both are exceptions carrying a complete,
// printable message; tools catch them at the top, print `error: <message>` and exit non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace aicf {

// A problem with the user's input. The message names the file, node or line.
class UserError : public std::runtime_error {
public:
  explicit UserError(std::string msg, int exitCode = 2)
      : std::runtime_error(std::move(msg)), exitCode_(exitCode) {}
  int exitCode() const { return exitCode_; }

private:
  int exitCode_;
};

// A broken invariant inside the compiler: a bug in aicf, never the user's fault.
class InternalError : public std::logic_error {
public:
  using std::logic_error::logic_error;
};

// Concatenates anything streamable: cat("node ", name, " has ", n, " inputs").
template <typename... Args>
std::string cat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

[[noreturn]] void throwInternal(const char *file, int line, const std::string &msg);

// A warning: something the user should know that does not stop the tool. Printed on stderr as
// `warning: <message>` unless warnings are silenced (aicfc --quiet).
void warn(const std::string &msg);
void setWarningsSilenced(bool silenced);

} // namespace aicf

// Internal invariant check with a message; active in every build type.
#define AICF_CHECK(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::aicf::throwInternal(__FILE__, __LINE__,                                                    \
                            ::aicf::cat("check failed: " #cond ": ", __VA_ARGS__));                \
  } while (0)
