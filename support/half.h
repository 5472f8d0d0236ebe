// IEEE binary16 and bfloat16 conversions (round to nearest even), used wherever f16/bf16
// tensors are read or written on the host.
#pragma once

#include <cstdint>
#include <cstring>

namespace aicf {

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16ToFloat(uint16_t h) {
  return bitsToFloat(static_cast<uint32_t>(h) << 16);
}

inline uint16_t floatToBf16(float f) {
  uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN
    return static_cast<uint16_t>((u >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float f16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0)
      return bitsToFloat(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31)
    return bitsToFloat(sign | 0x7f800000u | (mant << 13));
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToF16(float f) {
  uint32_t u = floatToBits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7e00u); // NaN
  if (absu >= 0x477ff000u)                        // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absu < 0x38800000u) { // below the smallest normal half (2^-14): subnormal or zero
    // value in units of 2^-24, rounded to nearest even
    float a = bitsToFloat(absu);
    float scaled = a * 16777216.0f; // exact (power-of-two scaling)
    uint32_t q = static_cast<uint32_t>(scaled);
    float rem = scaled - static_cast<float>(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u)))
      ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t exp = ((absu >> 23) - 112) << 10;
  uint32_t mant = (absu >> 13) & 0x3ffu;
  uint32_t rest = absu & 0x1fffu;
  uint32_t h = exp | mant;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h; // may carry into the exponent, which is the correct rounding
  return static_cast<uint16_t>(sign | h);
}

} // namespace aicf
