// The host compiler's command line (backend/host/host_build.cpp hostCompileFlags): the flags
// every generated library is built with, and the GCC-only parameter that keeps large unrolled
// loops in GCC's induction-variable optimisation (docs/benchmarks.md "Induction variables in
// large unrolled steps"), which clang would reject as unknown; and the build cache
// (support/build_cache.h) that reuses a library compiled from the same source and flags.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "kir/kir_parser.h"
#include "support/build_cache.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

using namespace aicf;
using namespace aicf::test_files;

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

// A serial loop (no `omp simd`) that reads twelve scalars beside the element it stores, as a
// requantizing epilogue does. g++ vectorises it only when it knows the buffers apart: from
// restrict parameters (the printer's NAME_body) it does; from restrict locals cast out of args[]
// it checked each load against the store at run time and gave up past ten such checks.
TEST_CASE("host build: a loop reading many buffers is vectorised without alias checks") {
  if (std::system("g++ --version > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: no g++ on this machine");
    return;
  }
  std::string params, sum = "X[b, j]";
  for (int i = 0; i < 12; ++i) {
    params += "S" + std::to_string(i) + ": global f32[] in, ";
    sum = "(" + sum + " + S" + std::to_string(i) + "[]) / S" + std::to_string(i) + "[]";
  }
  const std::string kir = "kernel @many_reads recipe(hand_written) grid(b: 4) block(t: 1)\n"
                          "    (X: global f32[4,64] in, " +
                          params +
                          "Y: global f32[4,64] out) {\n"
                          "  region t {\n"
                          "    for j in 0 .. 64 {\n"
                          "      Y[b, j] = " +
                          sum +
                          "\n"
                          "    }\n"
                          "  }\n"
                          "}\n";
  namespace fs = std::filesystem;
  fs::path dir = scratchDir("aicf_host_restrict_");
  NoBuildCache noCache; // the compiler's report, not a cached one
  HostBuildOptions o;
  o.compiler = "g++";
  o.cpuArch = "x86-64-v3";
  o.extraFlags = "-fopt-info-vec";
  std::string report = compileHostSource(printHostSource({kir::parseKernel(kir, "many_reads.kir")}),
                                         (dir / "k.cpp").string(), (dir / "k.so").string(), o);
  INFO(report);
  CHECK(report.find("loop vectorized") != std::string::npos);
  CHECK(report.find("possible aliasing") == std::string::npos);
}

// A vectorised loop reading through a permuting index (a transposed conv's phase layout): where
// g++ 12 does not use the gather instruction (its generic tuning, which -march=native gives a
// CPU it does not know, as x86-64-v4 does), it emulates a gather of 16 floats only from 32-bit
// offsets, so the printer casts a gathering load's offset (not affine in the lane) to int32;
// the contiguous loads keep theirs.
TEST_CASE("host build: a gathering load in a vectorised loop is vectorised") {
  if (std::system("g++ --version > /dev/null 2>&1") != 0) {
    MESSAGE("skipped: no g++ on this machine");
    return;
  }
  const std::string kir = "kernel @gather recipe(hand_written) grid(b: 32) block(t: 1)\n"
                          "    (X: global f32[512] in, Y: global f32[512] out) {\n"
                          "  region t {\n"
                          "    for v in 0 .. 16 vectorize {\n"
                          "      var i: i64 = b * 16 + v\n"
                          "      Y[i] = sigmoid(X[i / 2 % 16 * 32 + i / 32 * 2 + i % 2]) + X[i]\n"
                          "    }\n"
                          "  }\n"
                          "}\n";
  std::string src = printHostSource({kir::parseKernel(kir, "gather.kir")});
  CHECK(src.find("X[static_cast<int32_t>(i / 2L % 16L * 32L + i / 32L * 2L + i % 2L)]") !=
        std::string::npos);
  CHECK(src.find("X[i]") != std::string::npos);
  namespace fs = std::filesystem;
  fs::path dir = scratchDir("aicf_host_gather_");
  NoBuildCache noCache;
  HostBuildOptions o;
  o.compiler = "g++";
  o.cpuArch = "x86-64-v4";
  o.extraFlags = "-fopt-info-vec";
  std::string report = compileHostSource(src, (dir / "k.cpp").string(), (dir / "k.so").string(), o);
  INFO(src);
  INFO(report);
  CHECK(report.find("loop vectorized using 64 byte vectors") != std::string::npos);
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

TEST_CASE("host build: the build cache reuses a library only for the same source and flags") {
  namespace fs = std::filesystem;
  fs::path dir = scratchDir("aicf_build_cache_") / "cache";
  fs::remove_all(dir);
  BuildCache cache(dir.string());
  fs::create_directories(dir);
  fs::path art = dir.parent_path() / "artifact.bin", got = dir.parent_path() / "got.bin";
  writeAll(art, "library bytes");
  CHECK_FALSE(cache.fetch("flags\n--\nsource", got.string()));
  cache.store("flags\n--\nsource", art.string(), "compiler said this");
  std::optional<std::string> log = cache.fetch("flags\n--\nsource", got.string());
  REQUIRE(log);
  CHECK(*log == "compiler said this");
  CHECK(readAll(got) == "library bytes");
  CHECK_FALSE(cache.fetch("flags -O2\n--\nsource", got.string()));
  CHECK_FALSE(cache.fetch("flags\n--\nsource ", got.string()));
  // An entry whose key differs (as a hash collision would) is a miss, never the wrong library.
  for (const fs::directory_entry &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".key")
      writeAll(e.path(), "flags\n--\nother source");
  CHECK_FALSE(cache.fetch("flags\n--\nsource", got.string()));
  // No temporary files are left beside the entries.
  int files = 0;
  for (const fs::directory_entry &e : fs::directory_iterator(dir)) {
    CHECK(e.path().string().find(".tmp") == std::string::npos);
    ++files;
  }
  CHECK(files == 3);
}

TEST_CASE("host build: with AICF_BUILD_CACHE a second compile of a source is a copy") {
  namespace fs = std::filesystem;
  fs::path root = scratchDir("aicf_build_cache_env_");
  fs::remove_all(root / "cache");
  NoBuildCache saved; // restores the suite's setting afterwards
  ::setenv("AICF_BUILD_CACHE", (root / "cache").c_str(), 1);
  const std::string src = "extern \"C\" int aicf_cache_probe() { return 42; }\n";
  compileHostSource(src, (root / "a.cpp").string(), (root / "a.so").string());
  size_t entries = std::distance(fs::directory_iterator(root / "cache"), {});
  CHECK(entries == 3);
  // A hit writes the source too and returns the first compile's output; the library is the
  // first one.
  std::string first = readAll(
      root / "cache" / (fs::directory_iterator(root / "cache")->path().stem().string() + ".log"));
  CHECK(compileHostSource(src, (root / "b.cpp").string(), (root / "b.so").string()) == first);
  CHECK(readAll(root / "b.so") == readAll(root / "a.so"));
  CHECK(readAll(root / "b.cpp") == src);
  // Other flags: compiled again, a second entry.
  HostBuildOptions o;
  o.extraFlags = "-DAICF_OTHER=1";
  compileHostSource(src, (root / "c.cpp").string(), (root / "c.so").string(), o);
  CHECK(std::distance(fs::directory_iterator(root / "cache"), {}) == 6);
}
