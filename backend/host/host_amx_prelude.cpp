// The host micro-kernels' AMX tile text (see host_mma_prelude.h): after kHostMmaBlocksPrelude,
// whose aicf_mma_f32_panels calls these for bf16 products where the -march has the tiles.
#include "backend/host/host_mma_prelude.h"

namespace aicf {

const char *const kHostAmxPrelude = R"(
#if defined(__AMX_TILE__) && (defined(__AMX_BF16__) || defined(__AMX_INT8__))
namespace {

// Products on AMX tiles (a CPU with amx-bf16 / amx-int8: --cpu-arch native on a Sapphire Rapids
// or later Xeon). tdpbf16ps multiplies a tile of 16 rows x 16 A pairs by one of 16 pair rows x
// 16 columns of B into 16 x 16 f32, 8192 products per instruction, ~6x vdpbf16ps' rate on one
// core (measured on this project's Xeon, docs/precision.md); tdpbusd 16 rows x 16 uint8 quads of
// A by 16 int8 quad rows of B into 16 x 16 i32 sums, 16384 products, exactly as vpdpbusd sums
// them (4 products exact in 16 bits, added into the i32 lane, wrapping). Eight tile registers,
// each 16 rows of 64 bytes: 0-3 the 2 x 2 C tiles of a 32 x 32 block, 4-5 its A tiles, 6-7 its
// B tiles. The registers need the process's permission (Linux arch_prctl, asked once) and the
// thread's tile configuration, loaded on every call (another library in the process may load
// its own).
struct alignas(64) aicf_tile_cfg {
  uint8_t palette, start, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
// The tile instructions as asm that names the memory it reads and writes: GCC 12's intrinsics
// declare none (ldtilecfg reads "8 bytes", so the configuration's rows were dead stores and
// the first tile load faulted; tile loads and stores of a staging buffer could be reordered
// with its ordinary stores and loads).
#define AICF_TILE_LOAD(t, base, stride)                                                        \
  __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #t "|tileloadd\t%%tmm" #t ", [%0+%1*1]}"  \
                   ::"r"((const void *)(base)), "r"((long)(stride)) : "memory")
#define AICF_TILE_STORE(t, base, stride)                                                       \
  __asm__ volatile("{tilestored\t%%tmm" #t ", (%0,%1,1)|tilestored\t[%0+%1*1], %%tmm" #t "}" \
                   ::"r"((void *)(base)), "r"((long)(stride)) : "memory")
#define AICF_TILE_ZERO(t, base, stride) __asm__ volatile("tilezero\t%%tmm" #t ::)
#define AICF_TILE_DPBF16(c, a, b)                                                              \
  __asm__ volatile("{tdpbf16ps\t%%tmm" #b ", %%tmm" #a ", %%tmm" #c                           \
                   "|tdpbf16ps\t%%tmm" #c ", %%tmm" #a ", %%tmm" #b "}" ::)
// (tdpbusd: the first source, A, unsigned bytes; the second, B, signed.)
#define AICF_TILE_DPBUSD(c, a, b)                                                              \
  __asm__ volatile("{tdpbusd\t%%tmm" #b ", %%tmm" #a ", %%tmm" #c                             \
                   "|tdpbusd\t%%tmm" #c ", %%tmm" #a ", %%tmm" #b "}" ::)
bool aicf_amx_ready() {
  static const bool ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                 18 /* XFEATURE_XTILEDATA */) == 0;
  if (ok) {
    aicf_tile_cfg cfg = {};
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) {
      cfg.colsb[t] = 64;
      cfg.rows[t] = 16;
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg) : "memory");
  }
  return ok;
}

// The block's C tiles (those of its na row and nb column tiles) to or from the staging cs.
#define AICF_C_TILES(OP)                                                                       \
  do {                                                                                         \
    OP(0, cs[0], 64);                                                                          \
    if (nb == 2)                                                                               \
      OP(1, cs[1], 64);                                                                        \
    if (na == 2)                                                                               \
      OP(2, cs[2], 64);                                                                        \
    if (na == 2 && nb == 2)                                                                    \
      OP(3, cs[3], 64);                                                                        \
  } while (0)
// One k tile's products into the block's C tiles: bf16 pairs (G = 2) or int8 quads (G = 4).
#define AICF_TILE_PRODUCTS(DP)                                                                 \
  do {                                                                                         \
    DP(0, 4, 6);                                                                               \
    if (nb == 2)                                                                               \
      DP(1, 4, 7);                                                                             \
    if (na == 2)                                                                               \
      DP(2, 5, 6);                                                                             \
    if (na == 2 && nb == 2)                                                                    \
      DP(3, 5, 7);                                                                             \
  } while (0)

// C[tm x tn] (ldc) from the chunk's A groups ap (G k each: bf16 pairs, or uint8 quads holding A
// + AO; rows padded to 16 with zeros, kg groups each, kg a multiple of 16, past kc zero or AO)
// times B's group rows (column c0 + j in panel (c0 + j) / NR, at group row p NR + (c0 + j) % NR
// of it), per 32 x 32 block. bf16: C's values (the init on the first chunk, else C) loaded
// into the C tiles, the k tiles accumulated into them. int8: the C tiles start at zero, and
// their i32 sums less AO times B's column sums (the vector kernel's comp) join the init or C
// after. Then the epilogue (the last chunk) or C. B's last k tile, where fewer than 16 group
// rows remain, is copied beside zeros: the rows past the chunk may lie past the weight.
template <int G, int AO, typename X, typename TB>
void aicf_amx_tiles(float *__restrict C, int64_t ldc, const uint32_t *__restrict ap, int64_t kg,
                    const TB *__restrict Bk, int64_t panelStride, int64_t NR, int64_t c0,
                    int64_t tm, int64_t tn, int64_t kc, const X &x) {
  const int64_t groups = (kc + G - 1) / G, kt = (groups + 15) / 16, tail = groups - 16 * (kt - 1);
  alignas(64) float cs[4][256];
  alignas(64) uint32_t bt[2][256];
  alignas(64) int32_t comp[32] = {};
  // The tile's start value of C's element (row, column jc + l), l < 16, into v.
  auto start = [&](int64_t row, int64_t jc, float *v) {
    if constexpr (X::fused) {
      if (x.first) {
        x.init(row, jc, v);
        return;
      }
    }
    std::memcpy(v, C + row * ldc + jc, 64);
  };
  for (int64_t j = 0; j < tn; j += 32) {
    const int nb = tn - j > 16 ? 2 : 1;
    const uint32_t *bp[2];
    for (int q = 0; q < nb; ++q) {
      const int64_t col = c0 + j + 16 * q;
      bp[q] = reinterpret_cast<const uint32_t *>(Bk + col / NR * panelStride + G * (col % NR));
      if (tail < 16) { // the last k tile's group rows beside zeros
        std::memset(bt[q], 0, sizeof bt[q]);
        for (int64_t p = 0; p < tail; ++p)
          std::memcpy(bt[q] + p * 16, bp[q] + (16 * (kt - 1) + p) * NR, 64);
      }
      if constexpr (G == 4 && AO != 0) {
        aicf_v16i sum = {};
        for (int64_t p = 0; p < groups; ++p)
          sum = aicf_dpbusd(sum, uint32_t(AO) * 0x01010101u,
                            *reinterpret_cast<const aicf_v16ub *>(bp[q] + p * NR));
        std::memcpy(comp + 16 * q, &sum, sizeof sum);
      }
    }
    for (int64_t i = 0; i < tm; i += 32) {
      const int na = tm - i > 16 ? 2 : 1;
      if constexpr (G == 2) {
        // The C tiles' start, rows past tm zero.
        for (int a = 0; a < na; ++a)
          for (int q = 0; q < nb; ++q)
            for (int64_t r = 0; r < 16; ++r) {
              const int64_t row = i + 16 * a + r;
              if (row >= tm)
                std::memset(cs[2 * a + q] + 16 * r, 0, 64);
              else
                start(row, j + 16 * q, cs[2 * a + q] + 16 * r);
            }
        AICF_C_TILES(AICF_TILE_LOAD);
      } else {
        AICF_C_TILES(AICF_TILE_ZERO);
      }
      const uint32_t *a0 = ap + i * kg;
      for (int64_t t = 0; t < kt; ++t) {
        const bool part = t == kt - 1 && tail < 16;
        AICF_TILE_LOAD(4, a0 + 16 * t, kg * 4);
        if (na == 2)
          AICF_TILE_LOAD(5, a0 + 16 * kg + 16 * t, kg * 4);
        if (part)
          AICF_TILE_LOAD(6, bt[0], 64);
        else
          AICF_TILE_LOAD(6, bp[0] + 16 * t * NR, NR * 4);
        if (nb == 2) {
          if (part)
            AICF_TILE_LOAD(7, bt[1], 64);
          else
            AICF_TILE_LOAD(7, bp[1] + 16 * t * NR, NR * 4);
        }
        if constexpr (G == 2)
          AICF_TILE_PRODUCTS(AICF_TILE_DPBF16);
        else
          AICF_TILE_PRODUCTS(AICF_TILE_DPBUSD);
      }
      AICF_C_TILES(AICF_TILE_STORE);
      for (int a = 0; a < na; ++a)
        for (int q = 0; q < nb; ++q)
          for (int64_t r = 0; r < 16 && i + 16 * a + r < tm; ++r) {
            float *v = cs[2 * a + q] + 16 * r;
            const int64_t row = i + 16 * a + r, jc = j + 16 * q;
            if constexpr (G == 4) {
              alignas(64) float s[16];
              start(row, jc, s);
              const int32_t *sum = reinterpret_cast<const int32_t *>(v);
              for (int l = 0; l < 16; ++l)
                s[l] += float(int32_t(uint32_t(sum[l]) - uint32_t(comp[16 * q + l])));
              std::memcpy(v, s, 64);
            }
            if constexpr (X::fused) {
              if (x.last) {
                x.epi(row, jc, v);
                continue;
              }
            }
            std::memcpy(C + row * ldc + jc, v, 64);
          }
    }
  }
}

} // namespace
#endif
)";

} // namespace aicf
