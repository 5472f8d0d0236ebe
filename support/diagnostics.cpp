#include "support/diagnostics.h"

#include <atomic>
#include <cstdio>

namespace aicf {

void throwInternal(const char *file, int line, const std::string &msg) {
  throw InternalError(cat("internal error at ", file, ":", line, ": ", msg));
}

namespace {
std::atomic<bool> warningsSilenced{false};
} // namespace

void warn(const std::string &msg) {
  if (!warningsSilenced.load(std::memory_order_relaxed))
    std::fprintf(stderr, "warning: %s\n", msg.c_str());
}

void setWarningsSilenced(bool silenced) {
  warningsSilenced.store(silenced);
}

} // namespace aicf
