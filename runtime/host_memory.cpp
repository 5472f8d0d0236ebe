// See host_memory.h.
#include "runtime/host_memory.h"

#include "runtime/plan_read.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace aicf::rt {

Aligned::Aligned(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  size_t rounded = bytes > SIZE_MAX - kHuge ? 0 : std::max<size_t>((bytes + 63) / 64 * 64, 64);
  bool huge = rounded >= kHuge;
  if (huge)
    rounded = (rounded + kHuge - 1) / kHuge * kHuge;
  ptr = rounded ? std::aligned_alloc(huge ? kHuge : 64, rounded) : nullptr;
  if (!ptr)
    throw Error(cat("cannot allocate ", bytes, " bytes"));
#ifdef MADV_HUGEPAGE
  if (huge)
    madvise(ptr, rounded, MADV_HUGEPAGE);
#endif
  std::memset(ptr, 0, rounded);
}

Aligned::~Aligned() {
  std::free(ptr);
}

WeightsMode weightsModeFromEnv() {
  const char *env = std::getenv("AICF_WEIGHTS");
  if (!env || !*env || std::strcmp(env, "map") == 0)
    return WeightsMode::Map;
  if (std::strcmp(env, "copy") == 0)
    return WeightsMode::Copy;
  throw Error(cat("AICF_WEIGHTS='", env,
                  "': expected map (weights.bin mapped read-only, shared between processes) or "
                  "copy (read into private huge pages)"));
}

const char *weightsModeName(WeightsMode m) {
  return m == WeightsMode::Map ? "map" : "copy";
}

namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

WeightsImage::WeightsImage(const std::string &path, int64_t bytes, WeightsMode mode)
    : bytes_(bytes), mode_(mode) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0)
    throw Error(cat("cannot open ", path, ": ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0)
    throw Error(cat("cannot open ", path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    throw Error(cat(path, ": not a regular file"));
  if (static_cast<int64_t>(st.st_size) != bytes)
    throw Error(cat(path, ": ", static_cast<int64_t>(st.st_size), " bytes, plan.yaml says ", bytes,
                    " (truncated or wrong file)"));
  if (bytes == 0) { // nothing to read; the kernels are given a valid, unread base
    static const char kNone[64] = {};
    data_ = kNone;
    return;
  }
  size_t size = static_cast<size_t>(bytes);
  if (mode == WeightsMode::Map) {
    // MAP_PRIVATE and read-only: the page cache's pages themselves, shared by every mapping of
    // the file; nothing writes them (a write would fault, not reach the file).
    void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED)
      throw Error(cat("cannot map ", path, ": ", std::strerror(errno)));
    map_ = p;
    data_ = static_cast<const char *>(p);
#ifdef MADV_WILLNEED
    ::madvise(p, size, MADV_WILLNEED); // read ahead now: the first run reads every page
#endif
    return;
  }
  copy_ = std::make_unique<Aligned>(size);
  char *dst = static_cast<char *>(copy_->ptr);
  for (size_t done = 0; done < size;) {
    ssize_t n = ::pread(f.fd, dst + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error(cat("cannot read ", path, n < 0 ? cat(": ", std::strerror(errno)) : ""));
    done += static_cast<size_t>(n);
  }
  data_ = dst;
}

WeightsImage::~WeightsImage() {
  if (map_)
    ::munmap(map_, static_cast<size_t>(bytes_));
}

} // namespace aicf::rt
