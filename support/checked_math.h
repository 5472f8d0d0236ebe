// Overflow-checked int64 arithmetic for sizes (element counts, byte sizes, offsets, shape
// inference). Shapes come from user files and flags, so a product of dims can exceed int64; plain
// `*` would wrap silently (undefined behaviour) and the wrapped value would reach the generated
// code. These helpers report overflow instead; callers turn it into a UserError naming the input
// or node. The size limits they are checked against are here too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace aicf {

// Size limits (docs/safety.md, "Size limits"), enforced where shapes enter the compiler (the ONNX
// importer's inputs, --dim and
// --shape values, initializers, every node's inferred result, the IR verifier) so that no later
// size computation can overflow. Generated host and CUDA code index with int64, but a CUDA grid
// has at most 2^31-1 blocks along x (the printer flattens grids onto x), and byte sizes and
// offsets are products of element counts: capping each tensor at 2^31-1 elements (the limit
// TensorRT uses too) keeps every grid launchable and every index, byte size (at most 16 GiB per
// tensor) and offset far inside int64.
inline constexpr int64_t kMaxTensorElements = (int64_t(1) << 31) - 1;
// All weights together, and the activation arena, at most 1 TiB each (sums of per-tensor sizes).
inline constexpr int64_t kMaxTotalBytes = int64_t(1) << 40;

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

inline std::optional<int64_t> checkedSub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

// Product of `dims` (1 for none); nullopt when it overflows int64.
inline std::optional<int64_t> checkedProduct(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (__builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

} // namespace aicf
