// The CUDA printer (DESIGN.md §4): spells verified Kernel IR as CUDA C++ for nvcc. By the SIMT
// rule it adds no logic of its own — every index, guard and loop comes from the Kernel IR; the
// printer only chooses spellings (blockIdx / threadIdx, __shared__, registers, __syncthreads,
// warp shuffles for block_reduce, per-thread loops for mma_tile).
#pragma once

#include "kir/kir.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aicf {

// Static __shared__ memory is limited to 48 KB per block; a kernel whose shared buffers exceed
// it gets them in dynamic shared memory (one extern array with 16-byte aligned offsets).
constexpr int64_t kCudaStaticSharedLimit = 48 * 1024;

// The dynamic shared-memory bytes the launcher of `k` requests (0 when its shared buffers are
// static). Deterministic: the same rule the printer uses.
int64_t cudaDynamicSharedBytes(const kir::Kernel &k);

// kernels.cu: per kernel an extern "C" __global__ function NAME and a host launcher
//   extern "C" int aicf_launch_NAME(void *const *args, cudaStream_t stream)
// returning the cudaError_t of the launch. `arch` ("sm_90") is recorded in the header comment.
// Kernels failing kir::verifyKernel are an internal error.
std::string printCudaSource(const std::vector<kir::Kernel> &kernels, const std::string &arch);

} // namespace aicf
