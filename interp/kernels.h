// The interpreter's kernels: one function per op of ir/ops.def, declared here from the X-macro
// and collected into the dispatch table in interp/kernels.cpp. An op without a kernel leaves an
// undefined `kernel_<Op>` symbol, so the build fails rather than the run.
//
// Kernels live by family: kernels.cpp (elementwise), kernels_contract.cpp (matmul, gemm, conv,
// attention), kernels_reduce.cpp (reductions, normalisations, pooling), kernels_data.cpp (data
// movement).
#pragma once

#include "interp/kernel_util.h"

namespace aicf::interp {

using KernelFn = std::vector<Tensor> (*)(const KernelCtx &ctx);

#define OP(id, ...) std::vector<Tensor> kernel_##id(const KernelCtx &ctx);
#include "ir/ops.def"
#undef OP

// The kernel of `op` (never null).
KernelFn kernelFor(Op op);

} // namespace aicf::interp
