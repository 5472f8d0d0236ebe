// See build_cache.h.
#include "support/build_cache.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <utility>

namespace aicf {

namespace fs = std::filesystem;

namespace {

// FNV-1a, 64 bits: only spreads entries over names (a hit compares the whole key).
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool readFile(const std::string &path, std::string &out) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return false;
  out.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return !f.bad();
}

} // namespace

std::optional<BuildCache> BuildCache::fromEnv() {
  const char *dir = std::getenv("AICF_BUILD_CACHE");
  if (!dir || !*dir)
    return std::nullopt;
  std::error_code ec;
  fs::create_directories(dir, ec);
  return BuildCache(dir);
}

std::string BuildCache::entry(const std::string &key) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(fnv1a(key)));
  return (fs::path(dir_) / name).string();
}

std::optional<std::string> BuildCache::fetch(const std::string &key,
                                             const std::string &outPath) const {
  const std::string e = entry(key);
  std::string stored, log;
  if (!readFile(e + ".key", stored) || stored != key || !readFile(e + ".log", log))
    return std::nullopt;
  // Copied beside outPath and renamed over it: a new file, as the linker writes one, never the
  // library a process may have loaded rewritten in place.
  static std::atomic<int> serial{0};
  const std::string tmp =
      outPath + ".cached" + std::to_string(::getpid()) + "." + std::to_string(serial++);
  std::error_code ec;
  fs::copy_file(e + ".out", tmp, fs::copy_options::overwrite_existing, ec);
  if (!ec)
    fs::rename(tmp, outPath, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return std::nullopt;
  }
  return log;
}

void BuildCache::store(const std::string &key, const std::string &outPath,
                       const std::string &log) const {
  const std::string e = entry(key);
  static std::atomic<int> serial{0};
  const std::string tmp = e + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(serial++);
  auto removeTemps = [&] {
    std::error_code ignored;
    for (const char *ext : {".out", ".log", ".key"})
      fs::remove(tmp + ext, ignored);
  };
  std::error_code ec;
  fs::copy_file(outPath, tmp + ".out", fs::copy_options::overwrite_existing, ec);
  bool written = !ec;
  for (const auto &[ext, text] : {std::pair<const char *, const std::string &>{".log", log},
                                  std::pair<const char *, const std::string &>{".key", key}}) {
    std::ofstream f(tmp + ext, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    written = written && bool(f);
  }
  if (written) {
    for (const char *ext : {".out", ".log", ".key"}) { // the key last: it publishes the entry
      fs::rename(tmp + ext, e + ext, ec);
      if (ec)
        break;
    }
  }
  removeTemps();
}

std::string cachedBuild(const std::vector<std::string> &command, const std::string &source,
                        const std::string &outPath, const std::function<std::string()> &build) {
  std::optional<BuildCache> cache = BuildCache::fromEnv();
  if (!cache)
    return build();
  std::string key;
  for (const std::string &a : command)
    key += a + '\n';
  key += "--\n" + source;
  if (std::optional<std::string> log = cache->fetch(key, outPath))
    return *log;
  std::string output = build();
  cache->store(key, outPath, output);
  return output;
}

} // namespace aicf
