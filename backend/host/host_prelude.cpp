// The host kernels' first prelude text (see host_mma_prelude.h): includes, the scalar and
// vector helpers every kernel may call (bit casts, f16 / bf16 conversions, the branch-free
// aicf_expf / aicf_tanhf / aicf_erff, the per-thread arena).
#include "backend/host/host_mma_prelude.h"

namespace aicf {

const char *const kHostPrelude = R"(#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#if defined(__AVX512BF16__) || defined(__AVX512VNNI__) || defined(__AMX_TILE__)
#include <immintrin.h> // the bf16 / int8 micro-kernels' vdpbf16ps, vpdpbusd, AMX tiles (host_mma_prelude.cpp)
#endif
#if defined(__AMX_BF16__) && defined(__AMX_TILE__)
#include <sys/syscall.h> // the tile registers' permission (aicf_amx_ready)
#include <unistd.h>
#endif

namespace {

#define AICF_MATH inline __attribute__((always_inline))
AICF_MATH float aicf_bits_f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
AICF_MATH uint32_t aicf_f_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// IEEE binary16 / bfloat16 <-> float, round to nearest even (as support/half.h).
inline float aicf_h2f(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31)
    return aicf_bits_f(sign | 0x7f800000u | (mant << 13));
  return aicf_bits_f(sign | ((exp + 112) << 23) | (mant << 13));
}
inline uint16_t aicf_f2h(float f) {
  uint32_t u = aicf_f_bits(f), sign = (u >> 16) & 0x8000u, absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u);
  if (absu >= 0x477ff000u)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absu < 0x38800000u) {
    float scaled = aicf_bits_f(absu) * 16777216.0f;
    uint32_t q = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u)))
      ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((absu >> 23) - 112) << 10) | ((absu >> 13) & 0x3ffu), rest = absu & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return static_cast<uint16_t>(sign | h);
}
inline float aicf_bf2f(uint16_t h) { return aicf_bits_f(static_cast<uint32_t>(h) << 16); }
inline uint16_t aicf_f2bf(float f) {
  uint32_t u = aicf_f_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float aicf_rh(float f) { return aicf_h2f(aicf_f2h(f)); }
inline float aicf_rbf(float f) { return aicf_bf2f(aicf_f2bf(f)); }
// f32 as a tensor core reads a tf32 operand (PTX cvt.rna.tf32.f32: 10 mantissa bits, to nearest,
// ties away from zero; ir/precision.h roundToPrecision).
inline float aicf_rtf32(float f) {
  uint32_t u = aicf_f_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return f;
  return aicf_bits_f((u + 0x1000u) & 0xffffe000u);
}

// min/max propagate NaN; sign(NaN) is NaN.
template <class T> inline T aicf_min(T a, T b) { return (b < a || b != b) ? b : a; }
template <class T> inline T aicf_max(T a, T b) { return (a < b || b != b) ? b : a; }
template <class T> inline T aicf_sign(T x) {
  return x != x ? x : static_cast<T>((T(0) < x) - (x < T(0)));
}

// exp / tanh / erf in plain branch-free float arithmetic (selects only), always inlined so that
// the loops calling them vectorise; max relative error <= ~2.5e-7 against the correctly rounded
// value (tests/unit/test_kir.cpp), exact at +-inf, NaN, +-0, saturation and subnormals.
// exp: x = n ln2 + r, |r| <= ln2/2 (Cody-Waite), degree-6 polynomial, 2^n applied in two
// halves so that overflow to inf comes out right; NaN propagates. A result below the smallest
// normal float is 0 (x < ln FLT_MIN, as oneDNN's exp): a subnormal costs a microcode assist in
// the multiply that makes it and in every consumer that reads it (a Swin block's -100 window
// mask made its softmax 3.5x and the next product 27x their prediction); it differs from the
// true value by less than 1.2e-38.
// e^r for x = n ln2 + r (the reduction and polynomial both exps share); n in `n`.
AICF_MATH float aicf_exp_reduced(float x, int32_t &n) {
  float t = x * 1.44269504088896341f + 12582912.0f; // round to nearest: n in the low bits
  float fn = t - 12582912.0f;
  n = static_cast<int32_t>(aicf_f_bits(t) - aicf_f_bits(12582912.0f));
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * (r * r) + r + 1.0f;
}
AICF_MATH float aicf_expf(float x) {
  bool under = x < -87.33654f; // ln of the smallest normal float: the result would be subnormal
  x = x > 88.8f ? 88.8f : x;
  x = under ? -87.33654f : x;
  int32_t n;
  float p = aicf_exp_reduced(x, n);
  int32_t n1 = n >> 1, n2 = n - n1;
  float s1 = aicf_bits_f(static_cast<uint32_t>(n1 + 127) << 23);
  float s2 = aicf_bits_f(static_cast<uint32_t>(n2 + 127) << 23);
  return under ? 0.0f : p * s1 * s2;
}
// exp for erf's x in [-16, -1]: no clamps, one scale (the result is never subnormal).
AICF_MATH float aicf_expf_mid(float x) {
  int32_t n;
  float p = aicf_exp_reduced(x, n);
  return p * aicf_bits_f(static_cast<uint32_t>(n + 127) << 23);
}
// tanh: odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1) with the sign of x.
AICF_MATH float aicf_tanhf(float x) {
  float a = x < 0.0f ? -x : x, z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float r = a < 0.625f ? p * z * a + a : 1.0f - 2.0f / (aicf_expf(2.0f * a) + 1.0f);
  return aicf_bits_f(aicf_f_bits(r) | (aicf_f_bits(x) & 0x80000000u));
}
AICF_MATH float aicf_erff(float x) {
  float a = x < 0.0f ? -x : x, s = x * x;
  // |x| < 1: x * P(x^2).
  float q = 7.898210206e-05f;
  q = q * s - 8.024354128e-04f;
  q = q * s + 5.190053578e-03f;
  q = q * s - 2.685480854e-02f;
  q = q * s + 1.128361243e-01f;
  q = q * s - 3.761262884e-01f;
  q = q * s + 1.283791665e-01f;
  q = q * x + x;
  // |x| >= 1: 1 - t P(t) exp(-x^2), t = 1 / (1 + p|x|) (Abramowitz & Stegun 7.1.26), |x|
  // taken in [1, 4] (erf is 1 in float past 3.92; the lanes below 1 take q), so exp's argument
  // stays in [-16, -1] (ViT's erf-GELU MLP at one thread: ~2% less time than with aicf_expf).
  float b = a < 4.0f ? a : 4.0f;
  b = b > 1.0f ? b : 1.0f;
  float t = 1.0f / (1.0f + 0.3275911f * b);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  float r = 1.0f - p * t * aicf_expf_mid(-b * b);
  r = a < 1.0f ? q : r;
  r = aicf_bits_f(aicf_f_bits(r) | (aicf_f_bits(x) & 0x80000000u));
  return a != a ? x : r;
}
// sigmoid from e = exp(-|x|) in (0, 1], which cannot overflow: r = 1 / (1 + e) for x >= 0,
// e r below. e is formed as e' 2^-64 with e' = p 2^(n + 64) (|x| clamped to 104: one scale that
// stays normal), so that e r rounds once into the subnormals as 1 / (1 + expf(-x)) does; and
// where expf(-x) overflows (x <= -88.72284) the result is 0, as there. NaN propagates. (From
// 1 / (1 + aicf_expf(-x)), with its two scales and clamps, EfficientNet-B0's SiLU epilogues
// cost 6% more of the model: its 16 -> 96 expansion 0.76 -> 0.67 ms.)
AICF_MATH float aicf_sigmoid(float x) {
  float a = x < 0.0f ? -x : x;
  a = a < 104.0f ? a : 104.0f;
  int32_t n;
  float p = aicf_exp_reduced(-a, n);
  float e64 = p * aicf_bits_f(static_cast<uint32_t>(n + 64 + 127) << 23);
  float r = 1.0f / (1.0f + e64 * 5.42101086e-20f); // 2^-64
  float lo = a < 88.7228394f ? (e64 * r) * 5.42101086e-20f : 0.0f;
  float s = x < 0.0f ? lo : r;
  return x != x ? x : s;
}

// A kernel's per-call scratch (its band, its C tile: kernels.cpp's heap buffers) comes from a
// per-thread arena that calls reuse, released at the call's end (aicf_release: everything from
// the released buffer on). From malloc, a buffer above glibc's mmap threshold (128 KB, raised
// only once a larger block has been freed) was mapped and zeroed by the OS on every call, so a
// kernel's speed hung on which kernels ran before it (shufflenet_v2's 192 KB stage-2 conv: 0.21
// ms after a kernel that had freed 305 KB, 0.37 ms otherwise). A request that does not fit
// while the arena holds live buffers takes malloc this once; the arena grows to the high-water
// mark the next time it is empty.
struct aicf_scratch {
  char *base = nullptr;
  size_t cap = 0, top = 0, want = 0;
  ~aicf_scratch() { std::free(base); }
};
inline aicf_scratch &aicf_scratch_tls() {
  static thread_local aicf_scratch s;
  return s;
}
inline void *aicf_alloc(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  aicf_scratch &s = aicf_scratch_tls();
  if (s.top + bytes > s.cap) {
    s.want = s.want > s.top + bytes ? s.want : s.top + bytes;
    if (s.top != 0) {
      void *p = std::aligned_alloc(64, bytes);
      if (!p)
        std::abort();
      return p;
    }
    std::free(s.base);
    s.cap = s.want;
    s.base = static_cast<char *>(std::aligned_alloc(64, s.cap));
    if (!s.base)
      std::abort();
  }
  void *p = s.base + s.top;
  s.top += bytes;
  return p;
}
inline void aicf_release(void *p) {
  aicf_scratch &s = aicf_scratch_tls();
  char *c = static_cast<char *>(p);
  if (s.base && c >= s.base && c < s.base + s.cap) {
    if (size_t(c - s.base) < s.top)
      s.top = size_t(c - s.base);
  } else {
    std::free(p);
  }
}

)";

} // namespace aicf
