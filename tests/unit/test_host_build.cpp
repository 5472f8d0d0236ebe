// The host compiler's command line (backend/host/host_build.cpp hostCompileFlags): the flags
// every generated library is built with, and the GCC-only parameter that keeps large unrolled
// loops in GCC's induction-variable optimisation (docs/benchmarks.md "Induction variables in
// large unrolled steps"), which clang would reject as unknown.
#include "backend/host/host_build.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

using namespace aicf;

namespace {

bool has(const std::vector<std::string> &argv, const std::string &flag) {
  return std::find(argv.begin(), argv.end(), flag) != argv.end();
}

const char *kIvParam = "--param=iv-max-considered-uses=4000";

} // namespace

#if defined(__x86_64__) // the -march names are x86's
TEST_CASE("host build: g++ gets the induction-variable bound, after the fixed flags") {
  HostBuildOptions o;
  o.compiler = "g++";
  o.cpuArch = "x86-64-v2";
  o.extraFlags = "-DX=1  -g";
  std::vector<std::string> argv = hostCompileFlags(o);
  std::vector<std::string> head = {
      "g++",   "-std=c++17",      "-O3", "-fopenmp-simd", "-fno-trapping-math",
      "-fPIC", "-march=x86-64-v2"};
  REQUIRE(argv.size() >= head.size());
  CHECK(std::vector<std::string>(argv.begin(), argv.begin() + long(head.size())) == head);
  CHECK(has(argv, kIvParam));
  CHECK_FALSE(has(argv, "-mprefer-vector-width=512")); // x86-64-v2 has no AVX-512
  // The user's extra flags come last, split on whitespace, so they can override any of ours.
  REQUIRE(argv.size() >= 2);
  CHECK(argv[argv.size() - 2] == "-DX=1");
  CHECK(argv.back() == "-g");
}

TEST_CASE("host build: a part with AVX-512 prefers 512-bit vectors") {
  HostBuildOptions o;
  o.compiler = "g++";
  o.cpuArch = "skylake-avx512";
  CHECK(has(hostCompileFlags(o), "-mprefer-vector-width=512"));
}

TEST_CASE("host build: clang is not given GCC's parameters") {
  if (std::system("clang++ --version > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: no clang++ on this machine");
    return;
  }
  HostBuildOptions o;
  o.compiler = "clang++";
  o.cpuArch = "x86-64-v2";
  std::vector<std::string> argv = hostCompileFlags(o);
  CHECK(argv.front() == "clang++");
  CHECK_FALSE(has(argv, kIvParam));
}
#endif
