// Integer helpers for shapes, tiles and alignment, shared by every layer (one definition each).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace aicf {

// Ceiling of a / b for b > 0 (any sign of a); 0 when b <= 0, so an unset tile knob costs
// nothing instead of dividing by zero.
inline int64_t ceilDiv(int64_t a, int64_t b) {
  if (b <= 0)
    return 0;
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
// Floor of a / b for b > 0 (any sign of a).
inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
// a rounded up to a multiple of b (b > 0).
inline int64_t roundUp(int64_t a, int64_t b) {
  return ceilDiv(a, b) * b;
}
// The same, for byte offsets and sizes.
inline int64_t alignUp(int64_t x, int64_t a) {
  return roundUp(x, a);
}
// The smallest power of two >= v (1 for v <= 1).
inline int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v)
    p *= 2;
  return p;
}
// Product of dims[from, to) (1 for an empty range).
inline int64_t product(const std::vector<int64_t> &dims, size_t from = 0,
                       size_t to = std::numeric_limits<size_t>::max()) {
  int64_t n = 1;
  for (size_t i = from; i < std::min(to, dims.size()); ++i)
    n *= dims[i];
  return n;
}

} // namespace aicf
