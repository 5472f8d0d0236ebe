// Hardware descriptions for the planner (docs/cost-model.md, issue 10): what a target can do and
// what it limits. GPU descriptions are YAML files under target/hardware/ (compiled into the binary,
// so a plan never depends on where the tool is installed); the host CPU is detected from sysfs
// and /proc/cpuinfo over target/hardware/host.yaml's defaults, and any description can be
// replaced by a file (`aicfc --hardware FILE.yaml`, or AICF_HOST_HARDWARE for the host).
// Every field is validated on load: unknown or missing keys and out-of-range values are errors
// naming the file and the key. Which description a target uses: target/target.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aicf {

// The weights of seed 001's cost: α·traffic + β·latency + γ·spill − δ·parallelism, each term a
// time (see plan/cost_model.h).
struct CostCoefficients {
  double alpha = 1.0;        // memory-traffic time
  double beta = 1.0;         // latency: launch overhead and serial dependency chains
  double gamma = 1.0;        // register-spill traffic time
  double delta = 0.9;        // share of min(compute, memory) that concurrency overlaps
  double minOccupancy = 0.0; // GPU: candidates below this occupancy are rejected
};

struct Hardware {
  std::string name;        // "a100-sxm4-80gb", "host"
  std::string description; // "NVIDIA A100 SXM4 80GB"
  std::string source;      // "builtin:a100.yaml", a file path, or "detected (...)"
  bool gpu = false;        // a GPU's description; also its Target's kind (Target::gpu(), target.h)
  std::string arch;        // GPU: "sm_80"; host: "x86-64" / "aarch64"

  // Memory system.
  double dramBytesPerSec = 0; // GPU: HBM / GDDR; host: the whole socket's DRAM bandwidth
  int64_t memoryBytes = 0;    // device memory (GPU) or 0 when unknown (host)
  int64_t l2Bytes = 0;        // GPU: the device L2; host: L2 per core
  double launchUs = 0;        // per-kernel launch / dispatch overhead

  // GPU compute and limits (CUDA programming guide, compute capability tables).
  double fp32FlopsPerSec = 0;       // GPU peak; host: computed from cores·GHz·lanes·2·fma units
  double tensorF16FlopsPerSec = 0;  // dense FP16/BF16 tensor cores, FP32 accumulate
  double tensorTf32FlopsPerSec = 0; // 0 when the part has none worth using
  int64_t sms = 0;
  int64_t warpSize = 32;
  int64_t regsPerSm = 0;
  int64_t maxRegsPerThread = 0;
  int64_t regAllocUnit = 256; // registers are allocated per warp in units of this many
  int64_t maxThreadsPerBlock = 0;
  int64_t maxThreadsPerSm = 0;
  int64_t maxBlocksPerSm = 0;
  int64_t smemPerSm = 0;               // bytes
  int64_t smemPerBlock = 0;            // bytes, opt-in maximum for dynamic shared memory
  int64_t smemStaticMax = 48 * 1024;   // static __shared__ limit
  int64_t smemReservedPerBlock = 1024; // the runtime's per-block reserve
  int64_t smemAllocUnit = 128;

  // Host CPU.
  int64_t cores = 0;      // usable cores (sched_getaffinity)
  double ghz = 0;         // sustained clock
  int64_t vectorBits = 0; // 128 (SSE / NEON), 256 (AVX2), 512 (AVX-512)
  int64_t fmaUnits = 0;   // FMA pipes per core
  // Products per lane of one dot-product instruction, issued at the FMAs' rate (one per pipe
  // and cycle on current cores): bf16 pairs (vdpbf16ps) 2, int8 quads (vpdpbusd) 4; 0 where the
  // CPU lacks the instruction (detection reads avx512_bf16 / avx512_vnni from /proc/cpuinfo).
  double bf16DotProducts = 0, int8DotProducts = 0;
  // bf16 products per f32 lane and FMA pipe cycle on AMX tiles (tdpbf16ps: 16 x 16 x 32 products
  // per 16 cycles against 16 lanes x 2 pipes of FMAs: 16); 0 without amx_bf16 in /proc/cpuinfo,
  // or (compile driver) when the folder's -march lacks amx-bf16. int8 the same (tdpbusd: 16 x 16
  // x 64 products per 16 cycles: 32; amx_int8, amx-int8).
  double amxBf16Products = 0, amxInt8Products = 0;
  int64_t l1dBytes = 0;                                                 // per core
  int64_t l3Bytes = 0;                                                  // shared, 0 when absent
  double l1BytesPerCycle = 0, l2BytesPerCycle = 0, l3BytesPerCycle = 0; // per core

  CostCoefficients cost;

  int64_t maxWarpsPerSm() const { return warpSize ? maxThreadsPerSm / warpSize : 0; }
  int64_t vectorLanesF32() const { return vectorBits / 32; }
  // Vector registers per core: x86-64 has 32 with AVX-512, else 16; aarch64 32.
  int64_t vectorRegisters() const { return vectorBits >= 512 || arch == "aarch64" ? 32 : 16; }
  // Peak FP32 FLOP/s of the whole part (host: all cores).
  double peakFlops() const;
  // One line for reports: "NVIDIA A100 SXM4 80GB (sm_80, 108 SMs, 2039 GB/s) from
  // builtin:a100.yaml"
  std::string summary() const;
};

// Parses and validates one description. `sourceName` names the file in errors
// ("target/hardware/a100.yaml: sm.count: expected a positive integer, got -3"). UserError on
// malformed YAML, unknown or missing keys, wrong kinds or out-of-range values.
Hardware parseHardwareYaml(const std::string &text, const std::string &sourceName);
// The same, from a file (UserError "cannot open FILE" when unreadable).
Hardware loadHardwareFile(const std::string &path);

// Built-in descriptions by short name: "a100", "h100", "h200", "rtx4090", "rtx3090".
std::vector<std::string> builtinHardwareNames();
Hardware builtinHardware(const std::string &name); // UserError listing the names when unknown

// The host: host.yaml's defaults, overridden by what `sysRoot` (normally "/") reveals
// (/sys/devices/system/cpu/cpu0/cache/index*/, cpufreq, /proc/cpuinfo; cores from
// sched_getaffinity when sysRoot is "/", else from /proc/cpuinfo's processor lines), then by
// the file named in AICF_HOST_HARDWARE when set. Without that file, AICF_HOST_PEAK_GFLOPS (one
// core's measured FMA peak) sets the clock and AICF_HOST_CORES the cores (bench-costmodel's
// calibration). `source` records what was detected and what was set.
Hardware detectHostHardware(const std::string &sysRoot = "/");

} // namespace aicf
