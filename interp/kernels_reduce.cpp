// Reduction, normalisation and pooling kernels.
//
// Float reductions accumulate in double; integer ones in int64 (sum, prod, min, max, l1,
// sum_square exactly, mean truncated toward zero, l2 / log_sum_exp via double). Normalisations
// are two-pass in double (mean, then centred variance: exact and stable, docs/algorithms.md).
// softmax follows ONNX: a row of -inf gives NaN (attention, by contrast, gives zeros).
// max reductions / pools propagate NaN; arg_max / arg_min pick the first NaN like numpy.
// avg_pool with count_include_pad divides by the window positions inside the padded input
// (positions beyond the end padding that ceil_mode adds are never counted), as PyTorch and
// ONNX Runtime do.
#include "interp/kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace aicf::interp {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSumExp };

int64_t normAxis(const KernelCtx &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.fail(cat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

// (outer, n, inner) of a tensor split at `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit splitAt(const std::vector<int64_t> &shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis)
      s.outer *= shape[d];
    else if (d == axis)
      s.n = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

// Strides mapping each input element to its reduced output element (0 on reduced axes).
std::vector<int64_t> reducedStrides(const std::vector<int64_t> &shape,
                                    const std::vector<int64_t> &axes, int64_t &outNumel) {
  std::vector<int64_t> kept = shape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (axes.empty() || std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end())
      kept[d] = 1;
  outNumel = 1;
  for (int64_t d : kept)
    outNumel *= d;
  return broadcastStrides(kept, shape);
}

// acc[out(i)] = upd(acc[out(i)], x[i]) for every input element.
template <typename T, typename A, typename U>
void reduceInto(const std::vector<int64_t> &shape, const std::vector<int64_t> &outStrides,
                const T *x, std::vector<A> &acc, U upd) {
  std::array<std::vector<int64_t>, 2> st = {stridesOf(shape), outStrides};
  forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
    const T *xp = x + off[0];
    A *ap = acc.data() + off[1];
    if (inner[1] == 0) {
      A a = *ap;
      for (int64_t j = 0; j < len; ++j)
        a = upd(a, A(xp[j * inner[0]]));
      *ap = a;
    } else {
      for (int64_t j = 0; j < len; ++j)
        ap[j * inner[1]] = upd(ap[j * inner[1]], A(xp[j * inner[0]]));
    }
  });
}

double maxNaN(double a, double x) {
  return (x > a || std::isnan(x)) && !std::isnan(a) ? x : a;
}
double minNaN(double a, double x) {
  return (x < a || std::isnan(x)) && !std::isnan(a) ? x : a;
}

// Float reductions accumulate in double from the elements as stored (f32, or f64 unrounded).
template <typename T>
Tensor reduceFloatOf(const KernelCtx &ctx, Red kind, const T *p) {
  const Tensor &x = ctx.x(0);
  int64_t outN = 0;
  std::vector<int64_t> ost = reducedStrides(x.shape(), ctx.node.ints("axes"), outN);
  int64_t count = outN ? x.numel() / outN : 0;
  std::vector<double> acc(static_cast<size_t>(outN), 0.0);
  const auto &shape = x.shape();
  switch (kind) {
  case Red::Sum:
  case Red::Mean: reduceInto(shape, ost, p, acc, [](double a, double v) { return a + v; }); break;
  case Red::Max:
    std::fill(acc.begin(), acc.end(), -kInf);
    reduceInto(shape, ost, p, acc, maxNaN);
    break;
  case Red::Min:
    std::fill(acc.begin(), acc.end(), kInf);
    reduceInto(shape, ost, p, acc, minNaN);
    break;
  case Red::Prod:
    std::fill(acc.begin(), acc.end(), 1.0);
    reduceInto(shape, ost, p, acc, [](double a, double v) { return a * v; });
    break;
  case Red::L1:
    reduceInto(shape, ost, p, acc, [](double a, double v) { return a + std::fabs(v); });
    break;
  case Red::L2:
  case Red::SumSquare:
    reduceInto(shape, ost, p, acc, [](double a, double v) { return a + v * v; });
    break;
  case Red::LogSumExp: {
    std::vector<double> mx(static_cast<size_t>(outN), -kInf);
    reduceInto(shape, ost, p, mx, maxNaN);
    // Second pass: sum of exp(x - max) per output, the max read through the same strides.
    std::array<std::vector<int64_t>, 2> st = {stridesOf(shape), ost};
    forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
      for (int64_t j = 0; j < len; ++j) {
        int64_t o = off[1] + j * inner[1];
        double m = mx[o];
        if (std::isfinite(m))
          acc[o] += std::exp(double(p[off[0] + j * inner[0]]) - m);
      }
    });
    for (int64_t o = 0; o < outN; ++o)
      acc[o] = std::isfinite(mx[o]) ? mx[o] + std::log(acc[o]) : mx[o];
    break;
  }
  }
  for (int64_t o = 0; o < outN; ++o) {
    if (kind == Red::Mean)
      acc[o] = count ? acc[o] / double(count) : kNaN;
    else if (kind == Red::L2)
      acc[o] = std::sqrt(acc[o]);
  }
  return fromDoubles(acc, ctx.outType());
}

Tensor reduceFloat(const KernelCtx &ctx, Red kind) {
  const Tensor &x = ctx.x(0);
  if (x.dtype() == DType::F64)
    return reduceFloatOf(ctx, kind, x.data<double>());
  FloatIn xv(x);
  return reduceFloatOf(ctx, kind, xv.data());
}

Tensor reduceInt(const KernelCtx &ctx, Red kind) {
  const Tensor &x = ctx.x(0);
  int64_t outN = 0;
  std::vector<int64_t> ost = reducedStrides(x.shape(), ctx.node.ints("axes"), outN);
  int64_t count = outN ? x.numel() / outN : 0;
  std::vector<int64_t> xv = toInt64s(x);
  const int64_t *p = xv.data();
  const auto &shape = x.shape();
  auto add = [](int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); };
  auto mul = [](int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); };
  std::vector<int64_t> acc(static_cast<size_t>(outN), 0);
  if (kind == Red::L2 || kind == Red::LogSumExp) { // via double
    std::vector<double> xd(xv.begin(), xv.end()), ad(static_cast<size_t>(outN), 0.0);
    if (kind == Red::L2) {
      reduceInto(shape, ost, xd.data(), ad, [](double a, double v) { return a + v * v; });
      for (int64_t o = 0; o < outN; ++o)
        acc[o] = truncToInt64(std::sqrt(ad[o]));
    } else {
      std::vector<double> mx(static_cast<size_t>(outN), -kInf);
      reduceInto(shape, ost, xd.data(), mx, maxNaN);
      std::array<std::vector<int64_t>, 2> st = {stridesOf(shape), ost};
      forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
        for (int64_t j = 0; j < len; ++j) {
          int64_t o = off[1] + j * inner[1];
          ad[o] += std::exp(xd[off[0] + j * inner[0]] - mx[o]);
        }
      });
      for (int64_t o = 0; o < outN; ++o)
        acc[o] = truncToInt64(std::isfinite(mx[o]) ? mx[o] + std::log(ad[o]) : mx[o]);
    }
    return fromInt64s(acc, ctx.outType());
  }
  switch (kind) {
  case Red::Sum:
  case Red::Mean: reduceInto(shape, ost, p, acc, add); break;
  case Red::Max:
    std::fill(acc.begin(), acc.end(), INT64_MIN);
    reduceInto(shape, ost, p, acc, [](int64_t a, int64_t v) { return std::max(a, v); });
    break;
  case Red::Min:
    std::fill(acc.begin(), acc.end(), INT64_MAX);
    reduceInto(shape, ost, p, acc, [](int64_t a, int64_t v) { return std::min(a, v); });
    break;
  case Red::Prod:
    std::fill(acc.begin(), acc.end(), 1);
    reduceInto(shape, ost, p, acc, mul);
    break;
  case Red::L1:
    reduceInto(shape, ost, p, acc, [&](int64_t a, int64_t v) { return add(a, v < 0 ? -v : v); });
    break;
  case Red::SumSquare:
    reduceInto(shape, ost, p, acc, [&](int64_t a, int64_t v) { return add(a, mul(v, v)); });
    break;
  default: break;
  }
  if (kind == Red::Mean)
    for (int64_t &v : acc)
      v = count ? v / count : 0;
  // Max / min of an empty set: the type's smallest / largest value (bool: false / true), as
  // ONNX defines them, not the int64 limit wrapped to the type's width.
  if (count == 0 && (kind == Red::Max || kind == Red::Min)) {
    DType dt = ctx.outType().dtype;
    int bits = dt == DType::Bool ? 1 : static_cast<int>(dtypeSize(dt)) * 8;
    bool uns = isUnsigned(dt) || dt == DType::Bool;
    int64_t lo = uns ? 0 : bits == 64 ? INT64_MIN : -(int64_t(1) << (bits - 1));
    int64_t hi = uns ? (bits == 64 ? -1 : (int64_t(1) << bits) - 1)
                     : (bits == 64 ? INT64_MAX : (int64_t(1) << (bits - 1)) - 1);
    std::fill(acc.begin(), acc.end(), kind == Red::Max ? lo : hi);
  }
  return fromInt64s(acc, ctx.outType());
}

std::vector<Tensor> reduce(const KernelCtx &ctx, Red kind) {
  if (isFloat(ctx.x(0).dtype()))
    return {reduceFloat(ctx, kind)};
  return {reduceInt(ctx, kind)};
}

std::vector<Tensor> argReduce(const KernelCtx &ctx, bool isMax) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  bool last = ctx.node.i("select_last_index") != 0;
  AxisSplit s = splitAt(x.shape(), axis);
  if (s.n == 0)
    ctx.fail(cat("cannot take the arg ", isMax ? "max" : "min", " of an empty axis"));
  std::vector<double> v = x.toDoubles();
  std::vector<int64_t> out(static_cast<size_t>(s.outer * s.inner));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const double *p = v.data() + o * s.n * s.inner + i;
      int64_t best = 0;
      double bv = p[0];
      for (int64_t j = 1; j < s.n; ++j) {
        double c = p[j * s.inner];
        bool better;
        if (std::isnan(bv))
          better = last && std::isnan(c);
        else if (std::isnan(c))
          better = true;
        else
          better = isMax ? (c > bv || (last && c == bv)) : (c < bv || (last && c == bv));
        if (better) {
          best = j;
          bv = c;
        }
      }
      out[o * s.inner + i] = best;
    }
  return {fromInt64s(out, ctx.outType())};
}

// Softmax / log-softmax along `axis`, in double.
std::vector<Tensor> softmax(const KernelCtx &ctx, bool logForm) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  AxisSplit s = splitAt(x.shape(), axis);
  FloatIn xv(x);
  std::vector<float> out(static_cast<size_t>(x.numel()));
  int64_t lanes = s.outer * s.inner;
#pragma omp parallel for if (x.numel() > 32768)
  for (int64_t l = 0; l < lanes; ++l) {
    int64_t o = l / s.inner, i = l % s.inner;
    const float *p = xv.data() + o * s.n * s.inner + i;
    float *y = out.data() + o * s.n * s.inner + i;
    double mx = -kInf;
    for (int64_t j = 0; j < s.n; ++j)
      mx = maxNaN(mx, p[j * s.inner]);
    double sum = 0.0;
    for (int64_t j = 0; j < s.n; ++j)
      sum += std::exp(double(p[j * s.inner]) - mx);
    double logSum = std::log(sum);
    for (int64_t j = 0; j < s.n; ++j) {
      double d = double(p[j * s.inner]) - mx;
      y[j * s.inner] = static_cast<float>(logForm ? d - logSum : std::exp(d) / sum);
    }
  }
  return {fromFloats(out, ctx.outType())};
}

// A norm parameter (broadcastable to the normalised shape) expanded to `cols` floats.
std::vector<float> normParam(const Tensor &p, const std::vector<int64_t> &normShape) {
  std::vector<int64_t> full = normShape;
  FloatIn pv(p);
  int64_t n = 1;
  for (int64_t d : full)
    n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  std::array<std::vector<int64_t>, 2> st = {stridesOf(full), broadcastStrides(p.shape(), full)};
  forEachRow<2>(full, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j)
      out[off[0] + j * inner[0]] = pv[off[1] + j * inner[1]];
  });
  return out;
}

} // namespace

// ---- reductions -------------------------------------------------------------------------------

std::vector<Tensor> kernel_ReduceSum(const KernelCtx &ctx) {
  return reduce(ctx, Red::Sum);
}
std::vector<Tensor> kernel_ReduceMean(const KernelCtx &ctx) {
  return reduce(ctx, Red::Mean);
}
std::vector<Tensor> kernel_ReduceMax(const KernelCtx &ctx) {
  return reduce(ctx, Red::Max);
}
std::vector<Tensor> kernel_ReduceMin(const KernelCtx &ctx) {
  return reduce(ctx, Red::Min);
}
std::vector<Tensor> kernel_ReduceProd(const KernelCtx &ctx) {
  return reduce(ctx, Red::Prod);
}
std::vector<Tensor> kernel_ReduceL1(const KernelCtx &ctx) {
  return reduce(ctx, Red::L1);
}
std::vector<Tensor> kernel_ReduceL2(const KernelCtx &ctx) {
  return reduce(ctx, Red::L2);
}
std::vector<Tensor> kernel_ReduceSumSquare(const KernelCtx &ctx) {
  return reduce(ctx, Red::SumSquare);
}
std::vector<Tensor> kernel_ReduceLogSumExp(const KernelCtx &ctx) {
  return reduce(ctx, Red::LogSumExp);
}
std::vector<Tensor> kernel_ArgMax(const KernelCtx &ctx) {
  return argReduce(ctx, true);
}
std::vector<Tensor> kernel_ArgMin(const KernelCtx &ctx) {
  return argReduce(ctx, false);
}

// The k best along the axis by the order: `largest`: greater first (NaN above every number),
// else smaller first (NaN last); equal values by index. Integers compare as integers (exact
// beyond 2^53), and the values are copied bit for bit.
std::vector<Tensor> kernel_TopK(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  int64_t k = ctx.node.i("k");
  bool largest = ctx.node.i("largest") != 0;
  AxisSplit s = splitAt(x.shape(), axis);
  Tensor values(ctx.outType(0));
  std::vector<int64_t> indices(static_cast<size_t>(s.outer * k * s.inner));
  const bool fp = isFloat(x.dtype());
  const size_t es = dtypeSize(x.dtype());
  std::vector<int64_t> order(static_cast<size_t>(s.n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t base = o * s.n * s.inner + i;
      auto at = [&](int64_t j) { return base + j * s.inner; };
      // a before b: the better value, or the lower index of two equal ones.
      auto before = [&](int64_t a, int64_t b) {
        if (fp) {
          double va = x.getDouble(at(a)), vb = x.getDouble(at(b));
          bool na = std::isnan(va), nb = std::isnan(vb);
          if (na || nb) {
            if (na && nb)
              return a < b;
            return largest ? na : nb;
          }
          if (va != vb)
            return largest ? va > vb : va < vb;
          return a < b;
        }
        if (x.dtype() == DType::U64) { // above 2^63 getInt would wrap
          uint64_t va = 0, vb = 0;
          std::memcpy(&va, x.raw() + at(a) * 8, 8);
          std::memcpy(&vb, x.raw() + at(b) * 8, 8);
          if (va != vb)
            return largest ? va > vb : va < vb;
          return a < b;
        }
        int64_t va = x.getInt(at(a)), vb = x.getInt(at(b));
        if (va != vb)
          return largest ? va > vb : va < vb;
        return a < b;
      };
      for (int64_t j = 0; j < s.n; ++j)
        order[static_cast<size_t>(j)] = j;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) {
        int64_t src = at(order[static_cast<size_t>(j)]), dst = (o * k + j) * s.inner + i;
        std::memcpy(values.raw() + dst * es, x.raw() + src * es, es);
        indices[static_cast<size_t>(dst)] = order[static_cast<size_t>(j)];
      }
    }
  return {std::move(values), fromInt64s(indices, ctx.outType(1))};
}

// ---- normalisations ---------------------------------------------------------------------------

std::vector<Tensor> kernel_Softmax(const KernelCtx &ctx) {
  return softmax(ctx, false);
}
std::vector<Tensor> kernel_LogSoftmax(const KernelCtx &ctx) {
  return softmax(ctx, true);
}

std::vector<Tensor> kernel_LayerNorm(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  double eps = ctx.node.f("epsilon");
  std::vector<int64_t> normShape(x.shape().begin() + axis, x.shape().end());
  AxisSplit s = splitAt(x.shape(), axis);
  int64_t rows = s.outer, cols = s.n * s.inner;
  std::vector<float> gamma, beta;
  if (ctx.numIn() >= 2)
    gamma = normParam(ctx.x(1), normShape);
  if (ctx.numIn() >= 3)
    beta = normParam(ctx.x(2), normShape);
  FloatIn xv(x);
  std::vector<float> out(static_cast<size_t>(x.numel()));
#pragma omp parallel for if (x.numel() > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float *p = xv.data() + r * cols;
    float *y = out.data() + r * cols;
    double mean = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      mean += p[j];
    mean /= double(cols);
    double var = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      var += (p[j] - mean) * (p[j] - mean);
    var /= double(cols);
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) {
      double v = (p[j] - mean) * inv;
      if (!gamma.empty())
        v *= gamma[j];
      if (!beta.empty())
        v += beta[j];
      y[j] = static_cast<float>(v);
    }
  }
  return {fromFloats(out, ctx.outType())};
}

std::vector<Tensor> kernel_RmsNorm(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  double eps = ctx.node.f("epsilon");
  std::vector<int64_t> normShape(x.shape().begin() + axis, x.shape().end());
  AxisSplit s = splitAt(x.shape(), axis);
  int64_t rows = s.outer, cols = s.n * s.inner;
  std::vector<float> weight;
  if (ctx.numIn() >= 2)
    weight = normParam(ctx.x(1), normShape);
  FloatIn xv(x);
  std::vector<float> out(static_cast<size_t>(x.numel()));
#pragma omp parallel for if (x.numel() > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const float *p = xv.data() + r * cols;
    float *y = out.data() + r * cols;
    double ss = 0.0;
    for (int64_t j = 0; j < cols; ++j)
      ss += double(p[j]) * p[j];
    double inv = 1.0 / std::sqrt(ss / double(cols) + eps);
    for (int64_t j = 0; j < cols; ++j)
      y[j] = static_cast<float>(p[j] * inv * (weight.empty() ? 1.0 : double(weight[j])));
  }
  return {fromFloats(out, ctx.outType())};
}

std::vector<Tensor> kernel_BatchNorm(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  double eps = ctx.node.f("epsilon");
  int64_t N = x.shape()[0], C = x.shape()[1], plane = x.numel() / std::max<int64_t>(N * C, 1);
  std::vector<float> scale = toFloats(ctx.x(1)), bias = toFloats(ctx.x(2)),
                     mean = toFloats(ctx.x(3)), var = toFloats(ctx.x(4));
  FloatIn xv(x);
  std::vector<float> out(static_cast<size_t>(x.numel()));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double a = scale[c] / std::sqrt(double(var[c]) + eps);
      const float *p = xv.data() + (n * C + c) * plane;
      float *y = out.data() + (n * C + c) * plane;
      for (int64_t i = 0; i < plane; ++i)
        y[i] = static_cast<float>((p[i] - double(mean[c])) * a + bias[c]);
    }
  return {fromFloats(out, ctx.outType())};
}

std::vector<Tensor> kernel_InstanceNorm(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  double eps = ctx.node.f("epsilon");
  int64_t N = x.shape()[0], C = x.shape()[1], plane = x.numel() / std::max<int64_t>(N * C, 1);
  std::vector<float> scale = toFloats(ctx.x(1)), bias = toFloats(ctx.x(2));
  FloatIn xv(x);
  std::vector<float> out(static_cast<size_t>(x.numel()));
#pragma omp parallel for if (x.numel() > 32768)
  for (int64_t nc = 0; nc < N * C; ++nc) {
    int64_t c = nc % C;
    const float *p = xv.data() + nc * plane;
    float *y = out.data() + nc * plane;
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < plane; ++i)
      mean += p[i];
    mean /= double(plane);
    for (int64_t i = 0; i < plane; ++i)
      var += (p[i] - mean) * (p[i] - mean);
    var /= double(plane);
    double a = scale[c] / std::sqrt(var + eps);
    for (int64_t i = 0; i < plane; ++i)
      y[i] = static_cast<float>((p[i] - mean) * a + bias[c]);
  }
  return {fromFloats(out, ctx.outType())};
}

// ONNX MeanVarianceNormalization over any set of axes: y = (x - mean) / (sqrt(var) + epsilon).
// ONNX's function body computes var as E[x^2] - E[x]^2 in the input type; here it is the centred
// variance in double (the same value, exactly, without the cancellation that can make it
// negative and the result NaN).
std::vector<Tensor> kernel_MeanVarianceNorm(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  double eps = ctx.node.f("epsilon");
  int64_t outN = 0;
  std::vector<int64_t> ost = reducedStrides(x.shape(), ctx.node.ints("axes"), outN);
  int64_t count = outN ? x.numel() / outN : 0;
  FloatIn xv(x);
  const float *p = xv.data();
  const auto &shape = x.shape();
  std::vector<double> mean(static_cast<size_t>(outN), 0.0), m2(static_cast<size_t>(outN), 0.0);
  reduceInto(shape, ost, p, mean, [](double a, double v) { return a + v; });
  for (double &m : mean)
    m /= double(count);
  std::array<std::vector<int64_t>, 2> st = {stridesOf(shape), ost};
  forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      double d = p[off[0] + j * inner[0]] - mean[off[1] + j * inner[1]];
      m2[off[1] + j * inner[1]] += d * d;
    }
  });
  std::vector<float> out(static_cast<size_t>(x.numel()));
  forEachRow<2>(shape, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j) {
      int64_t i = off[0] + j * inner[0], o = off[1] + j * inner[1];
      out[i] = static_cast<float>((p[i] - mean[o]) / (std::sqrt(m2[o] / double(count)) + eps));
    }
  });
  return {fromFloats(out, ctx.outType())};
}

// ---- pooling ------------------------------------------------------------------------------------

namespace {

// Folds every window of every (n, c) plane: max, average, or (indices) the flat index of the
// maximum in x, max_pool_indices' rule (ir/ops.def).
std::vector<Tensor> pool(const KernelCtx &ctx, bool isMax, bool indices = false) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  const auto &ks = ctx.node.ints("kernel_shape"), &st = ctx.node.ints("strides"),
             &pd = ctx.node.ints("pads"), &dl = ctx.node.ints("dilations");
  bool includePad = !isMax && ctx.node.i("count_include_pad") != 0;
  // [N, CB, spatial..., 16]: planes are the lanes
  bool blocked = !indices && ctx.node.i("blocked") != 0;
  bool colMajor = indices && ctx.node.i("storage_order") != 0;
  size_t S = x.shape().size() - (blocked ? 3 : 2);
  std::vector<int64_t> I(x.shape().begin() + 2, x.shape().begin() + 2 + static_cast<long>(S)),
      O(ot.shape.begin() + 2, ot.shape.begin() + 2 + static_cast<long>(S));
  int64_t inPlane = 1, outPlane = 1, kerN = 1;
  for (size_t d = 0; d < S; ++d) {
    inPlane *= I[d];
    outPlane *= O[d];
    kerN *= ks[d];
  }
  int64_t planes = x.shape()[0] * x.shape()[1] * (blocked ? 16 : 1);
  std::vector<double> xv = x.toDoubles();
  // Blocked: lane l of block b is plane 16 b + l, element e of it at (b * plane + e) * 16 + l.
  auto lanesToPlanes = [](std::vector<double> &v, int64_t blocks, int64_t plane, bool back) {
    std::vector<double> t(v.size());
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t e = 0; e < plane; ++e)
        for (int64_t l = 0; l < 16; ++l) {
          size_t blockedAt = static_cast<size_t>((b * plane + e) * 16 + l),
                 planeAt = static_cast<size_t>((b * 16 + l) * plane + e);
          (back ? t[blockedAt] : t[planeAt]) = back ? v[planeAt] : v[blockedAt];
        }
    v.swap(t);
  };
  if (blocked)
    lanesToPlanes(xv, planes / 16, inPlane, false);
  std::vector<double> out(static_cast<size_t>(planes * outPlane));
#pragma omp parallel for if (planes * outPlane * kerN > 65536)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double *xp = xv.data() + pl * inPlane;
    std::vector<int64_t> o(S, 0), k(S, 0);
    for (int64_t op = 0; op < outPlane; ++op) {
      double acc = isMax ? -kInf : 0.0;
      int64_t count = 0, padCount = 0, arg = -1;
      std::fill(k.begin(), k.end(), 0);
      for (int64_t kp = 0; kp < kerN; ++kp) {
        int64_t off = 0, colOff = 0, colStride = 1;
        bool inside = true, insidePadded = true;
        for (size_t d = 0; d < S; ++d) {
          int64_t i = o[d] * st[d] - pd[d] + k[d] * dl[d];
          inside = inside && i >= 0 && i < I[d];
          insidePadded = insidePadded && i < I[d] + pd[S + d];
          off = off * I[d] + i;
          colOff += i * colStride;
          colStride *= I[d];
        }
        padCount += insidePadded;
        if (inside) {
          ++count;
          double v = xp[off];
          if (indices) {
            if (arg < 0 || v > acc || (std::isnan(v) && !std::isnan(acc))) {
              acc = v;
              arg = pl * inPlane + (colMajor ? colOff : off);
            }
          } else {
            acc = isMax ? maxNaN(acc, v) : acc + v;
          }
        }
        for (int64_t d = static_cast<int64_t>(S) - 1; d >= 0; --d) {
          if (++k[d] < ks[d])
            break;
          k[d] = 0;
        }
      }
      if (!isMax) {
        int64_t div = includePad ? padCount : count;
        acc = div ? acc / double(div) : kNaN;
      }
      if (indices)
        acc = double(arg);
      out[pl * outPlane + op] = acc;
      for (int64_t d = static_cast<int64_t>(S) - 1; d >= 0; --d) {
        if (++o[d] < O[d])
          break;
        o[d] = 0;
      }
    }
  }
  if (blocked)
    lanesToPlanes(out, planes / 16, outPlane, true);
  return {fromDoubles(out, ot)};
}

std::vector<Tensor> globalPool(const KernelCtx &ctx, bool isMax) {
  const Tensor &x = ctx.x(0);
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t plane = planes ? x.numel() / planes : 0;
  std::vector<double> xv = x.toDoubles(), out(static_cast<size_t>(planes));
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double *p = xv.data() + pl * plane;
    double acc = isMax ? -kInf : 0.0;
    for (int64_t i = 0; i < plane; ++i)
      acc = isMax ? maxNaN(acc, p[i]) : acc + p[i];
    out[pl] = isMax ? acc : (plane ? acc / double(plane) : kNaN);
  }
  return {fromDoubles(out, ctx.outType())};
}

} // namespace

std::vector<Tensor> kernel_MaxPool(const KernelCtx &ctx) {
  return pool(ctx, true);
}
std::vector<Tensor> kernel_MaxPoolIndices(const KernelCtx &ctx) {
  return pool(ctx, true, true);
}
std::vector<Tensor> kernel_AvgPool(const KernelCtx &ctx) {
  return pool(ctx, false);
}
std::vector<Tensor> kernel_GlobalAvgPool(const KernelCtx &ctx) {
  return globalPool(ctx, false);
}
std::vector<Tensor> kernel_GlobalMaxPool(const KernelCtx &ctx) {
  return globalPool(ctx, true);
}

} // namespace aicf::interp
