// What the graph passes need to know about the target: the on-chip memory a tile may use.
// (The full hardware descriptions and cost coefficients live with the planner; this is the
// subset legality checks read, so a property can say "fits on chip" for the chosen target.)
#pragma once

#include <cstdint>
#include <string>

namespace aicf {

struct TargetInfo {
  std::string name; // "cpu", "cuda:sm_90"
  bool gpu = false;
  int64_t onChipBytes = 0; // GPU: shared memory per block (opt-in max); CPU: L2 per core
  std::string onChipName;  // "shared memory per block", "L2 per core"
};

// Known targets: cpu, cuda:sm_80, cuda:sm_86, cuda:sm_89, cuda:sm_90. UserError otherwise.
TargetInfo targetInfo(const std::string &target);

} // namespace aicf
