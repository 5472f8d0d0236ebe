// Shared machinery for the interpreter's kernels (interp/kernels*.cpp): the kernel context,
// dtype conversion to the compute types (fp32 for floats, int64 for integers), strided row
// iteration (the one broadcasting / permuting / reducing loop every kernel builds on), and the
// scalar math shared by standalone ops and contraction epilogues.
#pragma once

#include "ir/graph.h"
#include "ir/types.h"
#include "support/diagnostics.h"
#include "support/int_math.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace aicf::interp {

// What a kernel sees: the node (attributes, location), its operand tensors and result types
// (inferred from the operand tensors' actual types).
struct KernelCtx {
  const Node &node;
  const std::vector<const Tensor *> &in;
  const std::vector<TensorType> &outTypes;

  const Tensor &x(size_t i) const { return *in.at(i); }
  size_t numIn() const { return in.size(); }
  const TensorType &outType(size_t i = 0) const { return outTypes.at(i); }
  // A UserError naming the node: "LOCATION: op: msg".
  [[noreturn]] void fail(const std::string &msg) const {
    throw UserError(cat(node.where(), ": ", node.name(), ": ", msg));
  }
};

// ---- dtype conversion -------------------------------------------------------------------------

// Float view of a tensor of any dtype: f32 data is used in place, anything else converted.
class FloatIn {
public:
  explicit FloatIn(const Tensor &t);
  FloatIn(const FloatIn &) = delete;
  FloatIn &operator=(const FloatIn &) = delete;
  const float *data() const { return p_; }
  float operator[](int64_t i) const { return p_[i]; }

private:
  const float *p_ = nullptr;
  std::vector<float> buf_;
};

std::vector<float> toFloats(const Tensor &t);
// A tensor of `type` from fp32 values, rounded to the dtype (f16/bf16 to nearest even; integers
// truncated; bool from nonzero).
Tensor fromFloats(const float *values, const TensorType &type);
inline Tensor fromFloats(const std::vector<float> &v, const TensorType &type) {
  return fromFloats(v.data(), type);
}
// f64 tensors (which the float paths above would round to f32) as doubles, and back: the
// elementwise kernels compute f64 in double (wantsF64: an operand or the result is f64).
Tensor fromDoubles(const std::vector<double> &values, const TensorType &type);
bool wantsF64(const KernelCtx &ctx);
std::vector<int64_t> toInt64s(const Tensor &t); // floats truncated toward zero
// A tensor of `type` from int64 values, narrowed with wrap-around (bool: nonzero).
Tensor fromInt64s(const std::vector<int64_t> &values, const TensorType &type);

// ---- strided row iteration --------------------------------------------------------------------

// Strides (in elements) of `shape` when broadcast to `out` (right-aligned, numpy rules): 0 on
// broadcast axes. The result has out.size() entries.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &out);

// Iterates over all elements of `shape` for N operands with their own strides, one innermost row
// at a time: f(offsets, innerStrides, len), offsets/innerStrides being std::array<int64_t, N>.
// Adjacent axes that are contiguous for every operand are merged first so rows are long.
template <size_t N, typename F>
void forEachRow(const std::vector<int64_t> &shape,
                const std::array<std::vector<int64_t>, N> &strides, F &&f) {
  // Drop size-1 axes and merge contiguous neighbours.
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0)
      return;
    if (shape[d] == 1)
      continue;
    bool merge = !dims.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = st[k].back() == strides[k][d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (size_t k = 0; k < N; ++k)
        st[k].back() = strides[k][d];
    } else {
      dims.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k)
        st[k].push_back(strides[k][d]);
    }
  }
  std::array<int64_t, N> off{}, inner{};
  if (dims.empty()) {
    f(off, inner, int64_t(1));
    return;
  }
  size_t r = dims.size();
  int64_t len = dims[r - 1];
  for (size_t k = 0; k < N; ++k)
    inner[k] = st[k][r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  while (true) {
    f(off, inner, len);
    // Advance the outer multi-index (axes 0 .. r-2), updating offsets incrementally.
    int64_t d = static_cast<int64_t>(r) - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < dims[d]) {
        for (size_t k = 0; k < N; ++k)
          off[k] += st[k][d];
        break;
      }
      for (size_t k = 0; k < N; ++k)
        off[k] -= st[k][d] * (dims[d] - 1);
      idx[d] = 0;
    }
    if (d < 0)
      return;
  }
}

// Copies one element of `size` bytes.
inline void copyElem(uint8_t *dst, const uint8_t *src, size_t size) {
  switch (size) {
  case 1: *dst = *src; return;
  case 2: std::memcpy(dst, src, 2); return;
  case 4: std::memcpy(dst, src, 4); return;
  case 8: std::memcpy(dst, src, 8); return;
  default: std::memcpy(dst, src, size); return;
  }
}

// out[i0, i1, ...] = x[maps[0][i0], maps[1][i1], ...], or `fill` (one element's bytes) where any
// map entry is -1. Serves slice, pad, tile, expand and nearest resize. maps[d].size() is the
// output's dim d; x has the same rank.
Tensor gatherByAxisMaps(const Tensor &x, const std::vector<std::vector<int64_t>> &maps,
                        const std::vector<uint8_t> &fill);

// Signed floor / ceil division: floorDiv, ceilDiv in support/int_math.h.

// ---- scalar math (double in, double out; results are rounded to the dtype by the caller) -----

inline double sigmoidD(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}
inline double geluErfD(double x) {
  return 0.5 * x * (1.0 + std::erf(x * 0.7071067811865476));
}
inline double geluTanhD(double x) {
  const double k = 0.7978845608028654; // sqrt(2/pi)
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
inline double siluD(double x) {
  return x * sigmoidD(x);
}
inline double reluD(double x) {
  return x < 0 ? 0.0 : x;
} // keeps NaN

// Contraction epilogues (ir/epilogue.h): applies `steps` to `acc` (shaped `outShape`, fp32) in
// order, each through its op's kernel; binary steps consume ctx operands from `firstExtra` on,
// broadcast to the output.
void applyEpilogue(const KernelCtx &ctx, const std::vector<std::string> &steps, size_t firstExtra,
                   const std::vector<int64_t> &outShape, std::vector<float> &acc);

// C[M,N] = A[M,K] * B[K,N] (row-major with leading dimensions), accumulated in double (exact
// products), rounded to fp32 once. `parallel`: split row blocks over OpenMP threads.
void gemmF32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
             int64_t ldb, float *C, int64_t ldc, bool parallel);

} // namespace aicf::interp
