// Implementation of the kernels' shared machinery (see kernel_util.h).
#include "interp/kernel_util.h"

#include "interp/interpreter.h"
#include "ir/epilogue.h"

#include "support/half.h"

#include <algorithm>
#include <optional>

namespace aicf::interp {

// ---- dtype conversion -------------------------------------------------------------------------

FloatIn::FloatIn(const Tensor &t) {
  if (t.dtype() == DType::F32) {
    p_ = t.data<float>();
  } else {
    buf_ = toFloats(t);
    p_ = buf_.data();
  }
}

std::vector<float> toFloats(const Tensor &t) {
  int64_t n = t.numel();
  std::vector<float> v(static_cast<size_t>(n));
  if (n == 0) // (no memcpy of an empty tensor's null data: undefined even for 0 bytes)
    return v;
  switch (t.dtype()) {
  case DType::F32: std::memcpy(v.data(), t.raw(), static_cast<size_t>(n) * 4); break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      v[i] = f16ToFloat(t.data<uint16_t>()[i]);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      v[i] = bf16ToFloat(t.data<uint16_t>()[i]);
    break;
  default:
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(t.getDouble(i));
    break;
  }
  return v;
}

Tensor fromFloats(const float *values, const TensorType &type) {
  Tensor t(type);
  int64_t n = t.numel();
  if (n == 0)
    return t;
  switch (type.dtype) {
  case DType::F32: std::memcpy(t.raw(), values, static_cast<size_t>(n) * 4); break;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = floatToF16(values[i]);
    break;
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = floatToBf16(values[i]);
    break;
  case DType::Bool:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint8_t>()[i] = values[i] != 0.0f ? 1 : 0;
    break;
  case DType::F64:
    for (int64_t i = 0; i < n; ++i)
      t.data<double>()[i] = values[i];
    break;
  default:
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, truncToInt64(values[i]));
    break;
  }
  return t;
}

Tensor fromDoubles(const std::vector<double> &values, const TensorType &type) {
  Tensor t(type);
  AICF_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "fromDoubles size mismatch");
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, values[static_cast<size_t>(i)]);
  return t;
}

bool wantsF64(const KernelCtx &ctx) {
  if (ctx.outType().dtype == DType::F64)
    return true;
  for (size_t k = 0; k < ctx.numIn(); ++k)
    if (ctx.x(k).dtype() == DType::F64)
      return true;
  return false;
}

std::vector<int64_t> toInt64s(const Tensor &t) {
  int64_t n = t.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  if (isFloat(t.dtype())) {
    for (int64_t i = 0; i < n; ++i)
      v[i] = truncToInt64(t.getDouble(i));
  } else if (t.dtype() == DType::I64) {
    if (n > 0)
      std::memcpy(v.data(), t.raw(), static_cast<size_t>(n) * 8);
  } else {
    for (int64_t i = 0; i < n; ++i)
      v[i] = t.getInt(i);
  }
  return v;
}

Tensor fromInt64s(const std::vector<int64_t> &values, const TensorType &type) {
  Tensor t(type);
  int64_t n = t.numel();
  AICF_CHECK(static_cast<int64_t>(values.size()) == n, "fromInt64s size mismatch");
  if (isFloat(type.dtype)) {
    for (int64_t i = 0; i < n; ++i)
      t.setDouble(i, static_cast<double>(values[i]));
  } else {
    for (int64_t i = 0; i < n; ++i)
      t.setInt(i, values[i]); // C++20: narrowing conversions wrap around
  }
  return t;
}

// ---- strided iteration ------------------------------------------------------------------------

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &out) {
  AICF_CHECK(shape.size() <= out.size(), "broadcast of ", shapeStr(shape), " to ", shapeStr(out));
  std::vector<int64_t> own = stridesOf(shape);
  std::vector<int64_t> st(out.size(), 0);
  size_t lead = out.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    AICF_CHECK(shape[d] == out[lead + d] || shape[d] == 1, "broadcast of ", shapeStr(shape), " to ",
               shapeStr(out));
    st[lead + d] = shape[d] == 1 ? 0 : own[d];
  }
  return st;
}

Tensor gatherByAxisMaps(const Tensor &x, const std::vector<std::vector<int64_t>> &maps,
                        const std::vector<uint8_t> &fill) {
  size_t rank = maps.size();
  AICF_CHECK(static_cast<int64_t>(rank) == x.type().rank(), "gatherByAxisMaps rank mismatch");
  std::vector<int64_t> outShape;
  for (const auto &m : maps)
    outShape.push_back(static_cast<int64_t>(m.size()));
  Tensor out(TensorType(x.dtype(), outShape));
  size_t es = dtypeSize(x.dtype());
  AICF_CHECK(fill.size() == es, "fill value size");
  if (out.numel() == 0)
    return out;
  uint8_t *dst = out.raw();
  const uint8_t *src = x.raw();
  if (rank == 0) {
    copyElem(dst, src, es);
    return out;
  }
  std::vector<int64_t> inSt = stridesOf(x.shape());
  const std::vector<int64_t> &last = maps[rank - 1];
  int64_t len = static_cast<int64_t>(last.size());
  int64_t lastStride = inSt[rank - 1];
  std::vector<int64_t> idx(rank - 1, 0);
  int64_t o = 0;
  while (true) {
    int64_t base = 0;
    bool valid = true;
    for (size_t d = 0; d + 1 < rank; ++d) {
      int64_t m = maps[d][idx[d]];
      valid = valid && m >= 0;
      base += m * inSt[d];
    }
    for (int64_t j = 0; j < len; ++j, ++o) {
      int64_t m = last[j];
      if (valid && m >= 0)
        copyElem(dst + o * es, src + (base + m * lastStride) * es, es);
      else
        copyElem(dst + o * es, fill.data(), es);
    }
    int64_t d = static_cast<int64_t>(rank) - 2;
    for (; d >= 0; --d) {
      if (++idx[d] < static_cast<int64_t>(maps[d].size()))
        break;
      idx[d] = 0;
    }
    if (d < 0)
      break;
  }
  return out;
}

// ---- epilogues ----------------------------------------------------------------------------------

void applyEpilogue(const KernelCtx &ctx, const std::vector<std::string> &steps, size_t firstExtra,
                   const std::vector<int64_t> &outShape, std::vector<float> &acc) {
  // Each step is evaluated as its op (evalNode: the op's own kernel) on the f32 accumulator: a
  // step is exactly the elementwise op, computed in f32 (the accumulator's type).
  size_t next = firstExtra;
  const TensorType accType(DType::F32, outShape);
  for (const std::string &name : steps) {
    std::optional<EpilogueStep> step = parseEpilogueStep(name);
    if (!step)
      ctx.fail(cat("unknown epilogue step '", name, "'"));
    Tensor accT = fromFloats(acc, accType);
    std::vector<const Tensor *> in = {&accT};
    Tensor widened;
    std::vector<int64_t> operandShape;
    if (step->takesOperand()) {
      if (next >= ctx.numIn())
        ctx.fail(cat("epilogue step '", name, "' has no operand left"));
      const Tensor &e = ctx.x(next++);
      operandShape = e.shape();
      if (e.dtype() == DType::F32) {
        in.push_back(&e);
      } else { // extra operands have the result's dtype: widened exactly, as the accumulator
        widened = fromFloats(toFloats(e), TensorType(DType::F32, e.shape()));
        in.push_back(&widened);
      }
    }
    StepNode sn = stepNode(*step, outShape, operandShape);
    std::vector<Tensor> r = evalNode(*sn.node, in);
    AICF_CHECK(r.size() == 1 && r[0].type() == accType, "epilogue step ", name, " result");
    std::memcpy(acc.data(), r[0].raw(), acc.size() * sizeof(float));
  }
  if (next != ctx.numIn())
    ctx.fail(cat("epilogue consumed ", next - firstExtra, " operands, but ",
                 ctx.numIn() - firstExtra, " were given"));
}

// ---- fp32 matrix product ------------------------------------------------------------------------

void gemmF32(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
             int64_t ldb, float *C, int64_t ldc, bool parallel) {
  // The product of two floats is exact in double, and so the double sums are within a few
  // double ulps of the exact dot product: C is the correctly rounded result in all but
  // pathological cases, which is what a reference wants. Row blocks of MR share each loaded row
  // of B and a column block of NB keeps the accumulators in L1.
  constexpr int64_t MR = 4, NB = 128;
  int64_t rowBlocks = (M + MR - 1) / MR;
#pragma omp parallel for schedule(static) if (parallel && rowBlocks > 1)
  for (int64_t rb = 0; rb < rowBlocks; ++rb) {
    int64_t i0 = rb * MR, mr = std::min(MR, M - i0);
    double acc[MR][NB];
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
      int64_t nb = std::min(NB, N - j0);
      for (int64_t r = 0; r < MR; ++r)
        for (int64_t j = 0; j < nb; ++j)
          acc[r][j] = 0.0;
      if (mr == MR) {
        double *p0 = acc[0], *p1 = acc[1], *p2 = acc[2], *p3 = acc[3];
        for (int64_t k = 0; k < K; ++k) {
          const float *b = B + k * ldb + j0;
          double a0 = A[(i0 + 0) * lda + k], a1 = A[(i0 + 1) * lda + k];
          double a2 = A[(i0 + 2) * lda + k], a3 = A[(i0 + 3) * lda + k];
#pragma omp simd
          for (int64_t j = 0; j < nb; ++j) {
            double bj = b[j];
            p0[j] += a0 * bj;
            p1[j] += a1 * bj;
            p2[j] += a2 * bj;
            p3[j] += a3 * bj;
          }
        }
      } else {
        for (int64_t k = 0; k < K; ++k) {
          const float *b = B + k * ldb + j0;
          for (int64_t r = 0; r < mr; ++r) {
            double a = A[(i0 + r) * lda + k];
            double *p = acc[r];
#pragma omp simd
            for (int64_t j = 0; j < nb; ++j)
              p[j] += a * b[j];
          }
        }
      }
      for (int64_t r = 0; r < mr; ++r)
        for (int64_t j = 0; j < nb; ++j)
          C[(i0 + r) * ldc + j0 + j] = static_cast<float>(acc[r][j]);
    }
  }
}

} // namespace aicf::interp
