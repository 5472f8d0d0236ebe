// A cache of built artifacts for generated code, keyed by everything the artifact depends on
// (the command line without its paths, and the source text). Off unless AICF_BUILD_CACHE names a
// directory; the test suite turns it on (tests/CMakeLists.txt): the sanitised unit tests compile
// the very sources the plain ones did, and compiling generated kernels is ~99% of the time of the
// suites that run them. An entry is DIR/<hash>.key (the whole key, compared byte for byte on a
// hit, so a hash collision is a miss), DIR/<hash>.out (the artifact) and DIR/<hash>.log (what
// the build printed, which callers may read: nvcc's register report). Entries are published by
// rename, the key last, so a concurrent reader sees a whole entry or none; a cache that cannot
// be read or written is a miss, never an error.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace aicf {

class BuildCache {
public:
  // The cache AICF_BUILD_CACHE names (created if missing), or nullopt when it is unset or empty.
  static std::optional<BuildCache> fromEnv();
  explicit BuildCache(std::string dir) : dir_(std::move(dir)) {}

  // Copies the artifact stored under `key` to `outPath` and returns the build's output; nullopt
  // when there is none.
  std::optional<std::string> fetch(const std::string &key, const std::string &outPath) const;
  // Stores the artifact at `outPath` and the build's output `log` under `key` (best effort).
  void store(const std::string &key, const std::string &outPath, const std::string &log) const;

private:
  std::string entry(const std::string &key) const; // DIR/<hash of key>
  std::string dir_;
};

// Builds `outPath` from `source` with `command` (its flags, without the input and output paths):
// `build()` writes outPath and returns what the build printed. With AICF_BUILD_CACHE set, an
// artifact stored for the same command and source is copied instead, and a fresh one stored.
std::string cachedBuild(const std::vector<std::string> &command, const std::string &source,
                        const std::string &outPath, const std::function<std::string()> &build);

} // namespace aicf
