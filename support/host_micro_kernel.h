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

// Rows of a block `nvv` native vectors wide: rows * nvv accumulators plus nvv - 1 B vectors
// (the last read as the FMA's memory operand) and a broadcast, at most 8.
constexpr int64_t hostBlockRows(int64_t nvv, int64_t vectorRegs) {
  return std::min<int64_t>(8, (vectorRegs - nvv) / nvv);
}

// Rows of such a block with every B vector in a register (no memory operand). From 3 vectors
// on the memory operand is free (a k step loads rows + nvv + rows vectors for rows * nvv FMAs:
// the load ports keep pace with the FMA units), and this is hostBlockRows. At 2 vectors (AVX2's
// 16-column block) it is not: 15 loads for 14 FMAs, and a 6 x 16 block ran 15-33% faster per
// row than a 7 x 16 one with B's second vector in memory (resnet18's 56 x 56 and 28 x 28 3 x 3
// convs, one AMD EPYC Zen 3 core).
constexpr int64_t hostRegisterRows(int64_t nvv, int64_t vectorRegs) {
  return nvv >= 3 ? hostBlockRows(nvv, vectorRegs)
                  : std::min<int64_t>(8, (vectorRegs - nvv - 1) / nvv);
}

struct HostRegisterBlock {
  int64_t groups = 1;       // 16-float column groups per call (divides the panel's)
  int64_t rows = 8;         // the tallest row block
  int64_t registerRows = 8; // the tallest with B wholly in registers (hostRegisterRows)
};

// The register block for a panel `panelGroups` 16-float groups wide.
constexpr HostRegisterBlock hostRegisterBlock(int64_t panelGroups, HostVectorUnit unit) {
  const int64_t vectorRegs = unit.regs;
  const int64_t perGroup = std::max<int64_t>(1, 512 / std::max<int64_t>(unit.bits, 128));
  int64_t g = panelGroups;
  if (hostBlockRows(g * perGroup, vectorRegs) < 6)
    g = panelGroups % 2 == 0 && hostBlockRows(g / 2 * perGroup, vectorRegs) >= 6 ? g / 2 : 1;
  return {g, std::max<int64_t>(1, hostBlockRows(g * perGroup, vectorRegs)),
          std::max<int64_t>(1, hostRegisterRows(g * perGroup, vectorRegs))};
}

// A run of r rows (a blocked conv's output row of pixels, a tile's rows) in row blocks: the
// fewest blocks up to `rows` tall, or up to `registerRows` tall where that takes at most a
// quarter more blocks (each block is a pass over the B panel slice: re-streamed, the block's
// accumulators filled and emptied; a 7-pixel row as 4 + 3 rather than 7 ran resnet18's
// layer-4 convs 20-50% slower, and 5 + 5 + 4 for 14 pixels 25% slower), heights within one of
// each other: `count` blocks, the first `taller` of them base + 1 rows, the rest base.
struct HostRowBlocks {
  int64_t count = 0, base = 0, taller = 0;
};
constexpr HostRowBlocks hostRowBlocks(int64_t r, int64_t rows, int64_t registerRows) {
  if (r <= 0)
    return {};
  int64_t nb = (r + rows - 1) / rows;
  const int64_t nbr = (r + registerRows - 1) / registerRows;
  if (registerRows < rows && 4 * nbr <= 5 * nb)
    nb = nbr;
  return {nb, r / nb, r % nb};
}

} // namespace aicf
