// The host micro-kernels' source text, second part (see host_mma_prelude.h): the register
// blocks, row blocks and column panels that run the k loops of host_mma_prelude.cpp's text.
#include "backend/host/host_mma_prelude.h"

namespace aicf {

const char *const kHostMmaBlocksPrelude =
    R"(// An f32 register block's accumulators from / to C (row stride ld).
template <int MR, int NN>
inline __attribute__((always_inline)) void aicf_c_load(aicf_vf (&acc)[MR][NN], const float *C,
                                                       int64_t ld) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NN; ++j)
      acc[i][j] = *reinterpret_cast<const aicf_vfu *>(C + i * ld + AICF_VL * j);
}
// The accumulators pinned to vector registers at this point (an empty asm that reads and
// writes each): around the k loop of a fused block, whose init and epilogue pass each vector
// through a 16-float buffer for the lambdas. Without it GCC 12 kept half of an AVX2 6 x 16
// block's accumulators in stack slots through the k loop (a load and a store per FMA, with
// two vector registers unused), and resnet18's stride-2 1 x 1 convs ran 1.6x slower.
template <int MR, int NN>
inline __attribute__((always_inline)) void aicf_in_regs(aicf_vf (&acc)[MR][NN]) {
#if defined(__x86_64__)
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NN; ++j)
      asm("" : "+v"(acc[i][j]));
#endif
}
template <int MR, int NN>
inline __attribute__((always_inline)) void aicf_c_store(const aicf_vf (&acc)[MR][NN], float *C,
                                                        int64_t ld) {
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NN; ++j)
      *reinterpret_cast<aicf_vfu *>(C + i * ld + AICF_VL * j) = acc[i][j];
}

// The mma_tile micro-kernel: Co[MR x 16*NV] (row stride ldo) = Ci (row stride ldi) + A[MR x K]
// (lda) * B[K x 16*NV] (ldb), the block held in MR*NV vector registers across the whole k loop
// (Ci = Co = the C tile, or a fused block's buffer).
template <int MR, int NV, bool KB, typename TA, typename TB>
inline void aicf_mma_block(const float *Ci, int64_t ldi, float *Co, int64_t ldo,
                           const TA *__restrict A, int64_t lda, aicf_kblocks kb,
                           const TB *__restrict B, int64_t ldb, int64_t K) {
  if constexpr (sizeof(TB) == 4) {
    // f32: register blocks of G column groups (all NV where the registers hold them), NN
    // native vectors each; the weight slice's prefetch issued by the first only.
    constexpr int G = aicf_groups_for(MR, NV), NN = G * aicf_vr;
#pragma GCC unroll 1
    for (int c = 0; c < NV / G; ++c) {
      const int64_t o = 16 * G * c;
      aicf_vf acc[MR][NN];
      aicf_c_load<MR, NN>(acc, Ci + o, ldi);
      aicf_kblocks kc = kb;
      if (c)
        kc.pfl = 0;
      aicf_mma_acc<MR, NN, KB>(acc, A, lda, kc, B + o, ldb, K);
      aicf_c_store<MR, NN>(acc, Co + o, ldo);
    }
    return;
  }
  aicf_v16f acc[MR][NV];
  if constexpr (sizeof(TB) == 1) { // int8: the i32 sums first, then C's values beside them
    aicf_v16i sum[MR][NV];
    aicf_mma_acc_i8<MR, NV>(sum, A, lda, kb, B, ldb, K);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = *reinterpret_cast<const aicf_v16fu *>(Ci + i * ldi + 16 * j) +
                    __builtin_convertvector(sum[i][j], aicf_v16f);
  } else if constexpr (sizeof(TB) == 2) { // bf16 pairs
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = *reinterpret_cast<const aicf_v16fu *>(Ci + i * ldi + 16 * j);
    aicf_mma_acc<MR, NV, KB>(acc, A, lda, kb, B, ldb, K);
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j)
      *reinterpret_cast<aicf_v16fu *>(Co + i * ldo + 16 * j) = acc[i][j];
}

// A dense A's block, kept out of line: GCC otherwise inlines it into some kernels, where the
// surrounding loops' registers crowd the accumulators (GPT-2's block 2.18 -> 2.35 ms). A
// blocked A's block stays inline (its table walk is cheap there; resnet18 runs 1% slower
// with it out of line).
template <int MR, int NV, typename TA, typename TB>
__attribute__((noinline)) void aicf_mma_block_dense(const float *Ci, int64_t ldi, float *Co,
                                                    int64_t ldo, const TA *__restrict A,
                                                    int64_t lda, aicf_kblocks kb,
                                                    const TB *__restrict B, int64_t ldb,
                                                    int64_t K) {
  aicf_mma_block<MR, NV, false>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
}

// The fused micro-kernel of one row-block height (C at the block, (i0, j0) its place in the
// tile): init and epilogue on the registers.
template <int MR, int NV, bool KB, typename X, typename TA, typename TB>
inline void aicf_mma_block_fused(float *__restrict C, int64_t ldc, const TA *__restrict A,
                                 int64_t lda, aicf_kblocks kb, const TB *__restrict B,
                                 int64_t ldb, int64_t K, const X &x, int64_t i0, int64_t j0) {
  if constexpr (sizeof(TB) == 4) { // f32: in register blocks, as aicf_mma_block
    constexpr int G = aicf_groups_for(MR, NV), NN = G * aicf_vr;
#pragma GCC unroll 1
    for (int c = 0; c < NV / G; ++c) {
      const int64_t o = 16 * G * c;
      aicf_vf acc[MR][NN];
      if (x.first) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            alignas(64) float v[16];
            x.init(i0 + i, j0 + o + 16 * g, v);
#pragma GCC unroll 4
            for (int r = 0; r < aicf_vr; ++r)
              acc[i][g * aicf_vr + r] = *reinterpret_cast<const aicf_vf *>(v + AICF_VL * r);
          }
      } else {
        aicf_c_load<MR, NN>(acc, C + o, ldc);
      }
      aicf_kblocks kc = kb;
      if (c)
        kc.pfl = 0;
      aicf_in_regs<MR, NN>(acc);
      aicf_mma_acc<MR, NN, KB>(acc, A, lda, kc, B + o, ldb, K);
      aicf_in_regs<MR, NN>(acc);
      if (x.last) {
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
          for (int g = 0; g < G; ++g) {
            alignas(64) float v[16];
#pragma GCC unroll 4
            for (int r = 0; r < aicf_vr; ++r)
              *reinterpret_cast<aicf_vf *>(v + AICF_VL * r) = acc[i][g * aicf_vr + r];
            x.epi(i0 + i, j0 + o + 16 * g, v);
          }
      } else {
        aicf_c_store<MR, NN>(acc, C + o, ldc);
      }
    }
    return;
  }
  aicf_v16f acc[MR][NV];
  // (int8: the i32 sums first, the init or C beside them after, so that the accumulators are
  // not live across the k loop twice.)
  [[maybe_unused]] aicf_v16i sum[MR][NV];
  if constexpr (sizeof(TB) == 1)
    aicf_mma_acc_i8<MR, NV>(sum, A, lda, kb, B, ldb, K);
  if (x.first) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        alignas(64) float v[16];
        x.init(i0 + i, j0 + 16 * j, v);
        acc[i][j] = *reinterpret_cast<const aicf_v16f *>(v);
      }
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] = *reinterpret_cast<const aicf_v16fu *>(C + i * ldc + 16 * j);
  }
  if constexpr (sizeof(TB) == 1) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        acc[i][j] += __builtin_convertvector(sum[i][j], aicf_v16f);
  } else if constexpr (sizeof(TB) == 2) {
    aicf_mma_acc<MR, NV, KB>(acc, A, lda, kb, B, ldb, K);
  }
  if (x.last) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) {
        alignas(64) float v[16];
        *reinterpret_cast<aicf_v16f *>(v) = acc[i][j];
        x.epi(i0 + i, j0 + 16 * j, v);
      }
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        *reinterpret_cast<aicf_v16fu *>(C + i * ldc + 16 * j) = acc[i][j];
  }
}

// Out of line, for an epilogue with a transcendental step (X::apart): inlined into the kernel's
// loops, GCC hoisted its constants (a SiLU's exp polynomial) out of them, and the accumulators
// spilled in the k loop (EfficientNet's 1152-channel expansion 0.27 -> 0.33 ms). A cheap
// epilogue stays inline (mobilenet_v2 runs 2% slower with it out of line).
template <int MR, int NV, bool KB, typename X, typename TA, typename TB>
__attribute__((noinline)) void
aicf_mma_block_fused_apart(float *__restrict C, int64_t ldc, const TA *__restrict A, int64_t lda,
                           aicf_kblocks kb, const TB *__restrict B, int64_t ldb, int64_t K,
                           const X &x, int64_t i0, int64_t j0) {
  aicf_mma_block_fused<MR, NV, KB>(C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
}

// The init (Init) or the epilogue of a block of rows x nv vectors at the tile's row i0, column
// j0, held in buf (row stride 16 * nv): the path of a height without its own micro-kernel.
template <bool Init, typename X>
__attribute__((noinline)) void aicf_fused_block(const X &x, int64_t i0, int64_t j0, int64_t rows,
                                                int64_t nv, float *__restrict buf) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < nv; ++v) {
      if constexpr (Init)
        x.init(i0 + r, j0 + 16 * v, buf + (r * nv + v) * 16);
      else
        x.epi(i0 + r, j0 + 16 * v, buf + (r * nv + v) * 16);
    }
}

// The shared micro-kernel for a block of mr rows (C at the block; Ci / Co where it reads and
// writes the accumulators).
template <int NV, bool KB, typename TA, typename TB>
inline void aicf_mma_shared(int64_t mr, const float *Ci, int64_t ldi, float *Co, int64_t ldo,
                            const TA *__restrict A, int64_t lda, aicf_kblocks kb,
                            const TB *__restrict B, int64_t ldb, int64_t K) {
  if constexpr (KB || aicf_reg_rows(NV) < AICF_MMA_MR) {
    switch (mr) {
    case 8: aicf_mma_block<8, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 7: aicf_mma_block<7, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 6: aicf_mma_block<6, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 5: aicf_mma_block<5, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 4: aicf_mma_block<4, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 3: aicf_mma_block<3, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    case 2: aicf_mma_block<2, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    default: aicf_mma_block<1, NV, KB>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K); break;
    }
  } else if (mr == AICF_MMA_MR) {
    aicf_mma_block_dense<AICF_MMA_MR, NV>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
  } else if (mr == 4) {
    aicf_mma_block_dense<4, NV>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
  } else if (mr == 2) {
    aicf_mma_block_dense<2, NV>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
  } else {
    aicf_mma_block_dense<1, NV>(Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
  }
}

// The shared micro-kernels out of line, for the fused blocks without their own (ragged
// blocks: rare at run time, and inlined into every kernel they cost compile time).
template <int NV, bool KB, typename TA, typename TB>
__attribute__((noinline)) void aicf_mma_shared_ool(int64_t mr, const float *Ci, int64_t ldi,
                                                   float *Co, int64_t ldo,
                                                   const TA *__restrict A, int64_t lda,
                                                   aicf_kblocks kb, const TB *__restrict B,
                                                   int64_t ldb, int64_t K) {
  aicf_mma_shared<NV, KB>(mr, Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
}

// A fused block of mr rows: its height's own micro-kernel when R lists it, else the shared one
// on a block buffer.
template <int NV, bool KB, typename X, typename TA, typename TB>
inline void aicf_mma_fused_rows(aicf_rows<>, int64_t mr, float *__restrict C, int64_t ldc,
                                const TA *__restrict A, int64_t lda, aicf_kblocks kb,
                                const TB *__restrict B, int64_t ldb, int64_t K, const X &x,
                                int64_t i0, int64_t j0) {
  alignas(64) float buf[(AICF_MMA_MR > 8 ? AICF_MMA_MR : 8) * 16 * NV];
  const float *Ci = C;
  float *Co = x.last ? buf : C;
  int64_t ldi = ldc, ldo = x.last ? 16 * NV : ldc;
  if (x.first) {
    aicf_fused_block<true>(x, i0, j0, mr, NV, buf);
    Ci = buf;
    ldi = 16 * NV;
  }
  aicf_mma_shared_ool<NV, KB>(mr, Ci, ldi, Co, ldo, A, lda, kb, B, ldb, K);
  if (x.last)
    aicf_fused_block<false>(x, i0, j0, mr, NV, buf);
}
template <int NV, bool KB, typename X, typename TA, typename TB, int S0, int... S>
inline void aicf_mma_fused_rows(aicf_rows<S0, S...>, int64_t mr, float *__restrict C, int64_t ldc,
                                const TA *__restrict A, int64_t lda, aicf_kblocks kb,
                                const TB *__restrict B, int64_t ldb, int64_t K, const X &x,
                                int64_t i0, int64_t j0) {
  if constexpr (!(X::nvs & (1 << NV))) {
    aicf_mma_fused_rows<NV, KB>(aicf_rows<>(), mr, C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
  } else if (mr != S0) {
    aicf_mma_fused_rows<NV, KB>(aicf_rows<S...>(), mr, C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
  } else if constexpr (X::apart) {
    aicf_mma_block_fused_apart<S0, NV, KB>(C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
  } else {
    aicf_mma_block_fused<S0, NV, KB>(C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
  }
}

// One block of mr rows at the tile's row i0, column j0 (C at the block), through x.
template <int NV, bool KB, typename X, typename TA, typename TB>
inline void aicf_mma_rowblock(int64_t mr, float *__restrict C, int64_t ldc,
                              const TA *__restrict A, int64_t lda, aicf_kblocks kb,
                              const TB *__restrict B, int64_t ldb, int64_t K, const X &x,
                              int64_t i0, int64_t j0) {
  if constexpr (X::fused)
    aicf_mma_fused_rows<NV, KB>(typename X::rows(), mr, C, ldc, A, lda, kb, B, ldb, K, x, i0, j0);
  else
    aicf_mma_shared<NV, KB>(mr, C, ldc, C, ldc, A, lda, kb, B, ldb, K);
}

// The tallest row block of a micro-kernel NV 16-float groups wide (aicf_reg_rows: 7 for
// AVX-512's 4 groups, 8 for fewer; 7 on AVX2), at most mr (the host printer's rowBlockHeights
// mirrors it).
constexpr int64_t aicf_kb_rows(int nv, int64_t mr) {
  return aicf_reg_rows(nv) < mr ? aicf_reg_rows(nv) : mr;
}

// Pass r of nb row-block passes over a panel slice: the part of the next slice (kb.pfl lines
// from kb.pf) it prefetches, spread over its k steps. A weight too large for
// L2 (resnet18's 3 x 3 convs of layer4: 9.4 MB over 49 pixels) is read from memory once, in
// its slice's first pass; alone, that pass ran at the memory's pace (layer4's convs at 60% of
// layer1's FLOP rate). Spread over the passes before it, the stream overlaps the arithmetic.
inline aicf_kblocks aicf_pass_prefetch(aicf_kblocks kb, int64_t r, int64_t nb) {
  if (!kb.pf)
    return kb;
  const int64_t per = (kb.pfl + nb - 1) / nb, from = r * per;
  kb.pf += from * 64;
  kb.pfl = from < kb.pfl ? (kb.pfl - from < per ? kb.pfl - from : per) : 0;
  return kb;
}

template <int NV, bool KB, typename X, typename TA, typename TB>
inline void aicf_mma_rows(float *__restrict C, int64_t ldc, const TA *__restrict A,
                          int64_t lda, aicf_kblocks kb, const TB *__restrict B, int64_t ldb,
                          int64_t tm, int64_t K, const X &x, int64_t i0, int64_t j0) {
  constexpr int64_t MR = AICF_MMA_MR;
  if constexpr (KB || aicf_reg_rows(NV) < MR) {
    // A blocked conv's rows (a 14- or 49-pixel map): the fewest blocks up to 8 rows, their
    // heights within one of each other (7 + 7 rather than 8 + 4 + 2; 50 rows 7 + 7 + 6 x 6, not
    // 7 x 7 + 1), so every pass over the B panel fills most accumulators; up to 7 for a 4-vector
    // panel (28 accumulators), whatever A's form: 8 x 4 accumulators take all 32 registers, and
    // the B vectors spill them (a 1 x 1 conv with K = 16, A plain rows); likewise where the
    // register file holds fewer rows (aicf_reg_rows: AVX2).
    // Blocks up to MB rows, or up to MBR (B wholly in registers) where that takes at most a
    // quarter more (support/host_micro_kernel.h hostRowBlocks).
    constexpr int64_t MB = aicf_kb_rows(NV, MR);
    constexpr int64_t MBR = aicf_register_rows_of(NV) < MB ? aicf_register_rows_of(NV) : MB;
    int64_t nb = (tm + MB - 1) / MB;
    if (MBR < MB && 4 * ((tm + MBR - 1) / MBR) <= 5 * nb)
      nb = (tm + MBR - 1) / MBR;
    const int64_t q = nb ? tm / nb : 0, rem = nb ? tm % nb : 0;
    for (int64_t r = 0, i = 0; r < nb; ++r) {
      const int64_t mr = q + (r < rem ? 1 : 0);
      aicf_kblocks kr = aicf_pass_prefetch(kb, r, nb);
      int64_t offs[KB ? AICF_KBLOCK_TABLE : 1], koffs[KB ? AICF_KBLOCK_TABLE : 1];
      if (KB && kb.tn && kb.g) // one row group: the blocks its row block reads
        kr = aicf_row_taps(kr, i, mr, offs, koffs);
      aicf_mma_rowblock<NV, KB>(mr, C + i * ldc, ldc, A + i * lda, lda, kr, B, ldb, K, x, i0 + i,
                                j0);
      i += mr;
    }
    return;
  }
  const int64_t rest = tm % MR;
  const int64_t nb = tm / MR + rest / 4 + rest % 4 / 2 + rest % 2;
  int64_t i = 0, r = 0;
  for (; i + MR <= tm; i += MR)
    aicf_mma_rowblock<NV, KB>(MR, C + i * ldc, ldc, A + i * lda, lda,
                              aicf_pass_prefetch(kb, r++, nb), B, ldb, K, x, i0 + i, j0);
  for (; i + 4 <= tm; i += 4)
    aicf_mma_rowblock<NV, KB>(4, C + i * ldc, ldc, A + i * lda, lda,
                              aicf_pass_prefetch(kb, r++, nb), B, ldb, K, x, i0 + i, j0);
  if (tm - i >= 2) {
    aicf_mma_rowblock<NV, KB>(2, C + i * ldc, ldc, A + i * lda, lda,
                              aicf_pass_prefetch(kb, r++, nb), B, ldb, K, x, i0 + i, j0);
    i += 2;
  }
  if (tm - i >= 1)
    aicf_mma_rowblock<NV, KB>(1, C + i * ldc, ldc, A + i * lda, lda,
                              aicf_pass_prefetch(kb, r++, nb), B, ldb, K, x, i0 + i, j0);
}

// One column panel over tm rows; kb.n1 != 0: A's k in blocks of 16 (aicf_kblocks), kb.g != 0:
// its rows in groups, each group its own run of row blocks over the same (L1-resident) panel.
// Groups that follow each other (a 1 x 1 conv's band: each output row's pixels right after the
// last row's) with no per-group tap rows are one run: row blocks across the groups' ends (a
// 14-pixel row alone is blocks of 6, 6 and 2 rows).
template <int NV, typename X, typename TA, typename TB>
inline void aicf_mma_panel(float *__restrict C, int64_t ldc, const TA *__restrict A,
                           int64_t lda, aicf_kblocks kb, const TB *__restrict B, int64_t ldb,
                           int64_t tm, int64_t K, const X &x, int64_t j0) {
  if (!kb.n1)
    aicf_mma_rows<NV, false>(C, ldc, A, lda, kb, B, ldb, tm, K, x, 0, j0);
  else if (!kb.g || (kb.gs == kb.g * lda && !kb.ts && !kb.tn))
    aicf_mma_rows<NV, true>(C, ldc, A, lda, kb, B, ldb, tm, K, x, 0, j0);
  else
    for (int64_t i = 0, ng = (tm + kb.g - 1) / kb.g; i < tm; i += kb.g) {
      aicf_kblocks kg = kb; // each group prefetches its share of the next slice
      if (kb.ts) // the group's own output row
        kg.tlo = kg.thi = kb.tlo + i / kb.g * kb.ts;
      kg.pfl = (kb.pfl + ng - 1) / ng;
      kg.pf = kb.pf ? kb.pf + i / kb.g * kg.pfl * 64 : nullptr;
      aicf_mma_rows<NV, true>(C + i * ldc, ldc, A + i / kb.g * kb.gs, lda, kg, B, ldb,
                              tm - i < kb.g ? tm - i : kb.g, K, x, i, j0);
    }
}

// x for the K chunk [k0, k0 + kc) of a step of K: first and last only at the step's ends.
template <typename X>
inline X aicf_chunk(const X &x, int64_t k0, int64_t kc, int64_t K) {
  X c = x;
  c.first = x.first && k0 == 0;
  c.last = x.last && k0 + kc == K;
  return c;
}

// One thread's tile: C[tm x tn] (ldc) += A[tm x K] (lda) * B[K x tn] (ldb), tn % 16 == 0.
// Column panels of 16*AICF_MMA_NV floats; each B panel is first packed contiguously (when it
// fits the per-thread pack buffer) so it stays in L1 while every row block streams over it.
template <typename X>
inline void aicf_mma_f32_k(float *__restrict C, int64_t ldc, const float *__restrict A,
                           int64_t lda, const float *__restrict B, int64_t ldb, int64_t tm,
                           int64_t tn, int64_t K, aicf_kblocks kb, const X &x) {
  constexpr int64_t NR = 16 * AICF_MMA_NV, kPack = AICF_MMA_PACK;
  alignas(64) static thread_local float pack[kPack > 0 ? kPack : 1];
  int64_t j = 0;
  for (; j + NR <= tn; j += NR) {
    const float *panel = B + j;
    int64_t ld = ldb;
    if (K * NR <= kPack) {
      for (int64_t kk = 0; kk < K; ++kk)
        std::memcpy(pack + kk * NR, B + kk * ldb + j, NR * sizeof(float));
      panel = pack;
      ld = NR;
    }
    aicf_mma_panel<AICF_MMA_NV>(C + j, ldc, A, lda, kb, panel, ld, tm, K, x, j);
  }
  // 16-float tail panels, packed too: unpacked, each row block re-reads B rows a stride apart.
  for (; j < tn; j += 16) {
    const float *panel = B + j;
    int64_t ld = ldb;
    if (K * 16 <= kPack) {
      for (int64_t kk = 0; kk < K; ++kk)
        std::memcpy(pack + kk * 16, B + kk * ldb + j, 16 * sizeof(float));
      panel = pack;
      ld = 16;
    }
    aicf_mma_panel<1>(C + j, ldc, A, lda, kb, panel, ld, tm, K, x, j);
  }
}
template <typename X = aicf_unfused>
inline void aicf_mma_f32(float *__restrict C, int64_t ldc, const float *__restrict A,
                         int64_t lda, const float *__restrict B, int64_t ldb, int64_t tm,
                         int64_t tn, int64_t K, aicf_kblocks kb = {0, 0, 0, 0, 0, 0, 16},
                         const X &x = X()) {
  aicf_kblock_chunks(kb, K, [&](aicf_kblocks kbc, int64_t k0, int64_t kc) {
    aicf_mma_f32_k(C, ldc, A, lda, B + k0 * ldb, ldb, tm, tn, kc, kbc, aicf_chunk(x, k0, kc, K));
  });
}

#if defined(__AMX_TILE__) && (defined(__AMX_BF16__) || defined(__AMX_INT8__))
// bf16 / int8 products on AMX tiles (defined in host_amx_prelude.cpp's text, after this one).
bool aicf_amx_ready();
template <int G, int AO, typename X, typename TB>
void aicf_amx_tiles(float *__restrict C, int64_t ldc, const uint32_t *__restrict ap, int64_t kg,
                    const TB *__restrict Bk, int64_t panelStride, int64_t NR, int64_t c0,
                    int64_t tm, int64_t tn, int64_t kc, const X &x);
#endif
// Whether the -march has AMX tiles for products in groups of G k (2: amx-bf16, 4: amx-int8).
template <int64_t G>
constexpr bool aicf_amx_for =
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
    G == 2 ||
#endif
#if defined(__AMX_TILE__) && defined(__AMX_INT8__)
    G == 4 ||
#endif
    false;

// B stored in panels of 16*NV columns, `panelStride` floats apart (a weight packed at compile
// time: panel p holds columns [p*16*NV, (p+1)*16*NV) as K rows of 16*NV floats): the
// micro-kernel streams each panel as it lies, with no staging copy. PF (mma_tile's bPrefetch):
// each panel's passes prefetch the slice read next into L2 (aicf_pass_prefetch). B in bf16
// pairs or int8 quads (TB): A is first converted for the chunk (AO: the int8 kernel's shift).
// TILES (mma_tile's bTiles, bf16 pairs or int8 quads): the products on AMX tiles where the -march
// has them (amx-bf16, amx-int8).
template <int NV, bool PF = false, int AO = 0, bool TILES = false, typename X = aicf_unfused,
          typename TB = float>
inline void aicf_mma_f32_panels(float *__restrict C, int64_t ldc, const float *__restrict A,
                                int64_t lda, const TB *__restrict B, int64_t panelStride,
                                int64_t tm, int64_t tn, int64_t K,
                                aicf_kblocks kb = {0, 0, 0, 0, 0, 0, 16}, int64_t c0 = 0,
                                const X &x = X()) {
  constexpr int64_t NR = 16 * NV;
  if (aicf_bw<TB> > 1) // (the pair / quad packers read every block: padding packs as zeros)
    kb.tn = 0;
  aicf_kblock_chunks(kb, K, [&](aicf_kblocks kc_, int64_t k0, int64_t kc) {
    const TB *__restrict Bk = B + k0 * NR; // (A's blocks are at kc_.offs: k0 included)
    // bf16 / int8: the chunk's A in pairs / quads of k, dense rows (aicf_pack_pairs,
    // aicf_pack_quads); f32: A as it lies.
    constexpr int64_t G = aicf_bw<TB>;
#if defined(__AMX_TILE__) && (defined(__AMX_BF16__) || defined(__AMX_INT8__))
    // On AMX tiles: A's groups in whole tiles of 16 rows and 64 bytes of k (pairs padded with
    // zeros, quads with AO; rows with zeros).
    if constexpr (TILES && aicf_amx_for<G>) {
      if (aicf_amx_ready()) {
        const int64_t kt = (kc + 16 * G - 1) / (16 * G) * 16, rows = (tm + 15) / 16 * 16;
        uint32_t *at = static_cast<uint32_t *>(aicf_alloc(size_t(rows * kt) * 4));
        if constexpr (G == 2)
          aicf_pack_pairs(at, kt, A, lda, kc_, tm, kc);
        else
          aicf_pack_quads<AO>(at, kt, A, lda, kc_, tm, kc);
        std::memset(at + tm * kt, 0, size_t((rows - tm) * kt) * 4);
        aicf_amx_tiles<int(G), AO>(C, ldc, at, kt, Bk, panelStride, NR, c0, tm, tn, kc,
                                   aicf_chunk(x, k0, kc, K));
        aicf_release(at);
        return;
      }
    }
#endif
    const int64_t kp = G > 1 ? (kc + 15) / 16 * (16 / G) : 0;
    uint32_t *ap = G > 1 ? static_cast<uint32_t *>(aicf_alloc(size_t(tm * kp) * 4)) : nullptr;
    if constexpr (G == 2)
      aicf_pack_pairs(ap, kp, A, lda, kc_, tm, kc);
    if constexpr (G == 4)
      aicf_pack_quads<AO>(ap, kp, A, lda, kc_, tm, kc);
    if (G > 1) {
      kc_.n1 = kc_.g = 0;
      kc_.offs = nullptr;
    }
    using TA = typename aicf_a_of<TB>::type;
    const TA *__restrict Ak = reinterpret_cast<const TA *>(G > 1 ? static_cast<const void *>(ap)
                                                                 : static_cast<const void *>(A));
    const int64_t la = G > 1 ? kp : lda;
    const X xc = aicf_chunk(x, k0, kc, K);
    // int8: AO times the column sums of the chunk's quads, for nv vectors from column c of the
    // panel at p (zeros when AO is 0).
    alignas(64) int32_t comp[16 * NV] = {};
    auto shifted = [&](const aicf_kblocks &k, const TB *p, int64_t c, int nv) {
      aicf_kblocks s = k;
      if constexpr (G == 4) {
        if (AO != 0)
          for (int v = 0; v < nv; ++v) {
            aicf_v16i sum = {};
            for (int64_t q = 0; q < (kc + 3) / 4; ++q)
              sum = aicf_dpbusd(sum, uint32_t(AO) * 0x01010101u,
                                *reinterpret_cast<const aicf_v16ub *>(p + 4 * q * NR + 4 * c +
                                                                      64 * v));
            std::memcpy(comp + 16 * v, &sum, sizeof sum);
          }
        s.comp = comp;
      }
      return s;
    };
    int64_t j = 0;
    // A tile starting inside a panel (c0 != 0) or ending inside one: those columns 16 at a
    // time, their rows NR apart; whole panels in between.
    for (; c0 != 0 && j < tn && c0 + j < NR; j += 16)
      aicf_mma_panel<1>(C + j, ldc, Ak, la, shifted(kc_, Bk, c0 + j, 1),
                        Bk + (c0 + j) * aicf_bw<TB>, NR, tm, kc, xc, j);
    for (; j + NR <= tn; j += NR) {
      // The slice read next: the next panel's, or after the last, the next K chunk's first.
      aicf_kblocks kn = kc_;
      if (PF) {
        kn.pf = reinterpret_cast<const char *>(j + 2 * NR <= tn
                                                   ? Bk + (c0 + j + NR) / NR * panelStride
                                                   : Bk + kc * NR + c0 / NR * panelStride);
        kn.pfl = kc * NV / aicf_bw<TB>;
      }
      const TB *panel = Bk + (c0 + j) / NR * panelStride;
      aicf_mma_panel<NV>(C + j, ldc, Ak, la, shifted(kn, panel, 0, NV), panel, NR, tm, kc, xc,
                         j);
    }
    for (; j < tn; j += 16) {
      const TB *panel = Bk + (c0 + j) / NR * panelStride;
      const int64_t c = (c0 + j) % NR;
      aicf_mma_panel<1>(C + j, ldc, Ak, la, shifted(kc_, panel, c, 1), panel + c * aicf_bw<TB>,
                        NR, tm, kc, xc, j);
    }
    if (G > 1)
      aicf_release(ap);
  });
}

} // namespace
)";

} // namespace aicf
