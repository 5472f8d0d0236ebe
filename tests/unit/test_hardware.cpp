// Tests of the hardware descriptions (target/hardware.h): every built-in loads with the
// datasheet figures, each validation rule gives its exact message (one file per rule under
// testdata/targets/bad/), host detection reads a fake sysfs tree exactly and falls back where
// files are missing, and AICF_HOST_HARDWARE replaces it. Which description a target uses
// (--hardware): tests/unit/test_target.cpp.
#include "target/hardware.h"
#include "target/target.h"

#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

const fs::path kTargets = fs::path(AICF_TESTDATA) / "targets";
const fs::path kSourceTargets = fs::path(AICF_TESTDATA) / ".." / "target" / "hardware";

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return e.what();
  }
  return "(no error)";
}

// Sets NAME to VALUE (unsets with nullopt) for one scope, restoring what was there.
struct ScopedEnv {
  std::string name;
  std::optional<std::string> saved;
  ScopedEnv(std::string n, const std::optional<std::string> &value) : name(std::move(n)) {
    if (const char *old = std::getenv(name.c_str()))
      saved = old;
    if (value)
      setenv(name.c_str(), value->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (saved)
      setenv(name.c_str(), saved->c_str(), 1);
    else
      unsetenv(name.c_str());
  }
};

// AICF_HOST_HARDWARE for one scope (a test run may set it for the golden tests).
struct HostHardwareEnv : ScopedEnv {
  explicit HostHardwareEnv(const std::optional<std::string> &value)
      : ScopedEnv("AICF_HOST_HARDWARE", value) {}
};

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path = fs::temp_directory_path() / cat("aicf_test_hardware_", tick);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string &rel, const std::string &text) const {
    fs::create_directories((path / rel).parent_path());
    std::ofstream(path / rel) << text;
  }
};

const std::string kDetected = "detected (sysfs, /proc/cpuinfo) over builtin:host.yaml";

} // namespace

TEST_CASE("hardware: built-in GPU descriptions carry the datasheet figures") {
  CHECK(builtinHardwareNames() ==
        std::vector<std::string>{"a100", "h100", "h200", "rtx3090", "rtx4090"});

  Hardware a100 = builtinHardware("a100");
  CHECK(a100.name == "a100-sxm4-80gb");
  CHECK(a100.description == "NVIDIA A100 SXM4 80GB");
  CHECK(a100.source == "builtin:a100.yaml");
  CHECK(a100.gpu);
  CHECK(a100.arch == "sm_80");
  CHECK(a100.sms == 108);
  CHECK(a100.dramBytesPerSec == 2039e9);
  CHECK(a100.memoryBytes == 80LL << 30);
  CHECK(a100.l2Bytes == 40LL << 20);
  CHECK(a100.fp32FlopsPerSec == doctest::Approx(19.5e12));
  CHECK(a100.peakFlops() == doctest::Approx(19.5e12));
  CHECK(a100.tensorF16FlopsPerSec == doctest::Approx(312e12));
  CHECK(a100.tensorTf32FlopsPerSec == doctest::Approx(156e12));
  CHECK(a100.warpSize == 32);
  CHECK(a100.regsPerSm == 65536);
  CHECK(a100.maxRegsPerThread == 255);
  CHECK(a100.regAllocUnit == 256);
  CHECK(a100.maxThreadsPerBlock == 1024);
  CHECK(a100.maxThreadsPerSm == 2048);
  CHECK(a100.maxWarpsPerSm() == 64);
  CHECK(a100.maxBlocksPerSm == 32);
  CHECK(a100.smemPerSm == 164 * 1024);
  CHECK(a100.smemPerBlock == 163 * 1024);
  CHECK(a100.smemStaticMax == 48 * 1024);
  CHECK(a100.smemReservedPerBlock == 1024);
  CHECK(a100.smemAllocUnit == 128);
  CHECK(a100.launchUs == 3.0);
  CHECK(a100.cost.alpha == 1.0);
  CHECK(a100.cost.beta == 1.0);
  CHECK(a100.cost.gamma == 1.0);
  CHECK(a100.cost.delta == 0.9);
  CHECK(a100.cost.minOccupancy == 0.0);
  CHECK(a100.summary() ==
        "NVIDIA A100 SXM4 80GB (sm_80, 108 SMs, 2039 GB/s) from builtin:a100.yaml");

  Hardware h100 = builtinHardware("h100");
  CHECK(h100.name == "h100-sxm5");
  CHECK(h100.arch == "sm_90");
  CHECK(h100.sms == 132);
  CHECK(h100.dramBytesPerSec == 3350e9);
  CHECK(h100.fp32FlopsPerSec == doctest::Approx(66.9e12));
  CHECK(h100.tensorF16FlopsPerSec == doctest::Approx(989.4e12));
  CHECK(h100.tensorTf32FlopsPerSec == doctest::Approx(494.7e12));
  CHECK(h100.l2Bytes == 50LL << 20);
  CHECK(h100.smemPerSm == 228 * 1024);
  CHECK(h100.smemPerBlock == 227 * 1024);
  CHECK(h100.regsPerSm == 65536);
  CHECK(h100.maxThreadsPerSm == 2048);
  CHECK(h100.maxBlocksPerSm == 32);
  CHECK(h100.memoryBytes == 80LL << 30);

  Hardware h200 = builtinHardware("h200");
  CHECK(h200.arch == "sm_90");
  CHECK(h200.dramBytesPerSec == 4800e9);
  CHECK(h200.memoryBytes == 141LL << 30);
  CHECK(h200.sms == h100.sms);
  CHECK(h200.fp32FlopsPerSec == h100.fp32FlopsPerSec);
  CHECK(h200.tensorF16FlopsPerSec == h100.tensorF16FlopsPerSec);
  CHECK(h200.smemPerBlock == h100.smemPerBlock);
  CHECK(h200.summary() ==
        "NVIDIA H200 SXM 141GB (sm_90, 132 SMs, 4800 GB/s) from builtin:h200.yaml");

  Hardware r4090 = builtinHardware("rtx4090");
  CHECK(r4090.arch == "sm_89");
  CHECK(r4090.sms == 128);
  CHECK(r4090.dramBytesPerSec == 1008e9);
  CHECK(r4090.fp32FlopsPerSec == doctest::Approx(82.6e12));
  CHECK(r4090.tensorF16FlopsPerSec == doctest::Approx(165.2e12));
  CHECK(r4090.tensorTf32FlopsPerSec == doctest::Approx(82.6e12));
  CHECK(r4090.l2Bytes == 72LL << 20);
  CHECK(r4090.smemPerSm == 100 * 1024);
  CHECK(r4090.smemPerBlock == 99 * 1024);
  CHECK(r4090.maxThreadsPerSm == 1536);
  CHECK(r4090.maxWarpsPerSm() == 48);
  CHECK(r4090.maxBlocksPerSm == 24);
  CHECK(r4090.memoryBytes == 24LL << 30);

  Hardware r3090 = builtinHardware("rtx3090");
  CHECK(r3090.arch == "sm_86");
  CHECK(r3090.sms == 82);
  CHECK(r3090.dramBytesPerSec == 936e9);
  CHECK(r3090.fp32FlopsPerSec == doctest::Approx(35.6e12));
  CHECK(r3090.tensorF16FlopsPerSec == doctest::Approx(71e12));
  CHECK(r3090.tensorTf32FlopsPerSec == doctest::Approx(35.6e12));
  CHECK(r3090.l2Bytes == 6LL << 20);
  CHECK(r3090.smemPerSm == 100 * 1024);
  CHECK(r3090.smemPerBlock == 99 * 1024);
  CHECK(r3090.maxThreadsPerSm == 1536);
  CHECK(r3090.maxBlocksPerSm == 16);
  CHECK(r3090.memoryBytes == 24LL << 30);

  // Every launch costs 3 µs, and the embedded text is the file in the source tree.
  for (const std::string &name : builtinHardwareNames()) {
    CAPTURE(name);
    Hardware built = builtinHardware(name);
    CHECK(built.launchUs == 3.0);
    Hardware onDisk = loadHardwareFile((kSourceTargets / (name + ".yaml")).string());
    CHECK(onDisk.name == built.name);
    CHECK(onDisk.sms == built.sms);
    CHECK(onDisk.dramBytesPerSec == built.dramBytesPerSec);
    CHECK(onDisk.smemPerBlock == built.smemPerBlock);
    CHECK(onDisk.source == (kSourceTargets / (name + ".yaml")).string());
  }

  CHECK(errorOf([] { builtinHardware("v100"); }) ==
        "unknown hardware 'v100' (a100, h100, h200, rtx3090, rtx4090, or a .yaml file)");
}

TEST_CASE("hardware: the CI host description and host.yaml's defaults") {
  Hardware ci = loadHardwareFile((kTargets / "ci-host.yaml").string());
  CHECK(!ci.gpu);
  CHECK(ci.name == "ci-host");
  CHECK(ci.arch == "x86-64");
  CHECK(ci.cores == 2);
  CHECK(ci.ghz == 2.1);
  CHECK(ci.vectorBits == 512);
  CHECK(ci.vectorLanesF32() == 16);
  CHECK(ci.fmaUnits == 2);
  CHECK(ci.l1dBytes == 48 * 1024);
  CHECK(ci.l2Bytes == 2 * 1024 * 1024);
  CHECK(ci.l3Bytes == 105LL * 1024 * 1024);
  CHECK(ci.dramBytesPerSec == 20e9);
  CHECK(ci.memoryBytes == 0);
  CHECK(ci.l1BytesPerCycle == 128);
  CHECK(ci.l2BytesPerCycle == 48);
  CHECK(ci.l3BytesPerCycle == 16);
  CHECK(ci.launchUs == 0.5);
  CHECK(ci.peakFlops() == doctest::Approx(2 * 2.1e9 * 16 * 2 * 2));
  CHECK(ci.fp32FlopsPerSec == ci.peakFlops());
  CHECK(ci.summary() == "Intel(R) Xeon(R) Processor @ 2.10GHz (x86-64, 2 cores, AVX-512, 2.10 GHz, "
                        "L2 2048 KiB) from " +
                            (kTargets / "ci-host.yaml").string());

  Hardware host = loadHardwareFile((kSourceTargets / "host.yaml").string());
  CHECK(host.name == "host");
  CHECK(host.cores == 1);
  CHECK(host.ghz == 2.0);
  CHECK(host.vectorBits == 128);
  CHECK(host.fmaUnits == 2);
  CHECK(host.l1dBytes == 32 * 1024);
  CHECK(host.l2Bytes == 1024 * 1024);
  CHECK(host.l3Bytes == 0);
  CHECK(host.l1BytesPerCycle == 128);
  CHECK(host.l2BytesPerCycle == 48);
  CHECK(host.l3BytesPerCycle == 16);
  CHECK(host.dramBytesPerSec == 20e9);
  CHECK(host.launchUs == 0.5);
}

TEST_CASE("hardware: the schema's example parses from a string") {
  Hardware h = parseHardwareYaml(R"(
name: a100-sxm4-80gb
description: NVIDIA A100 SXM4 80GB
kind: gpu            # gpu | cpu
arch: sm_80
memory: {bytes: 85899345920, bandwidth_gbs: 2039, l2_bytes: 41943040}
compute: {fp32_tflops: 19.5, fp16_tensor_tflops: 312, tf32_tensor_tflops: 156}
sm: {count: 108, warp_size: 32, registers: 65536, max_registers_per_thread: 255, register_alloc_unit: 256,
     max_threads_per_block: 1024, max_threads: 2048, max_blocks: 32,
     shared_bytes: 167936, shared_bytes_per_block: 166912, static_shared_max: 49152,
     shared_reserved_per_block: 1024, shared_alloc_unit: 128}
launch_overhead_us: 3.0
cost: {alpha: 1.0, beta: 1.0, gamma: 1.0, delta: 0.9, min_occupancy: 0.0}
)",
                                 "example.yaml");
  CHECK(h.source == "example.yaml");
  CHECK(h.sms == 108);
  CHECK(h.smemPerBlock == 166912);

  CHECK(errorOf([] { parseHardwareYaml("", "empty.yaml"); }) ==
        "empty.yaml: expected a map of keys, got nothing");
  CHECK(errorOf([] { loadHardwareFile("/nonexistent/x.yaml"); }) ==
        "cannot open /nonexistent/x.yaml");
}

TEST_CASE("hardware: each invalid description gives its exact message") {
  const std::map<std::string, std::string> expected = {
      {"malformed", "8:3: end of map flow not found"}, // FILE:LINE:COL, 1-based
      {"not_a_map", "expected a map of keys, got a sequence"},
      {"missing_kind", "missing key 'kind'"},
      {"bad_kind", "kind: expected 'gpu' or 'cpu', got 'tpu'"},
      {"unknown_key", "unknown key 'sm.foo'"},
      {"unknown_top_key", "unknown key 'launch_overhead'"},
      {"duplicate_key", "duplicate key 'sm.count'"},
      {"missing_key", "missing key 'sm.count'"},
      {"missing_section", "missing key 'sm'"},
      {"section_not_map", "sm: expected a map, got '5'"},
      {"negative", "sm.count: expected a positive integer, got '-3'"},
      {"not_integer", "sm.warp_size: expected a positive integer, got '32.5'"},
      {"not_number", "compute.fp32_tflops: expected a positive number, got 'fast'"},
      {"zero_bandwidth", "memory.bandwidth_gbs: expected a positive number, got '0'"},
      {"empty_name", "name: expected a non-empty string, got nothing"},
      {"delta_range", "cost.delta: expected a number in [0, 1], got '1.5'"},
      {"min_occupancy_range", "cost.min_occupancy: expected a number in [0, 1], got '-0.25'"},
      {"gpu_arch", "arch: expected sm_<number> for a gpu, got 'ampere'"},
      {"gpu_with_cpu", "key 'cpu' is not valid for kind gpu"},
      {"cpu_with_sm", "key 'sm' is not valid for kind cpu"},
      {"cpu_with_l2", "key 'memory.l2_bytes' is not valid for kind cpu"},
      {"cpu_arch", "arch: expected 'x86-64' or 'aarch64', got 'riscv64'"},
      {"vector_bits", "cpu.vector_bits: expected a multiple of 32, got '100'"},
      {"too_many_cores", "cpu.cores: expected at most 1024, got '4096'"},
      {"smem_per_block", "sm.shared_bytes_per_block (200000) exceeds sm.shared_bytes (167936)"},
      {"static_smem", "sm.static_shared_max (180000) exceeds sm.shared_bytes_per_block (166912)"},
      {"threads_per_block", "sm.max_threads_per_block (4096) exceeds sm.max_threads (2048)"},
      {"warp_multiple", "sm.max_threads (2040) is not a multiple of sm.warp_size (32)"},
      {"regs_per_thread", "sm.max_registers_per_thread (70000) exceeds sm.registers (65536)"},
  };
  // Every file under bad/ has its message here, and every message its file.
  size_t files = 0;
  for (const auto &e : fs::directory_iterator(kTargets / "bad")) {
    std::string stem = e.path().stem().string();
    CAPTURE(stem);
    REQUIRE(expected.count(stem));
    ++files;
    std::string path = e.path().string();
    std::string sep = stem == "malformed" ? ":" : ": ";
    CHECK(errorOf([&] { loadHardwareFile(path); }) == path + sep + expected.at(stem));
  }
  CHECK(files == expected.size());
}

TEST_CASE("hardware: host detection reads a fake sysfs tree") {
  HostHardwareEnv env(std::nullopt);

  Hardware h = detectHostHardware((kTargets / "fake_sys").string());
  CHECK(!h.gpu);
  CHECK(h.name == "host");
  CHECK(h.description == "AMD EPYC 7B13 64-Core Processor");
  CHECK(h.arch == "x86-64");
  CHECK(h.cores == 4);            // processor lines
  CHECK(h.ghz == 3.5);            // cpufreq's maximum beats "cpu MHz"
  CHECK(h.vectorBits == 256);     // avx2, no avx512f
  CHECK(h.l1dBytes == 32 * 1024); // index0 (index1 is the instruction cache)
  CHECK(h.l2Bytes == 512 * 1024); // "512K"
  CHECK(h.l3Bytes == 32LL << 20); // "32M"
  CHECK(h.fmaUnits == 2);         // host.yaml's defaults for what sysfs cannot tell
  CHECK(h.l1BytesPerCycle == 128);
  CHECK(h.l2BytesPerCycle == 48);
  CHECK(h.l3BytesPerCycle == 16);
  CHECK(h.dramBytesPerSec == 20e9);
  CHECK(h.launchUs == 0.5);
  CHECK(h.source == kDetected);
  CHECK(h.peakFlops() == doctest::Approx(4 * 3.5e9 * 8 * 2 * 2));
  CHECK(h.fp32FlopsPerSec == h.peakFlops());
  CHECK(h.summary() == "AMD EPYC 7B13 64-Core Processor (x86-64, 4 cores, AVX2, 3.50 GHz, L2 512 "
                       "KiB) from " +
                           kDetected);

  // aarch64: Features instead of flags, no model name, no sysfs at all.
  Hardware arm = detectHostHardware((kTargets / "fake_sys_arm").string());
  CHECK(arm.arch == "aarch64");
  CHECK(arm.cores == 2);
  CHECK(arm.vectorBits == 128);
  CHECK(arm.description == "host CPU");
  CHECK(arm.ghz == 2.0);
  CHECK(arm.l1dBytes == 32 * 1024);
  CHECK(arm.l2Bytes == 1024 * 1024);
  CHECK(arm.l3Bytes == 0);
  CHECK(arm.source == kDetected + "; defaults for description, ghz, l1d_bytes, l2_bytes, l3_bytes");
  CHECK(arm.summary() ==
        "host CPU (aarch64, 2 cores, NEON, 2.00 GHz, L2 1024 KiB) from " + arm.source);
}

TEST_CASE("hardware: host detection falls back where files are missing") {
  HostHardwareEnv env(std::nullopt);

  // Nothing at all: host.yaml throughout (arch from the compiler), no crash.
  TempDir empty;
  Hardware none = detectHostHardware((empty.path / "nothing-here").string());
  CHECK(none.cores == 1);
  CHECK(none.ghz == 2.0);
  CHECK(none.vectorBits == 128);
  CHECK(none.l1dBytes == 32 * 1024);
  CHECK(none.l2Bytes == 1024 * 1024);
  CHECK(none.l3Bytes == 0);
  CHECK(none.source ==
        kDetected + "; defaults for description, cores, ghz, vector_bits, l1d_bytes, l2_bytes, "
                    "l3_bytes");

  // The clock from "cpu MHz" without cpufreq, then from the model name; AVX-512; caches
  // listed without an L3 mean there is none (not a fallback).
  TempDir t;
  const std::string flags = "flags\t\t: fpu sse sse2 avx avx2 avx512f avx512bw\n";
  t.write("proc/cpuinfo", "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.10GHz\n"
                          "cpu MHz\t\t: 2600.000\n" +
                              flags);
  t.write("sys/devices/system/cpu/cpu0/cache/index0/level", "1\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index0/type", "Data\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index0/size", "48K\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index2/level", "2\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index2/type", "Unified\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index2/size", "2048K\n");
  Hardware mhz = detectHostHardware(t.path.string());
  CHECK(mhz.cores == 1);
  CHECK(mhz.ghz == 2.6);
  CHECK(mhz.vectorBits == 512);
  CHECK(mhz.l1dBytes == 48 * 1024);
  CHECK(mhz.l2Bytes == 2048 * 1024);
  CHECK(mhz.l3Bytes == 0);
  CHECK(mhz.source == kDetected);

  CHECK(mhz.fmaUnits == 2);

  // AMD family 25 (Zen 4) with AVX-512: one 512-bit FMA per cycle (two 256-bit halves).
  t.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n"
                          "model name\t: AMD EPYC\ncpu MHz\t\t: 2600.000\n" +
                              flags);
  Hardware zen4 = detectHostHardware(t.path.string());
  CHECK(zen4.vectorBits == 512);
  CHECK(zen4.fmaUnits == 1);
  t.write("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\n"
                          "model name\t: AMD EPYC\ncpu MHz\t\t: 2600.000\n" +
                              flags);
  CHECK(detectHostHardware(t.path.string()).fmaUnits == 2); // Zen 5: full-width pipes

  t.write("proc/cpuinfo", "processor\t: 0\nprocessor\t: 1\n"
                          "model name\t: Intel(R) Xeon(R) Processor @ 2.10GHz\n"
                          "flags\t\t: fpu sse sse2\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index3/level", "3\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index3/type", "Unified\n");
  t.write("sys/devices/system/cpu/cpu0/cache/index3/size", "105M\n");
  Hardware named = detectHostHardware(t.path.string());
  CHECK(named.cores == 2);
  CHECK(named.ghz == 2.1);
  CHECK(named.vectorBits == 128);
  CHECK(named.l3Bytes == 105LL << 20);
  CHECK(named.summary() == "Intel(R) Xeon(R) Processor @ 2.10GHz (x86-64, 2 cores, SSE, 2.10 GHz, "
                           "L2 2048 KiB) from " +
                               kDetected);

  // The real machine: whatever it is, a usable description with the cores we may run on.
  Hardware real = detectHostHardware("/");
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  CHECK(real.cores == CPU_COUNT(&set));
  CHECK(real.ghz > 0);
  CHECK(real.vectorBits >= 128);
  CHECK(real.l1dBytes > 0);
  CHECK(real.source.rfind(kDetected, 0) == 0);
}

// bench-costmodel's calibration: the fake tree's AVX2 core (8 lanes, 2 FMA pipes) measured at
// 48 GFLOP/s runs at 48 / (8 x 2 x 2) = 1.5 GHz; one core planned for.
TEST_CASE("hardware: AICF_HOST_PEAK_GFLOPS and AICF_HOST_CORES set the detected clock and cores") {
  HostHardwareEnv env(std::nullopt);
  {
    ScopedEnv peak("AICF_HOST_PEAK_GFLOPS", std::string("48")), cores("AICF_HOST_CORES", "1");
    Hardware h = detectHostHardware((kTargets / "fake_sys").string());
    CHECK(h.ghz == doctest::Approx(1.5));
    CHECK(h.cores == 1);
    CHECK(h.peakFlops() == doctest::Approx(48e9));
    CHECK(h.source == std::string(kDetected) +
                          "; clock from AICF_HOST_PEAK_GFLOPS=48; cores from AICF_HOST_CORES=1");
  }
  {
    ScopedEnv peak("AICF_HOST_PEAK_GFLOPS", std::string("fast"));
    CHECK(errorOf([] { detectHostHardware((kTargets / "fake_sys").string()); }) ==
          "AICF_HOST_PEAK_GFLOPS=fast: expected a positive number");
  }
  for (const char *bad : {"0", "1025", "-2", "many"}) {
    CAPTURE(bad);
    ScopedEnv cores("AICF_HOST_CORES", std::string(bad));
    CHECK(errorOf([] { detectHostHardware((kTargets / "fake_sys").string()); }) ==
          cat("AICF_HOST_CORES=", bad, ": expected a whole number from 1 to 1024"));
  }
  {
    ScopedEnv cores("AICF_HOST_CORES", std::string("1024"));
    CHECK(detectHostHardware((kTargets / "fake_sys").string()).cores == 1024);
  }
}

TEST_CASE("hardware: AICF_HOST_HARDWARE replaces detection") {
  const std::string ci = (kTargets / "ci-host.yaml").string();
  {
    HostHardwareEnv env(ci);
    Hardware h = detectHostHardware((kTargets / "fake_sys").string());
    CHECK(h.name == "ci-host");
    CHECK(h.source == ci);
    CHECK(h.cores == 2);
    CHECK(h.vectorBits == 512);
    CHECK(Target::parse("cpu").hw.name == "ci-host");
  }
  {
    const std::string gpu = (kSourceTargets / "a100.yaml").string();
    HostHardwareEnv env(gpu);
    CHECK(errorOf([] { detectHostHardware(); }) ==
          "AICF_HOST_HARDWARE=" + gpu + ": a GPU description cannot describe the host");
  }
  {
    HostHardwareEnv env(std::string("/nonexistent/host.yaml"));
    CHECK(errorOf([] { detectHostHardware(); }) ==
          "AICF_HOST_HARDWARE=/nonexistent/host.yaml: cannot open the file");
  }
}
