// File helpers shared by the unit tests that write compiled folders and edit their files.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace aicf::test_files {

// The folders scratchDir made, removed when the test process ends (compiled plans, weights:
// a suite's run once left 200 MB in the temp folder). AICF_KEEP_SCRATCH=1 keeps them to look
// at after a failure.
struct ScratchFolders {
  std::vector<std::filesystem::path> dirs;
  ~ScratchFolders() {
    if (std::getenv("AICF_KEEP_SCRATCH"))
      return;
    for (const auto &d : dirs) {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  }
};
inline ScratchFolders &scratchFolders() {
  static ScratchFolders folders;
  return folders;
}

// A per-process folder under the system temp folder: temp/<prefix><pid>, created on first use
// and removed at exit (ScratchFolders).
inline std::filesystem::path scratchDir(const std::string &prefix) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  if (std::filesystem::create_directories(dir))
    scratchFolders().dirs.push_back(dir);
  return dir;
}

// The build cache (support/build_cache.h, on for the suite) off while in scope: for tests of the
// build itself (parallel parts, byte-identical libraries), which a cached copy would pass
// without building anything.
struct NoBuildCache {
  std::string saved;
  bool had = false;
  NoBuildCache() {
    if (const char *v = std::getenv("AICF_BUILD_CACHE")) {
      saved = v;
      had = true;
    }
    ::unsetenv("AICF_BUILD_CACHE");
  }
  ~NoBuildCache() {
    if (had)
      ::setenv("AICF_BUILD_CACHE", saved.c_str(), 1);
  }
  NoBuildCache(const NoBuildCache &) = delete;
  NoBuildCache &operator=(const NoBuildCache &) = delete;
};

// aicfc and aicf-run as built beside the unit tests (build/tests/aicf_unit -> build/aicfc);
// false where this configuration does not build them (the tests that run them return).
struct Tools {
  std::string aicfc, run;
  explicit operator bool() const { return !aicfc.empty(); }
};
inline Tools builtTools() {
  std::filesystem::path bin =
      std::filesystem::canonical("/proc/self/exe").parent_path().parent_path();
  if (!std::filesystem::exists(bin / "aicfc") || !std::filesystem::exists(bin / "aicf-run"))
    return {};
  return {(bin / "aicfc").string(), (bin / "aicf-run").string()};
}

inline std::string readAll(const std::filesystem::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline void writeAll(const std::filesystem::path &p, const std::string &s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// The exit status of a shell command (a test running aicfc or aicf-run as a user does), its
// output (stdout and stderr) in `out`.
inline int sh(const std::string &cmd, std::string *out = nullptr) {
  std::filesystem::path log =
      std::filesystem::temp_directory_path() / ("aicf_sh_" + std::to_string(::getpid()) + ".log");
  int rc = std::system((cmd + " > '" + log.string() + "' 2>&1").c_str());
  if (out)
    *out = readAll(log);
  std::filesystem::remove(log);
  REQUIRE(WIFEXITED(rc));
  return WEXITSTATUS(rc);
}

} // namespace aicf::test_files
