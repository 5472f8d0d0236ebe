// File helpers shared by the unit tests that write compiled folders and edit their files.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

} // namespace aicf::test_files
