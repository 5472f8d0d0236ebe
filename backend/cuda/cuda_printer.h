// The CUDA printer (docs/architecture.md): spells verified Kernel IR as CUDA C++ for nvcc. By the
// SIMT rule it adds no logic of its own — every index, guard and loop comes from the Kernel IR; the
// printer only chooses spellings (blockIdx / threadIdx, __shared__, registers, __syncthreads,
// warp shuffles for block_reduce, per-thread loops for mma_tile).
#pragma once

#include "kir/kir.h"
#include "target/target.h"

#include <cstdint>
#include <string>
#include <vector>

namespace aicf {

// Static __shared__ memory is limited per block (hw.smemStaticMax, 48 KB on every built-in); a
// kernel whose shared buffers exceed it gets them in dynamic shared memory (one extern array
// with 16-byte aligned offsets).

// The dynamic shared-memory bytes the launcher of `k` requests on `hw` (0 when its shared
// buffers are static). Deterministic: the same rule the printer uses.
int64_t cudaDynamicSharedBytes(const kir::Kernel &k, const Hardware &hw);

// kernels.cu: per kernel an extern "C" __global__ function NAME and a host launcher
//   extern "C" int aicf_launch_NAME(void *const *args, cudaStream_t stream)
// returning the cudaError_t of the launch. The target's arch ("sm_90") is recorded in the header
// comment; its hardware's static shared-memory limit decides static or dynamic shared memory.
// Kernels failing kir::verifyKernel are an internal error.
std::string printCudaSource(const std::vector<kir::Kernel> &kernels, const Target &target);

} // namespace aicf
