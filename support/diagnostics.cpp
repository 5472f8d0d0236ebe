#include "support/diagnostics.h"

namespace aicf {

void throwInternal(const char *file, int line, const std::string &msg) {
  throw InternalError(cat("internal error at ", file, ":", line, ": ", msg));
}

} // namespace aicf
