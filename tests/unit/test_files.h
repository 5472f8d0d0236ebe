// File helpers shared by the unit tests that write compiled folders and edit their files.
#pragma once

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

namespace aicf::test_files {

// A per-process folder under the system temp folder: temp/<prefix><pid>, created on first use.
inline std::filesystem::path scratchDir(const std::string &prefix) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
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
