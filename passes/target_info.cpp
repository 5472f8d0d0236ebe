#include "passes/target_info.h"

#include "support/diagnostics.h"

namespace aicf {

TargetInfo targetInfo(const std::string &target) {
  // Figures from ALGORITHMS.md (CUDA programming guide tables; this project's CPU).
  if (target == "cpu")
    return {"cpu", false, 2 << 20, "L2 per core"};
  if (target == "cuda:sm_80")
    return {"cuda:sm_80", true, 163 << 10, "shared memory per block"};
  if (target == "cuda:sm_86" || target == "cuda:sm_89")
    return {target, true, 99 << 10, "shared memory per block"};
  if (target == "cuda:sm_90")
    return {"cuda:sm_90", true, 227 << 10, "shared memory per block"};
  throw UserError(
      cat("unknown target '", target, "' (cpu, cuda:sm_80, cuda:sm_86, cuda:sm_89, cuda:sm_90)"),
      1); // a --target flag value
}

} // namespace aicf
