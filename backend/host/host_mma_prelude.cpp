// The host micro-kernels' source text (see host_mma_prelude.h).
#include "backend/host/host_mma_prelude.h"

namespace aicf {

const char *const kHostMmaPrelude =
    R"(// The bf16 / int8 micro-kernels' 16-lane types pass by value between internal functions; on
// a -march without AVX-512 (their emulation) GCC warns that such vectors pass differently than
// in old ABIs, which no caller outside this file sees.
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float aicf_v16f __attribute__((vector_size(64)));
typedef float aicf_v16fu __attribute__((vector_size(64), aligned(4)));

// The f32 micro-kernel's native vector (AICF_VL floats) and register file (AICF_VREGS), from the
// -march the file is built for. Its blocks hold C in vectors of this width (a 64-byte vector
// type on AVX2 has no register of its own: GCC moved it through memory and general registers,
// 20-70x slower). support/host_micro_kernel.h states the register block's rule; aicf_reg_groups
// and aicf_reg_rows spell it here.
#if defined(__AVX512F__)
#define AICF_VL 16
#define AICF_VREGS 32
#elif defined(__AVX__)
#define AICF_VL 8
#define AICF_VREGS 16
#elif defined(__aarch64__)
#define AICF_VL 4
#define AICF_VREGS 32
#else
#define AICF_VL 4
#define AICF_VREGS 16
#endif
typedef float aicf_vf __attribute__((vector_size(4 * AICF_VL)));
typedef float aicf_vfu __attribute__((vector_size(4 * AICF_VL), aligned(4)));
constexpr int aicf_vr = 16 / AICF_VL; // native vectors per 16-float column group
constexpr int64_t aicf_block_rows(int nvv) {
  return (AICF_VREGS - nvv) / nvv < 8 ? (AICF_VREGS - nvv) / nvv : 8;
}
// The tallest block with every B vector in a register (hostRegisterRows).
constexpr int64_t aicf_register_rows(int nvv) {
  return nvv >= 3                               ? aicf_block_rows(nvv)
         : (AICF_VREGS - nvv - 1) / nvv < 8 ? (AICF_VREGS - nvv - 1) / nvv
                                                : 8;
}
// 16-float column groups per register block of a panel nv groups wide, and its tallest rows.
constexpr int aicf_reg_groups(int nv) {
  return aicf_block_rows(nv * aicf_vr) >= 6                                     ? nv
         : nv % 2 == 0 && aicf_block_rows(nv / 2 * aicf_vr) >= 6 ? nv / 2
                                                                  : 1;
}
// Column groups per register block of mr rows (a short block takes more of the panel at once:
// a 1-row GEMV block on AVX2 holds 8 accumulators, not 2).
constexpr bool aicf_fits(int mr, int g) { return (mr + 1) * g * aicf_vr <= AICF_VREGS; }
constexpr int aicf_groups_for(int mr, int nv) {
  return aicf_fits(mr, nv) ? nv : nv % 2 == 0 && aicf_fits(mr, nv / 2) ? nv / 2 : 1;
}
constexpr int64_t aicf_reg_rows(int nv) {
  return aicf_block_rows(aicf_reg_groups(nv) * aicf_vr) > 1
             ? aicf_block_rows(aicf_reg_groups(nv) * aicf_vr)
             : 1;
}
constexpr int64_t aicf_register_rows_of(int nv) {
  return aicf_register_rows(aicf_reg_groups(nv) * aicf_vr) > 1
             ? aicf_register_rows(aicf_reg_groups(nv) * aicf_vr)
             : 1;
}

// A's k in blocks of L contiguous floats (a conv input, kir.h mma_tile views: the 16 lanes of a
// channel block, or a kernel row's taps of a plain input): block b0 + kk / L = (b0', b1, b2)
// over (*, n1, n2) starts at b0' s0 + b1 s1 + b2 s2; n1 == 0: k contiguous.
// g != 0: A's rows in groups of g, gs apart (a blocked conv's tile of several output rows of g
// pixels each): row i starts at (i / g) gs + (i % g) lda.
// offs, koffs, nblk: the blocks the call reads, nblk of them: block i at A's offset offs[i] and
// k offset koffs[i] into the call's K (aicf_kblock_chunks fills them per call: b0, b0 + 1, ...
// less the blocks of padding it skips).
// tn != 0 (aicf_taps, mma_tile's taps): digit b1 is a kernel row kh of a conv's band, and a
// block whose row reads outside [0, tn) for every row of the tile (tlo + kh td > tn - 1, or
// thi + kh td < 0; tlo / thi the input row kernel row 0 reads for the tile's first / last row)
// holds zeros only: it is skipped (DeepLabV3's dilation-12 3 x 3 conv over a 14 x 14 map: most
// of its kernel rows read padding for most output rows). With row groups (g) each group is
// one output row, ts input rows after the one before; cn != 0: digit b2 is a kernel column kw,
// and pixel p of a group reads input column clo + p cs + kw cd: each row block of a group
// then skips the blocks that read padding for all of its pixels (aicf_row_taps). dig: the
// blocks' (kh, kw) digits, kh in the high half.
// pf, pfl: the pfl lines of 64 bytes from pf on that are prefetched into L2: for a panel's
// passes the weight slice read next, for one pass (aicf_pass_prefetch) its share, which the
// micro-kernel spreads evenly over its k steps.
// comp (int8 products): the shift's share of the block's columns, AO times B's column sums
// over the K chunk (aicf_mma_f32_panels), which the int8 micro-kernel's sums start from.
struct aicf_kblocks {
  int64_t b0, s0, s1, s2, n1, n2, L = 16, g = 0, gs = 0;
  const int64_t *offs = nullptr;
  const char *pf = nullptr;
  int64_t pfl = 0;
  const int32_t *comp = nullptr;
  const int64_t *koffs = nullptr;
  int64_t nblk = 0;
  int64_t tlo = 0, thi = 0, td = 1, tn = 0, ts = 0, clo = 0, cs = 1, cd = 1, cn = 0;
  const int64_t *dig = nullptr;
  int64_t at(int64_t b) const { return b / (n1 * n2) * s0 + b / n2 % n1 * s1 + b % n2 * s2; }
  // Whether block b may hold values other than the padding's zeros (see tn).
  bool live(int64_t b) const {
    const int64_t r = b / n2 % n1 * td;
    return tn == 0 || (tlo + r <= tn - 1 && thi + r >= 0);
  }
};
inline aicf_kblocks aicf_taps(aicf_kblocks kb, int64_t lo, int64_t hi, int64_t d, int64_t n,
                              int64_t ts, int64_t clo, int64_t cs, int64_t cd, int64_t cn) {
  kb.tlo = lo;
  kb.thi = hi;
  kb.td = d;
  kb.tn = n;
  kb.ts = ts;
  kb.clo = clo;
  kb.cs = cs;
  kb.cd = cd;
  kb.cn = cn;
  return kb;
}
// The blocks of kb's table that rows [i, i + mr) of one row group read anything but padding
// through (see tn), into offs / koffs.
inline aicf_kblocks aicf_row_taps(aicf_kblocks kb, int64_t i, int64_t mr, int64_t *offs,
                                  int64_t *koffs) {
  const int64_t c0 = kb.clo + i * kb.cs, c1 = kb.clo + (i + mr - 1) * kb.cs;
  int64_t m = 0;
  for (int64_t e = 0; e < kb.nblk; ++e) {
    const int64_t r = (kb.dig[e] >> 32) * kb.td, c = (kb.dig[e] & 0xffffffff) * kb.cd;
    if (kb.tlo + r > kb.tn - 1 || kb.thi + r < 0 ||
        (kb.cn && (c0 + c > kb.cn - 1 || c1 + c < 0)))
      continue;
    offs[m] = kb.offs[e];
    koffs[m++] = kb.koffs[e];
  }
  kb.offs = offs;
  kb.koffs = koffs;
  kb.nblk = m;
  return kb;
}

// Runs f(kb', k0, kc) over K in chunks whose block offsets fit a table on the stack (kb' =
// kb with offs set), so that the micro-kernel looks each block's offset up: divided out per
// block they cost resnet18's 56 x 56 convs 9% where GCC kept the micro-kernel out of line,
// and stepped through (b1, b2) the branches made GCC spill the accumulators around every block
// (its 7 x 7 stem, blocks of 7 taps). Without blocks (n1 == 0): f(kb, 0, K).
#ifndef AICF_KBLOCK_TABLE
#define AICF_KBLOCK_TABLE 256
#endif
template <typename F>
inline void aicf_kblock_chunks(aicf_kblocks kb, int64_t K, F &&f) {
  if (kb.n1 == 0) {
    f(kb, int64_t(0), K);
    return;
  }
  int64_t offs[AICF_KBLOCK_TABLE], koffs[AICF_KBLOCK_TABLE], dig[AICF_KBLOCK_TABLE];
  const int64_t span = AICF_KBLOCK_TABLE * kb.L;
  for (int64_t k0 = 0; k0 < K; k0 += span) {
    const int64_t kc = K - k0 < span ? K - k0 : span, nb = (kc + kb.L - 1) / kb.L;
    int64_t m = 0;
    for (int64_t i = 0; i < nb; ++i) {
      const int64_t b = kb.b0 + k0 / kb.L + i;
      if (!kb.live(b))
        continue;
      offs[m] = kb.at(b);
      dig[m] = (b / kb.n2 % kb.n1) << 32 | b % kb.n2;
      koffs[m++] = i * kb.L;
    }
    aicf_kblocks sub = kb;
    sub.offs = offs;
    sub.koffs = koffs;
    sub.dig = dig;
    sub.nblk = m;
    f(sub, k0, kc);
  }
}

// A tile's fused init and epilogue (kir.h mma_tile init / epilogue). Unfused (aicf_unfused),
// the accumulators start from C and end in C. Fused (aicf_fuse), on the reduction's first K step
// each accumulator vector starts from init(i, j, v) (v: the 16 floats of the tile's row i,
// columns j .. j + 15) instead of C, and on its last step goes to epi(i, j, v) instead of C: the
// bias, the activation and the output's store happen on the registers, not as passes over the
// C tile (a 16 -> 96 pointwise conv's K of 16 left those passes a third of its time).
// R = aicf_rows<S...>: the row-block heights the tile's blocks take, NVs the block widths (bit
// NV: NV vectors; the printer knows both from the tile's shape). Those get a micro-kernel of
// their own with the init and epilogue inlined; any other block runs the shared micro-kernel
// on a block buffer between out-of-line init and epilogue calls. (Inlined into every height
// and width, the fused kernels multiplied the C++ compile time by ten.)
template <int... S>
struct aicf_rows {};
struct aicf_unfused {
  static constexpr bool fused = false;
  bool first = false, last = false;
};
template <int NVs, bool Apart, typename I, typename F, typename R>
struct aicf_fused {
  static constexpr bool fused = true;
  static constexpr int nvs = NVs; // bit NV: blocks NV vectors wide get their own micro-kernels
  static constexpr bool apart = Apart; // those micro-kernels out of line
  using rows = R;
  bool first, last;
  I init;
  F epi;
};
template <int NVs, bool Apart, int... S, typename I, typename F>
inline aicf_fused<NVs, Apart, I, F, aicf_rows<S...>> aicf_fuse(bool first, bool last, I init,
                                                               F epi) {
  return {first, last, init, epi};
}

// The micro-kernel's k loop: acc[MR][NV] += A[MR x K] (lda) * B[K x AICF_VL*NV] (ldb), NV
// native vectors. KB: A's k in blocks of L (aicf_kblocks): element (i, k) at
// i * lda + kb.at(kb.b0 + k / L) + k % L.
template <int MR, int NV, bool KB>
inline __attribute__((always_inline)) void
aicf_mma_acc(aicf_vf (&acc)[MR][NV], const float *__restrict A, int64_t lda, aicf_kblocks kb,
             const float *__restrict B, int64_t ldb, int64_t K) {
  // K in steps: blocks of L for a blocked A (each at the offset kb.offs gives), else one step
  // of K.
  // Prefetching (kb.pfl lines over the K steps), a dense A's K goes in steps of 16 too: the
  // prefetches are issued per step, outside the k loop (inside it, even an empty prefetch loop
  // cost resnet18's stem 10%).
  const char *__restrict pf = kb.pf;
  const int64_t pfl = kb.pfl;
  // A blocked A's steps are the blocks the table lists (koffs: their k), the padding's left out.
  const int64_t step = KB ? kb.L : pfl ? 16 : K;
  const int64_t span = KB ? kb.nblk * step : K;
  // Lines per step, divided once here (an idiv per step cost more than the prefetches).
  const int64_t per = pfl && span ? (pfl * step + span - 1) / span : 0;
  int64_t pfd = 0; // lines prefetched so far
  const int64_t *__restrict offs = kb.offs;
  const int64_t *__restrict koffs = kb.koffs;
  // A 7 x 4 block's 28 accumulators, 4 B vectors and a broadcast are 33 of AVX-512's 32
  // registers: GCC 12 spilled an accumulator (a load, an FMA and a store on its chain every k
  // step). The last B vector instead stays in memory, each row's FMA operand: crnn_recognizer's
  // 3 x 3 convs 4-6% faster on one AMD EPYC (Zen 5) core. (A 2-vector block instead keeps
  // both: support/host_micro_kernel.h hostBlockRows.)
#if defined(__x86_64__) && defined(__FMA__)
  constexpr int NB = MR * NV + NV + 1 > AICF_VREGS ? NV - 1 : NV;
#else
  constexpr int NB = NV;
#endif
  for (int64_t s = 0, blk = 0; s < span; s += step, ++blk) {
    const int64_t k0 = KB ? koffs[blk] : s;
    const float *__restrict Ab = KB ? A + offs[blk] : A + k0;
    const float *__restrict Bb = B + k0 * ldb;
    const int64_t kn = K - k0 < step ? K - k0 : step;
    if (pfl)
      for (const int64_t e = pfd + per < pfl ? pfd + per : pfl; pfd < e; ++pfd)
        __builtin_prefetch(pf + pfd * 64, 0, 2);
    for (int64_t kk = 0; kk < kn; ++kk) {
      aicf_vf b[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j)
        b[j] = *reinterpret_cast<const aicf_vfu *>(Bb + kk * ldb + AICF_VL * j);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const float a = Ab[i * lda + kk];
#pragma GCC unroll 4
        for (int j = 0; j < NB; ++j)
          acc[i][j] += a * b[j];
#if defined(__x86_64__) && defined(__FMA__)
        if constexpr (NB < NV) { // (a - 0 is a, -0 and NaN included: the broadcast alone)
          const aicf_vf av = a - aicf_vf{};
          asm("vfmadd231ps %1, %2, %0"
              : "+v"(acc[i][NV - 1])
              : "m"(*reinterpret_cast<const aicf_vfu *>(Bb + kk * ldb + AICF_VL * (NV - 1))),
                "v"(av));
        }
#endif
      }
    }
  }
}

// bf16 products (--precision bf16, host): B a weight packed in k pairs (passes/pack_weights.cpp:
// pair row p holds (B[2p][j], B[2p+1][j]) for each column j, as uint16_t bf16 bits), A f32 rounded
// to bf16 pairs as it is read, products accumulated in f32. aicf_bw<TB>: elements per column in a
// B row (1 for f32, 2 for pairs); a k row still starts k * ldb elements in (k even).
template <typename TB>
constexpr int64_t aicf_bw = sizeof(float) / sizeof(TB);
// A's element as the micro-kernel reads it beside a B of TB: f32, or bf16 pairs beside bf16.
template <typename TB>
struct aicf_a_of {
  using type = float;
};
template <>
struct aicf_a_of<uint16_t> {
  using type = uint32_t;
};
typedef uint32_t aicf_v16u __attribute__((vector_size(64)));

// n <= 16 floats from a as 8 bf16 pairs (element 2q low, 2q + 1 high; past n zero), rounded as
// vcvtneps2bf16 does: to nearest even, a denormal as zero of its sign, a NaN quiet.
AICF_MATH void aicf_bf16_pairs(const float *__restrict a, int64_t n, uint32_t *__restrict out) {
#if defined(__AVX512BF16__)
  const __m512 v = n >= 16 ? _mm512_loadu_ps(a) : _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), a);
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(out), __m256i(_mm512_cvtneps_pbh(v)));
#else
  auto r = [](float f) -> uint32_t {
    uint32_t u = aicf_f_bits(f);
    if ((u & 0x7f800000u) == 0)
      return (u >> 16) & 0x8000u;
    return aicf_f2bf(f);
  };
  for (int64_t q = 0; q < 8; ++q)
    out[q] = (2 * q < n ? r(a[2 * q]) : 0u) | (2 * q + 1 < n ? r(a[2 * q + 1]) << 16 : 0u);
#endif
}

// acc + a . b per lane over one pair (a: A's pair broadcast, b: 16 pairs of B), as vdpbf16ps
// computes it: the high products first, each product exact in f32 and each sum rounded to
// nearest even (bf16 inputs denormal as zero, a denormal sum flushed: the emulation keeps
// those, which only tiny values reach).
AICF_MATH aicf_v16f aicf_dpbf16(aicf_v16f acc, uint32_t a, aicf_v16u b) {
#if defined(__AVX512BF16__)
  return aicf_v16f(_mm512_dpbf16_ps(__m512(acc), __m512bh(_mm512_set1_epi32(int(a))), __m512bh(b)));
#else
  const float ahi = aicf_bits_f(a & 0xffff0000u), alo = aicf_bits_f(a << 16);
  acc += ahi * (aicf_v16f)(b & 0xffff0000u);
  acc += alo * (aicf_v16f)(b << 16);
  return acc;
#endif
}

// int8 products (precision int8, host): B an int8 weight packed in k quads
// (passes/pack_weights.cpp: quad row q holds (B[4q][j], .., B[4q + 3][j]) for each column j),
// A integers read as uint8 after adding the tile's shift AO (A + AO lies in [0, 255]: the
// frontend's x_offset), as vpdpbusd multiplies them: 4 products of uint8 by int8 summed into
// an i32 lane, exactly. The shift's share, AO times B's column sums, starts each sum (negated:
// aicf_kblocks::comp), and the exact i32 result joins the f32 accumulator.
template <>
struct aicf_a_of<int8_t> {
  using type = uint32_t;
};
typedef int32_t aicf_v16i __attribute__((vector_size(64)));
typedef uint32_t aicf_v16ub __attribute__((vector_size(64), aligned(1)));

// n <= 16 floats from a (integers) plus AO as 4 uint8 quads (element 4q + t in byte t of
// out[q]; past n, AO), as vcvtps2dq, vpaddd, vpmaxsd with 0 and vpmovusdb give them: rounded to
// nearest even, saturated to [0, 255] (only a channel block's padding lanes, beside zero
// weights, can hold values outside it; a NaN or an out-of-range value reads as 0).
template <int AO>
AICF_MATH void aicf_u8_quads(const float *__restrict a, int64_t n, uint32_t *__restrict out) {
#if defined(__AVX512VNNI__)
  const __m512 v = n >= 16 ? _mm512_loadu_ps(a) : _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), a);
  // (The zero-masked forms with every lane set: GCC 12 warns that the plain ones' undefined
  // pass-through may be used uninitialized.)
  const __mmask16 all = 0xffff;
  __m512i i = _mm512_add_epi32(_mm512_maskz_cvtps_epi32(all, v), _mm512_set1_epi32(AO));
  i = _mm512_maskz_max_epi32(all, i, _mm512_setzero_si512());
  _mm_storeu_si128(reinterpret_cast<__m128i *>(out), _mm512_maskz_cvtusepi32_epi8(all, i));
#else
  auto u8 = [](float f) -> uint32_t {
    const float r = __builtin_nearbyintf(f);
    int64_t v = r >= -2147483648.0f && r < 2147483648.0f ? int64_t(r) : int64_t(INT32_MIN);
    v = int64_t(int32_t(uint32_t(v) + uint32_t(AO))); // vpaddd wraps
    return v < 0 ? 0u : v > 255 ? 255u : uint32_t(v);
  };
  for (int64_t q = 0; q < 4; ++q) {
    uint32_t w = 0;
    for (int64_t t = 0; t < 4; ++t)
      w |= u8(4 * q + t < n ? a[4 * q + t] : 0.0f) << (8 * t);
    out[q] = w;
  }
#endif
}

// acc + a . b per lane over one quad (a: A's 4 uint8 broadcast, b: 16 quads of int8), as
// vpdpbusd computes it: the 4 products (exact in 16 bits) summed into the i32 lane, wrapping.
AICF_MATH aicf_v16i aicf_dpbusd(aicf_v16i acc, uint32_t a, aicf_v16u b) {
#if defined(__AVX512VNNI__)
  return aicf_v16i(_mm512_dpbusd_epi32(__m512i(acc), _mm512_set1_epi32(int(a)), __m512i(b)));
#else
  for (int t = 0; t < 4; ++t)
    acc += int32_t((a >> (8 * t)) & 0xffu) * (aicf_v16i(b << (24 - 8 * t)) >> 24);
  return acc;
#endif
}

// The dot-product k loop of bf16 pairs (G = 2: vdpbf16ps into f32) and int8 quads (G = 4:
// vpdpbusd into i32): acc[MR][NV] += A[MR x K] * B[K x 16*NV], A already in groups of G k (row i
// at i * lda groups: aicf_pack_pairs / aicf_pack_quads), B in groups (ldb columns per k row,
// a group row 16 G elements per vector): each group of A, one broadcast from memory, times the
// NV vectors of B's group row. K in steps of 16 (16 / G groups) for the prefetches.
AICF_MATH aicf_v16f aicf_dot(aicf_v16f acc, uint32_t a, aicf_v16u b) {
  return aicf_dpbf16(acc, a, b);
}
AICF_MATH aicf_v16i aicf_dot(aicf_v16i acc, uint32_t a, aicf_v16u b) {
  return aicf_dpbusd(acc, a, b);
}
template <int G, int MR, int NV, typename Acc, typename TB>
inline __attribute__((always_inline)) void
aicf_dot_loop(Acc (&acc)[MR][NV], const uint32_t *__restrict A, int64_t lda, aicf_kblocks kb,
              const TB *__restrict B, int64_t ldb, int64_t K) {
  constexpr int S = 16 / G; // groups per step of 16 k
  const char *__restrict pf = kb.pf;
  const int64_t pfl = kb.pfl;
  const int64_t per = pfl ? (pfl * 16 + K - 1) / K : 0;
  int64_t pfd = 0;
  const int64_t P = (K + G - 1) / G;
  for (int64_t p0 = 0; p0 < P; p0 += S) {
    if (pfl)
      for (const int64_t e = pfd + per < pfl ? pfd + per : pfl; pfd < e; ++pfd)
        __builtin_prefetch(pf + pfd * 64, 0, 2);
    auto group = [&](int64_t p) __attribute__((always_inline)) {
      aicf_v16u b[NV];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j)
        b[j] = *reinterpret_cast<const aicf_v16ub *>(B + G * p * ldb + 16 * G * j);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j)
          acc[i][j] = aicf_dot(acc[i][j], A[i * lda + p], b[j]);
    };
    if (P - p0 >= S) {
#pragma GCC unroll 8
      for (int q = 0; q < S; ++q)
        group(p0 + q);
    } else {
      for (int64_t p = p0; p < P; ++p)
        group(p);
    }
  }
}

// The int8 k loop: acc[MR][NV] = A[MR x K] * B[K x 16*NV] - comp (the shift's share).
template <int MR, int NV>
inline __attribute__((always_inline)) void
aicf_mma_acc_i8(aicf_v16i (&acc)[MR][NV], const uint32_t *__restrict A, int64_t lda,
                aicf_kblocks kb, const int8_t *__restrict B, int64_t ldb, int64_t K) {
#pragma GCC unroll 4
  for (int j = 0; j < NV; ++j) {
    aicf_v16i c = {};
    std::memcpy(&c, kb.comp + 16 * j, sizeof c);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
      acc[i][j] = -c;
  }
  aicf_dot_loop<4>(acc, A, lda, kb, B, ldb, K);
}

// A's tile [tm x kc] (lda, its k in blocks of kb.L at kb.offs when kb.n1, rows in groups when
// kb.g) converted into ap, row r at r * kg groups of 4 bytes (pairs or quads of k; kg a multiple
// of 4, zero past kc): conv turns up to 16 floats into 16 elements of EB bytes (zeros, or the
// int8 shift, past its count).
//  * Blocks of 16 (a channel block) or none (dense rows): each row's runs converted in place.
//  * Blocks of another length (a plain input's kernel-row taps, resnet's 7 x 7 stem in blocks
//    of 7): a pair or quad may straddle two blocks, so each block's 16 elements are stored at
//    its k offset in k order (its trailing ones overwritten by the next block's), cut where
//    the row ends.
//  * Such short blocks are converted a vector each (16 lanes for L floats), so where the floats
//    the rows read take fewer vectors than the blocks (always, for a conv's overlapping windows
//    over its band), those floats are converted once into scratch and the blocks copied from
//    there: resnet18's 7 x 7 stem 2.54 -> 1.79 ms in bf16, 2.72 -> 1.39 ms in int8 (one AMD EPYC
//    Zen 4 core). (Blocks of 16 convert as fast as they copy: done so, resnet18's 3 x 3 convs
//    took 1.46 -> 1.69 ms.)
template <int EB, typename Conv>
inline void aicf_pack_groups(uint32_t *__restrict ap, int64_t kg, const float *__restrict A,
                             int64_t lda, const aicf_kblocks &kb, int64_t tm, int64_t kc,
                             Conv conv) {
  auto rowAt = [&](int64_t r) { return kb.g ? r / kb.g * kb.gs + r % kb.g * lda : r * lda; };
  const int64_t bytes = kg * 4;
  // 16 elements from `from` at byte `at` of row o, cut where the row ends.
  auto put = [bytes](unsigned char *__restrict o, int64_t at, const void *from) {
    if (at + 16 * EB <= bytes)
      std::memcpy(o + at, from, 16 * EB);
    else
      std::memcpy(o + at, from, size_t(bytes - at));
  };
  // Copies block e's runs from src (elements of EB bytes, offsets as A's) into row o.
  // Stores row o's blocks in k order, each in runs of 16 elements: run(at, n) gives the run
  // of A's floats from offset `at` (n of them meant) as EB-byte elements.
  auto blocks = [&](unsigned char *__restrict o, auto run) {
    for (int64_t e = 0; e < kb.nblk && kb.koffs[e] < kc; ++e) {
      const int64_t k = kb.koffs[e], n = kc - k < kb.L ? kc - k : kb.L;
      for (int64_t s = 0; s < n; s += 16)
        put(o, (k + s) * EB, run(kb.offs[e] + s, n - s < 16 ? n - s : 16));
    }
    std::memset(o + kc * EB, 0, size_t(bytes - kc * EB));
  };
  if (kb.n1 && kb.L != 16 && tm > 0) {
    // The floats read: [lo, span) from A, when no offset is negative.
    int64_t last = rowAt(tm - 1), far = 0, lo = INT64_MAX;
    if (kb.g && tm > kb.g) {
      const int64_t prev = rowAt((tm - 1) / kb.g * kb.g - 1);
      last = prev > last ? prev : last;
    }
    for (int64_t e = 0; e < kb.nblk && kb.koffs[e] < kc; ++e) {
      const int64_t n = kc - kb.koffs[e] < kb.L ? kc - kb.koffs[e] : kb.L;
      far = kb.offs[e] + n > far ? kb.offs[e] + n : far;
      lo = kb.offs[e] < lo ? kb.offs[e] : lo;
    }
    const int64_t span = lo <= far ? last + far - lo : 0;
    if (span > 0 && lo >= 0 && lda >= 0 && kb.gs >= 0 && span * kb.L < 16 * tm * kc) {
      unsigned char *cv = static_cast<unsigned char *>(aicf_alloc(size_t(span + 32) * EB));
      for (int64_t i = 0; i < span; i += 16) {
        uint32_t t[4 * EB];
        conv(A + lo + i, span - i < 16 ? span - i : 16, t);
        std::memcpy(cv + i * EB, t, sizeof t);
      }
      // Every row copies the same runs (its byte in the row, its element in scratch past the
      // row's start), listed once; the whole 16-element runs then copy in a tight loop (the
      // loop over the blocks with its cut per run was half of resnet18's int8 stem: on one core
      // of this project's Xeon the stem 1.36 -> 0.82 ms in int8, 1.32 -> 0.79 ms in bf16).
      int64_t runs = 0;
      for (int64_t e = 0; e < kb.nblk && kb.koffs[e] < kc; ++e)
        runs += ((kc - kb.koffs[e] < kb.L ? kc - kb.koffs[e] : kb.L) + 15) / 16;
      int64_t *dst = static_cast<int64_t *>(aicf_alloc(size_t(2 * runs + 1) * 8)),
              *from = dst + runs, whole = 0;
      for (int64_t e = 0, i = 0; e < kb.nblk && kb.koffs[e] < kc; ++e) {
        const int64_t k = kb.koffs[e], n = kc - k < kb.L ? kc - k : kb.L;
        for (int64_t s = 0; s < n; s += 16, ++i) {
          dst[i] = (k + s) * EB;
          from[i] = (kb.offs[e] - lo + s) * EB;
          whole += dst[i] + 16 * EB <= bytes ? 1 : 0; // (runs cut by the row's end come last)
        }
      }
      for (int64_t r = 0; r < tm; ++r) {
        const unsigned char *src = cv + rowAt(r) * EB;
        unsigned char *__restrict o = reinterpret_cast<unsigned char *>(ap + r * kg);
        for (int64_t i = 0; i < whole; ++i)
          std::memcpy(o + dst[i], src + from[i], 16 * EB);
        for (int64_t i = whole; i < runs; ++i)
          std::memcpy(o + dst[i], src + from[i], size_t(bytes - dst[i]));
        std::memset(o + kc * EB, 0, size_t(bytes - kc * EB));
      }
      aicf_release(dst);
      aicf_release(cv);
      return;
    }
  }
  if (kb.n1 && kb.L != 16) {
    for (int64_t r = 0; r < tm; ++r) {
      const float *row = A + rowAt(r);
      uint32_t t[4 * EB];
      blocks(reinterpret_cast<unsigned char *>(ap + r * kg),
             [&](int64_t at, int64_t n) -> const void * {
               conv(row + at, n, t);
               return t;
             });
    }
    return;
  }
  // Blocks of 16 or dense rows: whole blocks, then the cut one, then zeros. (The blocks'
  // offsets in locals: read through `kb` the loop reloaded them after every store, 20
  // instructions a block, a sixth of resnet18's int8 time on AMX tiles.)
  const int64_t *const offs = kb.n1 ? kb.offs : nullptr;
  const int64_t whole = kc / 16, words = 4 * EB;
  for (int64_t r = 0; r < tm; ++r) {
    const float *row = A + rowAt(r);
    uint32_t *out = ap + r * kg;
    if (offs)
      for (int64_t blk = 0; blk < whole; ++blk)
        conv(row + offs[blk], 16, out + blk * words);
    else
      for (int64_t blk = 0; blk < whole; ++blk)
        conv(row + blk * 16, 16, out + blk * words);
    int64_t w = whole * words;
    if (kc > whole * 16) {
      conv(row + (offs ? offs[whole] : whole * 16), kc - whole * 16, out + w);
      w += words;
    }
    for (; w < kg; ++w)
      out[w] = 0;
  }
}

// A's tile [tm x kc] (as aicf_pack_pairs reads it) plus AO as uint8 quads into ap, row r at
// r * kq quads (kq a multiple of 4, past kc: AO beside B's zero rows, or past the quads read).
template <int AO>
inline void aicf_pack_quads(uint32_t *__restrict ap, int64_t kq, const float *__restrict A,
                            int64_t lda, const aicf_kblocks &kb, int64_t tm, int64_t kc) {
  aicf_pack_groups<1>(ap, kq, A, lda, kb, tm, kc, [](const float *a, int64_t n, uint32_t *o) {
    aicf_u8_quads<AO>(a, n, o);
  });
}

// The bf16 k loop (aicf_dot_loop's pairs). (KB: never at run time, aicf_mma_f32_panels packs A
// in dense rows; instantiated all the same.)
template <int MR, int NV, bool KB>
inline __attribute__((always_inline)) void
aicf_mma_acc(aicf_v16f (&acc)[MR][NV], const uint32_t *__restrict A, int64_t lda, aicf_kblocks kb,
             const uint16_t *__restrict B, int64_t ldb, int64_t K) {
  aicf_dot_loop<2>(acc, A, lda, kb, B, ldb, K);
}

// A's tile [tm x kc] (lda, its k in blocks of 16 at kb.offs when kb.n1, rows in groups when kb.g)
// rounded to bf16 pairs into ap, row r at r * kp pairs (kp a multiple of 8, past kc zero): once
// per K chunk, for every panel and row block that reads it (rounded per block inside the k
// loop instead, the conversions held a 7 x 64 block to 60% of the pairs' rate).
inline void aicf_pack_pairs(uint32_t *__restrict ap, int64_t kp, const float *__restrict A,
                            int64_t lda, const aicf_kblocks &kb, int64_t tm, int64_t kc) {
  aicf_pack_groups<2>(ap, kp, A, lda, kb, tm, kc, [](const float *a, int64_t n, uint32_t *o) {
    aicf_bf16_pairs(a, n, o);
  });
}
)";

} // namespace aicf
