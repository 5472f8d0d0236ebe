// Contraction kernels: matmul, gemm, conv, conv_transpose and attention.
//
// Every product of two fp32 values is exact in double, and the sums are accumulated in double,
// so results are the correctly rounded fp32 value of the exact sum in all but pathological
// cases: what a reference should be. Epilogues (ir/epilogue.h) run on the fp32 accumulator before
// the one rounding to the result dtype.
//
// attention: a row whose keys are all masked (by the causal mask, a false bool mask entry or a
// -inf additive mask) yields zeros rather than NaN (docs/algorithms.md: the output for d = 0
// is zeros), so the streaming kernels and the interpreter agree on padded rows. The standalone
// softmax op keeps ONNX's NaN. Probabilities are computed in double and rounded to fp32 before
// the product with v.
#include "interp/kernels.h"
#include "ir/epilogue.h"
#include "support/int_math.h"

#include <algorithm>
#include <limits>

namespace aicf::interp {

namespace {

// Transposes a row-major [rows, cols] matrix into [cols, rows].
void transposeInto(const float *src, int64_t rows, int64_t cols, float *dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dst[c * rows + r] = src[r * cols + c];
}

// Offsets sum(idx[d] * strides[d]) of every multi-index idx over `dims`, in row-major order.
std::vector<int64_t> offsetsOver(const std::vector<int64_t> &dims,
                                 const std::vector<int64_t> &strides) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t b = 0; b < n; ++b) {
    int64_t off = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      off += idx[d] * strides[d];
    out[b] = off;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

// Flat index of each batch of `batch` (a broadcast output batch shape) in an operand whose batch
// shape is `own`.
std::vector<int64_t> batchIndices(const std::vector<int64_t> &own,
                                  const std::vector<int64_t> &batch) {
  return offsetsOver(batch, broadcastStrides(own, batch));
}

// Row-major index lists of every position of `dims` (as multi-indices), used to enumerate the
// outer (all but last) spatial axes of a convolution.
std::vector<std::vector<int64_t>> allPositions(const std::vector<int64_t> &dims) {
  std::vector<std::vector<int64_t>> out;
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t p = 0; p < n; ++p) {
    out.push_back(idx);
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      if (++idx[d] < dims[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

} // namespace

// ---- matmul / gemm ----------------------------------------------------------------------------

std::vector<Tensor> kernel_MatMul(const KernelCtx &ctx) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  const TensorType &ot = ctx.outType();
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  std::vector<int64_t> aBatch(as.begin(), as.end() - 2), bBatch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch = *broadcastShapes(aBatch, bBatch);
  std::vector<int64_t> ai = batchIndices(aBatch, batch), bi = batchIndices(bBatch, batch);
  int64_t nb = static_cast<int64_t>(ai.size());
  FloatIn A(a), B(b);
  std::vector<float> out(static_cast<size_t>(nb * M * N));
  if (nb > 1) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t i = 0; i < nb; ++i)
      gemmF32(M, N, K, A.data() + ai[i] * M * K, K, B.data() + bi[i] * K * N, N,
              out.data() + i * M * N, N, false);
  } else if (nb == 1) {
    gemmF32(M, N, K, A.data() + ai[0] * M * K, K, B.data() + bi[0] * K * N, N, out.data(), N, true);
  }
  applyEpilogue(ctx, ctx.node.strs("epilogue"), 2, ot.shape, out);
  return {fromFloats(out, ot)};
}

std::vector<Tensor> kernel_Gemm(const KernelCtx &ctx) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  const TensorType &ot = ctx.outType();
  const auto &epi = ctx.node.strs("epilogue");
  bool transA = ctx.node.i("transA") != 0, transB = ctx.node.i("transB") != 0;
  double alpha = ctx.node.f("alpha"), beta = ctx.node.f("beta");
  bool hasC = ctx.numIn() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  int64_t M = ot.shape[0], N = ot.shape[1];
  int64_t K = transA ? a.shape()[0] : a.shape()[1];
  std::vector<float> A = toFloats(a), B = toFloats(b);
  if (transA) {
    std::vector<float> t(A.size());
    transposeInto(A.data(), K, M, t.data());
    A.swap(t);
  }
  if (transB) {
    std::vector<float> t(B.size());
    transposeInto(B.data(), N, K, t.data());
    B.swap(t);
  }
  std::vector<float> out(static_cast<size_t>(M * N));
  gemmF32(M, N, K, A.data(), K, B.data(), N, out.data(), N, true);
  if (alpha != 1.0)
    for (float &v : out)
      v = static_cast<float>(alpha * v);
  if (hasC) {
    const Tensor &c = ctx.x(2);
    FloatIn cv(c);
    std::array<std::vector<int64_t>, 2> st = {stridesOf(ot.shape),
                                              broadcastStrides(c.shape(), ot.shape)};
    forEachRow<2>(ot.shape, st, [&](auto off, auto inner, int64_t len) {
      for (int64_t j = 0; j < len; ++j) {
        float &o = out[off[0] + j * inner[0]];
        o = static_cast<float>(double(o) + beta * cv[off[1] + j * inner[1]]);
      }
    });
  }
  applyEpilogue(ctx, epi, hasC ? 3 : 2, ot.shape, out);
  return {fromFloats(out, ot)};
}

// ---- convolutions -----------------------------------------------------------------------------

std::vector<Tensor> kernel_Conv(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &w = ctx.x(1);
  const TensorType &ot = ctx.outType();
  const auto &epi = ctx.node.strs("epilogue");
  bool hasBias = ctx.numIn() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  const auto &strides = ctx.node.ints("strides"), &pads = ctx.node.ints("pads"),
             &dil = ctx.node.ints("dilations");
  int64_t G = ctx.node.i("group");
  const std::vector<int64_t> &xs = x.shape(), &ws = w.shape(), &os = ot.shape;
  size_t S = xs.size() - 2;
  int64_t N = xs[0], C = xs[1], M = ws[0], Cg = C / G, Mg = M / G;
  std::vector<int64_t> I(xs.begin() + 2, xs.end()), Kd(ws.begin() + 2, ws.end()),
      O(os.begin() + 2, os.end());
  int64_t inPlane = product(I), outPlane = product(O), kerSize = product(Kd);
  int64_t lastI = I[S - 1], lastO = O[S - 1], lastK = Kd[S - 1];
  int64_t sL = strides[S - 1], pL = pads[S - 1], dL = dil[S - 1];

  // Input row (over the outer spatial axes) read by each (kernel outer, output outer) position,
  // or -1 when it falls into the padding.
  std::vector<int64_t> KOuter(Kd.begin(), Kd.end() - 1), OOuter(O.begin(), O.end() - 1);
  auto kPos = allPositions(KOuter), oPos = allPositions(OOuter);
  std::vector<int64_t> rowMap(kPos.size() * oPos.size());
  for (size_t kp = 0; kp < kPos.size(); ++kp)
    for (size_t op = 0; op < oPos.size(); ++op) {
      int64_t row = 0;
      for (size_t d = 0; d + 1 < S && row >= 0; ++d) {
        int64_t i = oPos[op][d] * strides[d] - pads[d] + kPos[kp][d] * dil[d];
        row = (i < 0 || i >= I[d]) ? -1 : row * I[d] + i;
      }
      rowMap[kp * oPos.size() + op] = row;
    }
  // Valid output range of the last axis for each kernel tap.
  std::vector<int64_t> lo(lastK), hi(lastK), base(lastK);
  for (int64_t kl = 0; kl < lastK; ++kl) {
    base[kl] = kl * dL - pL;
    lo[kl] = std::max<int64_t>(0, ceilDiv(-base[kl], sL));
    hi[kl] = std::min<int64_t>(lastO, floorDiv(lastI - 1 - base[kl], sL) + 1);
  }

  FloatIn X(x), W(w);
  std::vector<float> bias;
  if (hasBias)
    bias = toFloats(ctx.x(2));
  std::vector<float> out(static_cast<size_t>(N * M * outPlane));
  int64_t nOuterO = static_cast<int64_t>(oPos.size()), nOuterK = static_cast<int64_t>(kPos.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t nm = 0; nm < N * M; ++nm) {
    int64_t n = nm / M, oc = nm % M, g = oc / Mg;
    std::vector<double> acc(static_cast<size_t>(outPlane), 0.0);
    for (int64_t cg = 0; cg < Cg; ++cg) {
      const float *xp = X.data() + (n * C + g * Cg + cg) * inPlane;
      const float *wp = W.data() + (oc * Cg + cg) * kerSize;
      for (int64_t kp = 0; kp < nOuterK; ++kp)
        for (int64_t op = 0; op < nOuterO; ++op) {
          int64_t row = rowMap[kp * nOuterO + op];
          if (row < 0)
            continue;
          const float *xr = xp + row * lastI;
          double *ar = acc.data() + op * lastO;
          for (int64_t kl = 0; kl < lastK; ++kl) {
            double wv = wp[kp * lastK + kl];
            const float *xb = xr + base[kl];
            if (sL == 1) {
#pragma omp simd
              for (int64_t ol = lo[kl]; ol < hi[kl]; ++ol)
                ar[ol] += wv * xb[ol];
            } else {
              for (int64_t ol = lo[kl]; ol < hi[kl]; ++ol)
                ar[ol] += wv * xb[ol * sL];
            }
          }
        }
    }
    double b0 = hasBias ? bias[oc] : 0.0;
    float *o = out.data() + nm * outPlane;
    for (int64_t i = 0; i < outPlane; ++i)
      o[i] = static_cast<float>(acc[i] + b0);
  }
  applyEpilogue(ctx, epi, hasBias ? 3 : 2, ot.shape, out);
  return {fromFloats(out, ot)};
}

// The blocked layout's reference: every output lane summed in double over its taps, in the
// order (input channel, kh, kw), then the bias and the epilogue.
std::vector<Tensor> kernel_BlockedConv(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &w = ctx.x(1);
  const TensorType &ot = ctx.outType();
  const auto &epi = ctx.node.strs("epilogue");
  bool hasBias = ctx.numIn() == 3 + static_cast<size_t>(epilogueOperandCount(epi));
  bool blocked = ctx.node.i("blocked_input") != 0, depthwise = ctx.node.i("depthwise") != 0;
  const auto &ks = ctx.node.ints("kernel_shape"), &st = ctx.node.ints("strides"),
             &pd = ctx.node.ints("pads"), &dl = ctx.node.ints("dilations");
  const std::vector<int64_t> &xs = x.shape(), &os = ot.shape;
  int64_t N = xs[0], CB = xs[1], H = xs[2], W = xs[3], OB = os[1], OH = os[2], OW = os[3];
  int64_t KH = ks[0], KW = ks[1];
  int64_t C = blocked ? CB * 16 : CB; // input channels as the weight rows count them
  // Grouped: output block ob in group g = ob / OBg reads input blocks g CBg.. only, its weight
  // rows g Kg.. (ir/ops.def); G = 1 is the dense conv.
  int64_t G = depthwise ? 1 : ctx.node.i("group"), OBg = OB / G, CBg = CB / G;
  int64_t Kg = CBg * KH * KW * 16, ld = OBg * 16;
  FloatIn X(x), Wt(w);
  std::vector<float> bias;
  if (hasBias)
    bias = toFloats(ctx.x(2));
  // x element of input channel c (blocked: block c / 16, lane c % 16) at (ih, iw).
  auto xAt = [&](int64_t n, int64_t c, int64_t ih, int64_t iw) -> double {
    if (blocked)
      return X[(((n * CB + c / 16) * H + ih) * W + iw) * 16 + c % 16];
    return X[((n * CB + c) * H + ih) * W + iw];
  };
  std::vector<float> out(static_cast<size_t>(ot.numel()));
#pragma omp parallel for schedule(dynamic)
  for (int64_t nb = 0; nb < N * OB; ++nb) {
    int64_t n = nb / OB, ob = nb % OB;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t l = 0; l < 16; ++l) {
          int64_t oc = ob * 16 + l, g = ob / OBg;
          int64_t c0 = depthwise ? oc : G > 1 ? g * CBg * 16 : 0;
          int64_t c1 = depthwise ? oc + 1 : G > 1 ? c0 + CBg * 16 : C;
          double acc = 0;
          for (int64_t c = c0; c < c1; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                int64_t ih = oh * st[0] - pd[0] + kh * dl[0], iw = ow * st[1] - pd[1] + kw * dl[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  continue;
                double wv =
                    depthwise ? Wt[((ob * KH + kh) * KW + kw) * 16 + l]
                    : G > 1
                        ? Wt[(g * Kg + ((((c - c0) / 16) * KH + kh) * KW + kw) * 16 + c % 16) * ld +
                             oc - g * ld]
                    : blocked
                        ? Wt[((((c / 16) * KH + kh) * KW + kw) * 16 + c % 16) * (OB * 16) + oc]
                        : Wt[((c * KH + kh) * KW + kw) * (OB * 16) + oc];
                acc += wv * xAt(n, c, ih, iw);
              }
          if (hasBias)
            acc += bias[static_cast<size_t>(oc)];
          out[static_cast<size_t>((((n * OB + ob) * OH + oh) * OW + ow) * 16 + l)] =
              static_cast<float>(acc);
        }
  }
  applyEpilogue(ctx, epi, hasBias ? 3 : 2, ot.shape, out);
  return {fromFloats(out, ot)};
}

std::vector<Tensor> kernel_ConvTranspose(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &w = ctx.x(1);
  const TensorType &ot = ctx.outType();
  const auto &strides = ctx.node.ints("strides"), &pads = ctx.node.ints("pads"),
             &dil = ctx.node.ints("dilations");
  int64_t G = ctx.node.i("group");
  const std::vector<int64_t> &xs = x.shape(), &ws = w.shape(), &os = ot.shape;
  size_t S = xs.size() - 2;
  int64_t N = xs[0], C = xs[1], Mg = ws[1], M = os[1];
  if (C % G != 0)
    ctx.fail(cat("input channels ", C, " are not divisible by group ", G));
  int64_t Cg = C / G;
  std::vector<int64_t> I(xs.begin() + 2, xs.end()), Kd(ws.begin() + 2, ws.end()),
      O(os.begin() + 2, os.end());
  int64_t inPlane = product(I), outPlane = product(O), kerSize = product(Kd);
  int64_t lastI = I[S - 1], lastO = O[S - 1], lastK = Kd[S - 1];
  int64_t sL = strides[S - 1], pL = pads[S - 1], dL = dil[S - 1];

  // Output row written by each (kernel outer, input outer) position, or -1 when it is cropped.
  std::vector<int64_t> KOuter(Kd.begin(), Kd.end() - 1), IOuter(I.begin(), I.end() - 1);
  auto kPos = allPositions(KOuter), iPos = allPositions(IOuter);
  std::vector<int64_t> rowMap(kPos.size() * iPos.size());
  for (size_t kp = 0; kp < kPos.size(); ++kp)
    for (size_t ip = 0; ip < iPos.size(); ++ip) {
      int64_t row = 0;
      for (size_t d = 0; d + 1 < S && row >= 0; ++d) {
        int64_t o = iPos[ip][d] * strides[d] - pads[d] + kPos[kp][d] * dil[d];
        row = (o < 0 || o >= O[d]) ? -1 : row * O[d] + o;
      }
      rowMap[kp * iPos.size() + ip] = row;
    }
  std::vector<int64_t> lo(lastK), hi(lastK), base(lastK);
  for (int64_t kl = 0; kl < lastK; ++kl) {
    base[kl] = kl * dL - pL; // output position of input position il: il * sL + base
    lo[kl] = std::max<int64_t>(0, ceilDiv(-base[kl], sL));
    hi[kl] = std::min<int64_t>(lastI, floorDiv(lastO - 1 - base[kl], sL) + 1);
  }

  FloatIn X(x), W(w);
  std::vector<float> bias;
  if (ctx.numIn() == 3)
    bias = toFloats(ctx.x(2));
  std::vector<float> out(static_cast<size_t>(N * M * outPlane));
  int64_t nOuterI = static_cast<int64_t>(iPos.size()), nOuterK = static_cast<int64_t>(kPos.size());
#pragma omp parallel for schedule(dynamic)
  for (int64_t nm = 0; nm < N * M; ++nm) {
    int64_t n = nm / M, oc = nm % M, g = oc / Mg, m = oc % Mg;
    std::vector<double> acc(static_cast<size_t>(outPlane), bias.empty() ? 0.0 : bias[oc]);
    for (int64_t cg = 0; cg < Cg; ++cg) {
      int64_t ic = g * Cg + cg;
      const float *xp = X.data() + (n * C + ic) * inPlane;
      const float *wp = W.data() + (ic * Mg + m) * kerSize;
      for (int64_t kp = 0; kp < nOuterK; ++kp)
        for (int64_t ip = 0; ip < nOuterI; ++ip) {
          int64_t row = rowMap[kp * nOuterI + ip];
          if (row < 0)
            continue;
          const float *xr = xp + ip * lastI;
          double *ar = acc.data() + row * lastO;
          for (int64_t kl = 0; kl < lastK; ++kl) {
            double wv = wp[kp * lastK + kl];
            for (int64_t il = lo[kl]; il < hi[kl]; ++il)
              ar[il * sL + base[kl]] += wv * xr[il];
          }
        }
    }
    float *o = out.data() + nm * outPlane;
    for (int64_t i = 0; i < outPlane; ++i)
      o[i] = static_cast<float>(acc[i]);
  }
  return {fromFloats(out, ot)};
}

// ---- attention --------------------------------------------------------------------------------

std::vector<Tensor> kernel_Attention(const KernelCtx &ctx) {
  const Tensor &q = ctx.x(0), &k = ctx.x(1), &v = ctx.x(2);
  const TensorType &ot = ctx.outType();
  double scale = ctx.node.f("scale");
  bool causal = ctx.node.i("causal") != 0;
  size_t r = q.shape().size();
  int64_t Sq = q.shape()[r - 2], D = q.shape()[r - 1], Sk = k.shape()[r - 2], Dv = v.shape()[r - 1];
  std::vector<int64_t> batch(q.shape().begin(), q.shape().end() - 2);
  int64_t B = product(batch);

  // The mask, addressed through its broadcast strides over [batch..., Sq, Sk].
  const Tensor *mask = ctx.numIn() == 4 ? &ctx.x(3) : nullptr;
  std::vector<int64_t> scoresShape = batch;
  scoresShape.push_back(Sq);
  scoresShape.push_back(Sk);
  std::vector<int64_t> mst, mBatch;
  std::vector<float> maskF;
  bool maskBool = false;
  if (mask) {
    mst = broadcastStrides(mask->shape(), scoresShape);
    mBatch = offsetsOver(batch, mst);
    maskBool = mask->dtype() == DType::Bool;
    if (!maskBool)
      maskF = toFloats(*mask);
  }
  int64_t mi = mask ? mst[batch.size()] : 0, mj = mask ? mst[batch.size() + 1] : 0;

  FloatIn Q(q), Kt(k), V(v);
  std::vector<float> out(static_cast<size_t>(B * Sq * Dv));
  const double negInf = -std::numeric_limits<double>::infinity();
  bool parallelBatches = B > 1;
  auto one = [&](int64_t b, bool parallelInner) {
    std::vector<float> kT(static_cast<size_t>(D * Sk)), scores(static_cast<size_t>(Sq * Sk));
    transposeInto(Kt.data() + b * Sk * D, Sk, D, kT.data());
    gemmF32(Sq, Sk, D, Q.data() + b * Sq * D, D, kT.data(), Sk, scores.data(), Sk, parallelInner);
    std::vector<double> row(static_cast<size_t>(Sk));
    for (int64_t i = 0; i < Sq; ++i) {
      double mx = negInf;
      for (int64_t j = 0; j < Sk; ++j) {
        double s = scale * scores[i * Sk + j];
        if (mask) {
          int64_t mo = mBatch[b] + i * mi + j * mj;
          if (maskBool)
            s = mask->data<uint8_t>()[mo] ? s : negInf;
          else
            s += maskF[mo];
        }
        if (causal && j > i + (Sk - Sq))
          s = negInf;
        row[j] = s;
        mx = std::max(mx, s);
      }
      float *p = scores.data() + i * Sk;
      if (mx == negInf) { // every key masked: zeros, not NaN (see the file comment)
        std::fill(p, p + Sk, 0.0f);
        continue;
      }
      double sum = 0.0;
      for (int64_t j = 0; j < Sk; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      for (int64_t j = 0; j < Sk; ++j)
        p[j] = static_cast<float>(row[j] / sum);
    }
    gemmF32(Sq, Dv, Sk, scores.data(), Sk, V.data() + b * Sk * Dv, Dv, out.data() + b * Sq * Dv, Dv,
            parallelInner);
  };
  if (parallelBatches) {
#pragma omp parallel for schedule(dynamic)
    for (int64_t b = 0; b < B; ++b)
      one(b, false);
  } else if (B == 1) {
    one(0, true);
  }
  return {fromFloats(out, ot)};
}

} // namespace aicf::interp
