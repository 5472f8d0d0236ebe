// Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the integer
// contractions (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv), written out in plain
// ops with ONNX's semantics (onnx/reference/ops/op_*quantize*, op_qlinear_*, op_*_integer).
// Converters of the ONNX op table (onnx_ops.cpp; conventions in its comment).
//
// Why plain ops: a QDQ model (ONNX Runtime's static quantizer) is dequantize -> f32 op ->
// quantize by definition, and the integer ops are defined on exact integers. An integer product
// is computed as an f32 contraction of the zero-point-subtracted integers: every product and
// partial sum is an integer below 2^24 in magnitude, so it is exact whatever the summation order
// (and in bf16, which holds every integer of magnitude <= 256 exactly). Where the reduction is
// long enough for a sum to pass 2^24, it is cut into chunks that cannot, each cast to i32 and
// added in i32 (integerProduct below). Requantization follows the reference: the i32 result
// times (scale_a * scale_b / scale_y) in f32, plus the output zero point, rounded half to even
// and saturated.
#include "frontend/onnx_ops_internal.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace aicf::onnx_ops {

namespace {

// The largest magnitude an f32 holds every integer below: sums of products stay exact under it.
constexpr double kExactF32 = 16777216.0; // 2^24
// The most chunks an integer product is cut into (each a contraction node).
constexpr int64_t kMaxChunks = 1024;

struct QRange {
  double lo, hi;
};

// The integer range of a quantized element type.
QRange quantRange(const ConvertCtx &c, DType t, const std::string &what) {
  switch (t) {
  case DType::U8: return {0, 255};
  case DType::I8: return {-128, 127};
  case DType::U16: return {0, 65535};
  case DType::I16: return {-32768, 32767};
  default:
    c.fail(cat(what, " has element type ", dtypeName(t),
               ": quantized values must be uint8, int8, uint16 or int16"));
  }
}

// The integer contractions take 8-bit operands (their products then fit f32 exactly).
void requireEightBit(const ConvertCtx &c, DType t, const std::string &what) {
  if (t != DType::U8 && t != DType::I8)
    c.fail(cat(what, " has element type ", dtypeName(t), ": must be uint8 or int8"));
}

// A scale or zero point `p` shaped to broadcast against x (shape xShape; axisAttr may be negative):
// a scalar or one-element tensor as a scalar, a 1-D tensor along `axis` (per-axis), or with
// block_size > 0 a tensor of x's rank whose `axis` holds ceil(dim / block_size) blocks, each
// repeated block_size times (blocked quantization, opset 21).
Value *alongAxis(ConvertCtx &c, Value *p, const Shape &xShape, int64_t axisAttr, int64_t blockSize,
                 const std::string &what) {
  const Shape &s = p->type().shape;
  if (p->type().numel() == 1 && blockSize == 0)
    return c.reshape(p, {});
  auto rank = static_cast<int64_t>(xShape.size());
  int64_t axis = normAxis(c, axisAttr, rank);
  int64_t dim = xShape[static_cast<size_t>(axis)];
  if (blockSize == 0) {
    if (s.size() != 1 || s[0] != dim)
      c.fail(cat(what, " ", p->type().str(), " is neither a scalar nor 1-D of the ", dim,
                 " elements on axis ", axis));
    Shape to(static_cast<size_t>(rank), 1);
    to[static_cast<size_t>(axis)] = dim;
    return c.reshape(p, to);
  }
  if (blockSize < 0)
    c.fail(cat("block_size ", blockSize, " is negative"));
  int64_t blocks = dim / blockSize + (dim % blockSize != 0); // (no overflow for a huge size)
  bool fits = static_cast<int64_t>(s.size()) == rank;
  for (size_t i = 0; fits && i < s.size(); ++i)
    fits = s[i] == (static_cast<int64_t>(i) == axis ? blocks : xShape[i]);
  if (!fits)
    c.fail(cat(what, " ", p->type().str(), " does not hold ", blocks, " blocks of ", blockSize,
               " on axis ", axis, " and x's other dims ", shapeStr(xShape)));
  c.checkComputeBudget(dim * 8);
  Tensor idx(TensorType(DType::I64, {dim}));
  for (int64_t i = 0; i < dim; ++i)
    idx.setInt(i, i / blockSize);
  return c.emit(Op::Gather, {p, c.constant(std::move(idx))}, {{"axis", axis}});
}

// A quantized value's integers as f32: the f32 form its quantizing op recorded (ImportEnv::
// quantizedAsF32), else a cast.
Value *asF32(ConvertCtx &c, Value *x) {
  auto it = c.env().quantizedAsF32.find(x);
  return it != c.env().quantizedAsF32.end() ? it->second : c.castTo(x, DType::F32);
}

// x - zp as f32 (zp may be null: zero), zp shaped by alongAxis.
Value *minusZeroPoint(ConvertCtx &c, Value *x, Value *zp) {
  Value *xf = asF32(c, x);
  return zp ? c.emit(Op::Sub, {xf, c.castTo(zp, DType::F32)}) : xf;
}

// saturate(round_half_even(v) + zp) as `to`, v in f32 (zp may be null). The result's f32 form
// is recorded for its readers: the saturated value itself. (A NaN stays NaN there, where the
// cast makes it 0: ONNX leaves NaN's quantization unspecified, and a NaN activation is better
// seen than hidden.)
Value *roundAndSaturate(ConvertCtx &c, Value *v, Value *zp, DType to) {
  QRange r = quantRange(c, to, "the output");
  Value *q = c.emit(Op::Round, {v});
  if (zp)
    q = c.emit(Op::Add, {q, c.castTo(zp, q->type().dtype)});
  q = c.emit(Op::Clip, {q}, {{"min", r.lo}, {"max", r.hi}});
  Value *out = c.castTo(q, to);
  c.env().quantizedAsF32[out] = c.castTo(q, DType::F32);
  return out;
}

// The input's zero point shaped against x, or null when absent. Its element type must be x's.
Value *zeroPoint(ConvertCtx &c, size_t input, DType xType, const Shape &xShape, int64_t axis,
                 int64_t blockSize, const std::string &what) {
  if (!c.hasInput(input))
    return nullptr;
  Value *zp = c.input(input);
  if (zp->type().dtype != xType)
    c.fail(cat(what, " ", zp->type().str(), " must have the quantized input's element type ",
               dtypeName(xType)));
  return alongAxis(c, zp, xShape, axis, blockSize, what);
}

// The largest |v - zp| a quantized operand can hold: from its constant data when it has one,
// else from its type's range and the zero point's extremes.
double maxMagnitude(const ConvertCtx &c, size_t input, const Tensor *zpData) {
  double zlo = 0, zhi = 0;
  if (zpData && zpData->numel() > 0) {
    zlo = zhi = zpData->getDouble(0);
    for (int64_t i = 1; i < zpData->numel(); ++i) {
      zlo = std::min(zlo, zpData->getDouble(i));
      zhi = std::max(zhi, zpData->getDouble(i));
    }
  }
  if (const Tensor *t = c.constInput(input)) {
    double lo = 0, hi = 0;
    for (int64_t i = 0; i < t->numel(); ++i) {
      lo = std::min(lo, t->getDouble(i));
      hi = std::max(hi, t->getDouble(i));
    }
    return std::max(std::abs(hi - zlo), std::abs(lo - zhi));
  }
  QRange r = quantRange(c, c.type(input).dtype, cat("input '", c.inputName(input), "'"));
  if (!zpData) // unknown zero point: the widest difference the type allows
    return r.hi - r.lo;
  return std::max(std::abs(r.hi - zlo), std::abs(r.lo - zhi));
}

// How many products one f32 sum may add while staying exact: the reduction length per chunk.
int64_t exactChunk(double maxA, double maxB) {
  double prod = std::max(1.0, maxA * maxB);
  return std::max<int64_t>(1, static_cast<int64_t>(std::floor((kExactF32 - 1) / prod)));
}

Value *sliceAxis(ConvertCtx &c, Value *v, int64_t axis, int64_t from, int64_t to) {
  return c.emit(
      Op::Slice, {v},
      {{"starts", Shape{from}}, {"ends", Shape{to}}, {"axes", Shape{axis}}, {"steps", Shape{1}}});
}

// The exact i32 result of a contraction of integer-valued f32 operands a and b, reducing
// `length` elements: one f32 contraction when every sum stays under 2^24 (product(a, b) on the
// whole), else the sum in i32 of the contractions over chunks of the reduction, cut from a on
// axis aAxis and b on axis bAxis, `unit` reduced elements per index of those axes.
template <typename Product>
Value *integerProduct(ConvertCtx &c, Value *a, Value *b, int64_t aAxis, int64_t bAxis,
                      int64_t extent, int64_t unit, double maxA, double maxB, Product product) {
  int64_t chunk = exactChunk(maxA, maxB) / unit;
  if (extent * unit <= exactChunk(maxA, maxB))
    return c.castTo(product(a, b), DType::I32);
  if (chunk < 1)
    c.fail(cat("one output sums ", unit, " products per input channel, each up to ", maxA * maxB,
               ": more than an exact f32 sum holds"));
  // (8-bit operands: a chunk holds at least 258 products, so this bounds the reduction to
  // 264192 products, past any real model's.)
  if (extent / chunk > kMaxChunks)
    c.fail(cat("a reduction of ", extent * unit, " products needs more than ", kMaxChunks,
               " exact chunks"));
  Value *sum = nullptr;
  for (int64_t k = 0; k < extent; k += chunk) {
    int64_t end = std::min(extent, k + chunk);
    Value *part = c.castTo(product(sliceAxis(c, a, aAxis, k, end), sliceAxis(c, b, bAxis, k, end)),
                           DType::I32);
    sum = sum ? c.emit(Op::Add, {sum, part}) : part;
  }
  return sum;
}

// A zero point given as input i, as constant data when it is one.
const Tensor *zeroPointData(const ConvertCtx &c, size_t i) {
  return c.hasInput(i) ? c.constInput(i) : nullptr;
}

// MatMul of (a - aZp) and (b - bZp), exact, as i32. aZp: scalar or per row of a ([M]); bZp:
// scalar or per column of b ([N]).
Value *integerMatMul(ConvertCtx &c, size_t ia, size_t ib, size_t iaZp, size_t ibZp) {
  Value *a = c.input(ia), *b = c.input(ib);
  const Shape &as = a->type().shape, &bs = b->type().shape;
  if (as.empty() || bs.empty())
    c.fail("a and b must have rank >= 1");
  requireEightBit(c, a->type().dtype, "a");
  requireEightBit(c, b->type().dtype, "b");
  int64_t ra = a->type().rank(), rb = b->type().rank();
  Value *aZp = nullptr, *bZp = nullptr;
  if (c.hasInput(iaZp)) {
    aZp = c.input(iaZp);
    if (aZp->type().numel() != 1 && ra >= 2)
      aZp = alongAxis(c, aZp, as, ra - 2, 0, "a's zero point");
    else
      aZp = c.reshape(aZp, {});
  }
  if (c.hasInput(ibZp)) {
    bZp = c.input(ibZp);
    bZp = bZp->type().numel() == 1 ? c.reshape(bZp, {})
                                   : alongAxis(c, bZp, bs, rb - 1, 0, "b's zero point");
  }
  double maxA = maxMagnitude(c, ia, zeroPointData(c, iaZp));
  double maxB = maxMagnitude(c, ib, zeroPointData(c, ibZp));
  Value *af = minusZeroPoint(c, a, aZp), *bf = minusZeroPoint(c, b, bZp);
  int64_t k = as.back();
  return integerProduct(c, af, bf, ra - 1, rb == 1 ? 0 : rb - 2, k, 1, maxA, maxB,
                        [&](Value *x, Value *y) {
                          return c.emit(Op::MatMul, {x, y});
                        });
}

// Conv of (x - xZp) and (w - wZp), exact, as i32 (the conv attributes are this node's; wZp
// scalar or per output channel).
Value *integerConv(ConvertCtx &c, size_t ix, size_t iw, size_t ixZp, size_t iwZp) {
  Value *x = c.input(ix), *w = c.input(iw);
  requireEightBit(c, x->type().dtype, "x");
  requireEightBit(c, w->type().dtype, "w");
  Shape in = spatialDims(c, ix);
  const Shape &ws = w->type().shape;
  if (ws.size() != in.size() + 2)
    c.fail(cat("weights ", w->type().str(), " do not match input ", x->type().str()));
  Shape kernel = kernelShape(c, Shape(ws.begin() + 2, ws.end()));
  Window win = windowAttrs(c, in, kernel);
  int64_t group = c.attrInt("group", 1);
  Value *xZp = c.hasInput(ixZp) ? c.reshape(c.input(ixZp), {}) : nullptr;
  if (xZp && c.type(ixZp).numel() != 1)
    c.fail(cat("x's zero point ", c.type(ixZp).str(), " must be a scalar"));
  Value *wZp = nullptr;
  if (c.hasInput(iwZp))
    wZp = alongAxis(c, c.input(iwZp), ws, 0, 0, "w's zero point");
  double maxX = maxMagnitude(c, ix, zeroPointData(c, ixZp));
  double maxW = maxMagnitude(c, iw, zeroPointData(c, iwZp));
  Value *xf = minusZeroPoint(c, x, xZp), *wf = minusZeroPoint(c, w, wZp);
  int64_t taps = 1;
  for (int64_t k : kernel)
    taps *= k;
  AttrMap attrs = {
      {"strides", win.strides}, {"pads", win.pads}, {"dilations", win.dilations}, {"group", group}};
  auto conv = [&](Value *a, Value *b) { return c.emit(Op::Conv, {a, b}, attrs); };
  int64_t cin = ws[1];
  if (group != 1 && cin * taps > exactChunk(maxX, maxW))
    c.fail(cat("a grouped conv (group ", group, ") summing ", cin * taps,
               " products per output: more than an exact f32 sum holds"));
  return integerProduct(c, xf, wf, 1, 1, cin, taps, maxX, maxW, conv);
}

// The requantization: acc times the multiplier scale_a * scale_b / scale_y (computed in the
// scales' type, f32 or f16 as the reference does), plus y's zero point, rounded and saturated;
// each scale shaped by the caller to broadcast against the i32 result.
Value *requantize(ConvertCtx &c, Value *acc, Value *sa, Value *sb, Value *sy, Value *yZp,
                  DType to) {
  DType st = sa->type().dtype;
  for (Value *s : {sa, sb, sy})
    if (s->type().dtype != st || (st != DType::F32 && st != DType::F16))
      c.fail(cat("scales ", sa->type().str(), ", ", sb->type().str(), " and ", sy->type().str(),
                 " must all be f32 or all f16"));
  Value *mult = c.castTo(c.emit(Op::Div, {c.emit(Op::Mul, {sa, sb}), sy}), DType::F32);
  Value *r = c.emit(Op::Mul, {c.castTo(acc, DType::F32), mult});
  return roundAndSaturate(c, r, yZp, to);
}

Value *scalarParam(ConvertCtx &c, size_t i, const std::string &what) {
  if (c.type(i).numel() != 1)
    c.fail(cat(what, " ", c.type(i).str(), " must be a scalar"));
  return c.reshape(c.input(i), {});
}

} // namespace

void convDequantizeLinear(ConvertCtx &c) {
  if (Value *same = dequantizeOnGrid(c)) {
    c.setOutput(0, same);
    return;
  }
  Value *x = c.input(0), *scale = c.input(1);
  DType xt = x->type().dtype;
  const Shape &xs = x->type().shape;
  int64_t axis = c.attrInt("axis", 1), block = c.attrInt("block_size", 0);
  if (xt != DType::I32)
    quantRange(c, xt, "x");
  if (xt == DType::I32 && c.hasInput(2)) {
    const Tensor *z = c.constInput(2);
    bool zero = z != nullptr;
    for (int64_t i = 0; zero && i < z->numel(); ++i)
      zero = z->getDouble(i) == 0;
    if (!zero)
      c.fail("an int32 input's zero point must be absent or 0");
  }
  DType out = scale->type().dtype;
  if (c.hasAttr("output_dtype")) {
    DType want = castTarget(c, static_cast<int32_t>(c.attrIntReq("output_dtype")));
    if (want != out)
      c.fail(cat("output_dtype ", dtypeName(want), " differs from the scale's ", dtypeName(out)));
  }
  Value *zp = zeroPoint(c, 2, xt, xs, axis, block, "x_zero_point");
  Value *s = alongAxis(c, scale, xs, axis, block, "x_scale");
  Value *ints = minusZeroPoint(c, x, zp);
  Value *d = c.castTo(c.emit(Op::Mul, {ints, c.castTo(s, DType::F32)}), out);
  c.setOutput(0, d);
  // 8-bit integers (|q - zp| <= 255) with a per-tensor or per-axis f32 scale: a Conv reading
  // this may compute on the integers (integerDomainConv).
  bool eightBit = xt == DType::U8 || xt == DType::I8;
  if (eightBit && block == 0 && out == DType::F32 && scale->type().dtype == DType::F32 &&
      scale->type().rank() <= 1) {
    int64_t a = scale->type().numel() == 1 ? -1 : normAxis(c, axis, x->type().rank());
    int64_t offset = -1;
    const Tensor *z = c.hasInput(2) ? c.constInput(2) : nullptr;
    if (!c.hasInput(2) || (z && z->numel() == 1))
      offset = static_cast<int64_t>((z ? z->getDouble(0) : 0.0) - quantRange(c, xt, "x").lo);
    const Tensor *sc = c.constInput(1);
    c.env().dequantized[d] = {ints, c.reshape(scale, a < 0 ? Shape{} : scale->type().shape), a,
                              offset, sc && sc->numel() == 1 ? sc->getDouble(0) : 0.0};
  }
}

// A Conv of a dequantized activation (a per-tensor scale) by a dequantized weight (per tensor
// or per output channel), computed on the integers with the scales applied after:
//   conv(qx - zx, qw - zw) * (sx * sw) + bias
// The same product with each term's scales factored out; its sums of integers are exact below
// 2^24 where the dequantized form rounds every term, as ONNX Runtime's int32 accumulation is.
// The conv is marked integer_operands (its operands are integers of magnitude <= 255, exact in
// bf16: assign-precision may put it on the bf16 micro-kernel with an fp32 plan's results), and
// x_offset records where x's integers lie (x + x_offset in [0, 255]: the int8 micro-kernel's
// uint8 operand) when its zero point is a constant.
// Null when the operands are not both such dequantized values.
Value *integerDomainConv(ConvertCtx &c, const AttrMap &convAttrs) {
  auto &dq = c.env().dequantized;
  auto xi = dq.find(c.input(0)), wi = dq.find(c.input(1));
  if (xi == dq.end() || wi == dq.end() || xi->second.axis != -1 ||
      (wi->second.axis != -1 && wi->second.axis != 0))
    return nullptr;
  const int64_t m = c.type(1).shape[0], rank = c.rank(0);
  Shape perChannel(static_cast<size_t>(rank), 1);
  perChannel[1] = m;
  AttrMap attrs = convAttrs;
  attrs["integer_operands"] = int64_t(1);
  attrs["x_offset"] = xi->second.offset;
  Value *acc = c.emit(Op::Conv, {xi->second.integers, wi->second.integers}, attrs);
  Value *sw = wi->second.axis < 0 ? wi->second.scale : c.reshape(wi->second.scale, perChannel);
  Value *y = c.emit(Op::Mul, {acc, c.emit(Op::Mul, {xi->second.scale, sw})});
  if (c.hasInput(2))
    y = c.emit(Op::Add, {y, c.reshape(c.input(2), perChannel)});
  return y;
}

// A MatMul or Gemm of a dequantized activation (a per-tensor scale) by a dequantized B (per
// tensor; a [K, N] weight also per output column: a MatMul's [K, N] along axis 1, a Gemm's along
// axis transB ? 0 : 1), on the integers with the scales applied after, as integerDomainConv does
// for convs: matmul(qa - za, qb - zb) * (alpha sa sb) (+ beta C). A QDQ model's projections so run
// on the int8 micro-kernel where the host has VNNI (passes/assign_precision.cpp), one int8
// contraction where the model spells dequantize -> f32 product -> quantize.
// Null when the operands are not both such dequantized values.
Value *integerDomainMatMul(ConvertCtx &c, const AttrMap *gemmAttrs) {
  auto &dq = c.env().dequantized;
  auto ai = dq.find(c.input(0)), bi = dq.find(c.input(1));
  if (ai == dq.end() || bi == dq.end() || ai->second.axis != -1 || c.rank(0) < 2 || c.rank(1) < 2)
    return nullptr;
  bool transB = gemmAttrs && std::get<int64_t>(gemmAttrs->at("transB")) != 0;
  if (gemmAttrs && std::get<int64_t>(gemmAttrs->at("transA")) != 0)
    return nullptr;
  if (bi->second.axis != -1 && (c.rank(1) != 2 || bi->second.axis != (transB ? 0 : 1)))
    return nullptr;
  AttrMap attrs = gemmAttrs ? AttrMap{{"transB", int64_t(transB)}} : AttrMap{};
  attrs["integer_operands"] = int64_t(1);
  attrs["x_offset"] = ai->second.offset;
  Value *acc =
      c.emit(gemmAttrs ? Op::Gemm : Op::MatMul, {ai->second.integers, bi->second.integers}, attrs);
  // A per-column scale [N] broadcasts along the result's last dim.
  Value *scale = c.emit(Op::Mul, {ai->second.scale, bi->second.scale});
  if (gemmAttrs && std::get<double>(gemmAttrs->at("alpha")) != 1.0)
    scale =
        c.emit(Op::Mul, {scale, c.scalar(DType::F32, std::get<double>(gemmAttrs->at("alpha")))});
  Value *y = c.emit(Op::Mul, {acc, scale});
  if (gemmAttrs && c.hasInput(2)) {
    Value *bc = c.input(2);
    double beta = std::get<double>(gemmAttrs->at("beta"));
    if (beta != 1.0)
      bc = c.emit(Op::Mul, {bc, c.scalar(DType::F32, beta)});
    y = c.emit(Op::Add, {y, bc});
  }
  return y;
}

void convQuantizeLinear(ConvertCtx &c) {
  Value *x = c.input(0), *scale = c.input(1);
  const Shape &xs = x->type().shape;
  int64_t axis = c.attrInt("axis", 1), block = c.attrInt("block_size", 0);
  DType to = DType::U8;
  if (c.hasAttr("output_dtype") && c.attrIntReq("output_dtype") != 0)
    to = castTarget(c, static_cast<int32_t>(c.attrIntReq("output_dtype")));
  if (c.hasInput(2)) {
    if (c.hasAttr("output_dtype") && c.attrIntReq("output_dtype") != 0 && c.type(2).dtype != to)
      c.fail(cat("output_dtype ", dtypeName(to), " differs from the zero point's ",
                 dtypeName(c.type(2).dtype)));
    to = c.type(2).dtype;
  }
  quantRange(c, to, "the output");
  if (Value *same = quantizeOnGrid(c, x, to)) {
    c.setOutput(0, same);
    return;
  }
  // precision (opset 23): the type x / scale is computed in; f32 for an f32 x is what we do.
  if (c.hasAttr("precision") && c.attrIntReq("precision") != 0 &&
      castTarget(c, static_cast<int32_t>(c.attrIntReq("precision"))) != x->type().dtype)
    c.fail(cat("precision ",
               dtypeName(castTarget(c, static_cast<int32_t>(c.attrIntReq("precision")))),
               " differs from x's element type ", dtypeName(x->type().dtype)));
  Value *zp = zeroPoint(c, 2, to, xs, axis, block, "y_zero_point");
  Value *s = c.castTo(alongAxis(c, scale, xs, axis, block, "y_scale"), x->type().dtype);
  Value *v = c.castTo(c.emit(Op::Div, {x, s}), DType::F32);
  c.setOutput(0, roundAndSaturate(c, v, zp, to));
}

void convDynamicQuantizeLinear(ConvertCtx &c) {
  Value *x = c.input(0);
  if (x->type().dtype != DType::F32)
    c.fail(cat("x ", x->type().str(), " must be f32"));
  AttrMap all = {{"axes", Shape{}}, {"keepdims", int64_t(0)}};
  Value *zero = c.scalar(DType::F32, 0.0);
  Value *hi = c.emit(Op::Max, {c.emit(Op::ReduceMax, {x}, all), zero});
  Value *lo = c.emit(Op::Min, {c.emit(Op::ReduceMin, {x}, all), zero});
  // scale = (max == min ? 1 : max - min) / 255; zp = round(clip(0 - min / scale, 0, 255)).
  Value *range = c.emit(Op::Sub, {hi, lo});
  Value *same = c.emit(Op::Equal, {hi, lo});
  range = c.emit(Op::Where, {same, c.scalar(DType::F32, 1.0), range});
  Value *scale = c.emit(Op::Div, {range, c.scalar(DType::F32, 255.0)});
  Value *zpf = c.emit(Op::Sub, {zero, c.emit(Op::Div, {lo, scale})});
  zpf = c.emit(Op::Round, {c.emit(Op::Clip, {zpf}, {{"min", 0.0}, {"max", 255.0}})});
  Value *y = c.emit(Op::Div, {x, scale});
  c.setOutput(0, roundAndSaturate(c, y, zpf, DType::U8));
  c.setOutput(1, scale);
  c.setOutput(2, c.castTo(zpf, DType::U8));
}

void convMatMulInteger(ConvertCtx &c) {
  c.setOutput(0, integerMatMul(c, 0, 1, 2, 3));
}

void convConvInteger(ConvertCtx &c) {
  c.setOutput(0, integerConv(c, 0, 1, 2, 3));
}

// QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp): scales per tensor, or
// (opset 21) a's per row and b's per column.
void convQLinearMatMul(ConvertCtx &c) {
  Value *acc = integerMatMul(c, 0, 3, 2, 5);
  int64_t ra = c.rank(0), rb = c.rank(3);
  auto scaleOf = [&](size_t i, int64_t rank, int64_t axis, const std::string &what) {
    Value *s = c.input(i);
    if (s->type().numel() == 1 || rank < 2)
      return c.reshape(s, {});
    return alongAxis(c, s, c.type(i == 1 ? 0 : 3).shape, axis, 0, what);
  };
  Value *sa = scaleOf(1, ra, ra - 2, "a_scale"), *sb = scaleOf(4, rb, rb - 1, "b_scale");
  Value *yZp = scalarParam(c, 7, "y_zero_point");
  c.setOutput(0, requantize(c, acc, sa, sb, scalarParam(c, 6, "y_scale"), yZp, c.type(7).dtype));
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?): w's scale and zero point
// per output channel or per tensor; the bias B (i32, scale x_scale * w_scale) joins the
// accumulator before requantization.
void convQLinearConv(ConvertCtx &c) {
  Value *acc = integerConv(c, 0, 3, 2, 5);
  int64_t rank = c.rank(0);
  const Shape &ws = c.type(3).shape;
  if (c.hasInput(8)) {
    if (c.type(8).dtype != DType::I32 || c.type(8).shape != Shape{ws[0]})
      c.fail(cat("bias ", c.type(8).str(), " must be i32[", ws[0], "]"));
    Shape to(static_cast<size_t>(rank), 1);
    to[1] = ws[0];
    acc = c.emit(Op::Add, {acc, c.reshape(c.input(8), to)});
  }
  Value *sw = c.input(4);
  if (sw->type().numel() == 1) {
    sw = c.reshape(sw, {});
  } else {
    if (sw->type().shape != Shape{ws[0]})
      c.fail(cat("w_scale ", sw->type().str(), " is neither a scalar nor per output channel [",
                 ws[0], "]"));
    Shape to(static_cast<size_t>(rank), 1);
    to[1] = ws[0];
    sw = c.reshape(sw, to);
  }
  Value *yZp = scalarParam(c, 7, "y_zero_point");
  c.setOutput(0, requantize(c, acc, scalarParam(c, 1, "x_scale"), sw, scalarParam(c, 6, "y_scale"),
                            yZp, c.type(7).dtype));
}

} // namespace aicf::onnx_ops
