// Building generated CUDA (docs/architecture.md): kernels.cu -> libmodel.so with nvcc (-arch from
// the target, ptxas -v), the per-kernel ptxas figures parsed from nvcc's output, recorded in the
// plan (hints.ptxas) and checked against the target's limits (registers per thread and per block,
// threads per block, shared memory per block): a violation is a compile error naming the kernel
// and the limit. Without nvcc (AICF_NVCC_PATH empty) every entry point says so.
#pragma once

#include "kir/kir.h"
#include "plan/plan.h"

#include <map>
#include <string>
#include <vector>

namespace aicf {

// The configured nvcc ("" when the CUDA toolkit was not found at configure time).
std::string nvccPath();

struct CudaBuildOptions {
  std::string arch = "sm_90"; // -arch value
  std::string extraFlags;     // whitespace-separated extra nvcc flags
};

// Writes `source` to `cuPath` and compiles it with
//   nvcc -std=c++17 -shared -Xcompiler -fPIC -cudart shared -O3 -arch=ARCH -Xptxas -v
// into `soPath`. Returns nvcc's output (the ptxas report); UserError with the command and the
// output when nvcc fails or is not available.
std::string compileCudaSource(const std::string &source, const std::string &cuPath,
                              const std::string &soPath, const CudaBuildOptions &opts = {});

// Per kernel (entry function name) the figures in a `ptxas -v` report.
std::map<std::string, PtxasFigures> parsePtxasReport(const std::string &output);

// Records each kernel step's figures in `plan` and checks them, with each step's launch, against
// the limits of `target`'s hardware description: registers per thread (255 on every built-in),
// registers per block (the SM's register file, 65536), threads per block (1024), static +
// dynamic shared memory within the per-block maximum. UserError naming the kernel and the limit
// on the first violation, or when a kernel has no figures.
void recordPtxas(Plan &plan, const std::map<std::string, PtxasFigures> &figures,
                 const Target &target);

} // namespace aicf
