// The interpreter's dispatch table (generated from ir/ops.def) and the elementwise kernels.
//
// Semantics are ONNX's. Floating-point values are computed in double from their fp32 (or
// widened f16/bf16) values and rounded to the result dtype once; integer arithmetic runs in int64
// with wrap-around and is narrowed to the result dtype; integer division truncates toward zero
// and a zero divisor is a user error. min/max propagate NaN (like numpy.minimum/maximum).
#include "interp/kernels.h"

#include "support/half.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace aicf::interp {

KernelFn kernelFor(Op op) {
  static const KernelFn table[] = {
#define OP(id, ...) &kernel_##id,
#include "ir/ops.def"
#undef OP
  };
  static_assert(std::size(table) == static_cast<size_t>(kNumOps), "one kernel per op");
  return table[static_cast<size_t>(op)];
}

namespace {

// ---- loops ------------------------------------------------------------------------------------

template <typename F>
Tensor mapFloat(const KernelCtx &ctx, F fn) {
  if (wantsF64(ctx)) {
    std::vector<double> v = ctx.x(0).toDoubles();
    for (double &e : v)
      e = fn(e);
    return fromDoubles(v, ctx.outType());
  }
  FloatIn in(ctx.x(0));
  int64_t n = ctx.x(0).numel();
  std::vector<float> out(static_cast<size_t>(n));
  const float *p = in.data();
#pragma omp parallel for if (n > 32768)
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(fn(static_cast<double>(p[i])));
  return fromFloats(out, ctx.outType());
}

// Float dtypes through `ff` (double -> double), integers and bool through `fi` (int64 -> int64).
template <typename FF, typename FI>
Tensor mapNumeric(const KernelCtx &ctx, FF ff, FI fi) {
  if (isFloat(ctx.x(0).dtype()))
    return mapFloat(ctx, ff);
  std::vector<int64_t> v = toInt64s(ctx.x(0));
  for (int64_t &e : v)
    e = fi(e);
  return fromInt64s(v, ctx.outType());
}

// o[i] = f(a[...], b[...]) over the broadcast output shape (o contiguous).
template <typename TA, typename TB, typename TO, typename F>
void broadcast2(const std::vector<int64_t> &outShape, const std::vector<int64_t> &aShape,
                const TA *a, const std::vector<int64_t> &bShape, const TB *b, TO *o, F f) {
  std::array<std::vector<int64_t>, 3> st = {stridesOf(outShape), broadcastStrides(aShape, outShape),
                                            broadcastStrides(bShape, outShape)};
  forEachRow<3>(outShape, st, [&](auto off, auto inner, int64_t len) {
    TO *po = o + off[0];
    const TA *pa = a + off[1];
    const TB *pb = b + off[2];
    if (inner[0] == 1 && inner[1] == 1 && inner[2] == 1) {
      for (int64_t j = 0; j < len; ++j)
        po[j] = f(pa[j], pb[j]);
    } else {
      for (int64_t j = 0; j < len; ++j)
        po[j * inner[0]] = f(pa[j * inner[1]], pb[j * inner[2]]);
    }
  });
}

// Binary arithmetic with numpy broadcasting: floats via `ff(double, double)`, integers via
// `fi(int64, int64)`.
template <typename FF, typename FI>
Tensor binaryArith(const KernelCtx &ctx, FF ff, FI fi) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  const TensorType &ot = ctx.outType();
  std::vector<int64_t> shape = ot.shape;
  if (wantsF64(ctx)) {
    std::vector<double> av = a.toDoubles(), bv = b.toDoubles(), o(static_cast<size_t>(ot.numel()));
    broadcast2(shape, a.shape(), av.data(), b.shape(), bv.data(), o.data(), ff);
    return fromDoubles(o, ot);
  }
  if (isFloat(ot.dtype)) {
    FloatIn av(a), bv(b);
    std::vector<float> o(static_cast<size_t>(ot.numel()));
    broadcast2(shape, a.shape(), av.data(), b.shape(), bv.data(), o.data(),
               [&](float x, float y) { return static_cast<float>(ff(double(x), double(y))); });
    return fromFloats(o, ot);
  }
  std::vector<int64_t> av = toInt64s(a), bv = toInt64s(b);
  std::vector<int64_t> o(static_cast<size_t>(ot.numel()));
  broadcast2(shape, a.shape(), av.data(), b.shape(), bv.data(), o.data(), fi);
  return fromInt64s(o, ot);
}

// Comparisons: floats compared as fp32 (f64 as double) values, u64 as uint64, everything else
// as int64.
template <typename Cmp>
Tensor compare(const KernelCtx &ctx, Cmp cmp) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  const TensorType &ot = ctx.outType();
  Tensor out(ot);
  uint8_t *o = out.data<uint8_t>();
  auto toBool = [&](auto x, auto y) -> uint8_t { return cmp(x, y) ? 1 : 0; };
  if (wantsF64(ctx)) {
    std::vector<double> av = a.toDoubles(), bv = b.toDoubles();
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), bv.data(), o, toBool);
  } else if (a.dtype() == DType::U64) {
    broadcast2(ot.shape, a.shape(), a.data<uint64_t>(), b.shape(), b.data<uint64_t>(), o, toBool);
  } else if (isFloat(a.dtype())) {
    FloatIn av(a), bv(b);
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), bv.data(), o, toBool);
  } else {
    std::vector<int64_t> av = toInt64s(a), bv = toInt64s(b);
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), bv.data(), o, toBool);
  }
  return out;
}

template <typename F>
Tensor logical(const KernelCtx &ctx, F f) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  Tensor out(ctx.outType());
  broadcast2(ctx.outType().shape, a.shape(), a.data<uint8_t>(), b.shape(), b.data<uint8_t>(),
             out.data<uint8_t>(),
             [&](uint8_t x, uint8_t y) -> uint8_t { return f(x != 0, y != 0) ? 1 : 0; });
  return out;
}

// Variadic min / max: folds the operands into the broadcast output.
template <typename FF, typename FI>
Tensor variadic(const KernelCtx &ctx, FF ff, FI fi) {
  const TensorType &ot = ctx.outType();
  std::vector<int64_t> shape = ot.shape;
  int64_t n = ot.numel();
  auto fold = [&](auto &acc, auto load, auto op) {
    for (size_t k = 0; k < ctx.numIn(); ++k) {
      auto vals = load(ctx.x(k));
      std::array<std::vector<int64_t>, 2> st = {stridesOf(shape),
                                                broadcastStrides(ctx.x(k).shape(), shape)};
      forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
        for (int64_t j = 0; j < len; ++j) {
          auto &o = acc[off[0] + j * inner[0]];
          auto v = vals[off[1] + j * inner[1]];
          o = k == 0 ? v : op(o, v);
        }
      });
    }
  };
  if (ot.dtype == DType::F64) {
    std::vector<double> acc(static_cast<size_t>(n));
    fold(
        acc, [](const Tensor &t) { return t.toDoubles(); }, ff);
    return fromDoubles(acc, ot);
  }
  if (isFloat(ot.dtype)) {
    std::vector<float> acc(static_cast<size_t>(n));
    fold(
        acc, [](const Tensor &t) { return toFloats(t); }, ff);
    return fromFloats(acc, ot);
  }
  if (ot.dtype == DType::U64) { // unsigned order
    std::vector<uint64_t> acc(static_cast<size_t>(n));
    auto u64s = [](const Tensor &t) {
      return std::vector<uint64_t>(t.data<uint64_t>(), t.data<uint64_t>() + t.numel());
    };
    fold(acc, u64s, fi);
    Tensor out(ot);
    std::memcpy(out.raw(), acc.data(), acc.size() * 8);
    return out;
  }
  std::vector<int64_t> acc(static_cast<size_t>(n));
  fold(
      acc, [](const Tensor &t) { return toInt64s(t); }, fi);
  return fromInt64s(acc, ot);
}

// Wrapping int64 arithmetic (C++20 defines the unsigned -> signed conversion).
int64_t wrapAdd(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) + uint64_t(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) - uint64_t(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) * uint64_t(b));
}
int64_t wrapNeg(int64_t a) {
  return int64_t(0 - uint64_t(a));
}

int64_t intPow(int64_t base, int64_t exp) {
  if (exp < 0) { // truncated reciprocal: only |base| == 1 survives
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp & 1) ? -1 : 1;
    if (base == 0)
      return 0; // division by zero in real arithmetic; numpy errors, we give 0
    return 0;
  }
  int64_t r = 1;
  while (exp) {
    if (exp & 1)
      r = wrapMul(r, base);
    base = wrapMul(base, base);
    exp >>= 1;
  }
  return r;
}

double nanMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return std::min(a, b);
}
double nanMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

double signD(double x) {
  if (std::isnan(x))
    return x;
  return (x > 0) - (x < 0);
}

double softplusD(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

} // namespace

// ---- unary ------------------------------------------------------------------------------------

std::vector<Tensor> kernel_Identity(const KernelCtx &ctx) {
  return {ctx.x(0)};
}

std::vector<Tensor> kernel_Neg(const KernelCtx &ctx) {
  return {mapNumeric(
      ctx, [](double x) { return -x; }, wrapNeg)};
}
std::vector<Tensor> kernel_Abs(const KernelCtx &ctx) {
  return {mapNumeric(
      ctx, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? wrapNeg(x) : x; })};
}
std::vector<Tensor> kernel_Sqrt(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::sqrt(x); })};
}
std::vector<Tensor> kernel_Reciprocal(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return 1.0 / x; })};
}
std::vector<Tensor> kernel_Exp(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::exp(x); })};
}
std::vector<Tensor> kernel_Log(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::log(x); })};
}
std::vector<Tensor> kernel_Erf(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::erf(x); })};
}
std::vector<Tensor> kernel_Tanh(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::tanh(x); })};
}
std::vector<Tensor> kernel_Sigmoid(const KernelCtx &ctx) {
  return {mapFloat(ctx, sigmoidD)};
}
std::vector<Tensor> kernel_Relu(const KernelCtx &ctx) {
  return {mapNumeric(ctx, reluD, [](int64_t x) { return x < 0 ? int64_t(0) : x; })};
}
std::vector<Tensor> kernel_Softplus(const KernelCtx &ctx) {
  return {mapFloat(ctx, softplusD)};
}
std::vector<Tensor> kernel_Floor(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::floor(x); })};
}
std::vector<Tensor> kernel_Ceil(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::ceil(x); })};
}
std::vector<Tensor> kernel_Round(const KernelCtx &ctx) {
  // nearbyint rounds half to even in the default rounding mode.
  return {mapFloat(ctx, [](double x) { return std::nearbyint(x); })};
}
std::vector<Tensor> kernel_Sign(const KernelCtx &ctx) {
  return {mapNumeric(ctx, signD, [](int64_t x) { return int64_t((x > 0) - (x < 0)); })};
}
std::vector<Tensor> kernel_Sin(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::sin(x); })};
}
std::vector<Tensor> kernel_Cos(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return std::cos(x); })};
}
std::vector<Tensor> kernel_Not(const KernelCtx &ctx) {
  Tensor out(ctx.outType());
  const uint8_t *p = ctx.x(0).data<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<uint8_t>()[i] = p[i] ? 0 : 1;
  return {out};
}
std::vector<Tensor> kernel_LeakyRelu(const KernelCtx &ctx) {
  double alpha = ctx.node.f("alpha");
  return {mapFloat(ctx, [alpha](double x) { return x < 0 ? alpha * x : x; })};
}
std::vector<Tensor> kernel_Elu(const KernelCtx &ctx) {
  double alpha = ctx.node.f("alpha");
  return {mapFloat(ctx, [alpha](double x) { return x < 0 ? alpha * std::expm1(x) : x; })};
}
std::vector<Tensor> kernel_HardSigmoid(const KernelCtx &ctx) {
  double alpha = ctx.node.f("alpha"), beta = ctx.node.f("beta");
  return {mapFloat(ctx, [=](double x) { return std::max(0.0, std::min(1.0, alpha * x + beta)); })};
}
std::vector<Tensor> kernel_HardSwish(const KernelCtx &ctx) {
  return {mapFloat(ctx, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6.0 + 0.5)); })};
}
std::vector<Tensor> kernel_Clip(const KernelCtx &ctx) {
  double lo = ctx.node.f("min"), hi = ctx.node.f("max");
  int64_t ilo = truncToInt64(lo), ihi = truncToInt64(hi);
  return {mapNumeric(
      ctx, [=](double x) { return std::min(std::max(x, lo), hi); },
      [=](int64_t x) { return std::min(std::max(x, ilo), ihi); })};
}

std::vector<Tensor> kernel_Cast(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  DType from = x.dtype(), to = ot.dtype;
  if (from == to)
    return {x};
  if (isFloat(from) && isFloat(to))
    return {from == DType::F64 || to == DType::F64 ? fromDoubles(x.toDoubles(), ot)
                                                   : fromFloats(toFloats(x), ot)};
  Tensor out(ot);
  int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (isFloat(to))
      out.setDouble(i, x.getDouble(i));
    else if (to == DType::Bool)
      out.setInt(i, isFloat(from) ? (x.getDouble(i) != 0.0) : (x.getInt(i) != 0));
    else if (to == DType::U64 && isFloat(from)) // from 2^63 up, direct (setDouble)
      out.setDouble(i, x.getDouble(i));
    else // integer: floats truncate toward zero, then narrowing wraps
      out.setInt(i, isFloat(from) ? truncToInt64(x.getDouble(i)) : x.getInt(i));
  }
  return {out};
}

std::vector<Tensor> kernel_Gelu(const KernelCtx &ctx) {
  const std::string &approx = ctx.node.s("approximate");
  if (approx == "none")
    return {mapFloat(ctx, geluErfD)};
  if (approx == "tanh")
    return {mapFloat(ctx, geluTanhD)};
  ctx.fail(cat("approximate must be \"none\" or \"tanh\", got \"", approx, "\""));
}

std::vector<Tensor> kernel_Silu(const KernelCtx &ctx) {
  return {mapFloat(ctx, siluD)};
}

// ---- binary / variadic ------------------------------------------------------------------------

std::vector<Tensor> kernel_Add(const KernelCtx &ctx) {
  return {binaryArith(
      ctx, [](double a, double b) { return a + b; }, wrapAdd)};
}
std::vector<Tensor> kernel_Sub(const KernelCtx &ctx) {
  return {binaryArith(
      ctx, [](double a, double b) { return a - b; }, wrapSub)};
}
std::vector<Tensor> kernel_Mul(const KernelCtx &ctx) {
  return {binaryArith(
      ctx, [](double a, double b) { return a * b; }, wrapMul)};
}
std::vector<Tensor> kernel_Div(const KernelCtx &ctx) {
  bool divByZero = false;
  if (ctx.outType().dtype == DType::U64) { // unsigned quotient
    const Tensor &a = ctx.x(0), &b = ctx.x(1);
    Tensor out(ctx.outType());
    broadcast2(ctx.outType().shape, a.shape(), a.data<uint64_t>(), b.shape(), b.data<uint64_t>(),
               out.data<uint64_t>(), [&](uint64_t x, uint64_t y) -> uint64_t {
                 divByZero = divByZero || y == 0;
                 return y == 0 ? 0 : x / y;
               });
    if (divByZero)
      ctx.fail("integer division by zero");
    return {out};
  }
  Tensor t = binaryArith(
      ctx, [](double a, double b) { return a / b; },
      [&](int64_t a, int64_t b) -> int64_t {
        if (b == 0) {
          divByZero = true;
          return 0;
        }
        return b == -1 ? wrapNeg(a) : a / b; // C++ '/' truncates toward zero, as ONNX wants
      });
  if (divByZero)
    ctx.fail("integer division by zero");
  return {t};
}

std::vector<Tensor> kernel_Pow(const KernelCtx &ctx) {
  const Tensor &a = ctx.x(0), &b = ctx.x(1);
  const TensorType &ot = ctx.outType();
  std::vector<double> e = b.toDoubles();
  if (ot.dtype == DType::F64) {
    std::vector<double> av = a.toDoubles(), o(static_cast<size_t>(ot.numel()));
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), e.data(), o.data(),
               [](double x, double y) { return std::pow(x, y); });
    return {fromDoubles(o, ot)};
  }
  if (isFloat(ot.dtype)) {
    FloatIn av(a);
    std::vector<float> o(static_cast<size_t>(ot.numel()));
    broadcast2(
        ot.shape, a.shape(), av.data(), b.shape(), e.data(), o.data(),
        [](float x, double y) { return static_cast<float>(std::pow(static_cast<double>(x), y)); });
    return {fromFloats(o, ot)};
  }
  std::vector<int64_t> av = toInt64s(a), o(static_cast<size_t>(ot.numel()));
  if (isFloat(b.dtype())) {
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), e.data(), o.data(),
               [](int64_t x, double y) { return truncToInt64(std::pow(double(x), y)); });
  } else {
    std::vector<int64_t> bv = toInt64s(b);
    broadcast2(ot.shape, a.shape(), av.data(), b.shape(), bv.data(), o.data(), intPow);
  }
  return {fromInt64s(o, ot)};
}

std::vector<Tensor> kernel_Min(const KernelCtx &ctx) {
  return {variadic(
      ctx, [](auto a, auto b) { return decltype(a)(nanMin(a, b)); },
      [](auto a, auto b) { return std::min(a, b); })};
}
std::vector<Tensor> kernel_Max(const KernelCtx &ctx) {
  return {variadic(
      ctx, [](auto a, auto b) { return decltype(a)(nanMax(a, b)); },
      [](auto a, auto b) { return std::max(a, b); })};
}

std::vector<Tensor> kernel_Equal(const KernelCtx &ctx) {
  return {compare(ctx, [](auto a, auto b) { return a == b; })};
}
std::vector<Tensor> kernel_Less(const KernelCtx &ctx) {
  return {compare(ctx, [](auto a, auto b) { return a < b; })};
}
std::vector<Tensor> kernel_LessEqual(const KernelCtx &ctx) {
  return {compare(ctx, [](auto a, auto b) { return a <= b; })};
}
std::vector<Tensor> kernel_Greater(const KernelCtx &ctx) {
  return {compare(ctx, [](auto a, auto b) { return a > b; })};
}
std::vector<Tensor> kernel_GreaterEqual(const KernelCtx &ctx) {
  return {compare(ctx, [](auto a, auto b) { return a >= b; })};
}

std::vector<Tensor> kernel_And(const KernelCtx &ctx) {
  return {logical(ctx, [](bool a, bool b) { return a && b; })};
}
std::vector<Tensor> kernel_Or(const KernelCtx &ctx) {
  return {logical(ctx, [](bool a, bool b) { return a || b; })};
}
std::vector<Tensor> kernel_Xor(const KernelCtx &ctx) {
  return {logical(ctx, [](bool a, bool b) { return a != b; })};
}

std::vector<Tensor> kernel_Where(const KernelCtx &ctx) {
  const Tensor &c = ctx.x(0), &a = ctx.x(1), &b = ctx.x(2);
  const TensorType &ot = ctx.outType();
  Tensor out(ot);
  size_t es = dtypeSize(ot.dtype);
  std::array<std::vector<int64_t>, 4> st = {
      stridesOf(ot.shape), broadcastStrides(c.shape(), ot.shape),
      broadcastStrides(a.shape(), ot.shape), broadcastStrides(b.shape(), ot.shape)};
  const uint8_t *cp = c.data<uint8_t>(), *ap = a.raw(), *bp = b.raw();
  uint8_t *op = out.raw();
  forEachRow<4>(ot.shape, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      bool take = cp[off[1] + j * inner[1]] != 0;
      const uint8_t *src =
          take ? ap + (off[2] + j * inner[2]) * es : bp + (off[3] + j * inner[3]) * es;
      copyElem(op + (off[0] + j * inner[0]) * es, src, es);
    }
  });
  return {out};
}

} // namespace aicf::interp
