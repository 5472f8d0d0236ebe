// The compilation target, typed (issue 16 item 3): its kind (the host CPU or CUDA), the CUDA
// architecture and the hardware description. The command line's "cpu" / "cuda:sm_90" is parsed
// here once; everything downstream asks the Target (gpu(), arch, name()) instead of testing the
// string again, and reads every limit (on-chip memory for the graph passes' tile legality,
// static shared memory for the CUDA printer, ptxas' registers, threads and shared memory) from
// its `hw`, so `--hardware FILE.yaml` changes all of them at once.
#pragma once

#include "target/hardware.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aicf {

// Whether something is for a GPU has one source: the description's Hardware::gpu, which gpu()
// reads (parseSpec sets it on a GPU target before any description is loaded, and loadHardware
// accepts only a description of the same kind). Two targets ask it for two questions:
//   a GPU plan (recipes' defaults and candidates, the cost model, host-only plan steps):
//     the plan's target, Knobs::planFor.gpu() / Plan::planFor.gpu(), or, where only the
//     description is at hand (the cost model, a recipe's candidates), the same bit as hw.gpu;
//   a CUDA build (nvcc, the CUDA printer, the runtime's device): the build target's gpu().
// They differ only under `aicfc --target cpu --plan-for cuda:sm_XX`: a GPU plan (planFor.gpu(),
// its hw.gpu) built and run as C++ on the host (target.gpu() false).
struct Target {
  std::string arch; // Cuda: "sm_90" (nvcc's -arch); Cpu: ""
  // The description planned for and checked against. Empty (all zeros, no name; gpu set on a GPU
  // target) after parseSpec until loadHardware; a default-constructed Target is the cpu
  // without one.
  Hardware hw;

  bool gpu() const { return hw.gpu; }
  // Whether `hw` holds a description (parse, loadHardware, of); a default-constructed or
  // parseSpec'd Target has none (only its kind, hw.gpu).
  bool hasHardware() const { return !hw.name.empty(); }
  // This target with a description: itself when it has one, else with the default loaded (the
  // detected host for cpu, the arch's built-in for a GPU). What a pass or the compile driver
  // given a default-constructed Target (the cpu) plans and checks against.
  Target loaded() const;
  // "cpu", "cuda:sm_90": the spelling of the command line and plan.yaml.
  std::string name() const;

  // On-chip memory a tile's working set may use (the graph passes' tile legality): shared
  // memory per block (opt-in maximum) on a GPU, L2 per core on the host, from `hw`.
  int64_t onChipBytes() const { return gpu() ? hw.smemPerBlock : hw.l2Bytes; }
  const char *onChipName() const { return gpu() ? "shared memory per block" : "L2 per core"; }

  // The known targets, in order: cpu, then cuda:ARCH for each arch with a built-in default
  // description (sm_80 a100, sm_86 rtx3090, sm_89 rtx4090, sm_90 h100).
  static std::vector<std::string> knownNames();

  // `spec` ("cpu" or a known "cuda:sm_XX") and its hardware description: `hardwareChoice` is ""
  // (the arch's default: the detected host for cpu, the built-in for a GPU arch), a built-in
  // name or a YAML file. UserError (exit 1) "unknown target 'X' (cpu, cuda:sm_80, ...)" for an
  // unknown spec; the description's errors as loadHardware says.
  static Target parse(const std::string &spec, const std::string &hardwareChoice = "");
  // The spec alone (kind and arch), for checking a command line before anything is loaded;
  // `hw` stays empty until loadHardware.
  static Target parseSpec(const std::string &spec);
  // aicfc --plan-for: a GPU target whose plan the host build emulates. UserError (exit 1)
  // "--plan-for X: expected cuda:sm_XX" for anything else, the unknown-target error for an
  // unknown arch. The hardware is not loaded.
  static Target parsePlanFor(const std::string &spec);
  // The target a description is for: cpu, or cuda:<its arch> (no check that the arch is known).
  static Target of(const Hardware &hw);

  // Loads `hw` for this target (choices as for parse). UserError when a chosen GPU's arch
  // differs from this target's ("--hardware a100: a sm_80 description cannot plan for
  // cuda:sm_90") or a description of the other kind is chosen; "cannot open FILE" (exit 1).
  void loadHardware(const std::string &hardwareChoice = "");
};

} // namespace aicf
