// The host micro-kernel's register block: how many rows and 16-float column groups of C one
// call of the f32 micro-kernel holds in vector registers, for a vector unit of `vectorBits`
// with `vectorRegs` registers. Declared once: backend/host/host_mma_prelude.cpp spells the
// same rule with the compiler's macros (aicf_reg_groups / aicf_reg_rows, for the -march the
// kernels are built for), the host printer mirrors it to pick the row-block heights that get
// fused micro-kernels, and the cost model prices blocks of this shape.
//
// Why: a block sized for AVX-512's 32 registers of 16 floats (7 x 64: 28 accumulators) needs
// 56 of AVX2's 16 registers; GCC then keeps the accumulators in memory and moves them through
// general registers, and every contraction ran 20-70x slower than its prediction on an AVX2
// CPU. The block's accumulators, its B vectors (the last one a memory operand of the FMA) and
// a broadcast fit the register file, and a panel wider than that block is walked in column
// groups (A re-read from L1 per group, as in ORT's 6 x 16 AVX2 kernel).
#pragma once

#include <algorithm>
#include <cstdint>

namespace aicf {

// A host vector unit: its width in bits and its vector registers (AVX-512 512 / 32, AVX2 256 /
// 16, NEON 128 / 32).
struct HostVectorUnit {
  int64_t bits = 512;
  int64_t regs = 32;
};

struct HostRegisterBlock {
  int64_t groups = 1; // 16-float column groups per call (divides the panel's)
  int64_t rows = 8;   // the tallest row block
};

// Rows of a block `nvv` native vectors wide: rows * nvv accumulators plus nvv - 1 B vectors
// (the last read as the FMA's memory operand) and a broadcast, at most 8.
constexpr int64_t hostBlockRows(int64_t nvv, int64_t vectorRegs) {
  return std::min<int64_t>(8, (vectorRegs - nvv) / nvv);
}

// The register block for a panel `panelGroups` 16-float groups wide.
constexpr HostRegisterBlock hostRegisterBlock(int64_t panelGroups, HostVectorUnit unit) {
  const int64_t vectorRegs = unit.regs;
  const int64_t perGroup = std::max<int64_t>(1, 512 / std::max<int64_t>(unit.bits, 128));
  int64_t g = panelGroups;
  if (hostBlockRows(g * perGroup, vectorRegs) < 6)
    g = panelGroups % 2 == 0 && hostBlockRows(g / 2 * perGroup, vectorRegs) >= 6 ? g / 2 : 1;
  return {g, std::max<int64_t>(1, hostBlockRows(g * perGroup, vectorRegs))};
}

} // namespace aicf
