// Data-movement kernels: reshape, transpose, concat, split, slice, gather, gather_elements,
// gather_nd, scatter_elements, scatter_nd, expand, tile, pad and resize. They move raw elements
// (any dtype) except linear and cubic resize, which interpolate in double, and the scatters'
// reductions, which combine in the dtype's compute type (f32 for f32 / f16 / bf16, rounded to
// the dtype after each update; double for f64; 64-bit wrap-around for integers; or / and for
// bool), one update at a time in row-major order of the updates (so duplicates are deterministic:
// the last update of reduction none wins). Indices out of range are errors naming the node.
//
// resize follows the ONNX reference (onnx/reference/ops/op_resize.py): the output coordinate is
// mapped to the input by coordinate_transformation_mode using the node's scales (or out/in where
// a scale is not positive); nearest rounds by nearest_mode and clamps to the input; linear
// clamps the coordinate to [0, len-1] and interpolates between its floor and the next element,
// one axis at a time (separable, so N-d linear is multilinear); cubic is Keys' convolution over
// four taps per axis (resizeCubic). Integer data is interpolated in double and rounded to
// nearest. tf_crop_and_resize maps onto the node's roi box and sets every element whose
// coordinate falls outside the input on some axis to extrapolation_value.
#include "interp/kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>

namespace aicf::interp {

namespace {

int64_t normAxis(const KernelCtx &ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.fail(cat("axis ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

int64_t prod(const std::vector<int64_t> &v, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to && i < v.size(); ++i)
    n *= v[i];
  return n;
}

std::vector<int64_t> identityMap(int64_t n) {
  std::vector<int64_t> m(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    m[i] = i;
  return m;
}

// One element of `dtype` holding `value`, as bytes.
std::vector<uint8_t> elementBytes(DType dtype, double value) {
  Tensor t(TensorType(dtype, {}));
  t.setDouble(0, value);
  return t.bytes();
}

// Input coordinate of output coordinate `xo` (ONNX coordinate_transformation_mode). As in the
// ONNX reference, the resized length is the real lenIn * scale (2.4 for 4 * 0.6), not the rounded
// output size; the two agree whenever the scale came from the sizes.
// tf_crop_and_resize maps onto the crop box [r0, r1] (normalised input coordinates) of the axis.
double inputCoord(const KernelCtx &ctx, const std::string &mode, int64_t xo, int64_t lenIn,
                  int64_t lenOut, double scale, double r0 = 0.0, double r1 = 1.0) {
  double x = static_cast<double>(xo);
  double resized = double(lenIn) * scale;
  if (std::fabs(resized - double(lenOut)) < 1e-9 * std::max(1.0, resized))
    resized = double(lenOut); // absorb the rounding of out / in * in
  if (mode == "half_pixel")
    return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel")
    return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return resized == 1 ? 0.0 : x * double(lenIn - 1) / (resized - 1);
  if (mode == "asymmetric")
    return x / scale;
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / scale;
  if (mode == "half_pixel_symmetric")
    return double(lenIn) / 2 * (1 - double(lenOut) / resized) + ((x + 0.5) / scale - 0.5);
  if (mode == "tf_crop_and_resize")
    return lenOut > 1
               ? x * (r1 - r0) * double(lenIn - 1) / double(lenOut - 1) + r0 * double(lenIn - 1)
               : 0.5 * (r0 + r1) * double(lenIn - 1);
  ctx.fail(cat("coordinate_transformation_mode '", mode,
               "' is not supported (half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
               "tf_half_pixel_for_nn, half_pixel_symmetric, tf_crop_and_resize)"));
}

int64_t nearestIndex(const KernelCtx &ctx, const std::string &mode, double x, int64_t lenIn) {
  double f = std::floor(x);
  double r;
  if (mode == "round_prefer_floor")
    r = x == f + 0.5 ? f : std::round(x);
  else if (mode == "round_prefer_ceil")
    r = x == f + 0.5 ? f + 1.0 : std::round(x);
  else if (mode == "floor")
    r = f;
  else if (mode == "ceil")
    r = std::ceil(x);
  else
    ctx.fail(cat("nearest_mode '", mode,
                 "' is not supported (round_prefer_floor, round_prefer_ceil, floor, ceil)"));
  return std::clamp<int64_t>(static_cast<int64_t>(r), 0, lenIn - 1);
}

} // namespace

std::vector<Tensor> kernel_Reshape(const KernelCtx &ctx) {
  return {Tensor(ctx.outType(), ctx.x(0).bytes())};
}

std::vector<Tensor> kernel_Transpose(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  const auto &perm = ctx.node.ints("perm");
  std::vector<int64_t> inSt = stridesOf(x.shape()), permSt(perm.size());
  for (size_t d = 0; d < perm.size(); ++d)
    permSt[d] = inSt[perm[d]];
  Tensor out(ot);
  size_t es = dtypeSize(ot.dtype);
  const uint8_t *src = x.raw();
  uint8_t *dst = out.raw();
  std::array<std::vector<int64_t>, 2> st = {stridesOf(ot.shape), permSt};
  forEachRow<2>(ot.shape, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j)
      copyElem(dst + (off[0] + j * inner[0]) * es, src + (off[1] + j * inner[1]) * es, es);
  });
  return {out};
}

std::vector<Tensor> kernel_Concat(const KernelCtx &ctx) {
  const TensorType &ot = ctx.outType();
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), ot.rank());
  size_t es = dtypeSize(ot.dtype);
  int64_t outer = prod(ot.shape, 0, static_cast<size_t>(axis));
  int64_t inner = prod(ot.shape, static_cast<size_t>(axis) + 1, ot.shape.size());
  Tensor out(ot);
  uint8_t *dst = out.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < ctx.numIn(); ++k) {
      const Tensor &x = ctx.x(k);
      size_t chunk = static_cast<size_t>(x.shape()[axis] * inner) * es;
      if (chunk)
        std::memcpy(dst, x.raw() + o * chunk, chunk);
      dst += chunk;
    }
  return {out};
}

std::vector<Tensor> kernel_Split(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  size_t es = dtypeSize(x.dtype());
  int64_t outer = prod(x.shape(), 0, static_cast<size_t>(axis));
  int64_t inner = prod(x.shape(), static_cast<size_t>(axis) + 1, x.shape().size());
  size_t rowBytes = static_cast<size_t>(x.shape()[axis] * inner) * es;
  std::vector<Tensor> outs;
  size_t begin = 0;
  for (const TensorType &t : ctx.outTypes) {
    Tensor out(t);
    size_t chunk = static_cast<size_t>(t.shape[axis] * inner) * es;
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(out.raw() + o * chunk, x.raw() + o * rowBytes + begin, chunk);
    begin += chunk;
    outs.push_back(std::move(out));
  }
  return outs;
}

std::vector<Tensor> kernel_Slice(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  const auto &starts = ctx.node.ints("starts"), &axes = ctx.node.ints("axes"),
             &steps = ctx.node.ints("steps");
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < ot.rank(); ++d)
    maps.push_back(identityMap(ot.shape[d]));
  for (size_t k = 0; k < axes.size(); ++k) {
    auto &m = maps[axes[k]];
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = starts[k] + static_cast<int64_t>(i) * steps[k];
  }
  return {gatherByAxisMaps(x, maps, std::vector<uint8_t>(dtypeSize(x.dtype()), 0))};
}

std::vector<Tensor> kernel_Gather(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &indices = ctx.x(1);
  const TensorType &ot = ctx.outType();
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  int64_t len = x.shape()[axis];
  std::vector<int64_t> idx = toInt64s(indices);
  for (int64_t &i : idx) {
    int64_t orig = i;
    if (i < 0)
      i += len;
    if (i < 0 || i >= len)
      ctx.fail(cat("index ", orig, " is out of range for axis ", axis, " of size ", len));
  }
  size_t es = dtypeSize(x.dtype());
  int64_t outer = prod(x.shape(), 0, static_cast<size_t>(axis));
  size_t chunk =
      static_cast<size_t>(prod(x.shape(), static_cast<size_t>(axis) + 1, x.shape().size())) * es;
  Tensor out(ot);
  uint8_t *dst = out.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i : idx) {
      if (chunk)
        std::memcpy(dst, x.raw() + (o * len + i) * chunk, chunk);
      dst += chunk;
    }
  return {out};
}

namespace {

// indices[i] (negative counting from the end of an axis of size len), checked.
int64_t wrapIndex(const KernelCtx &ctx, int64_t v, int64_t len, int64_t axis) {
  int64_t i = v < 0 ? v + len : v;
  if (i < 0 || i >= len)
    ctx.fail(cat("index ", v, " is out of range for axis ", axis, " of size ", len));
  return i;
}

std::vector<int64_t> unravelIndex(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return idx;
}

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reductionOf(const KernelCtx &ctx) {
  const std::string &r = ctx.node.s("reduction");
  if (r == "none")
    return Reduction::None;
  if (r == "add")
    return Reduction::Add;
  if (r == "mul")
    return Reduction::Mul;
  if (r == "max")
    return Reduction::Max;
  if (r == "min")
    return Reduction::Min;
  ctx.fail(cat("reduction '", r, "' is not none, add, mul, max or min"));
}

template <typename T>
T combineValues(Reduction r, T a, T b) {
  switch (r) {
  case Reduction::Add: return a + b;
  case Reduction::Mul: return a * b;
  case Reduction::Max: return a != a ? a : (b != b || b > a) ? b : a; // NaN propagates
  case Reduction::Min: return a != a ? a : (b != b || b < a) ? b : a;
  case Reduction::None: break;
  }
  return b;
}

// out[o] = updates[u], or combined with it by the reduction, in the dtype's compute type.
void scatterElement(Tensor &out, int64_t o, const Tensor &upd, int64_t u, Reduction r) {
  size_t es = dtypeSize(out.dtype());
  if (r == Reduction::None) {
    copyElem(out.raw() + o * es, upd.raw() + u * es, es);
    return;
  }
  DType t = out.dtype();
  if (t == DType::F64) {
    out.setDouble(o, combineValues(r, out.getDouble(o), upd.getDouble(u)));
  } else if (isFloat(t)) {
    float a = static_cast<float>(out.getDouble(o)), b = static_cast<float>(upd.getDouble(u));
    out.setDouble(o, static_cast<double>(combineValues(r, a, b)));
  } else if (t == DType::Bool) {
    bool a = out.getInt(o) != 0, b = upd.getInt(u) != 0;
    out.setInt(o, (r == Reduction::Add || r == Reduction::Max) ? (a || b) : (a && b));
  } else if (isUnsigned(t)) {
    auto a = static_cast<uint64_t>(out.getInt(o)), b = static_cast<uint64_t>(upd.getInt(u));
    out.setInt(o, static_cast<int64_t>(combineValues(r, a, b)));
  } else { // wrap-around arithmetic, as the narrowing store does
    int64_t a = out.getInt(o), b = upd.getInt(u);
    if (r == Reduction::Add)
      out.setInt(o, static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)));
    else if (r == Reduction::Mul)
      out.setInt(o, static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)));
    else
      out.setInt(o, combineValues(r, a, b));
  }
}

} // namespace

// GatherElements / ScatterElements: the offset into the data (dims xs, strides xst) of element
// i of the indices (dims is), whose value `index` replaces its coordinate along `axis`.
static int64_t elementsOffset(const KernelCtx &ctx, int64_t i, const std::vector<int64_t> &is,
                              int64_t index, const std::vector<int64_t> &xs,
                              const std::vector<int64_t> &xst, int64_t axis) {
  std::vector<int64_t> c = unravelIndex(i, is);
  c[axis] = wrapIndex(ctx, index, xs[axis], axis);
  int64_t off = 0;
  for (size_t d = 0; d < c.size(); ++d)
    off += c[d] * xst[d];
  return off;
}

std::vector<Tensor> kernel_GatherElements(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &indices = ctx.x(1);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  const std::vector<int64_t> &xs = x.shape(), &is = indices.shape();
  std::vector<int64_t> xst = stridesOf(xs), idx = toInt64s(indices);
  size_t es = dtypeSize(x.dtype());
  Tensor out(ctx.outType());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t off = elementsOffset(ctx, i, is, idx[i], xs, xst, axis);
    copyElem(out.raw() + i * es, x.raw() + off * es, es);
  }
  return {out};
}

std::vector<Tensor> kernel_GatherND(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &indices = ctx.x(1);
  const std::vector<int64_t> &xs = x.shape(), &is = indices.shape();
  size_t b = static_cast<size_t>(ctx.node.i("batch_dims"));
  size_t k = static_cast<size_t>(is.back());
  int64_t batches = prod(xs, 0, b), tuples = prod(is, b, is.size() - 1);
  int64_t slice = prod(xs, b + k, xs.size()), perBatch = prod(xs, b, b + k);
  std::vector<int64_t> idx = toInt64s(indices);
  size_t es = dtypeSize(x.dtype());
  Tensor out(ctx.outType());
  uint8_t *dst = out.raw();
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t n = 0; n < tuples; ++n) {
      const int64_t *tuple = idx.data() + (bi * tuples + n) * static_cast<int64_t>(k);
      int64_t off = 0;
      for (size_t j = 0; j < k; ++j)
        off = off * xs[b + j] + wrapIndex(ctx, tuple[j], xs[b + j], static_cast<int64_t>(b + j));
      size_t bytes = static_cast<size_t>(slice) * es;
      std::memcpy(dst, x.raw() + (bi * perBatch + off) * slice * static_cast<int64_t>(es), bytes);
      dst += bytes;
    }
  return {out};
}

std::vector<Tensor> kernel_ScatterElements(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &indices = ctx.x(1), &upd = ctx.x(2);
  int64_t axis = normAxis(ctx, ctx.node.i("axis"), x.type().rank());
  Reduction r = reductionOf(ctx);
  const std::vector<int64_t> &xs = x.shape(), &is = indices.shape();
  std::vector<int64_t> xst = stridesOf(xs), idx = toInt64s(indices);
  Tensor out(ctx.outType(), x.bytes());
  for (int64_t i = 0; i < indices.numel(); ++i) {
    int64_t off = elementsOffset(ctx, i, is, idx[i], xs, xst, axis);
    scatterElement(out, off, upd, i, r);
  }
  return {out};
}

std::vector<Tensor> kernel_ScatterND(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0), &indices = ctx.x(1), &upd = ctx.x(2);
  Reduction r = reductionOf(ctx);
  const std::vector<int64_t> &xs = x.shape(), &is = indices.shape();
  size_t k = static_cast<size_t>(is.back());
  int64_t tuples = prod(is, 0, is.size() - 1), slice = prod(xs, k, xs.size());
  std::vector<int64_t> idx = toInt64s(indices);
  Tensor out(ctx.outType(), x.bytes());
  for (int64_t u = 0; u < tuples; ++u) {
    int64_t off = 0;
    for (size_t j = 0; j < k; ++j)
      off = off * xs[j] +
            wrapIndex(ctx, idx[u * static_cast<int64_t>(k) + j], xs[j], static_cast<int64_t>(j));
    for (int64_t e = 0; e < slice; ++e)
      scatterElement(out, off * slice + e, upd, u * slice + e, r);
  }
  return {out};
}

std::vector<Tensor> kernel_Expand(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  Tensor out(ot);
  size_t es = dtypeSize(ot.dtype);
  const uint8_t *src = x.raw();
  uint8_t *dst = out.raw();
  std::array<std::vector<int64_t>, 2> st = {stridesOf(ot.shape),
                                            broadcastStrides(x.shape(), ot.shape)};
  forEachRow<2>(ot.shape, st, [&](auto off, auto inner, int64_t len) {
    for (int64_t j = 0; j < len; ++j)
      copyElem(dst + (off[0] + j * inner[0]) * es, src + (off[1] + j * inner[1]) * es, es);
  });
  return {out};
}

std::vector<Tensor> kernel_Tile(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < ot.rank(); ++d) {
    std::vector<int64_t> m = identityMap(ot.shape[d]);
    for (int64_t &i : m)
      i %= x.shape()[d];
    maps.push_back(std::move(m));
  }
  return {gatherByAxisMaps(x, maps, std::vector<uint8_t>(dtypeSize(x.dtype()), 0))};
}

std::vector<Tensor> kernel_Pad(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  const auto &pads = ctx.node.ints("pads");
  const std::string &mode = ctx.node.s("mode");
  int64_t r = ot.rank();
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < r; ++d) {
    int64_t L = x.shape()[d];
    std::vector<int64_t> m(static_cast<size_t>(ot.shape[d]));
    for (int64_t i = 0; i < ot.shape[d]; ++i) {
      int64_t c = i - pads[d];
      if (c >= 0 && c < L) {
        m[i] = c;
      } else if (mode == "constant") {
        m[i] = -1;
      } else if (L == 0) {
        ctx.fail(cat("cannot ", mode, "-pad axis ", d, " of size 0"));
      } else if (mode == "edge") {
        m[i] = std::clamp<int64_t>(c, 0, L - 1);
      } else if (mode == "reflect") {
        int64_t period = 2 * (L - 1);
        if (period == 0) {
          m[i] = 0;
        } else {
          c = ((c % period) + period) % period;
          m[i] = c >= L ? period - c : c;
        }
      } else {
        ctx.fail(cat("mode '", mode, "' is not constant, reflect or edge"));
      }
    }
    maps.push_back(std::move(m));
  }
  return {gatherByAxisMaps(x, maps, elementBytes(x.dtype(), ctx.node.f("value")))};
}

namespace {

// Keys' cubic convolution weights of the taps at offsets -1, 0, 1, 2 from floor(c), t = c -
// floor(c) in [0, 1), coefficient A (ONNX's cubic_coeff_a).
std::array<double, 4> cubicWeights(double t, double A) {
  auto near = [A](double s) { return ((A + 2) * s - (A + 3)) * s * s + 1; };      // |s| <= 1
  auto far = [A](double s) { return ((A * s - 5 * A) * s + 8 * A) * s - 4 * A; }; // 1 < |s| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

// Cubic resize (ONNX's, as its reference computes it): per output position the input coordinate
// c (not clamped), taps floor(c) - 1 .. floor(c) + 2 read at indices clamped to the axis (edge
// padding), weighted by Keys' cubic convolution with coefficient A at t = c - floor(c); with
// exclude_outside the taps outside the axis weigh 0 and the rest are renormalised. Separable,
// one axis at a time, in double.
template <typename CoordOf>
Tensor resizeCubic(const KernelCtx &ctx, CoordOf coordOf) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  double A = ctx.node.f("cubic_coeff_a");
  bool exclude = ctx.node.i("exclude_outside") != 0;
  std::vector<double> cur = x.toDoubles();
  std::vector<int64_t> shape = x.shape();
  for (int64_t d = 0; d < ot.rank(); ++d) {
    int64_t lenIn = shape[d], lenOut = ot.shape[d];
    bool identity = lenIn == lenOut;
    for (int64_t i = 0; i < lenOut && identity; ++i)
      identity = coordOf(d, i, lenIn) == double(i);
    if (identity)
      continue;
    std::vector<std::array<int64_t, 4>> idx(static_cast<size_t>(lenOut));
    std::vector<std::array<double, 4>> w(static_cast<size_t>(lenOut));
    for (int64_t i = 0; i < lenOut; ++i) {
      double c = coordOf(d, i, lenIn);
      double base = std::floor(c);
      std::array<double, 4> k = cubicWeights(c - base, A);
      double sum = 0;
      for (int t = 0; t < 4; ++t) {
        int64_t j = static_cast<int64_t>(base) - 1 + t;
        if (exclude && (j < 0 || j >= lenIn))
          k[t] = 0;
        sum += k[t];
        idx[i][t] = std::clamp<int64_t>(j, 0, lenIn - 1);
      }
      for (int t = 0; t < 4; ++t)
        w[i][t] = exclude ? k[t] / sum : k[t];
    }
    int64_t outer = prod(shape, 0, static_cast<size_t>(d));
    int64_t inner = prod(shape, static_cast<size_t>(d) + 1, shape.size());
    std::vector<double> next(static_cast<size_t>(outer * lenOut * inner), 0.0);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < lenOut; ++i) {
        double *y = next.data() + (o * lenOut + i) * inner;
        for (int t = 0; t < 4; ++t) {
          const double *a = cur.data() + (o * lenIn + idx[i][t]) * inner;
          for (int64_t j = 0; j < inner; ++j)
            y[j] += w[i][t] * a[j];
        }
      }
    cur.swap(next);
    shape[d] = lenOut;
  }
  if (isFloat(ot.dtype))
    return fromDoubles(cur, ot);
  Tensor out(ot);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.setInt(i, truncToInt64(std::nearbyint(cur[i])));
  return out;
}

} // namespace

std::vector<Tensor> kernel_Resize(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const TensorType &ot = ctx.outType();
  const auto &scales = ctx.node.floats("scales");
  const std::string &mode = ctx.node.s("mode"), &ctm = ctx.node.s("coordinate_transformation_mode");
  int64_t r = ot.rank();
  auto scaleOf = [&](int64_t d) {
    double s = scales[d];
    return s > 0 ? s : double(ot.shape[d]) / double(x.shape()[d]);
  };
  for (int64_t d = 0; d < r; ++d)
    if (x.shape()[d] == 0 && ot.shape[d] != 0)
      ctx.fail(cat("cannot resize axis ", d, " of size 0 to ", ot.shape[d]));
  // tf_crop_and_resize: the crop box per axis, and where a coordinate falls outside the input
  // (on any axis) the element is extrapolation_value, whatever the mode.
  const auto &roi = ctx.node.floats("roi");
  bool crop = ctm == "tf_crop_and_resize";
  if (crop && static_cast<int64_t>(roi.size()) != 2 * r)
    ctx.fail(cat("tf_crop_and_resize needs roi with 2 values per axis, got ", roi.size()));
  auto coordOf = [&](int64_t d, int64_t i, int64_t lenIn) {
    return crop ? inputCoord(ctx, ctm, i, lenIn, ot.shape[d], scaleOf(d), roi[d], roi[r + d])
                : inputCoord(ctx, ctm, i, lenIn, ot.shape[d], scaleOf(d));
  };
  std::vector<std::vector<char>> outside(static_cast<size_t>(r));
  bool anyOutside = false;
  if (crop)
    for (int64_t d = 0; d < r; ++d)
      for (int64_t i = 0; i < ot.shape[d]; ++i) {
        double c = coordOf(d, i, x.shape()[d]);
        outside[d].push_back(c < 0 || c > double(x.shape()[d] - 1));
        anyOutside = anyOutside || outside[d].back();
      }
  double ev = ctx.node.f("extrapolation_value");
  auto extrapolate = [&](Tensor t) {
    if (!anyOutside)
      return t;
    std::vector<int64_t> st = stridesOf(ot.shape);
    for (int64_t e = 0; e < t.numel(); ++e) {
      bool out = false;
      for (int64_t d = 0; d < r && !out; ++d)
        out = outside[d][(e / st[d]) % ot.shape[d]];
      if (out)
        t.setDouble(e, ev);
    }
    return t;
  };
  if (mode == "nearest") {
    const std::string &nm = ctx.node.s("nearest_mode");
    std::vector<std::vector<int64_t>> maps;
    for (int64_t d = 0; d < r; ++d) {
      std::vector<int64_t> m(static_cast<size_t>(ot.shape[d]));
      for (int64_t i = 0; i < ot.shape[d]; ++i)
        m[i] = nearestIndex(ctx, nm, coordOf(d, i, x.shape()[d]), x.shape()[d]);
      maps.push_back(std::move(m));
    }
    return {extrapolate(gatherByAxisMaps(x, maps, std::vector<uint8_t>(dtypeSize(x.dtype()), 0)))};
  }
  if (mode != "linear" && mode != "cubic")
    ctx.fail(cat("mode '", mode, "' is not nearest, linear or cubic"));
  if (mode == "cubic")
    return {extrapolate(resizeCubic(ctx, coordOf))};
  // Separable linear interpolation, one axis at a time, in double.
  std::vector<double> cur = x.toDoubles();
  std::vector<int64_t> shape = x.shape();
  for (int64_t d = 0; d < r; ++d) {
    int64_t lenIn = shape[d], lenOut = ot.shape[d];
    std::vector<int64_t> i0(static_cast<size_t>(lenOut)), i1(static_cast<size_t>(lenOut));
    std::vector<double> w1(static_cast<size_t>(lenOut));
    bool identity = lenIn == lenOut;
    for (int64_t i = 0; i < lenOut; ++i) {
      double c = coordOf(d, i, lenIn);
      c = std::clamp(c, 0.0, double(lenIn - 1));
      i0[i] = static_cast<int64_t>(std::floor(c));
      i1[i] = std::min(i0[i] + 1, lenIn - 1);
      w1[i] = c - double(i0[i]);
      identity = identity && i0[i] == i && w1[i] == 0.0;
    }
    if (identity)
      continue;
    int64_t outer = prod(shape, 0, static_cast<size_t>(d));
    int64_t inner = prod(shape, static_cast<size_t>(d) + 1, shape.size());
    std::vector<double> next(static_cast<size_t>(outer * lenOut * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < lenOut; ++i) {
        const double *a = cur.data() + (o * lenIn + i0[i]) * inner;
        const double *b = cur.data() + (o * lenIn + i1[i]) * inner;
        double *y = next.data() + (o * lenOut + i) * inner;
        double wb = w1[i], wa = 1.0 - wb;
        for (int64_t j = 0; j < inner; ++j)
          y[j] = wa * a[j] + wb * b[j];
      }
    cur.swap(next);
    shape[d] = lenOut;
  }
  Tensor out(ot);
  if (isFloat(ot.dtype)) {
    std::vector<float> f(cur.begin(), cur.end());
    return {extrapolate(fromFloats(f, ot))};
  }
  for (int64_t i = 0; i < out.numel(); ++i)
    out.setInt(i, truncToInt64(std::nearbyint(cur[i])));
  return {extrapolate(std::move(out))};
}

} // namespace aicf::interp

namespace aicf::interp {

// ---- lengths known only at run time -----------------------------------------------------------
// Each returns its results at their actual length (the planning types hold the bound); the
// interpreter records the last result as the data dim's value (interpreter.cpp).

// The non-zero elements' indices, one column per element in row-major order.
std::vector<Tensor> kernel_NonZero(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const std::vector<int64_t> &shape = x.shape();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (isFloat(x.dtype()) ? x.getDouble(i) != 0.0 : x.getInt(i) != 0)
      hits.push_back(i);
  const int64_t rank = x.type().rank(), n = static_cast<int64_t>(hits.size());
  std::vector<int64_t> out(static_cast<size_t>(rank * n));
  for (int64_t c = 0; c < n; ++c) {
    int64_t rest = hits[static_cast<size_t>(c)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      out[static_cast<size_t>(d * n + c)] = rest % shape[static_cast<size_t>(d)];
      rest /= shape[static_cast<size_t>(d)];
    }
  }
  return {fromInt64s(out, TensorType(DType::I64, {rank, n})), Tensor::fromI64({n}, {})};
}

std::vector<Tensor> kernel_Choose(const KernelCtx &ctx) {
  const Tensor &chosen = ctx.x(0).getInt(0) != 0 ? ctx.x(1) : ctx.x(2);
  return {chosen, Tensor::fromI64({chosen.shape()[0]}, {})};
}

std::vector<Tensor> kernel_SetDim(const KernelCtx &ctx) {
  return {Tensor::fromI64({ctx.x(0).getInt(0)}, {})};
}

// The distinct slices x[i, ...] (ir/ops.def unique): slices compare element by element in
// row-major order, NaN equal to NaN and after every number. A stable sort of the slice indices
// puts each slice's first occurrence first among its equals.
std::vector<Tensor> kernel_Unique(const KernelCtx &ctx) {
  const Tensor &x = ctx.x(0);
  const int64_t n = x.shape()[0];
  const int64_t len = n > 0 ? x.numel() / n : 0; // elements per slice
  const bool fl = isFloat(x.dtype());
  auto order = [&](int64_t a, int64_t b) { // <0, 0, >0 as slice a is before, equal, after b
    for (int64_t e = 0; e < len; ++e) {
      if (fl) {
        double va = x.getDouble(a * len + e), vb = x.getDouble(b * len + e);
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na != nb)
            return na ? 1 : -1;
          continue;
        }
        if (va != vb)
          return va < vb ? -1 : 1;
      } else if (int64_t va = x.getInt(a * len + e), vb = x.getInt(b * len + e); va != vb) {
        return va < vb ? -1 : 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), int64_t(0));
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return order(a, b) < 0; });
  // Groups of equal slices in ascending order: first occurrence, members.
  std::vector<int64_t> firsts, counts, groupOf(static_cast<size_t>(n));
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k == 0 || order(idx[k - 1], idx[k]) != 0) {
      firsts.push_back(idx[k]);
      counts.push_back(0);
    }
    counts.back() += 1;
    groupOf[static_cast<size_t>(idx[k])] = static_cast<int64_t>(firsts.size()) - 1;
  }
  const int64_t m = static_cast<int64_t>(firsts.size());
  std::vector<int64_t> rank(static_cast<size_t>(m)); // a group's position in the result
  std::iota(rank.begin(), rank.end(), int64_t(0));
  if (ctx.node.i("sorted") == 0) { // by first occurrence
    std::vector<int64_t> byFirst = rank;
    std::sort(byFirst.begin(), byFirst.end(), [&](int64_t a, int64_t b) {
      return firsts[static_cast<size_t>(a)] < firsts[static_cast<size_t>(b)];
    });
    for (int64_t p = 0; p < m; ++p)
      rank[static_cast<size_t>(byFirst[static_cast<size_t>(p)])] = p;
  }
  std::vector<int64_t> shape = x.shape();
  shape[0] = m;
  Tensor y(TensorType(x.dtype(), shape));
  std::vector<int64_t> indices(static_cast<size_t>(m)), count(static_cast<size_t>(m)), inverse;
  const size_t slice = n > 0 ? x.byteSize() / static_cast<size_t>(n) : 0;
  for (int64_t g = 0; g < m; ++g) {
    size_t p = static_cast<size_t>(rank[static_cast<size_t>(g)]);
    indices[p] = firsts[static_cast<size_t>(g)];
    count[p] = counts[static_cast<size_t>(g)];
    if (slice > 0)
      std::memcpy(y.raw() + p * slice, x.raw() + static_cast<size_t>(indices[p]) * slice, slice);
  }
  for (int64_t g : groupOf)
    inverse.push_back(rank[static_cast<size_t>(g)]);
  return {std::move(y), fromInt64s(indices, TensorType(DType::I64, {m})),
          fromInt64s(inverse, TensorType(DType::I64, {n})),
          fromInt64s(count, TensorType(DType::I64, {m})), Tensor::fromI64({m}, {})};
}

namespace {
// ONNX's suppression test in the boxes' own precision (f32; f16 / bf16 widened): whether box a
// overlaps box b by an IoU above the threshold. Corners may come in either order.
bool suppresses(const float *a, const float *b, bool centered, float iou) {
  float ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!centered) { // [y1, x1, y2, x2]
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]);
    ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]);
    by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
  } else { // [x center, y center, width, height]
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  float ix0 = std::max(ax0, bx0), ix1 = std::min(ax1, bx1);
  float iy0 = std::max(ay0, by0), iy1 = std::min(ay1, by1);
  if (ix1 <= ix0 || iy1 <= iy0)
    return false;
  float inter = (ix1 - ix0) * (iy1 - iy0);
  float areaA = (ax1 - ax0) * (ay1 - ay0), areaB = (bx1 - bx0) * (by1 - by0);
  float uni = areaA + areaB - inter;
  if (inter <= 0 || areaA <= 0 || areaB <= 0 || uni <= 0)
    return false;
  return inter / uni > iou;
}
} // namespace

// Greedy suppression per batch and class, candidates by descending score (ties: lower index).
std::vector<Tensor> kernel_NonMaxSuppression(const KernelCtx &ctx) {
  const Tensor &boxesT = ctx.x(0), &scoresT = ctx.x(1);
  const int64_t batches = boxesT.shape()[0], nb = boxesT.shape()[1], classes = scoresT.shape()[1];
  FloatIn boxes(boxesT), scores(scoresT);
  const int64_t maxPer = ctx.node.i("max_per_class");
  const bool thresholded = ctx.node.i("has_score_threshold") != 0;
  const float scoreTh = static_cast<float>(ctx.node.f("score_threshold"));
  const float iouTh = static_cast<float>(ctx.node.f("iou_threshold"));
  const bool centered = ctx.node.i("center_point_box") != 0;
  std::vector<int64_t> rows;
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t c = 0; c < classes; ++c) {
      const float *s = scores.data() + (b * classes + c) * nb;
      const float *bx = boxes.data() + b * nb * 4;
      order.clear();
      for (int64_t i = 0; i < nb; ++i)
        if (!thresholded || s[i] > scoreTh)
          order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= maxPer)
          break;
        bool keep = true;
        for (int64_t k : kept)
          if (suppresses(bx + i * 4, bx + k * 4, centered, iouTh)) {
            keep = false;
            break;
          }
        if (!keep)
          continue;
        kept.push_back(i);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  int64_t n = static_cast<int64_t>(rows.size()) / 3;
  return {fromInt64s(rows, TensorType(DType::I64, {n, 3})), Tensor::fromI64({n}, {})};
}

} // namespace aicf::interp
