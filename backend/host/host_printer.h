// The host C++ printer (docs/architecture.md; the full mapping in host_printer.cpp's comment):
// grid axes -> one loop over a chunk [lo, hi) of the flattened blocks (the runtime's thread pool
// hands out the chunks; the kernel owns no threads), each thread region -> a loop over thread
// ids, shared -> a per-block array, local -> an array indexed by thread, barriers -> nothing
// (regions already run in order), block_reduce -> a loop, mma_tile -> a register-blocked
// micro-kernel written with GCC vector types (generic loops when the thread tile does not fit
// the vector shape). The printer adds spelling only, no logic.
//
// Every kernel is printed as   extern "C" void NAME(void *const *args, int64_t lo, int64_t hi)
// where args[i] is the i-th param buffer (kernel.params order). The file starts with the small
// fixed helpers the spelling needs (vectorisable exp/tanh/erf, sigmoid, f16/bf16 conversions, the
// micro-kernel), so it is self-contained; output is deterministic.
#pragma once

#include "kir/kir.h"
#include "support/host_micro_kernel.h"

#include <string>
#include <vector>

namespace aicf {

// `unit`: the vector unit the source is built for (the micro-kernel's row blocks follow its
// registers, support/host_micro_kernel.h).
std::string printHostSource(const std::vector<kir::Kernel> &kernels, HostVectorUnit unit = {});

} // namespace aicf
