// The ONNX op mapping table: one entry per ONNX op type, each a converter from one NodeProto to
// registry ops (ir/ops.def). Our IR is static-shaped and takes compile-time parameters as
// attributes, so converters read ONNX's parameter inputs (Reshape's shape, Slice's starts, ...)
// as constants, resolve ONNX conventions (0 / -1 in shapes, negative axes, auto_pad, clamped
// slice bounds) and emit fully explicit attributes. Version-specific semantics are handled in
// the converter, keyed on ctx.opset(): attribute-vs-input forms (Squeeze/Unsqueeze/Split/Reduce
// axes, Slice-1 vs 10, Clip-6 vs 11, Pad-2 vs 11), Upsample vs Resize, BatchNormalization, ...
// With dims compiled for a range (issue 21) a shape may be a list of expressions in the dims:
// the shape-reading converters (Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand,
// ConstantOfShape, Slice, Gather, Range, Trilu, Dropout) then resolve the same conventions over
// expressions, exactly for every value in the ranges or not at all; the others keep their
// static code, and what they would fix at the planning point is refused by the symbolic shape
// rules or by the importer's second ONNX inference (onnx_importer.cpp).
//
// The table is at the bottom of the file, alphabetical.
#include "frontend/onnx_ops.h"

#include "ir/infer_sym.h"

#include "frontend/onnx_tensor.h"
#include "support/diagnostics.h"
#include "support/int_math.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>

namespace aicf {

namespace {

using Shape = std::vector<int64_t>;

// Normalises a list of axes against `rank`, sorted and without duplicates.
Shape normAxes(const ConvertCtx &c, Shape axes, int64_t rank, const char *what = "axis") {
  for (int64_t &a : axes)
    a = normAxis(c, a, rank, what);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
    c.fail(cat("axes ", shapeStr(axes), " repeat an axis"));
  return axes;
}

void alias(ConvertCtx &c, size_t out, Value *v) {
  c.setOutput(out, v);
}

// ---- symbolic dims (issue 21) -----------------------------------------------------------------
// A converter whose inputs are static keeps its static code, so static compiles are unchanged;
// with a symbolic input dim or shape value it computes the result's dims as expressions.

bool symInput(const ConvertCtx &c, size_t i) {
  return c.hasInput(i) && c.symValue(c.input(i));
}

SymExpr symOk(const ConvertCtx &c, std::optional<SymExpr> e) {
  if (!e)
    c.fail("shape arithmetic on the symbolic dims overflows int64");
  return *e;
}

SymExpr symProduct(const ConvertCtx &c, const SymElems &s, size_t from = 0, size_t to = SIZE_MAX) {
  SymExpr n = 1;
  for (size_t i = from; i < s.size() && i < to; ++i)
    n = symOk(c, SymExpr::mul(n, s[i]));
  return n;
}

// `shape` (and `sym_shape` when a dim is symbolic) for a reshape or expand to `dims`.
AttrMap symShapeAttrs(const ConvertCtx &c, const SymElems &dims) {
  std::vector<int64_t> planned;
  std::vector<std::string> texts;
  bool symbolic = false;
  for (const SymExpr &e : dims) {
    planned.push_back(c.planning(e));
    texts.push_back(e.str());
    symbolic = symbolic || !e.isConstant();
  }
  AttrMap attrs{{"shape", planned}};
  if (symbolic)
    attrs["sym_shape"] = texts;
  return attrs;
}

// A dim given as an expression must be >= 0 for every value (a negative one is no shape at
// all). 0 is a length known only at run time come out empty (a data dim, min 0); the dims of
// the inputs have min >= 1.
void requireDimNonNegative(const ConvertCtx &c, const SymExpr &e, const std::string &what) {
  if (e.isConstant())
    return;
  if (c.bounds(e, what).lo < 0)
    c.fail(cat(what, " ", e.str(), " is not >= 0 for every value of the dims", c.rangesOf(e)));
}

// ---- elementwise ------------------------------------------------------------------------------

template <Op op>
void convUnary(ConvertCtx &c) {
  c.setOutput(0, c.emit(op, {c.input(0)}));
}

// Before opset 7 binary ops broadcast only with broadcast = 1: B's dims match A's suffix, or
// A's dims from `axis` on. Returns B reshaped so that numpy broadcasting does the same.
Value *legacyBroadcast(ConvertCtx &c, Value *a, Value *b) {
  if (c.opset() >= 7 || c.attrInt("broadcast", 0) == 0 || !c.hasAttr("axis"))
    return b;
  int64_t ra = a->type().rank(), rb = b->type().rank();
  int64_t axis = normAxis(c, c.attrInt("axis", 0), ra);
  if (axis + rb > ra)
    c.fail(cat("B ", b->type().str(), " does not fit A ", a->type().str(), " at axis ", axis));
  Shape s = b->type().shape;
  s.resize(static_cast<size_t>(ra - axis), 1);
  return c.reshape(b, s);
}

template <Op op>
void convBinary(ConvertCtx &c) {
  c.setOutput(0, c.emit(op, {c.input(0), legacyBroadcast(c, c.input(0), c.input(1))}));
}

// Min / Max: variadic with numpy broadcasting, like ours.
template <Op op>
void convVariadic(ConvertCtx &c) {
  std::vector<Value *> xs;
  for (size_t i = 0; i < c.numInputs(); ++i)
    xs.push_back(c.input(i));
  c.setOutput(0, xs.size() == 1 ? xs[0] : c.emit(op, xs));
}

// Sum / Mean: a chain of adds (Mean divides by the count).
void convSumMean(ConvertCtx &c) {
  Value *acc = c.input(0);
  for (size_t i = 1; i < c.numInputs(); ++i)
    acc = c.emit(Op::Add, {acc, c.input(i)});
  if (c.opType() == "Mean" && c.numInputs() > 1)
    acc = c.emit(Op::Div, {acc, c.scalar(acc->type().dtype, static_cast<double>(c.numInputs()))});
  c.setOutput(0, acc);
}

void convPow(ConvertCtx &c) {
  Value *base = c.input(0), *exp = legacyBroadcast(c, c.input(0), c.input(1));
  // ONNX lets the exponent's dtype differ; a float base takes a float exponent exactly.
  if (isFloat(base->type().dtype))
    exp = c.castTo(exp, base->type().dtype);
  c.setOutput(0, c.emit(Op::Pow, {base, exp}));
}

void convLeakyRelu(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::LeakyRelu, {c.input(0)}, {{"alpha", c.attrFloat("alpha", 0.01)}}));
}

void convElu(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::Elu, {c.input(0)}, {{"alpha", c.attrFloat("alpha", 1.0)}}));
}

void convSelu(ConvertCtx &c) {
  Value *x = c.input(0);
  double alpha = c.attrFloat("alpha", 1.67326319217681884765625);
  double gamma = c.attrFloat("gamma", 1.05070102214813232421875);
  Value *e = c.emit(Op::Elu, {x}, {{"alpha", alpha}});
  c.setOutput(0, c.emit(Op::Mul, {e, c.scalar(x->type().dtype, gamma)}));
}

// celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = alpha * elu(x / alpha)
void convCelu(ConvertCtx &c) {
  Value *x = c.input(0);
  double alpha = c.attrFloat("alpha", 1.0);
  if (alpha == 1.0) {
    c.setOutput(0, c.emit(Op::Elu, {x}, {{"alpha", 1.0}}));
    return;
  }
  DType t = x->type().dtype;
  Value *e = c.emit(Op::Elu, {c.emit(Op::Div, {x, c.scalar(t, alpha)})}, {{"alpha", 1.0}});
  c.setOutput(0, c.emit(Op::Mul, {e, c.scalar(t, alpha)}));
}

void convHardSigmoid(ConvertCtx &c) {
  c.setOutput(0,
              c.emit(Op::HardSigmoid, {c.input(0)},
                     {{"alpha", c.attrFloat("alpha", 0.2)}, {"beta", c.attrFloat("beta", 0.5)}}));
}

void convSoftsign(ConvertCtx &c) {
  Value *x = c.input(0);
  Value *den = c.emit(Op::Add, {c.emit(Op::Abs, {x}), c.scalar(x->type().dtype, 1.0)});
  c.setOutput(0, c.emit(Op::Div, {x, den}));
}

void convThresholdedRelu(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  Value *keep = c.emit(Op::Greater, {x, c.scalar(t, c.attrFloat("alpha", 1.0))});
  c.setOutput(0, c.emit(Op::Where, {keep, x, c.scalar(t, 0.0)}));
}

void convPRelu(ConvertCtx &c) {
  Value *x = c.input(0), *slope = c.input(1);
  // PRelu-1/6: a 1-D slope is per channel (axis 1), not numpy-aligned to the last axis.
  const Shape &ss = slope->type().shape, &xs = x->type().shape;
  if (c.opset() < 7 && ss.size() == 1 && xs.size() >= 2 && ss[0] == xs[1] && ss[0] != 1) {
    Shape s(xs.size() - 1, 1);
    s[0] = ss[0];
    slope = c.reshape(slope, s);
  }
  Value *neg = c.emit(Op::Less, {x, c.scalar(x->type().dtype, 0.0)});
  c.setOutput(0, c.emit(Op::Where, {neg, c.emit(Op::Mul, {x, slope}), x}));
}

void convShrink(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  double bias = c.attrFloat("bias", 0.0), lambd = c.attrFloat("lambd", 0.5);
  Value *lo = c.emit(Op::Less, {x, c.scalar(t, -lambd)});
  Value *hi = c.emit(Op::Greater, {x, c.scalar(t, lambd)});
  Value *inner = c.emit(Op::Where, {hi, c.emit(Op::Sub, {x, c.scalar(t, bias)}), c.scalar(t, 0)});
  c.setOutput(0, c.emit(Op::Where, {lo, c.emit(Op::Add, {x, c.scalar(t, bias)}), inner}));
}

void convMish(ConvertCtx &c) {
  Value *x = c.input(0);
  Value *t = c.emit(Op::Tanh, {c.emit(Op::Softplus, {x})});
  c.setOutput(0, c.emit(Op::Mul, {x, t}));
}

void convGelu(ConvertCtx &c) {
  std::string approx = c.attrStr("approximate", "none");
  if (approx != "none" && approx != "tanh")
    c.fail(cat("approximate = '", approx, "' is not none or tanh"));
  c.setOutput(0, c.emit(Op::Gelu, {c.input(0)}, {{"approximate", approx}}));
}

void convClip(ConvertCtx &c) {
  Value *x = c.input(0);
  if (c.opset() < 11) { // Clip-6: min / max attributes with finite defaults
    c.setOutput(
        0, c.emit(Op::Clip, {x},
                  {{"min", c.attrFloat("min", -FLT_MAX)}, {"max", c.attrFloat("max", FLT_MAX)}}));
    return;
  }
  // Clip-11+: optional min / max inputs (scalars). Constants become attributes; anything else
  // becomes max / min nodes.
  const Tensor *lo = c.constInput(1), *hi = c.constInput(2);
  bool constLo = !c.hasInput(1) || lo, constHi = !c.hasInput(2) || hi;
  if (constLo && constHi) {
    for (const Tensor *t : {lo, hi})
      if (t && t->numel() != 1)
        c.fail(cat("min / max must be scalars, got ", t->type().str()));
    AttrMap attrs;
    if (lo)
      attrs["min"] = lo->getDouble(0);
    if (hi)
      attrs["max"] = hi->getDouble(0);
    c.setOutput(0, attrs.empty() ? x : c.emit(Op::Clip, {x}, attrs));
    return;
  }
  if (c.hasInput(1))
    x = c.emit(Op::Max, {x, c.input(1)});
  if (c.hasInput(2))
    x = c.emit(Op::Min, {x, c.input(2)});
  c.setOutput(0, x);
}

DType castTarget(ConvertCtx &c, int32_t onnxType) {
  auto t = dtypeFromOnnx(onnxType);
  if (!t)
    c.fail(cat("cast to ", onnxDTypeName(onnxType),
               " is not supported (supported: ", kSupportedOnnxTypes, ")"));
  return *t;
}

void convCast(ConvertCtx &c) {
  int32_t onnxType = 0;
  if (c.opset() < 6) { // Cast-1 names the type: to = "FLOAT"
    onnx::TensorProto::DataType t;
    std::string name = c.attrStr("to", "");
    if (!onnx::TensorProto::DataType_Parse(name, &t))
      c.fail(cat("to = '", name, "' is not an ONNX type name"));
    onnxType = t;
  } else {
    onnxType = static_cast<int32_t>(c.attrIntReq("to"));
  }
  DType to = castTarget(c, onnxType);
  c.setOutput(0, c.castTo(c.input(0), to));
}

void convCastLike(ConvertCtx &c) {
  c.setOutput(0, c.castTo(c.input(0), c.type(1).dtype));
}

void convIsNaN(ConvertCtx &c) {
  Value *x = c.input(0);
  c.setOutput(0, c.emit(Op::Not, {c.emit(Op::Equal, {x, x})}));
}

void convIsInf(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  bool pos = c.attrInt("detect_positive", 1) != 0, neg = c.attrInt("detect_negative", 1) != 0;
  Value *out;
  if (pos && neg)
    out = c.emit(Op::Equal, {c.emit(Op::Abs, {x}), c.scalar(t, INFINITY)});
  else if (pos)
    out = c.emit(Op::Equal, {x, c.scalar(t, INFINITY)});
  else if (neg)
    out = c.emit(Op::Equal, {x, c.scalar(t, -INFINITY)});
  else
    out = c.emit(Op::Less, {x, x}); // all false, with x's shape
  c.setOutput(0, out);
}

// Hyperbolic and inverse hyperbolic functions and tan, from exp / log / sqrt / sin / cos.
void convSinhCosh(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  Value *ep = c.emit(Op::Exp, {x}), *en = c.emit(Op::Exp, {c.emit(Op::Neg, {x})});
  Value *s = c.emit(c.opType() == "Sinh" ? Op::Sub : Op::Add, {ep, en});
  c.setOutput(0, c.emit(Op::Mul, {s, c.scalar(t, 0.5)}));
}

void convTan(ConvertCtx &c) {
  Value *x = c.input(0);
  c.setOutput(0, c.emit(Op::Div, {c.emit(Op::Sin, {x}), c.emit(Op::Cos, {x})}));
}

// asinh(x) = log(x + sqrt(x^2 + 1)), acosh(x) = log(x + sqrt(x^2 - 1)),
// atanh(x) = log((1 + x) / (1 - x)) / 2
void convInverseHyperbolic(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  Value *one = c.scalar(t, 1.0), *out;
  if (c.opType() == "Atanh") {
    Value *q = c.emit(Op::Div, {c.emit(Op::Add, {one, x}), c.emit(Op::Sub, {one, x})});
    out = c.emit(Op::Mul, {c.emit(Op::Log, {q}), c.scalar(t, 0.5)});
  } else {
    Value *sq = c.emit(Op::Mul, {x, x});
    sq = c.emit(c.opType() == "Asinh" ? Op::Add : Op::Sub, {sq, one});
    out = c.emit(Op::Log, {c.emit(Op::Add, {x, c.emit(Op::Sqrt, {sq})})});
  }
  c.setOutput(0, out);
}

// Mod: fmod = 1 truncates the quotient (C fmod); fmod = 0 gives the remainder the divisor's
// sign (Python's %, numpy.mod; for floats as onnx 1.23's node tests define it).
void convMod(ConvertCtx &c) {
  Value *a = c.input(0), *b = c.input(1);
  DType t = a->type().dtype;
  bool fmod = c.attrInt("fmod", 0) != 0;
  Value *q = c.emit(Op::Div, {a, b});
  if (isFloat(t)) {
    Value *neg = c.emit(Op::Less, {q, c.scalar(t, 0.0)});
    q = c.emit(Op::Where, {neg, c.emit(Op::Ceil, {q}), c.emit(Op::Floor, {q})});
  }
  Value *r = c.emit(Op::Sub, {a, c.emit(Op::Mul, {q, b})});
  if (isFloat(t)) { // a finite a mod +-inf is a (where q b would be 0 inf = NaN)
    Value *zero = c.scalar(t, 0.0);
    Value *bInf = c.emit(Op::Equal, {c.emit(Op::Abs, {b}), c.scalar(t, INFINITY)});
    Value *aFinite = c.emit(Op::Equal, {c.emit(Op::Sub, {a, a}), zero});
    r = c.emit(Op::Where, {c.emit(Op::And, {bInf, aFinite}), a, r});
  }
  if (!fmod) {
    Value *zero = c.scalar(t, 0.0);
    Value *nonzero = c.emit(Op::Not, {c.emit(Op::Equal, {r, zero})});
    Value *signs = c.emit(Op::Xor, {c.emit(Op::Less, {r, zero}), c.emit(Op::Less, {b, zero})});
    r = c.emit(Op::Where, {c.emit(Op::And, {nonzero, signs}), c.emit(Op::Add, {r, b}), r});
  }
  c.setOutput(0, r);
}

// BitShift, as ONNX's reference defines it for every integer type: a shift by y < 0 or y >=
// the width gives 0 (a right shift of a negative signed value: -1); otherwise x << y wraps at the
// width and x >> y is arithmetic for signed types. Composed of elementwise ops in uint64:
// x << y = x * 2^y (2^y exact below 2^64, the product wrapping, then narrowed); x >> y = x / 2^y
// for x >= 0, and ~(~x / 2^y) for x < 0 (~x = -1 - x is then >= 0).
void convBitShift(ConvertCtx &c) {
  Value *x = c.input(0), *y = c.input(1);
  DType t = x->type().dtype;
  if (!isInteger(t))
    c.fail(cat("BitShift needs integers, got ", dtypeName(t)));
  std::string dir = c.attrStr("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    c.fail(cat("direction '", dir, "' is not LEFT or RIGHT"));
  bool isSigned = !isUnsigned(t);
  auto cast = [&](Value *v, DType to) {
    return v->type().dtype == to ? v : c.emit(Op::Cast, {v}, {{"to", std::string(dtypeName(to))}});
  };
  double width = double(8 * dtypeSize(t));
  Value *zero = c.scalar(y->type().dtype, 0.0);
  Value *valid = c.emit(Op::And, {c.emit(Op::GreaterEqual, {y, zero}),
                                  c.emit(Op::Less, {y, c.scalar(y->type().dtype, width)})});
  Value *shift = c.emit(Op::Where, {valid, y, zero});
  Value *pow2 = c.emit(Op::Pow, {c.scalar(DType::U64, 2.0), cast(shift, DType::U64)});
  Value *r, *outside;
  if (dir == "LEFT") {
    r = cast(c.emit(Op::Mul, {cast(x, DType::U64), pow2}), t);
    outside = c.scalar(t, 0.0);
  } else if (!isSigned) {
    r = cast(c.emit(Op::Div, {cast(x, DType::U64), pow2}), t);
    outside = c.scalar(t, 0.0);
  } else {
    Value *neg = c.emit(Op::Less, {x, c.scalar(t, 0.0)});
    Value *minus1 = c.scalar(t, -1.0);
    Value *nx = c.emit(Op::Where, {neg, c.emit(Op::Sub, {minus1, x}), x});
    Value *q = cast(c.emit(Op::Div, {cast(nx, DType::U64), pow2}), t);
    r = c.emit(Op::Where, {neg, c.emit(Op::Sub, {minus1, q}), q});
    outside = c.emit(Op::Where, {neg, minus1, c.scalar(t, 0.0)});
  }
  c.setOutput(0, c.emit(Op::Where, {valid, r, outside}));
}

void convWhere(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::Where, {c.input(0), c.input(1), c.input(2)}));
}

// ---- contractions -----------------------------------------------------------------------------

void convMatMul(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::MatMul, {c.input(0), c.input(1)}));
}

void convGemm(ConvertCtx &c) {
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  AttrMap attrs = {{"alpha", c.attrFloat("alpha", 1.0)},
                   {"beta", c.attrFloat("beta", 1.0)},
                   {"transA", c.attrInt("transA", 0)},
                   {"transB", c.attrInt("transB", 0)}};
  c.setOutput(0, c.emit(Op::Gemm, ops, attrs));
}

// Explicit window attributes for conv / pool: strides, dilations and pads default to 1, 1, 0,
// and auto_pad is resolved to pads (SAME_UPPER puts the odd pad at the end, SAME_LOWER at the
// beginning; output size ceil(in / stride)).
struct Window {
  Shape strides, dilations, pads;
};

Window windowAttrs(ConvertCtx &c, const Shape &in, const Shape &kernel) {
  size_t n = in.size();
  Window w;
  w.strides = c.attrIntsOpt("strides").value_or(Shape(n, 1));
  w.dilations = c.attrIntsOpt("dilations").value_or(Shape(n, 1));
  w.pads = c.attrIntsOpt("pads").value_or(Shape(2 * n, 0));
  if (w.strides.size() != n || w.dilations.size() != n || w.pads.size() != 2 * n ||
      kernel.size() != n)
    c.fail(cat("strides, dilations, kernel_shape and pads must have ", n, ", ", n, ", ", n, " and ",
               2 * n, " values for ", n, " spatial dims"));
  for (size_t i = 0; i < n; ++i)
    if (w.strides[i] < 1 || w.dilations[i] < 1 || kernel[i] < 1)
      c.fail("strides, dilations and kernel_shape must be >= 1");
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  if (autoPad == "VALID") {
    w.pads.assign(2 * n, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      int64_t out = (in[i] + w.strides[i] - 1) / w.strides[i];
      int64_t eff = (kernel[i] - 1) * w.dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[i] + eff - in[i]);
      int64_t small = total / 2, big = total - small;
      w.pads[i] = autoPad == "SAME_UPPER" ? small : big;
      w.pads[n + i] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "NOTSET" && !autoPad.empty()) {
    c.fail(cat("auto_pad '", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  }
  return w;
}

Shape spatialDims(ConvertCtx &c, size_t input) {
  const Shape &s = c.type(input).shape;
  if (s.size() < 3)
    c.fail(cat("input '", c.inputName(input), "' must be [N, C, spatial...], got ",
               c.type(input).str()));
  return Shape(s.begin() + 2, s.end());
}

Shape kernelShape(ConvertCtx &c, const Shape &fromWeights) {
  auto k = c.attrIntsOpt("kernel_shape");
  if (k && *k != fromWeights)
    c.fail(
        cat("kernel_shape ", shapeStr(*k), " does not match the weights' ", shapeStr(fromWeights)));
  return fromWeights;
}

void convConv(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  const Shape &ws = c.type(1).shape;
  if (ws.size() != in.size() + 2)
    c.fail(cat("weights ", c.type(1).str(), " do not match input ", c.type(0).str()));
  Shape kernel = kernelShape(c, Shape(ws.begin() + 2, ws.end()));
  Window w = windowAttrs(c, in, kernel);
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  c.setOutput(0, c.emit(Op::Conv, ops,
                        {{"strides", w.strides},
                         {"pads", w.pads},
                         {"dilations", w.dilations},
                         {"group", c.attrInt("group", 1)}}));
}

void convConvTranspose(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  const Shape &ws = c.type(1).shape;
  size_t n = in.size();
  if (ws.size() != n + 2)
    c.fail(cat("weights ", c.type(1).str(), " do not match input ", c.type(0).str()));
  Shape kernel = kernelShape(c, Shape(ws.begin() + 2, ws.end()));
  Shape strides = c.attrIntsOpt("strides").value_or(Shape(n, 1));
  Shape dil = c.attrIntsOpt("dilations").value_or(Shape(n, 1));
  Shape pads = c.attrIntsOpt("pads").value_or(Shape(2 * n, 0));
  Shape outPad = c.attrIntsOpt("output_padding").value_or(Shape(n, 0));
  if (strides.size() != n || dil.size() != n || pads.size() != 2 * n || outPad.size() != n)
    c.fail(cat("strides, dilations, output_padding and pads must have ", n, ", ", n, ", ", n,
               " and ", 2 * n, " values"));
  std::string autoPad = c.attrStr("auto_pad", "NOTSET");
  auto outShape = c.attrIntsOpt("output_shape");
  if (outShape && outShape->size() == n + 2)
    outShape = Shape(outShape->begin() + 2, outShape->end());
  if (outShape && outShape->size() != n)
    c.fail(cat("output_shape ", shapeStr(*outShape), " needs ", n, " spatial values"));
  if (!outShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    outShape = Shape(n);
    for (size_t i = 0; i < n; ++i)
      (*outShape)[i] = in[i] * strides[i];
  }
  if (outShape) {
    // total padding = stride * (in - 1) + output_padding + ((k - 1) * dilation + 1) - out
    for (size_t i = 0; i < n; ++i) {
      int64_t total =
          strides[i] * (in[i] - 1) + outPad[i] + (kernel[i] - 1) * dil[i] + 1 - (*outShape)[i];
      if (total < 0) { // the output is longer than the padded result: pad at the end
        outPad[i] -= total;
        total = 0;
      }
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[n + i] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad == "VALID") {
    pads.assign(2 * n, 0);
  } else if (autoPad != "NOTSET" && !autoPad.empty()) {
    c.fail(cat("auto_pad '", autoPad, "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID"));
  }
  std::vector<Value *> ops = {c.input(0), c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  AttrMap attrs = {
      {"strides", strides}, {"pads", pads}, {"dilations", dil}, {"group", c.attrInt("group", 1)}};
  if (std::any_of(outPad.begin(), outPad.end(), [](int64_t v) { return v != 0; }))
    attrs["output_padding"] = outPad;
  c.setOutput(0, c.emit(Op::ConvTranspose, ops, attrs));
}

// ---- reductions -------------------------------------------------------------------------------

// The reduced axes of a ReduceX node, or nullopt for "no reduction" (noop_with_empty_axes with
// empty axes). Axes became an input in ReduceSum-13 and in every other ReduceX at opset 18.
std::optional<Shape> reduceAxes(ConvertCtx &c, bool axesAsInput) {
  int64_t rank = c.rank(0);
  Shape axes;
  if (axesAsInput) {
    if (c.hasInput(1))
      axes = c.constInts(1, "axes");
  } else {
    axes = c.attrInts("axes");
  }
  if (axes.empty()) {
    if (c.attrInt("noop_with_empty_axes", 0))
      return std::nullopt;
    axes.resize(static_cast<size_t>(rank));
    std::iota(axes.begin(), axes.end(), 0);
    return axes;
  }
  return normAxes(c, axes, rank);
}

template <Op op>
void convReduce(ConvertCtx &c) {
  bool asInput = c.opset() >= 18 || (op == Op::ReduceSum && c.opset() >= 13);
  auto axes = reduceAxes(c, asInput);
  if (!axes) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0,
              c.emit(op, {c.input(0)}, {{"axes", *axes}, {"keepdims", c.attrInt("keepdims", 1)}}));
}

void convReduceLogSum(ConvertCtx &c) {
  auto axes = reduceAxes(c, c.opset() >= 18);
  if (!axes) {
    c.setOutput(0, c.emit(Op::Log, {c.input(0)}));
    return;
  }
  Value *s = c.emit(Op::ReduceSum, {c.input(0)},
                    {{"axes", *axes}, {"keepdims", c.attrInt("keepdims", 1)}});
  c.setOutput(0, c.emit(Op::Log, {s}));
}

template <Op op>
void convArg(ConvertCtx &c) {
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  c.setOutput(0, c.emit(op, {c.input(0)},
                        {{"axis", axis},
                         {"keepdims", c.attrInt("keepdims", 1)},
                         {"select_last_index", c.attrInt("select_last_index", 0)}}));
}

// TopK: k from the attribute (opset < 10) or an input; `sorted` = 0 allows any order, and the
// result is sorted anyway. A k computed at run time makes the outputs' length a data dim
// (set_dim, bounded by the axis's length: a k above it, or negative, fails the run).
void convTopK(ConvertCtx &c) {
  Value *x = c.input(0);
  if (x->type().rank() == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", -1), c.rank(0));
  const TensorType &t = x->type();
  // A symbolic axis (a length known only at run time, the candidates a NonZero kept) is read
  // from the dims; n is its most.
  const SymExpr len = t.symDim(static_cast<size_t>(axis));
  const int64_t n = c.bounds(len, "axis length").hi;
  AttrMap attrs{{"axis", axis}, {"largest", c.attrInt("largest", 1)}};
  std::vector<Value *> operands{x};
  if (c.opset() >= 10 && !c.constInput(1) && !c.symValue(c.input(1))) {
    Value *kv = c.input(1);
    if (kv->type().dtype != DType::I64 || !kv->type().isStatic() || kv->type().numel() != 1)
      c.fail(cat("k must be one i64 value, got ", kv->type().str()));
    Value *count = c.emitDataDim(Op::SetDim, {kv}, {}, 1, n)[0];
    const Node *setter = count->def();
    attrs["k"] = setter->i("bound");
    attrs["sym_k"] = std::vector<std::string>{setter->s("dim")};
    operands.push_back(count);
  } else {
    int64_t k = 0;
    if (c.opset() < 10) {
      k = c.attrInt("k", -1);
    } else {
      Shape kv = c.constInts(1, "k");
      if (kv.size() != 1)
        c.fail(cat("k must hold one value, got ", kv.size()));
      k = kv[0];
    }
    if (k < 0 || !c.provablyLe(SymExpr(k), len))
      c.fail(cat("k = ", k, " is not in [0, ", len.str(), "], the length of axis ", axis, " of ",
                 t.str(), c.rangesOf(len)));
    attrs["k"] = k;
  }
  std::vector<Value *> r = c.emitMulti(Op::TopK, operands, attrs, 2);
  c.setOutput(0, r[0]);
  c.setOutput(1, r[1]);
}

// ---- lengths known only at run time (issue 51) --------------------------------------------------

// The most elements of t over the dims' ranges.
int64_t maxElements(const ConvertCtx &c, const TensorType &t) {
  int64_t n = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    int64_t hi = c.bounds(t.symDim(d), "dim").hi;
    if (__builtin_mul_overflow(n, hi, &n))
      c.fail(cat(t.str(), " has too many elements"));
  }
  return n;
}

// NonZero: i64[rank, n] (a data dim, at most the element count).
void convNonZero(ConvertCtx &c) {
  Value *x = c.input(0);
  c.setOutput(0, c.emitDataDim(Op::NonZero, {x}, {}, 2, maxElements(c, x->type()))[0]);
}

// Compress: the slices along `axis` (of the flattened input without one) whose condition is
// true: non_zero of the condition gives their indices, a gather takes them. A condition longer
// than the axis is refused unless constant (ONNX allows only false entries past the end).
void convCompress(ConvertCtx &c) {
  Value *x = c.input(0), *cond = c.input(1);
  if (cond->type().rank() != 1)
    c.fail(cat("condition must be 1-D, got ", cond->type().str()));
  int64_t axis = 0;
  if (c.hasAttr("axis")) {
    axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  } else {
    SymExpr n = 1;
    for (size_t d = 0; d < x->type().shape.size(); ++d)
      n = *SymExpr::mul(n, x->type().symDim(d));
    x = c.reshapeSym(x, {n});
  }
  SymExpr len = x->type().symDim(static_cast<size_t>(axis));
  SymExpr condLen = cond->type().symDim(0);
  if (const Tensor *t = c.constInput(1)) {
    for (int64_t i = 0; i < t->numel(); ++i)
      if (t->getInt(i) != 0 && !c.provablyLe(SymExpr(i + 1), len))
        c.fail(
            cat("condition entry ", i, " is true, past the ", len.str(), " slices of axis ", axis));
  } else if (!c.provablyLe(condLen, len)) {
    c.fail(cat("condition of length ", condLen.str(), " is longer than axis ", axis, " (",
               len.str(), ")"));
  }
  Value *idx = c.emitDataDim(Op::NonZero, {cond}, {}, 2, c.bounds(condLen, "length").hi)[0];
  const TensorType &it = idx->type();
  idx = c.reshapeSym(idx, {it.symDim(1)});
  c.setOutput(0, c.emit(Op::Gather, {x, idx}, {{"axis", axis}}));
}

// Unique: the distinct slices along `axis` (of the flattened input without one), a data dim of
// at most the axis length. The unique op works along axis 0, so another axis is moved first and
// the slices moved back.
void convUnique(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = 0;
  Shape perm;
  if (c.hasAttr("axis")) {
    if (x->type().rank() == 0)
      c.fail("input must have rank >= 1 with an axis");
    axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
    perm.push_back(axis);
    for (int64_t d = 0; d < x->type().rank(); ++d)
      if (d != axis)
        perm.push_back(d);
    if (axis != 0)
      x = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  } else {
    SymExpr n = 1;
    for (size_t d = 0; d < x->type().shape.size(); ++d)
      n = *SymExpr::mul(n, x->type().symDim(d));
    x = c.reshapeSym(x, {n});
  }
  int64_t sorted = c.attrInt("sorted", 1);
  if (sorted != 0 && sorted != 1)
    c.fail(cat("sorted must be 0 or 1, got ", sorted));
  int64_t bound = c.bounds(x->type().symDim(0), "axis length").hi;
  std::vector<Value *> r = c.emitDataDim(Op::Unique, {x}, {{"sorted", sorted}}, 5, bound);
  if (axis != 0) { // the slices back in place: the inverse of perm
    Shape inv(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      inv[static_cast<size_t>(perm[d])] = static_cast<int64_t>(d);
    r[0] = c.emit(Op::Transpose, {r[0]}, {{"perm", inv}});
  }
  for (size_t k = 0; k < 4; ++k)
    if (k < c.numOutputs())
      c.setOutput(k, r[k]);
}

// NonMaxSuppression: the thresholds and the per-class limit must be compile-time constants;
// the selected rows are a data dim of at most batch x classes x min(limit, boxes).
void convNonMaxSuppression(ConvertCtx &c) {
  Value *boxes = c.input(0), *scores = c.input(1);
  auto scalarInput = [&](size_t i, const char *what) -> std::optional<double> {
    if (!c.hasInput(i))
      return std::nullopt;
    std::vector<double> v = c.constDoubles(i, what);
    if (v.size() > 1)
      c.fail(cat(what, " must hold one value, got ", v.size()));
    return v.empty() ? std::nullopt : std::optional<double>(v[0]);
  };
  std::optional<int64_t> maxPer; // an integer (INT64_MAX: no limit), not through a double
  if (c.hasInput(2)) {
    std::vector<int64_t> v = c.constInts(2, "max_output_boxes_per_class");
    if (v.size() > 1)
      c.fail(cat("max_output_boxes_per_class must hold one value, got ", v.size()));
    if (!v.empty())
      maxPer = v[0];
  }
  auto iou = scalarInput(3, "iou_threshold");
  auto score = scalarInput(4, "score_threshold");
  const TensorType &bt = boxes->type(), &st = scores->type();
  if (bt.rank() != 3 || st.rank() != 3)
    c.fail(cat("boxes ", bt.str(), " and scores ", st.str(), " must have rank 3"));
  int64_t per = maxPer ? std::max<int64_t>(0, *maxPer) : 0;
  int64_t batches = c.bounds(bt.symDim(0), "batch").hi;
  int64_t classes = c.bounds(st.symDim(1), "classes").hi;
  int64_t nb = c.bounds(bt.symDim(1), "boxes").hi;
  int64_t bound = 0;
  if (__builtin_mul_overflow(batches * classes, std::min(per, nb), &bound))
    c.fail("the most selected boxes overflow");
  AttrMap attrs{{"max_per_class", per},
                {"iou_threshold", iou ? *iou : 0.0},
                {"score_threshold", score ? *score : 0.0},
                {"has_score_threshold", int64_t(score ? 1 : 0)},
                {"center_point_box", c.attrInt("center_point_box", 0)}};
  if (bound == 0) { // nothing can be selected
    c.setOutput(0, c.constant(Tensor(TensorType(DType::I64, {0, 3}))));
    return;
  }
  c.setOutput(0, c.emitDataDim(Op::NonMaxSuppression, {boxes, scores}, attrs, 2, bound)[0]);
}

// ---- normalisations ---------------------------------------------------------------------------

// Softmax / LogSoftmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1) and
// normalised over the flattened trailing part; from 13 on it is normalised along `axis` (-1).
template <Op op>
void convSoftmax(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t rank = x->type().rank();
  if (rank == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", c.opset() >= 13 ? -1 : 1), rank);
  if (c.opset() >= 13 || axis == rank - 1) {
    c.setOutput(0, c.emit(op, {x}, {{"axis", axis}}));
    return;
  }
  const Shape &s = x->type().shape;
  Value *flat = c.reshape(x, {product(s, 0, axis), product(s, axis)});
  c.setOutput(0, c.reshape(c.emit(op, {flat}, {{"axis", int64_t(1)}}), s));
}

// Mean and 1/sqrt(var + eps) over axes [axis, rank), in f32 (LayerNormalization's stash type).
void layerNormStats(ConvertCtx &c, Value *x, int64_t axis, double eps) {
  Value *xs = c.castTo(x, DType::F32);
  Shape axes;
  for (int64_t a = axis; a < x->type().rank(); ++a)
    axes.push_back(a);
  AttrMap red = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *mean = c.emit(Op::ReduceMean, {xs}, red);
  Value *d = c.emit(Op::Sub, {xs, mean});
  Value *var = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, red);
  Value *inv = c.emit(Op::Reciprocal,
                      {c.emit(Op::Sqrt, {c.emit(Op::Add, {var, c.scalar(DType::F32, eps)})})});
  if (c.outputUsed(1))
    c.setOutput(1, mean);
  if (c.outputUsed(2))
    c.setOutput(2, inv);
}

void convLayerNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  double eps = c.attrFloat("epsilon", 1e-5);
  std::vector<Value *> ops = {x, c.input(1)};
  if (c.hasInput(2))
    ops.push_back(c.input(2));
  c.setOutput(0, c.emit(Op::LayerNorm, ops, {{"axis", axis}, {"epsilon", eps}}));
  if (c.outputUsed(1) || c.outputUsed(2))
    layerNormStats(c, x, axis, eps);
}

void convRmsNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  c.setOutput(0, c.emit(Op::RmsNorm, {x, c.input(1)},
                        {{"axis", axis}, {"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

// BatchNormalization-14/15 with training_mode = 1: y normalised by the batch's own statistics,
// the mean and the population variance over every axis but the channel axis 1, computed with
// reduce_mean; outputs 1 and 2 are the updated running statistics, input_running * momentum +
// current * (1 - momentum) (ONNX's reference; momentum defaults to 0.9).
void batchNormTraining(ConvertCtx &c, const std::vector<Value *> &ops) {
  Value *x = ops[0];
  const Shape &xs = x->type().shape;
  DType t = x->type().dtype;
  Shape axes = {0};
  for (int64_t a = 2; a < static_cast<int64_t>(xs.size()); ++a)
    axes.push_back(a);
  Value *meanK = c.emit(Op::ReduceMean, {x}, {{"axes", axes}, {"keepdims", int64_t(1)}});
  Value *d = c.emit(Op::Sub, {x, meanK});
  Value *var =
      c.emit(Op::ReduceMean, {c.emit(Op::Mul, {d, d})}, {{"axes", axes}, {"keepdims", int64_t(0)}});
  Value *mean = c.reshape(meanK, {xs[1]});
  c.setOutput(0, c.emit(Op::BatchNorm, {x, ops[1], ops[2], mean, var},
                        {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
  double momentum = c.attrFloat("momentum", 0.9);
  for (size_t k = 1; k <= 2; ++k) {
    if (!c.outputUsed(k))
      continue;
    Value *running = c.emit(Op::Mul, {ops[2 + k], c.scalar(t, momentum)});
    Value *current = c.emit(Op::Mul, {k == 1 ? mean : var, c.scalar(t, 1.0 - momentum)});
    c.setOutput(k, c.castTo(c.emit(Op::Add, {running, current}), c.type(2 + k).dtype));
  }
}

void convBatchNorm(ConvertCtx &c) {
  if (c.opset() < 7 && c.attrInt("is_test", 0) == 0)
    c.fail("is_test = 0 (training mode, batch statistics) is not supported (inference only)");
  if (c.opset() < 9 && c.attrInt("spatial", 1) != 1)
    c.fail("spatial = 0 (per-activation statistics) is not supported");
  bool training = c.opset() >= 14 && c.attrInt("training_mode", 0) != 0;
  if (!training)
    for (size_t k = 1; k < c.numOutputs(); ++k)
      if (c.outputUsed(k))
        c.fail(cat("output ", k, " ('", c.node().output(static_cast<int>(k)),
                   "', a training statistic) needs training_mode = 1"));
  Value *x = c.input(0);
  DType t = x->type().dtype;
  // BatchNormalization-15 lets scale/bias and mean/var have their own float types.
  std::vector<Value *> ops = {x};
  for (size_t k = 1; k <= 4; ++k)
    ops.push_back(c.castTo(c.input(k), t));
  if (training) {
    batchNormTraining(c, ops);
    return;
  }
  c.setOutput(0, c.emit(Op::BatchNorm, ops, {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

void convInstanceNorm(ConvertCtx &c) {
  c.setOutput(0, c.emit(Op::InstanceNorm, {c.input(0), c.input(1), c.input(2)},
                        {{"epsilon", c.attrFloat("epsilon", 1e-5)}}));
}

// MeanVarianceNormalization: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (default
// [0, 2, 3]; empty: all axes). Over trailing contiguous axes [a, rank) it is one registry op,
// whose online_reducible_norm certificate (a Welford row) lowers it in one pass. Over any other
// axes no one-pass row exists, so it is ONNX's own function body in primitive ops, which the
// existing reduction and pointwise kernels lower.
void convMeanVarianceNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  DType t = x->type().dtype;
  int64_t rank = x->type().rank();
  Shape axes = normAxes(c, c.attrIntsOpt("axes").value_or(Shape{0, 2, 3}), rank);
  bool trailing = !axes.empty() && axes.back() == rank - 1 &&
                  axes.back() - axes.front() + 1 == static_cast<int64_t>(axes.size());
  if (trailing && isFloat(t)) {
    c.setOutput(0, c.emit(Op::MeanVarianceNorm, {x}, {{"axes", axes}}));
    return;
  }
  AttrMap red = {{"axes", axes}, {"keepdims", int64_t(1)}};
  Value *mean = c.emit(Op::ReduceMean, {x}, red);
  Value *meanSq = c.emit(Op::Mul, {mean, mean});
  Value *sqMean = c.emit(Op::ReduceMean, {c.emit(Op::Mul, {x, x})}, red);
  Value *std = c.emit(Op::Sqrt, {c.emit(Op::Sub, {sqMean, meanSq})});
  Value *den = c.emit(Op::Add, {std, c.scalar(t, 1e-9)});
  c.setOutput(0, c.emit(Op::Div, {c.emit(Op::Sub, {x, mean}), den}));
}

// Hardmax: 1 at the first maximum along the axis (after the pre-13 coercion to 2-D), else 0.
void convHardmax(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape s = x->type().shape;
  int64_t rank = static_cast<int64_t>(s.size());
  if (rank == 0)
    c.fail("input must have rank >= 1");
  int64_t axis = normAxis(c, c.attrInt("axis", c.opset() >= 13 ? -1 : 1), rank);
  Value *v = x;
  if (c.opset() < 13 && axis != rank - 1) {
    v = c.reshape(x, {product(s, 0, axis), product(s, axis)});
    axis = 1;
  }
  const Shape vs = v->type().shape;
  Value *am = c.emit(Op::ArgMax, {v}, {{"axis", axis}, {"keepdims", int64_t(1)}});
  Shape iotaShape(vs.size(), 1);
  iotaShape[static_cast<size_t>(axis)] = vs[static_cast<size_t>(axis)];
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < iota.numel(); ++i)
    iota.setInt(i, i);
  Value *hit = c.emit(Op::Equal, {am, c.constant(std::move(iota))});
  c.setOutput(0, c.reshape(c.castTo(hit, x->type().dtype), s));
}

// LRN: the sum of squares over a window of channels is an average pool (count_include_pad) over
// the channel axis of x^2 reshaped to [N, 1, C, rest], times the window size.
// LSTM (opset 7 / 14) unrolled over its sequence, which is static once the dims are bound:
// the input projection of every step in one MatMul, then per step (per direction) the
// recurrent MatMul, the gates (ONNX order i, o, f, c), the cell and hidden updates:
//   i = sigma(x Wi + h Ri + b_i + Pi c), f = sigma(.. + Pf c), g = tanh(..),
//   c' = f c + i g, o = sigma(.. + Po c'), h' = o tanh(c').
// Default activations only, no clip, no input_forget, every sequence full length (Silero
// VAD's decoder: one step of 128 units per call).
void convLstm(ConvertCtx &c) {
  Value *x = c.input(0), *w = c.input(1), *r = c.input(2);
  std::string dir = c.attrStr("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.fail(cat("direction '", dir, "' is not forward, reverse or bidirectional"));
  if (!c.attrFloats("activation_alpha").empty() || !c.attrFloats("activation_beta").empty())
    c.fail("activation_alpha / activation_beta are not supported");
  if (c.hasAttr("activations")) {
    std::vector<std::string> acts;
    for (const auto &a : c.node().attribute())
      if (a.name() == "activations")
        for (const auto &sv : a.strings())
          acts.push_back(sv);
    for (size_t k = 0; k < acts.size(); ++k)
      if (acts[k] != (k % 3 == 0 ? "Sigmoid" : "Tanh"))
        c.fail(cat("activation '", acts[k], "' is not supported (only the defaults: Sigmoid, ",
                   "Tanh, Tanh)"));
  }
  if (c.hasAttr("clip"))
    c.fail("clip is not supported");
  c.requireAttrDefault("input_forget", 0, "coupled input and forget gates are not supported");
  int64_t layout = c.attrInt("layout", 0);
  if (x->type().rank() != 3 || w->type().rank() != 3 || r->type().rank() != 3)
    c.fail(cat("X, W and R must have rank 3 (got ", x->type().str(), ", ", w->type().str(), ", ",
               r->type().str(), ")"));
  if (layout == 1)
    x = c.emit(Op::Transpose, {x}, {{"perm", Shape{1, 0, 2}}});
  const Shape &xs = x->type().shape;
  int64_t T = xs[0], N = xs[1], I = xs[2], D = dir == "bidirectional" ? 2 : 1;
  int64_t H = c.attrInt("hidden_size", r->type().shape[2]);
  if (w->type().shape != Shape{D, 4 * H, I} || r->type().shape != Shape{D, 4 * H, H})
    c.fail(cat("W ", w->type().str(), " / R ", r->type().str(), " do not match ", D,
               " direction(s), hidden_size ", H, " and input size ", I));
  if (T > 1024)
    c.fail(cat("a sequence of ", T, " steps is unrolled at compile time; at most 1024"));
  if (c.hasInput(4)) {
    std::vector<int64_t> lens = c.constInts(4, "sequence_lens");
    for (int64_t l : lens)
      if (l != T)
        c.fail(cat("sequence_lens ", l, " differs from the sequence length ", T,
                   " (padded sequences are not supported)"));
  }
  DType dt = x->type().dtype;
  auto slice = [&](Value *v, int64_t axis, int64_t from, int64_t to) {
    return c.emit(
        Op::Slice, {v},
        {{"starts", Shape{from}}, {"ends", Shape{to}}, {"axes", Shape{axis}}, {"steps", Shape{1}}});
  };
  auto zeros = [&] { return c.constant(Tensor(TensorType(dt, {N, H}))); };
  std::vector<Value *> ys(static_cast<size_t>(D)), hs(static_cast<size_t>(D)),
      cs(static_cast<size_t>(D));
  for (int64_t d = 0; d < D; ++d) {
    Value *wT = c.emit(Op::Transpose, {c.reshape(slice(w, 0, d, d + 1), {4 * H, I})},
                       {{"perm", Shape{1, 0}}});
    Value *rT = c.emit(Op::Transpose, {c.reshape(slice(r, 0, d, d + 1), {4 * H, H})},
                       {{"perm", Shape{1, 0}}});
    // Every step's input projection at once, with both biases.
    Value *xw = c.emit(Op::MatMul, {c.reshape(x, {T * N, I}), wT});
    if (c.hasInput(3)) {
      Value *b = c.reshape(slice(c.input(3), 0, d, d + 1), {8 * H});
      xw = c.emit(Op::Add,
                  {xw, c.emit(Op::Add, {slice(b, 0, 0, 4 * H), slice(b, 0, 4 * H, 8 * H)})});
    }
    xw = c.reshape(xw, {T, N, 4 * H});
    Value *p = c.hasInput(7) ? c.reshape(slice(c.input(7), 0, d, d + 1), {3 * H}) : nullptr;
    Value *h = c.hasInput(5) ? c.reshape(slice(c.input(5), 0, d, d + 1), {N, H}) : zeros();
    Value *cell = c.hasInput(6) ? c.reshape(slice(c.input(6), 0, d, d + 1), {N, H}) : zeros();
    bool reverse = dir == "reverse" || d == 1;
    std::vector<Value *> steps(static_cast<size_t>(T));
    for (int64_t k = 0; k < T; ++k) {
      int64_t t = reverse ? T - 1 - k : k;
      Value *g = c.emit(
          Op::Add, {c.reshape(slice(xw, 0, t, t + 1), {N, 4 * H}), c.emit(Op::MatMul, {h, rT})});
      auto gate = [&](int64_t q) { return slice(g, 1, q * H, (q + 1) * H); };
      auto peep = [&](Value *v, int64_t q, Value *cv) {
        return p ? c.emit(Op::Add, {v, c.emit(Op::Mul, {slice(p, 0, q * H, (q + 1) * H), cv})}) : v;
      };
      Value *ig = c.emit(Op::Sigmoid, {peep(gate(0), 0, cell)});
      Value *fg = c.emit(Op::Sigmoid, {peep(gate(2), 2, cell)});
      Value *cg = c.emit(Op::Tanh, {gate(3)});
      cell = c.emit(Op::Add, {c.emit(Op::Mul, {fg, cell}), c.emit(Op::Mul, {ig, cg})});
      Value *og = c.emit(Op::Sigmoid, {peep(gate(1), 1, cell)});
      h = c.emit(Op::Mul, {og, c.emit(Op::Tanh, {cell})});
      steps[static_cast<size_t>(t)] = c.reshape(h, {1, 1, N, H});
    }
    ys[static_cast<size_t>(d)] =
        T == 1 ? steps[0] : c.emit(Op::Concat, steps, {{"axis", int64_t(0)}});
    hs[static_cast<size_t>(d)] = c.reshape(h, {1, N, H});
    cs[static_cast<size_t>(d)] = c.reshape(cell, {1, N, H});
  }
  auto stack = [&](std::vector<Value *> v, int64_t axis) {
    return v.size() == 1 ? v[0] : c.emit(Op::Concat, v, {{"axis", axis}});
  };
  Value *y = stack(ys, 1); // [T, D, N, H]
  if (layout == 1)
    y = c.emit(Op::Transpose, {y}, {{"perm", Shape{2, 0, 1, 3}}});
  Value *yh = stack(hs, 0), *yc = stack(cs, 0);
  if (layout == 1) {
    yh = c.emit(Op::Transpose, {yh}, {{"perm", Shape{1, 0, 2}}});
    yc = c.emit(Op::Transpose, {yc}, {{"perm", Shape{1, 0, 2}}});
  }
  c.setOutput(0, y);
  if (c.numOutputs() > 1)
    c.setOutput(1, yh);
  if (c.numOutputs() > 2)
    c.setOutput(2, yc);
}

void convLrn(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape &s = x->type().shape;
  if (s.size() < 3)
    c.fail(cat("input must be [N, C, ...], got ", x->type().str()));
  DType t = x->type().dtype;
  int64_t size = c.attrIntReq("size");
  if (size < 1)
    c.fail("size must be >= 1");
  double alpha = c.attrFloat("alpha", 1e-4), beta = c.attrFloat("beta", 0.75),
         bias = c.attrFloat("bias", 1.0);
  Value *sq = c.reshape(c.emit(Op::Mul, {x, x}), {s[0], 1, s[1], product(s, 2)});
  int64_t before = (size - 1) / 2, after = size - 1 - before;
  Value *avg = c.emit(Op::AvgPool, {sq},
                      {{"kernel_shape", Shape{size, 1}},
                       {"strides", Shape{1, 1}},
                       {"pads", Shape{before, 0, after, 0}},
                       {"dilations", Shape{1, 1}},
                       {"count_include_pad", int64_t(1)}});
  Value *den = c.emit(
      Op::Add, {c.emit(Op::Mul, {c.reshape(avg, s), c.scalar(t, alpha)}), c.scalar(t, bias)});
  den = c.emit(Op::Pow, {den, c.scalar(t, beta)});
  c.setOutput(0, c.emit(Op::Div, {x, den}));
}

// Shared by NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: -logp[n, target[n, ...], ...]
// weighted and reduced. The class is picked with a one-hot mask (no gather-elements op).
Value *nllLoss(ConvertCtx &c, Value *logp, Value *target, Value *weight) {
  const Shape &ls = logp->type().shape;
  if (ls.size() < 2)
    c.fail(cat("input must be [N, C, ...], got ", logp->type().str()));
  DType t = logp->type().dtype;
  int64_t classes = ls[1];
  Value *tgt = c.castTo(target, DType::I64);
  Shape ts = tgt->type().shape;
  Shape expanded = ts;
  expanded.insert(expanded.begin() + 1, 1);
  Shape iotaShape(ls.size(), 1);
  iotaShape[1] = classes;
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < classes; ++i)
    iota.setInt(i, i);
  Value *onehot = c.emit(Op::Equal, {c.reshape(tgt, expanded), c.constant(std::move(iota))});
  Value *mask = c.castTo(onehot, t); // [N, C, ...]
  AttrMap overClasses = {{"axes", Shape{1}}, {"keepdims", int64_t(0)}};
  Value *picked = c.emit(Op::ReduceSum, {c.emit(Op::Mul, {logp, mask})}, overClasses);
  // Per-element weight: weight[target] (0 where the target is out of range), 0 if ignored.
  Value *w;
  if (weight) {
    Shape wShape(ls.size(), 1);
    wShape[1] = classes;
    w = c.emit(Op::ReduceSum, {c.emit(Op::Mul, {mask, c.reshape(weight, wShape)})}, overClasses);
  } else {
    w = c.emit(Op::ReduceSum, {mask}, overClasses);
  }
  if (c.hasAttr("ignore_index")) {
    Value *ignore = c.scalar(DType::I64, static_cast<double>(c.attrInt("ignore_index", 0)));
    Value *keep = c.castTo(c.emit(Op::Not, {c.emit(Op::Equal, {tgt, ignore})}), t);
    w = c.emit(Op::Mul, {w, keep});
  }
  Value *loss = c.emit(Op::Neg, {c.emit(Op::Mul, {picked, w})});
  std::string reduction = c.attrStr("reduction", "mean");
  Shape all(ts.size());
  std::iota(all.begin(), all.end(), 0);
  AttrMap full = {{"axes", all}, {"keepdims", int64_t(0)}};
  if (reduction == "none")
    return loss;
  if (reduction == "sum")
    return c.emit(Op::ReduceSum, {loss}, full);
  if (reduction != "mean")
    c.fail(cat("reduction '", reduction, "' is not none, sum or mean"));
  return c.emit(Op::Div, {c.emit(Op::ReduceSum, {loss}, full), c.emit(Op::ReduceSum, {w}, full)});
}

void convNllLoss(ConvertCtx &c) {
  c.setOutput(0, nllLoss(c, c.input(0), c.input(1), c.hasInput(2) ? c.input(2) : nullptr));
}

void convSoftmaxCrossEntropy(ConvertCtx &c) {
  Value *scores = c.input(0);
  if (scores->type().rank() < 2)
    c.fail(cat("scores must be [N, C, ...], got ", scores->type().str()));
  Value *logp = c.emit(Op::LogSoftmax, {scores}, {{"axis", int64_t(1)}});
  c.setOutput(0, nllLoss(c, logp, c.input(1), c.hasInput(2) ? c.input(2) : nullptr));
  if (c.outputUsed(1))
    c.setOutput(1, logp);
}

void convLpNorm(ConvertCtx &c) {
  Value *x = c.input(0);
  int64_t axis = normAxis(c, c.attrInt("axis", -1), x->type().rank());
  int64_t p = c.attrInt("p", 2);
  if (p != 1 && p != 2)
    c.fail(cat("p = ", p, " is not 1 or 2"));
  Value *norm = c.emit(p == 1 ? Op::ReduceL1 : Op::ReduceL2, {x},
                       {{"axes", Shape{axis}}, {"keepdims", int64_t(1)}});
  // A zero vector normalises to zeros (ONNX's reference and ONNX Runtime), not 0 / 0 = NaN.
  DType t = x->type().dtype;
  Value *zero = c.emit(Op::Equal, {norm, c.scalar(t, 0.0)});
  c.setOutput(0, c.emit(Op::Where, {zero, c.scalar(t, 0.0), c.emit(Op::Div, {x, norm})}));
}

// A [sq, sk] constant of f(query i, key j) (bool or int64).
Value *attentionGrid(ConvertCtx &c, int64_t sq, int64_t sk,
                     const std::function<int64_t(int64_t, int64_t)> &f, DType dtype) {
  Tensor t(TensorType(dtype, {sq, sk}));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j)
      t.setInt(i * sk + j, f(i, j));
  return c.constant(std::move(t));
}

Value *andMask(ConvertCtx &c, Value *a, Value *b) {
  return a ? c.emit(Op::And, {a, b}) : b;
}

// Attention-23/24/25 written out in plain ops, in the order of ONNX's reference
// (onnx/reference/ops/op_attention.py): Q and K each scaled by sqrt(scale), Q K^T, softcap, the
// additive bias (attn_mask padded to the keys with False / -inf, is_causal, the sliding window,
// nonpad_kv_seqlen's padding mask), softmax (in softmax_precision), fully-masked rows (an all
// -inf bias row) zeroed, then times V. q, k, v are [B, H, S, D] with the cache concatenated and
// the K/V heads repeated. The causal and window frontiers are query i, key j: j <= i + offset,
// offset - left <= j - i <= offset + right, with offset the cache length (a constant mask) or,
// for an external cache, nonpad_kv_seqlen[b] - Sq (a mask compared at run time). Returns Y;
// *qkOut is qk_matmul_output in its mode.
Value *attentionByOps(ConvertCtx &c, Value *q, Value *k, Value *v, int64_t past, double scale,
                      bool causal, Value **qkOut) {
  DType t = q->type().dtype;
  int64_t sq = q->type().shape[2], sk = k->type().shape[2], batch = q->type().shape[0];
  int64_t left = c.attrInt("left_window_size", -1), right = c.attrInt("right_window_size", -1);
  if (left < -1 || right < -1)
    c.fail("left_window_size and right_window_size must be -1 or nonnegative");
  Value *lens = nullptr; // nonpad_kv_seqlen as [B, 1, 1, 1] int64
  if (c.hasInput(6)) {
    if (c.hasInput(4))
      c.fail("nonpad_kv_seqlen cannot be combined with past_key / past_value");
    Value *n = c.input(6);
    if (n->type().shape != Shape{batch})
      c.fail(cat("nonpad_kv_seqlen ", n->type().str(), " is not [batch = ", batch, "]"));
    lens = c.reshape(c.castTo(n, DType::I64), {batch, 1, 1, 1});
  }
  // The mask: bool `allowed` and a float `added`, either absent.
  Value *allowed = nullptr, *added = nullptr;
  if (c.hasInput(3)) {
    Value *m = c.input(3);
    Shape ms = m->type().shape;
    bool isBool = m->type().dtype == DType::Bool;
    if (!ms.empty() && ms.back() > sk)
      c.fail(cat("attn_mask ", m->type().str(), " is longer than the ", sk, " keys"));
    if (!ms.empty() && ms.back() < sk) { // padded to the keys: False / -inf
      Shape ps = ms;
      ps.back() = sk - ms.back();
      Tensor pad(TensorType(m->type().dtype, ps));
      for (int64_t i = 0; i < pad.numel(); ++i)
        pad.setDouble(i, isBool ? 0.0 : -INFINITY);
      m = c.emit(Op::Concat, {m, c.constant(std::move(pad))}, {{"axis", int64_t(ms.size() - 1)}});
    }
    (isBool ? allowed : added) = m;
  }
  // Frontiers j - i <= offset + hi (hi >= 0 on that side) and j - i >= offset - lo.
  auto frontier = [&](int64_t hi, int64_t lo) {
    if (!lens) {
      return attentionGrid(
          c, sq, sk,
          [&](int64_t i, int64_t j) {
            int64_t d = j - i - past;
            return int64_t((hi < 0 || d <= hi) && (lo < 0 || d >= -lo));
          },
          DType::Bool);
    }
    // offset = lens - sq: j - i + sq - hi <= lens and lens <= j - i + sq + lo.
    Value *r = nullptr;
    if (hi >= 0)
      r = andMask(
          c, r,
          c.emit(Op::LessEqual,
                 {attentionGrid(
                      c, sq, sk, [&](int64_t i, int64_t j) { return j - i + sq - hi; }, DType::I64),
                  lens}));
    if (lo >= 0)
      r = andMask(
          c, r,
          c.emit(Op::LessEqual,
                 {lens, attentionGrid(
                            c, sq, sk, [&](int64_t i, int64_t j) { return j - i + sq + lo; },
                            DType::I64)}));
    return r;
  };
  if (causal)
    allowed = andMask(c, allowed, frontier(0, -1));
  if (left >= 0 || right >= 0)
    allowed = andMask(c, allowed, frontier(right, left));
  if (lens) { // padding: key j < nonpad_kv_seqlen[b]
    Tensor iota(TensorType(DType::I64, {sk}));
    for (int64_t j = 0; j < sk; ++j)
      iota.setInt(j, j);
    allowed = andMask(c, allowed, c.emit(Op::Less, {c.constant(std::move(iota)), lens}));
  }
  Value *bias = added;
  if (allowed)
    bias = c.emit(Op::Where, {allowed, added ? added : c.scalar(t, 0.0), c.scalar(t, -INFINITY)});

  Value *s = c.scalar(t, std::sqrt(scale));
  Value *kt = c.emit(Op::Transpose, {c.emit(Op::Mul, {k, s})}, {{"perm", Shape{0, 1, 3, 2}}});
  Value *qk = c.emit(Op::MatMul, {c.emit(Op::Mul, {q, s}), kt});
  double softcap = c.attrFloat("softcap", 0.0);
  if (softcap > 0) {
    Value *cap = c.scalar(t, softcap);
    qk = c.emit(Op::Mul, {c.emit(Op::Tanh, {c.emit(Op::Div, {qk, cap})}), cap});
  }
  int64_t mode = c.attrInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    c.fail(cat("qk_matmul_output_mode = ", mode, " is not 0, 1, 2 or 3"));
  *qkOut = qk;
  if (bias)
    qk = c.emit(Op::Add, {qk, bias});
  if (mode == 2)
    *qkOut = qk;
  if (c.hasAttr("softmax_precision"))
    qk = c.castTo(qk, castTarget(c, static_cast<int32_t>(c.attrInt("softmax_precision", 1))));
  Value *p = c.emit(Op::Softmax, {qk}, {{"axis", int64_t(-1)}});
  if (bias) {
    int64_t last = bias->type().rank() - 1;
    Value *rowMax =
        c.emit(Op::ReduceMax, {bias}, {{"axes", Shape{last}}, {"keepdims", int64_t(1)}});
    Value *none = c.emit(Op::Equal, {rowMax, c.scalar(t, -INFINITY)});
    p = c.emit(Op::Where, {none, c.scalar(p->type().dtype, 0.0), p});
  }
  p = c.castTo(p, t);
  if (mode == 3)
    *qkOut = p;
  return c.emit(Op::MatMul, {p, v});
}

// Attention-23/24/25. 3-D inputs [B, S, H*D] are split into heads; a past key / value cache
// [B, Hkv, P, D] is concatenated before the new keys / values (present_key / present_value are
// the concatenations); grouped-query K/V heads are repeated to the query heads. is_causal lets
// query i see key j <= i + P (P = 0 without a cache: top-left). Softcap, nonpad_kv_seqlen,
// sliding windows, a short attn_mask and qk_matmul_output are written out in plain ops
// (attentionByOps); the rest is our attention op, whose own causal flag is the bottom-right
// diagonal (P = Sk - Sq): another offset becomes a constant bool mask, and'ed with a given bool
// mask or turned into -inf in a given additive one.
void convAttention(ConvertCtx &c) {
  if (c.hasInput(4) != c.hasInput(5))
    c.fail("past_key and past_value must be given together");
  Value *q = c.input(0), *k = c.input(1), *v = c.input(2);
  int64_t r = q->type().rank();
  if (r != 3 && r != 4)
    c.fail(cat("Q must be 3-D or 4-D, got ", q->type().str()));
  if (k->type().rank() != r || v->type().rank() != r)
    c.fail("Q, K and V must have the same rank");
  auto splitHeads = [&](Value *t, int64_t heads, const char *what) {
    const Shape &s = t->type().shape;
    if (heads < 1 || s[2] % heads != 0)
      c.fail(cat(what, " ", t->type().str(), " does not split into ", heads, " heads"));
    Value *h = c.reshape(t, {s[0], s[1], heads, s[2] / heads});
    return c.emit(Op::Transpose, {h}, {{"perm", Shape{0, 2, 1, 3}}});
  };
  if (r == 3) {
    int64_t qh = c.attrInt("q_num_heads", 0), kvh = c.attrInt("kv_num_heads", 0);
    if (qh < 1 || kvh < 1)
      c.fail("3-D inputs need the q_num_heads and kv_num_heads attributes");
    q = splitHeads(q, qh, "Q");
    k = splitHeads(k, kvh, "K");
    v = splitHeads(v, kvh, "V");
  }
  int64_t past = 0;
  if (c.hasInput(4)) {
    Value *pk = c.input(4), *pv = c.input(5);
    const Shape &kss = k->type().shape, &pks = pk->type().shape, &pvs = pv->type().shape;
    if (pk->type().rank() != 4 || pv->type().rank() != 4 || pks[0] != kss[0] || pks[1] != kss[1] ||
        pks[3] != kss[3] || pvs[0] != kss[0] || pvs[1] != kss[1] || pvs[2] != pks[2] ||
        pvs[3] != v->type().shape[3])
      c.fail(cat("past_key ", pk->type().str(), " / past_value ", pv->type().str(),
                 " do not match the keys ", k->type().str(), " and values ", v->type().str()));
    past = pks[2];
    k = c.emit(Op::Concat, {pk, k}, {{"axis", int64_t(2)}});
    v = c.emit(Op::Concat, {pv, v}, {{"axis", int64_t(2)}});
  }
  const Shape &qs = q->type().shape, &ks = k->type().shape;
  int64_t hq = qs[1], hkv = ks[1];
  Value *presentK = k, *presentV = v;
  if (hq != hkv) {
    if (hkv < 1 || hq % hkv != 0)
      c.fail(cat("query heads ", hq, " are not a multiple of key/value heads ", hkv));
    auto repeat = [&](Value *t) {
      const Shape &s = t->type().shape;
      Value *u = c.reshape(t, {s[0], s[1], 1, s[2], s[3]});
      u = c.emit(Op::Expand, {u}, {{"shape", Shape{s[0], s[1], hq / hkv, s[2], s[3]}}});
      return c.reshape(u, {s[0], hq, s[2], s[3]});
    };
    k = repeat(k);
    v = repeat(v);
  }
  int64_t sq = qs[2], sk = ks[2];
  bool causal = c.attrInt("is_causal", 0) != 0;
  double scale = c.attrFloat("scale", 1.0 / std::sqrt(static_cast<double>(qs[3])));
  Value *mask = c.hasInput(3) ? c.input(3) : nullptr;
  bool byOps = c.hasInput(6) || c.attrFloat("softcap", 0.0) != 0.0 ||
               c.attrInt("left_window_size", -1) != -1 ||
               c.attrInt("right_window_size", -1) != -1 || c.outputUsed(3) ||
               (mask && mask->type().rank() > 0 && mask->type().shape.back() < sk);
  Value *y = nullptr, *qkOut = nullptr;
  if (byOps) {
    y = attentionByOps(c, q, k, v, past, scale, causal, &qkOut);
  } else {
    std::vector<Value *> ops = {q, k, v};
    if (causal && past != sk - sq) { // the op's diagonal is Sk - Sq: this one as a mask
      Value *allowed = attentionGrid(
          c, sq, sk, [&](int64_t i, int64_t j) { return int64_t(j <= i + past); }, DType::Bool);
      if (!mask)
        mask = allowed;
      else if (mask->type().dtype == DType::Bool)
        mask = c.emit(Op::And, {mask, allowed});
      else
        mask = c.emit(Op::Where, {allowed, mask, c.scalar(mask->type().dtype, -INFINITY)});
      causal = false;
    }
    if (mask)
      ops.push_back(mask);
    y = c.emit(Op::Attention, ops, {{"scale", scale}, {"causal", int64_t(causal)}});
  }
  if (r == 3) {
    const Shape &ys = y->type().shape;
    y = c.emit(Op::Transpose, {y}, {{"perm", Shape{0, 2, 1, 3}}});
    y = c.reshape(y, {ys[0], ys[2], ys[1] * ys[3]});
  }
  c.setOutput(0, y);
  if (c.outputUsed(1))
    c.setOutput(1, presentK);
  if (c.outputUsed(2))
    c.setOutput(2, presentV);
  if (c.outputUsed(3))
    c.setOutput(3, qkOut);
}

// ---- pooling ----------------------------------------------------------------------------------

template <Op op>
void convPool(ConvertCtx &c) {
  Shape in = spatialDims(c, 0);
  auto k = c.attrIntsOpt("kernel_shape");
  if (!k)
    c.fail("attribute 'kernel_shape' is required");
  Window w = windowAttrs(c, in, *k);
  AttrMap attrs = {{"kernel_shape", *k},
                   {"strides", w.strides},
                   {"pads", w.pads},
                   {"dilations", w.dilations},
                   {"ceil_mode", c.attrInt("ceil_mode", 0)}};
  if (op == Op::AvgPool)
    attrs["count_include_pad"] = c.attrInt("count_include_pad", 0);
  c.setOutput(0, c.emit(op, {c.input(0)}, attrs));
  // MaxPool's Indices (opset 8+): the flat index of each maximum, its own node.
  if (op == Op::MaxPool && c.outputUsed(1)) {
    attrs["storage_order"] = c.attrInt("storage_order", 0);
    c.setOutput(1, c.emit(Op::MaxPoolIndices, {c.input(0)}, attrs));
  }
}

// ---- data movement ----------------------------------------------------------------------------

// Resolves a Reshape target: 0 copies the input dim (unless allowzero), -1 is inferred.
Shape resolveReshape(ConvertCtx &c, const Shape &in, Shape target, bool allowZero) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= in.size())
        c.fail(cat("shape ", shapeStr(target), " copies dim ", i, " that ", shapeStr(in),
                   " does not have"));
      target[i] = in[i];
    }
    if (target[i] == -1) {
      if (infer >= 0)
        c.fail(cat("shape ", shapeStr(target), " has more than one -1"));
      infer = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      c.fail(cat("shape ", shapeStr(target), " has a negative dim"));
    } else {
      known *= target[i];
    }
  }
  int64_t numel = product(in);
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      c.fail(cat("cannot reshape ", shapeStr(in), " to ", shapeStr(target)));
    target[static_cast<size_t>(infer)] = numel / known;
  }
  if (product(target) != numel)
    c.fail(cat("cannot reshape ", shapeStr(in), " (", numel, " elements) to ", shapeStr(target),
               " (", product(target), " elements)"));
  return target;
}

// resolveReshape over expressions: a 0 copies the input's dim, a -1 is the element count over
// the other dims, which must divide it for every value (a single-term divisor: a product of
// dims); every other dim must be >= 1 throughout the ranges.
SymElems resolveReshapeSym(ConvertCtx &c, const SymElems &in, SymElems target, bool allowZero) {
  std::optional<size_t> infer;
  SymExpr known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == SymExpr(0) && !allowZero) {
      if (i >= in.size())
        c.fail(cat("shape ", symElemsStr(target), " copies dim ", i, " that ", symElemsStr(in),
                   " does not have"));
      target[i] = in[i];
    }
    if (target[i] == SymExpr(-1)) {
      if (infer)
        c.fail(cat("shape ", symElemsStr(target), " has more than one -1"));
      infer = i;
      continue;
    }
    if (target[i].isConstant() && target[i].constant() < 0)
      c.fail(cat("shape ", symElemsStr(target), " has a negative dim"));
    requireDimNonNegative(c, target[i], cat("reshape target dim ", i));
    known = symOk(c, SymExpr::mul(known, target[i]));
  }
  SymExpr numel = symProduct(c, in);
  if (infer) {
    auto q = divExactSym(numel, known);
    if (!q)
      c.fail(cat("cannot reshape ", symElemsStr(in), " to ", symElemsStr(target), ": ", numel.str(),
                 " elements over ", known.str(),
                 " is not a whole number for every value of the symbolic dims"));
    target[*infer] = *q;
  }
  if (symProduct(c, target) != numel)
    c.fail(cat("cannot reshape ", symElemsStr(in), " (", numel.str(), " elements) to ",
               symElemsStr(target), " (", symProduct(c, target).str(),
               " elements) for every value of the symbolic dims"));
  return target;
}

void convReshape(ConvertCtx &c) {
  bool allowZero = c.attrInt("allowzero", 0) != 0;
  if (c.opset() >= 5 && (c.type(0).isSymbolic() || symInput(c, 1))) {
    c.setOutput(0, c.reshapeSym(c.input(0), resolveReshapeSym(c, symShapeOf(c.type(0)),
                                                              c.symInts(1, "shape"), allowZero)));
    return;
  }
  Shape target = c.opset() < 5 ? c.attrInts("shape") : c.constInts(1, "shape");
  c.setOutput(0, c.reshape(c.input(0), resolveReshape(c, c.type(0).shape, target, allowZero)));
}

void convFlatten(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t axis = c.attrInt("axis", 1);
  if (axis < -r || axis > r)
    c.fail(cat("axis ", axis, " is out of range for rank ", r));
  if (axis < 0)
    axis += r;
  if (c.type(0).isSymbolic()) {
    SymElems d = symShapeOf(c.type(0));
    size_t a = static_cast<size_t>(axis);
    c.setOutput(0, c.reshapeSym(c.input(0), {symProduct(c, d, 0, a), symProduct(c, d, a)}));
    return;
  }
  c.setOutput(0, c.reshape(c.input(0), {product(s, 0, axis), product(s, axis)}));
}

// Squeeze / Unsqueeze axes: an attribute before opset 13, an input from 13 on.
std::optional<Shape> axesOperand(ConvertCtx &c) {
  if (c.opset() >= 13)
    return c.hasInput(1) ? std::optional<Shape>(c.constInts(1, "axes")) : std::nullopt;
  return c.attrIntsOpt("axes");
}

// Squeeze of symbolic dims: a dim is squeezed only when it is 1 for every value; one that is 1
// for some values only would change the rank with the value (refused).
void squeezeSym(ConvertCtx &c, const std::optional<Shape> &axes) {
  SymElems s = symShapeOf(c.type(0)), out;
  Shape ax;
  if (axes)
    ax = normAxes(c, *axes, static_cast<int64_t>(s.size()));
  for (size_t d = 0; d < s.size(); ++d) {
    bool one = s[d] == SymExpr(1);
    if (!axes) {
      if (!one && !s[d].isConstant() && c.bounds(s[d], "dim").lo <= 1)
        c.fail(cat("squeezes the dims of size 1 of ", c.type(0).str(), ", and dim ", d, " (",
                   s[d].str(), ") is 1 for some values only", c.rangesOf(s[d]), ": give the axes"));
      if (!one)
        out.push_back(s[d]);
      continue;
    }
    bool squeezed = std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(d));
    if (squeezed && !one)
      c.fail(cat("cannot squeeze axis ", d, " of ", c.type(0).str(),
                 ": its size is not 1 for every value of the symbolic dims"));
    if (!squeezed)
      out.push_back(s[d]);
  }
  c.setOutput(0, c.reshapeSym(c.input(0), out));
}

void convSqueeze(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  auto axes = axesOperand(c);
  if (c.type(0).isSymbolic()) {
    squeezeSym(c, axes);
    return;
  }
  Shape out;
  if (!axes) {
    for (int64_t d : s)
      if (d != 1)
        out.push_back(d);
  } else {
    Shape ax = normAxes(c, *axes, static_cast<int64_t>(s.size()));
    for (size_t d = 0; d < s.size(); ++d) {
      bool squeezed = std::binary_search(ax.begin(), ax.end(), static_cast<int64_t>(d));
      if (squeezed && s[d] != 1)
        c.fail(cat("cannot squeeze axis ", d, " of ", c.type(0).str(), ": its size is not 1"));
      if (!squeezed)
        out.push_back(s[d]);
    }
  }
  c.setOutput(0, c.reshape(c.input(0), out));
}

void convUnsqueeze(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  auto axes = axesOperand(c);
  if (!axes)
    c.fail("axes are required");
  int64_t outRank = static_cast<int64_t>(s.size() + axes->size());
  Shape ax = normAxes(c, *axes, outRank);
  if (c.type(0).isSymbolic()) {
    SymElems in = symShapeOf(c.type(0)), out;
    size_t next = 0;
    for (int64_t d = 0; d < outRank; ++d)
      out.push_back(std::binary_search(ax.begin(), ax.end(), d) ? SymExpr(1) : in[next++]);
    c.setOutput(0, c.reshapeSym(c.input(0), out));
    return;
  }
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(std::binary_search(ax.begin(), ax.end(), d) ? 1 : s[next++]);
  c.setOutput(0, c.reshape(c.input(0), out));
}

void convTranspose(ConvertCtx &c) {
  int64_t r = c.rank(0);
  Shape perm = c.attrIntsOpt("perm").value_or(Shape{});
  if (!c.hasAttr("perm"))
    for (int64_t i = r - 1; i >= 0; --i)
      perm.push_back(i);
  for (int64_t &p : perm)
    p = normAxis(c, p, r, "perm entry");
  Shape id(static_cast<size_t>(r));
  std::iota(id.begin(), id.end(), 0);
  c.setOutput(0, perm == id ? c.input(0) : c.emit(Op::Transpose, {c.input(0)}, {{"perm", perm}}));
}

void convConcat(ConvertCtx &c) {
  std::vector<Value *> xs;
  for (size_t i = 0; i < c.numInputs(); ++i)
    if (c.hasInput(i))
      xs.push_back(c.input(i));
  if (xs.empty())
    c.fail("needs at least one input");
  // Concat-1 defaults the axis to 1; from opset 4 on it is required.
  int64_t axis = c.opset() < 4 ? c.attrInt("axis", 1) : c.attrIntReq("axis");
  axis = normAxis(c, axis, xs[0]->type().rank());
  // Empty pieces (a 0 extent along the axis) add nothing: dropped once their shape checks out.
  std::vector<Value *> kept;
  for (Value *x : xs) {
    const TensorType &t = x->type();
    if (!t.isStatic() || t.numel() != 0) {
      kept.push_back(x);
      continue;
    }
    Shape want = xs[0]->type().shape, got = t.shape;
    if (got.size() != want.size())
      c.fail(cat("input ", t.str(), " and ", xs[0]->type().str(), " differ in rank"));
    want[static_cast<size_t>(axis)] = got[static_cast<size_t>(axis)] = 0;
    if (got != want && xs[0]->type().numel() != 0)
      c.fail(cat("input ", t.str(), " does not fit ", xs[0]->type().str(), " beside axis ", axis));
  }
  if (!kept.empty() && kept.size() < xs.size())
    xs = kept;
  c.setOutput(0, xs.size() == 1 ? xs[0] : c.emit(Op::Concat, xs, {{"axis", axis}}));
}

void convSplit(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t axis = normAxis(c, c.attrInt("axis", 0), static_cast<int64_t>(s.size()));
  int64_t dim = s[static_cast<size_t>(axis)];
  int64_t n = static_cast<int64_t>(c.numOutputs());
  Shape sizes;
  if ((c.opset() >= 13 || c.opset() < 2) && c.hasInput(1)) // Split-1 and 13+: an input
    sizes = c.constInts(1, "split");
  else if (c.opset() < 13 && c.hasAttr("split"))
    sizes = c.attrInts("split");
  if (sizes.empty()) {
    if (c.opset() >= 18 && c.hasAttr("num_outputs")) {
      // Split-18: chunks of ceil(dim / num_outputs), the last one smaller.
      int64_t parts = c.attrInt("num_outputs", n);
      if (parts != n || parts < 1)
        c.fail(cat("num_outputs = ", parts, " but the node has ", n, " outputs"));
      int64_t chunk = (dim + parts - 1) / parts;
      for (int64_t i = 0; i < parts; ++i)
        sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
    } else {
      if (n < 1 || dim % n != 0)
        c.fail(cat("dim ", dim, " does not split evenly into ", n, " outputs"));
      sizes.assign(static_cast<size_t>(n), dim / n);
    }
  }
  if (static_cast<int64_t>(sizes.size()) != n)
    c.fail(cat("split ", shapeStr(sizes), " has ", sizes.size(), " sizes for ", n, " outputs"));
  // Empty pieces (size 0 beside others: a rotary embedding over the whole head leaves nothing
  // unrotated) are constants holding no values, which Concat drops; the split cuts the rest.
  Shape kept;
  for (int64_t sz : sizes)
    if (sz != 0)
      kept.push_back(sz);
  if (kept.empty() || kept.size() == sizes.size() || c.type(0).isSymbolic()) {
    std::vector<Value *> outs = c.emitMulti(
        Op::Split, {c.input(0)}, {{"axis", axis}, {"sizes", sizes}}, static_cast<int>(n));
    for (size_t i = 0; i < outs.size(); ++i)
      c.setOutput(i, outs[i]);
    return;
  }
  std::vector<Value *> pieces =
      kept.size() == 1 ? std::vector<Value *>{c.input(0)}
                       : c.emitMulti(Op::Split, {c.input(0)}, {{"axis", axis}, {"sizes", kept}},
                                     static_cast<int>(kept.size()));
  size_t next = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] != 0) {
      c.setOutput(i, pieces[next++]);
      continue;
    }
    Shape empty = s;
    empty[static_cast<size_t>(axis)] = 0;
    c.setOutput(i, c.constant(Tensor(TensorType(c.type(0).dtype, empty))));
  }
}

// Clamps ONNX slice bounds to our convention (see inferSlice): for a positive step start and
// end lie in [0, dim]; for a negative one start lies in [0, dim-1] and end in [-1, dim-1].
void clampSlice(int64_t dim, int64_t step, int64_t &start, int64_t &end) {
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  auto clamp = [](int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; };
  if (step > 0) {
    start = clamp(start, 0, dim);
    end = clamp(end, 0, dim);
  } else {
    start = clamp(start, -1, dim - 1);
    end = clamp(end, -1, dim - 1);
  }
}

// A slice bound (step > 0) over a symbolic axis or given as an expression, as clampSlice makes
// it: negative counts from the end, then clamped into [0, dim]. Exact only when the same case
// applies for every value of the dims (always within the axis, or always clamped to one end);
// a bound clamped for some values only would make the extent a min(), which is refused.
SymExpr sliceBound(ConvertCtx &c, const SymExpr &v, const SymExpr &dim, const char *what,
                   int64_t axis, const TensorType &t) {
  bool negative;
  if (v.isConstant()) {
    negative = v.constant() < 0;
  } else {
    SymBounds b = c.bounds(v, cat("slice ", what));
    if (b.lo < 0 && b.hi >= 0)
      c.fail(cat("slice ", what, " ", v.str(), " of axis ", axis, " of ", t.str(),
                 " is negative (counted from the end) for some values only", c.rangesOf(v)));
    negative = b.hi < 0;
  }
  SymExpr x = negative ? symOk(c, SymExpr::add(v, dim)) : v;
  if (c.provablyLe(dim, x))
    return dim;
  if (c.provablyLe(x, SymExpr(0)))
    return SymExpr(0);
  if (c.provablyLe(SymExpr(0), x) && c.provablyLe(x, dim))
    return x;
  // A constant bound into a length known only at run time (the first 100 of the boxes NMS
  // kept): min(v, len) is itself such a length, computed when the length is.
  if (v.isConstant() && v.constant() >= 0)
    if (Value *len = c.dataLength(dim)) {
      Value *bound =
          c.emit(Op::Min, {len, c.scalar(DType::I64, static_cast<double>(v.constant()))});
      int64_t most = std::min(v.constant(), c.bounds(dim, "axis length").hi);
      Value *count = c.emitDataDim(Op::SetDim, {bound}, {}, 1, most)[0];
      return SymExpr::symbol(count->def()->s("dim"));
    }
  c.fail(cat("slice ", what, " ", v.str(), " of axis ", axis, " of ", t.str(),
             " is clamped to the axis for some values of the dims only",
             c.rangesOf(symOk(c, SymExpr::add(x, dim)))));
}

// Slice's optional axes (default: 0, 1, ...) and steps (default: 1), and the four lists'
// lengths checked, for the static and the symbolic form alike.
void sliceDefaults(const ConvertCtx &c, size_t starts, size_t ends, Shape &axes, Shape &steps) {
  if (axes.empty())
    for (size_t i = 0; i < starts; ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(starts, 1);
  if (ends != starts || axes.size() != starts || steps.size() != starts)
    c.fail("starts, ends, axes and steps must have the same length");
}

void sliceSym(ConvertCtx &c) {
  const TensorType &t = c.type(0);
  int64_t r = t.rank();
  SymElems starts, ends;
  Shape axes, steps;
  if (c.opset() < 10) {
    for (int64_t v : c.attrInts("starts"))
      starts.emplace_back(v);
    for (int64_t v : c.attrInts("ends"))
      ends.emplace_back(v);
    axes = c.attrInts("axes");
  } else {
    starts = c.symInts(1, "starts");
    ends = c.symInts(2, "ends");
    if (c.hasInput(3))
      axes = c.constInts(3, "axes");
    if (c.hasInput(4))
      steps = c.constInts(4, "steps");
  }
  sliceDefaults(c, starts.size(), ends.size(), axes, steps);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  bool identity = true, symbolic = false;
  for (size_t k = 0; k < axes.size(); ++k) {
    axes[k] = normAxis(c, axes[k], r);
    if (seen[static_cast<size_t>(axes[k])])
      c.fail(cat("axis ", axes[k], " is sliced twice"));
    seen[static_cast<size_t>(axes[k])] = true;
    if (steps[k] == 0)
      c.fail("steps must not be 0");
    SymExpr dim = t.symDim(static_cast<size_t>(axes[k]));
    if (dim.isConstant() && starts[k].isConstant() && ends[k].isConstant()) {
      int64_t s0 = starts[k].constant(), e0 = ends[k].constant();
      clampSlice(dim.constant(), steps[k], s0, e0);
      starts[k] = s0;
      ends[k] = e0;
      identity = identity && steps[k] == 1 && s0 == 0 && e0 == dim.constant();
      continue;
    }
    if (steps[k] < 0)
      c.fail(cat("a reverse slice (step ", steps[k], ") of axis ", axes[k], " of ", t.str(),
                 " with symbolic dims or bounds is not supported"));
    starts[k] = sliceBound(c, starts[k], dim, "start", axes[k], t);
    ends[k] = sliceBound(c, ends[k], dim, "end", axes[k], t);
    SymExpr extent = symOk(c, SymExpr::sub(ends[k], starts[k]));
    if (!extent.isConstant() && steps[k] != 1)
      c.fail(cat("a slice of axis ", axes[k], " of ", t.str(), " from ", starts[k].str(), " to ",
                 ends[k].str(), " by step ", steps[k],
                 ": a symbolic extent is supported with step 1 only"));
    if (c.bounds(extent, "slice extent").lo < (c.usesDataDim(extent) ? 0 : 1))
      c.fail(cat("the slice [", starts[k].str(), ", ", ends[k].str(), ") of axis ", axes[k], " of ",
                 t.str(), " is empty for some values of the dims", c.rangesOf(extent)));
    symbolic = symbolic || !starts[k].isConstant() || !ends[k].isConstant();
    identity = identity && steps[k] == 1 && starts[k] == SymExpr(0) && ends[k] == dim;
  }
  if (identity) {
    c.setOutput(0, c.input(0));
    return;
  }
  Shape s0, e0;
  std::vector<std::string> ss, es;
  for (size_t k = 0; k < axes.size(); ++k) {
    s0.push_back(c.planning(starts[k]));
    e0.push_back(c.planning(ends[k]));
    ss.push_back(starts[k].str());
    es.push_back(ends[k].str());
  }
  AttrMap attrs = {{"starts", s0}, {"ends", e0}, {"axes", axes}, {"steps", steps}};
  if (symbolic) {
    attrs["sym_starts"] = ss;
    attrs["sym_ends"] = es;
  }
  c.setOutput(0, c.emit(Op::Slice, {c.input(0)}, std::move(attrs)));
}

void convSlice(ConvertCtx &c) {
  if (c.type(0).isSymbolic() || (c.opset() >= 10 && (symInput(c, 1) || symInput(c, 2)))) {
    sliceSym(c);
    return;
  }
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  Shape starts, ends, axes, steps;
  if (c.opset() < 10) { // Slice-1: attributes, step 1
    starts = c.attrInts("starts");
    ends = c.attrInts("ends");
    axes = c.attrInts("axes");
  } else {
    starts = c.constInts(1, "starts");
    ends = c.constInts(2, "ends");
    if (c.hasInput(3))
      axes = c.constInts(3, "axes");
    if (c.hasInput(4))
      steps = c.constInts(4, "steps");
  }
  sliceDefaults(c, starts.size(), ends.size(), axes, steps);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  bool identity = true;
  for (size_t k = 0; k < axes.size(); ++k) {
    axes[k] = normAxis(c, axes[k], r);
    if (seen[static_cast<size_t>(axes[k])])
      c.fail(cat("axis ", axes[k], " is sliced twice"));
    seen[static_cast<size_t>(axes[k])] = true;
    if (steps[k] == 0)
      c.fail("steps must not be 0");
    int64_t dim = s[static_cast<size_t>(axes[k])];
    clampSlice(dim, steps[k], starts[k], ends[k]);
    identity = identity && steps[k] == 1 && starts[k] == 0 && ends[k] == dim;
  }
  if (identity) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0, c.emit(Op::Slice, {c.input(0)},
                        {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}}));
}

// Constant indices into a symbolic axis: each must be in range for every value of the dim. A
// negative one counts from the end, a symbolic position: one such index is a slice of extent 1
// from dim + index (then the axis dropped for a scalar index); several are refused.
void gatherSym(ConvertCtx &c, Value *x, const Tensor &t, int64_t axis) {
  SymExpr dim = x->type().symDim(static_cast<size_t>(axis));
  SymBounds b = c.bounds(dim, "dim");
  bool negative = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = t.getInt(i);
    if (v >= b.lo || v < -b.lo)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", x->type().str(),
                 " for some values of the dims", c.rangesOf(dim)));
    negative = negative || v < 0;
  }
  if (!negative) {
    c.setOutput(0, c.emit(Op::Gather, {x, c.input(1)}, {{"axis", axis}}));
    return;
  }
  if (t.numel() != 1)
    c.fail(cat("negative indices into the symbolic axis ", axis, " of ", x->type().str(),
               " count from a symbolic end: supported for one index only"));
  SymExpr start = symOk(c, SymExpr::add(dim, SymExpr(t.getInt(0))));
  SymExpr end = symOk(c, SymExpr::add(start, SymExpr(1)));
  Value *s = c.emit(Op::Slice, {x},
                    {{"starts", Shape{c.planning(start)}},
                     {"ends", Shape{c.planning(end)}},
                     {"axes", Shape{axis}},
                     {"steps", Shape{1}},
                     {"sym_starts", std::vector<std::string>{start.str()}},
                     {"sym_ends", std::vector<std::string>{end.str()}}});
  SymElems out = symShapeOf(x->type());
  out.erase(out.begin() + axis);
  out.insert(out.begin() + axis, static_cast<size_t>(t.type().rank()), SymExpr(1));
  c.setOutput(0, c.reshapeSym(s, out));
}

void convGather(ConvertCtx &c) {
  Value *x = c.input(0), *idx = c.input(1);
  int64_t axis = normAxis(c, c.attrInt("axis", 0), x->type().rank());
  int64_t dim = x->type().shape[static_cast<size_t>(axis)];
  // Constant indices: check the range and make negative ones positive.
  if (const Tensor *t = c.constInput(1)) {
    if (!isInteger(t->dtype()))
      c.fail(cat("indices must be integers, got ", t->type().str()));
    if (!x->type().symDim(static_cast<size_t>(axis)).isConstant()) {
      gatherSym(c, x, *t, axis);
      return;
    }
    bool negative = false;
    for (int64_t i = 0; i < t->numel(); ++i) {
      int64_t v = t->getInt(i);
      if (v < -dim || v >= dim)
        c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", x->type().str()));
      negative = negative || v < 0;
    }
    if (negative) {
      Tensor fixed(TensorType(DType::I64, t->shape()));
      for (int64_t i = 0; i < t->numel(); ++i)
        fixed.setInt(i, t->getInt(i) < 0 ? t->getInt(i) + dim : t->getInt(i));
      idx = c.constant(std::move(fixed));
    }
  }
  c.setOutput(0, c.emit(Op::Gather, {x, idx}, {{"axis", axis}}));
}

// ---- gather / scatter by index tensors ----------------------------------------------------------
// GatherElements, GatherND, ScatterElements (and Scatter-9, its deprecated spelling) and
// ScatterND map to the registry ops of the same semantics. Indices must be int32 or int64;
// constant ones are range-checked here so a bad model fails at import naming the node (the
// interpreter checks computed ones; compiled kernels keep their reads and writes in bounds). All
// inputs constant (an exporter's mask built by slice assignment): the node folds at import.

void requireIndexInput(const ConvertCtx &c, size_t i) {
  DType t = c.type(i).dtype;
  if (t != DType::I64 && t != DType::I32)
    c.fail(cat("indices must be int32 or int64, got ", c.type(i).str()));
}

// Constant element indices (GatherElements, ScatterElements): each in [-dim, dim) of the axis.
void checkElementIndices(const ConvertCtx &c, int64_t axis) {
  const Tensor *t = c.constInput(1);
  if (!t)
    return;
  int64_t dim = c.type(0).shape[static_cast<size_t>(axis)];
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t v = t->getInt(i);
    if (v < -dim || v >= dim)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", c.type(0).str()));
  }
}

// Constant index tuples (GatherND, ScatterND): element j of each in [-dim, dim) of data axis
// batch_dims + j.
void checkTupleIndices(const ConvertCtx &c, int64_t batchDims) {
  const Tensor *t = c.constInput(1);
  if (!t || t->shape().empty())
    return;
  int64_t k = t->shape().back();
  const Shape &xs = c.type(0).shape;
  if (k < 1 || batchDims + k > static_cast<int64_t>(xs.size()))
    return; // inference reports the shape
  for (int64_t i = 0; i < t->numel(); ++i) {
    int64_t axis = batchDims + i % k, dim = xs[static_cast<size_t>(axis)], v = t->getInt(i);
    if (v < -dim || v >= dim)
      c.fail(cat("index ", v, " is out of range for axis ", axis, " of ", c.type(0).str()));
  }
}

std::string scatterReduction(const ConvertCtx &c) {
  std::string r = c.attrStr("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    c.fail(cat("reduction '", r, "' is not none, add, mul, max or min"));
  return r;
}

void convGatherElements(ConvertCtx &c) {
  requireIndexInput(c, 1);
  if (c.rank(0) < 1 || c.rank(1) != c.rank(0))
    c.fail(cat("data ", c.type(0).str(), " and indices ", c.type(1).str(),
               " must have the same rank >= 1"));
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  checkElementIndices(c, axis);
  c.setOutput(0, c.emit(Op::GatherElements, {c.input(0), c.input(1)}, {{"axis", axis}}));
}

void convGatherND(ConvertCtx &c) {
  requireIndexInput(c, 1);
  int64_t b = c.attrInt("batch_dims", 0);
  checkTupleIndices(c, b);
  // One index per tuple and no batch dims: a gather along axis 0 (what exporters write for
  // x[mask]: NonZero, Transpose, GatherND), which takes symbolic and run-time lengths.
  const TensorType &it = c.type(1);
  if (b == 0 && it.rank() >= 1 && it.symDim(static_cast<size_t>(it.rank() - 1)) == SymExpr(1)) {
    SymElems rows = symShapeOf(it);
    rows.pop_back();
    Value *idx = c.reshapeSym(c.input(1), rows);
    c.setOutput(0, c.emit(Op::Gather, {c.input(0), idx}, {{"axis", int64_t(0)}}));
    return;
  }
  c.setOutput(0, c.emit(Op::GatherND, {c.input(0), c.input(1)}, {{"batch_dims", b}}));
}

// ScatterElements, and Scatter (opsets 9 and 10, the same op without reduction).
void convScatterElements(ConvertCtx &c) {
  requireIndexInput(c, 1);
  if (c.rank(0) < 1 || c.rank(1) != c.rank(0))
    c.fail(cat("data ", c.type(0).str(), " and indices ", c.type(1).str(),
               " must have the same rank >= 1"));
  if (c.type(2).shape != c.type(1).shape)
    c.fail(cat("updates ", c.type(2).str(), " must have the shape of indices ", c.type(1).str()));
  int64_t axis = normAxis(c, c.attrInt("axis", 0), c.rank(0));
  checkElementIndices(c, axis);
  c.setOutput(0, c.emit(Op::ScatterElements, {c.input(0), c.input(1), c.input(2)},
                        {{"axis", axis}, {"reduction", scatterReduction(c)}}));
}

void convScatterND(ConvertCtx &c) {
  requireIndexInput(c, 1);
  checkTupleIndices(c, 0);
  c.setOutput(0, c.emit(Op::ScatterND, {c.input(0), c.input(1), c.input(2)},
                        {{"reduction", scatterReduction(c)}}));
}

// Expand with symbolic dims: numpy broadcasting of the input's dims and the target's, which
// holds for every value only where the two are equal or one is 1.
void expandSym(ConvertCtx &c) {
  SymElems in = symShapeOf(c.type(0)), target = c.symInts(1, "shape");
  size_t r = std::max(in.size(), target.size()), bad = 0;
  auto bc = broadcastSymShapes(in, target, &bad);
  if (!bc) {
    SymExpr a = bad < r - in.size() ? SymExpr(1) : in[bad - (r - in.size())];
    SymExpr b = bad < r - target.size() ? SymExpr(1) : target[bad - (r - target.size())];
    c.fail(cat("cannot expand ", c.type(0).str(), " to ", symElemsStr(target), ": ", a.str(),
               " and ", b.str(), " broadcast only where they are equal"));
  }
  SymElems out = *bc;
  for (size_t i = 0; i < r; ++i)
    requireDimNonNegative(c, out[i], cat("expanded dim ", i));
  c.setOutput(0, out == in ? c.input(0) : c.emit(Op::Expand, {c.input(0)}, symShapeAttrs(c, out)));
}

void convExpand(ConvertCtx &c) {
  if (c.type(0).isSymbolic() || symInput(c, 1)) {
    expandSym(c);
    return;
  }
  Shape target = c.constInts(1, "shape");
  auto out = broadcastShapes(c.type(0).shape, target);
  if (!out)
    c.fail(cat("cannot expand ", c.type(0).str(), " to ", shapeStr(target)));
  c.setOutput(0, *out == c.type(0).shape ? c.input(0)
                                         : c.emit(Op::Expand, {c.input(0)}, {{"shape", *out}}));
}

void convTile(ConvertCtx &c) {
  Shape reps = c.constInts(1, "repeats");
  bool identity = std::all_of(reps.begin(), reps.end(), [](int64_t v) { return v == 1; });
  c.setOutput(0, identity && static_cast<int64_t>(reps.size()) == c.rank(0)
                     ? c.input(0)
                     : c.emit(Op::Tile, {c.input(0)}, {{"repeats", reps}}));
}

void convPad(ConvertCtx &c) {
  int64_t r = c.rank(0);
  std::string mode = c.attrStr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    c.fail(cat("mode '", mode, "' is not supported (constant, reflect or edge)"));
  Shape pads;
  double value = 0.0;
  if (c.opset() < 11) { // Pad-2: pads and value attributes
    pads = c.attrInts(c.hasAttr("pads") ? "pads" : "paddings");
    value = c.attrFloat("value", 0.0);
  } else {
    pads = c.constInts(1, "pads");
    if (c.hasInput(2)) {
      const Tensor &v = c.requireConst(2, "constant_value");
      if (v.numel() != 1)
        c.fail(cat("constant_value must be a scalar, got ", v.type().str()));
      value = v.getDouble(0);
    }
    if (c.hasInput(3)) { // Pad-18: pads for the listed axes only
      Shape axes = c.constInts(3, "axes");
      if (pads.size() != 2 * axes.size())
        c.fail(cat("pads ", shapeStr(pads), " need 2 values per axis of ", shapeStr(axes)));
      Shape full(static_cast<size_t>(2 * r), 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        int64_t a = normAxis(c, axes[k], r);
        full[static_cast<size_t>(a)] = pads[k];
        full[static_cast<size_t>(r + a)] = pads[axes.size() + k];
      }
      pads = full;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * r)
    c.fail(cat("pads ", shapeStr(pads), " need ", 2 * r, " values for ", c.type(0).str()));
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    c.setOutput(0, c.input(0));
    return;
  }
  c.setOutput(0, c.emit(Op::Pad, {c.input(0)}, {{"pads", pads}, {"mode", mode}, {"value", value}}));
}

// OneHot: indices (any numeric type, negative ones count from the end) compared with an iota
// along the new axis select values[1] (on) or values[0] (off).
void convOneHot(ConvertCtx &c) {
  Value *idx = c.castTo(c.input(0), DType::I64);
  const Tensor &depthT = c.requireConst(1, "depth");
  if (depthT.numel() != 1)
    c.fail(cat("depth must be a scalar, got ", depthT.type().str()));
  auto depth = static_cast<int64_t>(depthT.getDouble(0));
  if (depth < 1)
    c.fail(cat("depth ", depth, " must be >= 1"));
  Value *values = c.input(2);
  if (values->type().numel() != 2)
    c.fail(cat("values must hold [off, on], got ", values->type().str()));
  values = c.reshape(values, {2});
  auto pick = [&](int64_t i) {
    Value *v = c.emit(
        Op::Slice, {values},
        {{"starts", Shape{i}}, {"ends", Shape{i + 1}}, {"axes", Shape{0}}, {"steps", Shape{1}}});
    return c.reshape(v, {});
  };
  Value *off = pick(0), *on = pick(1);
  Value *dv = c.scalar(DType::I64, static_cast<double>(depth));
  Value *neg = c.emit(Op::Less, {idx, c.scalar(DType::I64, 0)});
  idx = c.emit(Op::Where, {neg, c.emit(Op::Add, {idx, dv}), idx});
  int64_t outRank = idx->type().rank() + 1;
  int64_t axis = normAxis(c, c.attrInt("axis", -1), outRank);
  Shape us = idx->type().shape;
  us.insert(us.begin() + axis, 1);
  Shape iotaShape(static_cast<size_t>(outRank), 1);
  iotaShape[static_cast<size_t>(axis)] = depth;
  Tensor iota(TensorType(DType::I64, iotaShape));
  for (int64_t i = 0; i < depth; ++i)
    iota.setInt(i, i);
  Value *hit = c.emit(Op::Equal, {c.reshape(idx, us), c.constant(std::move(iota))});
  c.setOutput(0, c.emit(Op::Where, {hit, on, off}));
}

// CumSum: y[..., i, ...] = sum of x[..., j, ...] over j <= i (j < i when exclusive; j >= i when
// reversed), as a constant [n, n] selection mask applied with where and reduced, which is exact
// for every dtype.
void convCumSum(ConvertCtx &c) {
  Value *x = c.input(0);
  Shape s = x->type().shape;
  int64_t r = static_cast<int64_t>(s.size());
  Shape ax = c.constInts(1, "axis");
  if (ax.size() != 1)
    c.fail("axis must be a scalar");
  int64_t axis = normAxis(c, ax[0], r);
  bool exclusive = c.attrInt("exclusive", 0) != 0, reverse = c.attrInt("reverse", 0) != 0;
  int64_t n = s[static_cast<size_t>(axis)];
  // Move the axis last, add a length-1 axis before it: [..., 1, n].
  Shape perm;
  for (int64_t d = 0; d < r; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  Value *xt = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  Shape ts = xt->type().shape;
  Shape us = ts;
  us.insert(us.end() - 1, 1);
  Tensor sel(TensorType(DType::Bool, {n, n})); // sel[i][j]: does output i take input j?
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      sel.setInt(i * n + j, reverse ? (exclusive ? j > i : j >= i) : (exclusive ? j < i : j <= i));
  Value *picked = c.emit(
      Op::Where, {c.constant(std::move(sel)), c.reshape(xt, us), c.scalar(x->type().dtype, 0.0)});
  Value *sum =
      c.emit(Op::ReduceSum, {picked},
             {{"axes", Shape{static_cast<int64_t>(us.size()) - 1}}, {"keepdims", int64_t(0)}});
  Shape inv(static_cast<size_t>(r));
  for (int64_t d = 0; d < r; ++d)
    inv[static_cast<size_t>(perm[static_cast<size_t>(d)])] = d;
  c.setOutput(0, c.emit(Op::Transpose, {sum}, {{"perm", inv}}));
}

// Resize to `sizes` (output dims) with per-axis `scales` for the coordinate mapping.
// tf_crop_and_resize: `roi` is the crop box, [starts..., ends...] over every axis.
void emitResize(ConvertCtx &c, const Shape &sizes, const std::vector<double> &scales,
                const std::string &mode, const std::string &coord, const std::string &nearest,
                const std::vector<double> &roi = {}) {
  // Scale 1 maps every coordinate to itself, except in the modes that shift or crop.
  if (sizes == c.type(0).shape && coord != "tf_crop_and_resize" &&
      coord != "tf_half_pixel_for_nn" &&
      std::all_of(scales.begin(), scales.end(), [](double s) { return s == 1.0; })) {
    c.setOutput(0, c.input(0));
    return;
  }
  AttrMap attrs = {{"sizes", sizes},
                   {"scales", scales},
                   {"mode", mode},
                   {"coordinate_transformation_mode", coord},
                   {"nearest_mode", nearest}};
  if (mode == "cubic") {
    attrs["cubic_coeff_a"] = c.attrFloat("cubic_coeff_a", -0.75);
    attrs["exclude_outside"] = c.attrInt("exclude_outside", 0);
  }
  if (coord == "tf_crop_and_resize") {
    attrs["roi"] = roi;
    attrs["extrapolation_value"] = c.attrFloat("extrapolation_value", 0.0);
  }
  c.setOutput(0, c.emit(Op::Resize, {c.input(0)}, std::move(attrs)));
}

// Output dims from scales: floor(in * scale), computed in float like the ONNX reference.
Shape sizesFromScales(const Shape &in, const std::vector<double> &scales) {
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    out.push_back(static_cast<int64_t>(
        std::floor(static_cast<float>(in[i]) * static_cast<float>(scales[i]))));
  return out;
}

std::string resizeMode(ConvertCtx &c) {
  std::string mode = c.attrStr("mode", "nearest");
  if (mode == "bilinear") // Upsample-7 accepted this spelling
    mode = "linear";
  if (mode != "nearest" && mode != "linear" && (mode != "cubic" || c.opType() == "Upsample"))
    c.fail(cat("mode '", mode, "' is not supported (nearest, linear or cubic)"));
  return mode;
}

// Upsample (7: scales attribute, 9: scales input) and Resize-10: asymmetric coordinates,
// nearest rounds down.
void convUpsample(ConvertCtx &c) {
  std::string mode = resizeMode(c);
  std::vector<double> scales = c.opset() < 9 ? c.attrFloats("scales") : c.constDoubles(1, "scales");
  const Shape &in = c.type(0).shape;
  if (scales.size() != in.size())
    c.fail(cat("scales need one value per axis of ", c.type(0).str()));
  emitResize(c, sizesFromScales(in, scales), scales, mode, "asymmetric", "floor");
}

void convResize(ConvertCtx &c) {
  if (c.opset() < 11) {
    convUpsample(c);
    return;
  }
  std::string mode = resizeMode(c);
  std::string coord = c.attrStr("coordinate_transformation_mode", "half_pixel");
  static const char *known[] = {
      "half_pixel",           "asymmetric",           "align_corners",     "pytorch_half_pixel",
      "tf_half_pixel_for_nn", "half_pixel_symmetric", "tf_crop_and_resize"};
  if (std::find(std::begin(known), std::end(known), coord) == std::end(known))
    c.fail(cat("coordinate_transformation_mode '", coord, "' is unknown"));
  std::string nearest = c.attrStr("nearest_mode", "round_prefer_floor");
  c.requireAttrDefault("antialias", 0, "antialiasing is not implemented");
  const Shape &in = c.type(0).shape;
  int64_t r = static_cast<int64_t>(in.size());
  Shape axes = c.attrIntsOpt("axes").value_or(Shape{});
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i)
      axes.push_back(i);
  for (int64_t &a : axes)
    a = normAxis(c, a, r);

  const Tensor *sizesT = c.hasInput(3) ? &c.requireConst(3, "sizes") : nullptr;
  if (sizesT && sizesT->numel() == 0)
    sizesT = nullptr;
  Shape sizes = in;
  std::vector<double> scales(in.size(), 1.0);
  if (sizesT) {
    Shape given = sizesT->toInts();
    if (given.size() != axes.size())
      c.fail(cat("sizes ", shapeStr(given), " need one value per resized axis"));
    std::string policy = c.attrStr("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t k = 0; k < axes.size(); ++k) {
        auto a = static_cast<size_t>(axes[k]);
        sizes[a] = given[k];
        scales[a] = static_cast<double>(static_cast<float>(given[k]) / static_cast<float>(in[a]));
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      float scale = policy == "not_larger" ? INFINITY : 0.0f;
      for (size_t k = 0; k < axes.size(); ++k) {
        float s = static_cast<float>(given[k]) / static_cast<float>(in[axes[k]]);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int64_t a : axes) {
        sizes[a] = static_cast<int64_t>(std::floor(static_cast<float>(in[a]) * scale + 0.5f));
        scales[a] = scale;
      }
    } else {
      c.fail(cat("keep_aspect_ratio_policy '", policy, "' is unknown"));
    }
  } else {
    std::vector<double> given = c.constDoubles(2, "scales");
    if (given.size() != axes.size())
      c.fail(cat("scales need one value per resized axis, got ", given.size()));
    for (size_t k = 0; k < axes.size(); ++k)
      scales[static_cast<size_t>(axes[k])] = given[k];
    sizes = sizesFromScales(in, scales);
  }
  // tf_crop_and_resize: the roi input, [starts, ends] over the resized axes (the others keep
  // the whole axis, [0, 1]). Output sizes from scales stay floor(in * scale), as ONNX Runtime
  // and the ONNX reference compute them.
  std::vector<double> roi;
  if (coord == "tf_crop_and_resize") {
    if (!c.hasInput(1))
      c.fail("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input");
    std::vector<double> given = c.constDoubles(1, "roi");
    if (given.size() != 2 * axes.size())
      c.fail(
          cat("roi needs 2 values per resized axis (", 2 * axes.size(), "), got ", given.size()));
    roi.assign(2 * in.size(), 0.0);
    std::fill(roi.begin() + static_cast<long>(in.size()), roi.end(), 1.0);
    for (size_t k = 0; k < axes.size(); ++k) {
      auto a = static_cast<size_t>(axes[k]);
      roi[a] = given[k];
      roi[in.size() + a] = given[axes.size() + k];
    }
  }
  emitResize(c, sizes, scales, mode, coord, nearest, roi);
}

void convDepthToSpace(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t b = c.attrIntReq("blocksize");
  if (s.size() != 4 || b < 1 || s[1] % (b * b) != 0)
    c.fail(cat("needs [N, C, H, W] with C divisible by blocksize^2, got ", c.type(0).str()));
  int64_t n = s[0], ch = s[1] / (b * b), h = s[2], w = s[3];
  bool crd = c.attrStr("mode", "DCR") == "CRD";
  Value *x = c.reshape(c.input(0), crd ? Shape{n, ch, b, b, h, w} : Shape{n, b, b, ch, h, w});
  Shape perm = crd ? Shape{0, 1, 4, 2, 5, 3} : Shape{0, 3, 4, 1, 5, 2};
  x = c.emit(Op::Transpose, {x}, {{"perm", perm}});
  c.setOutput(0, c.reshape(x, {n, ch, h * b, w * b}));
}

void convSpaceToDepth(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t b = c.attrIntReq("blocksize");
  if (s.size() != 4 || b < 1 || s[2] % b != 0 || s[3] % b != 0)
    c.fail(cat("needs [N, C, H, W] with H and W divisible by blocksize, got ", c.type(0).str()));
  // mode (SpaceToDepth-28): DCR (the default, and the only layout before) puts the block
  // offset before the channel, CRD after it (DepthToSpace's CRD inverse).
  std::string mode = c.attrStr("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    c.fail(cat("mode '", mode, "' is not DCR or CRD"));
  int64_t n = s[0], ch = s[1], h = s[2] / b, w = s[3] / b;
  Value *x = c.reshape(c.input(0), {n, ch, h, b, w, b});
  x = c.emit(Op::Transpose, {x},
             {{"perm", mode == "DCR" ? Shape{0, 3, 5, 1, 2, 4} : Shape{0, 1, 3, 5, 2, 4}}});
  c.setOutput(0, c.reshape(x, {n, ch * b * b, h, w}));
}

void checkConstantSize(const ConvertCtx &c, const TensorType &t);

// Trilu: a constant keep-mask over the last two axes selects x or zero.
void convTrilu(ConvertCtx &c) {
  Value *x = c.input(0);
  const Shape &s = x->type().shape;
  if (s.size() < 2)
    c.fail(cat("input must have rank >= 2, got ", x->type().str()));
  int64_t k = 0;
  if (c.hasInput(1)) {
    Shape kv = c.constInts(1, "k");
    if (kv.size() != 1)
      c.fail("k must be a scalar");
    k = kv[0];
  }
  bool upper = c.attrInt("upper", 1) != 0;
  int64_t rows = s[s.size() - 2], cols = s[s.size() - 1];
  // Symbolic rows or columns: mask[i, j] depends on i and j only, so the mask for any value is
  // the top-left corner of the one for the dims' maxima (a constant), cut by a slice.
  SymExpr symRows = x->type().symDim(s.size() - 2), symCols = x->type().symDim(s.size() - 1);
  bool symbolic = !symRows.isConstant() || !symCols.isConstant();
  if (symbolic) {
    rows = c.bounds(symRows, "rows").hi;
    cols = c.bounds(symCols, "columns").hi;
    checkConstantSize(c, TensorType(DType::Bool, {rows, cols}));
  }
  Tensor mask(TensorType(DType::Bool, {rows, cols}));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.setInt(i * cols + j, upper ? j - i >= k : j - i <= k);
  Value *keep = c.constant(std::move(mask));
  if (symbolic)
    keep = c.emit(Op::Slice, {keep},
                  {{"starts", Shape{0, 0}},
                   {"ends", Shape{c.planning(symRows), c.planning(symCols)}},
                   {"axes", Shape{0, 1}},
                   {"steps", Shape{1, 1}},
                   {"sym_starts", std::vector<std::string>{"0", "0"}},
                   {"sym_ends", std::vector<std::string>{symRows.str(), symCols.str()}}});
  Value *zero = c.scalar(x->type().dtype, 0.0);
  c.setOutput(0, c.emit(Op::Where, {keep, x, zero}));
}

// ---- constants --------------------------------------------------------------------------------

// A shape read at import is a constant; with symbolic dims it is a symbolic shape value (the
// planning-point dims as data, the dims' expressions beside them).
void convShape(ConvertCtx &c) {
  const Shape &s = c.type(0).shape;
  int64_t r = static_cast<int64_t>(s.size());
  int64_t start = c.attrInt("start", 0), end = c.attrInt("end", r);
  clampSlice(r, 1, start, end);
  Shape dims;
  SymElems elems;
  for (int64_t i = start; i < end; ++i) {
    dims.push_back(s[static_cast<size_t>(i)]);
    elems.push_back(c.type(0).symDim(static_cast<size_t>(i)));
  }
  int64_t n = static_cast<int64_t>(dims.size());
  c.setOutput(0, c.symConstant(Tensor::fromI64(dims, {n}), elems));
}

void convSize(ConvertCtx &c) {
  c.setOutput(0, c.symConstant(Tensor::fromI64({product(c.type(0).shape)}, {}),
                               {symProduct(c, symShapeOf(c.type(0)))}));
}

// Constants computed here from constant inputs (Range, EyeLike, windows) are allocated at once,
// so a few bytes of model could ask for gigabytes: their size is checked against the per-tensor
// limit and against kMaxComputedConstantBytes first. Real models compute position ids, masks
// and windows, far below it.
constexpr int64_t kMaxComputedConstantBytes = int64_t(256) << 20;

void checkConstantSize(const ConvertCtx &c, const TensorType &t) {
  if (std::string p = tensorSizeProblem(t); !p.empty())
    c.fail("result " + p);
  if (t.bytes() > kMaxComputedConstantBytes)
    c.fail(cat("result ", t.str(), " would be a constant of ", t.bytes(),
               " bytes computed at import, above the limit of ", kMaxComputedConstantBytes));
  c.checkComputeBudget(t.bytes());
}

// A small result is a constant; a large one is its single value broadcast (an expand, which
// readers fold as an index map), so that neither the importer nor weights.bin holds it.
void convConstantOfShape(ConvertCtx &c) {
  if (symInput(c, 0)) { // a symbolic shape: the value broadcast to it, never a weight
    SymElems shape = c.symInts(0, "shape");
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i].isConstant() && shape[i].constant() < 1)
        c.fail(cat("shape ", symElemsStr(shape), " has a dim < 1"));
      requireDimNonNegative(c, shape[i], cat("dim ", i));
    }
    std::optional<Tensor> value = c.attrTensor("value");
    if (value && value->numel() != 1)
      c.fail(cat("value must hold one element, got ", value->type().str()));
    Value *one = value ? c.constant(Tensor(TensorType(value->dtype(), {}), value->bytes()))
                       : c.scalar(DType::F32, 0.0);
    c.setOutput(0, c.emit(Op::Expand, {one}, symShapeAttrs(c, shape)));
    return;
  }
  Shape shape = c.constInts(0, "shape");
  for (int64_t d : shape)
    if (d < 0)
      c.fail(cat("shape ", shapeStr(shape), " has a negative dim"));
  std::optional<Tensor> value = c.attrTensor("value");
  if (value && value->numel() != 1)
    c.fail(cat("value must hold one element, got ", value->type().str()));
  TensorType type(value ? value->dtype() : DType::F32, shape);
  if (std::string p = tensorSizeProblem(type); !p.empty())
    c.fail("result " + p);
  if (!ConvertCtx::foldable(type)) {
    Value *one = value ? c.constant(Tensor(TensorType(value->dtype(), {}), value->bytes()))
                       : c.scalar(DType::F32, 0.0);
    c.setOutput(0, c.emit(Op::Expand, {one}, {{"shape", shape}}));
    return;
  }
  Tensor out(type);
  if (value && out.numel() > 0) {
    size_t es = dtypeSize(out.dtype());
    for (int64_t i = 0; i < out.numel(); ++i)
      std::memcpy(out.raw() + i * es, value->raw(), es);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

// Range to a symbolic limit (position ids: Range(0, seq)): the values do not depend on the
// limit, only the count does, so it is the first `limit - start` elements of the range to the
// limit's maximum, a constant, by a slice with a symbolic end. From a constant start by step 1.
void rangeSym(ConvertCtx &c) {
  SymElems start = c.symInts(0, "start"), limit = c.symInts(1, "limit"),
           delta = c.symInts(2, "delta");
  if (start.size() != 1 || limit.size() != 1 || delta.size() != 1)
    c.fail("start, limit and delta must be scalars");
  if (!start[0].isConstant() || delta[0] != SymExpr(1))
    c.fail(cat("Range(", start[0].str(), ", ", limit[0].str(), ", ", delta[0].str(),
               ") over symbolic dims is supported from a constant start by step 1 only"));
  SymExpr n = symOk(c, SymExpr::sub(limit[0], start[0]));
  SymBounds b = c.bounds(n, "element count");
  if (b.lo < 1)
    c.fail(cat("the range has ", n.str(), " elements, not >= 1 for every value of the dims",
               c.rangesOf(n)));
  DType t = c.type(0).dtype;
  checkConstantSize(c, TensorType(t, {b.hi}));
  Tensor full(TensorType(t, {b.hi}));
  for (int64_t i = 0; i < b.hi; ++i)
    full.setInt(i, start[0].constant() + i);
  c.setOutput(0, c.emit(Op::Slice, {c.constant(std::move(full))},
                        {{"starts", Shape{0}},
                         {"ends", Shape{c.planning(n)}},
                         {"axes", Shape{0}},
                         {"steps", Shape{1}},
                         {"sym_starts", std::vector<std::string>{"0"}},
                         {"sym_ends", std::vector<std::string>{n.str()}}}));
}

void convRange(ConvertCtx &c) {
  if (symInput(c, 0) || symInput(c, 1) || symInput(c, 2)) {
    rangeSym(c);
    return;
  }
  const Tensor &start = c.requireConst(0, "start"), &limit = c.requireConst(1, "limit"),
               &delta = c.requireConst(2, "delta");
  for (const Tensor *t : {&start, &limit, &delta})
    if (t->numel() != 1)
      c.fail(cat("start, limit and delta must be scalars, got ", t->type().str()));
  DType t = start.dtype();
  Tensor out;
  if (isFloat(t)) {
    double s = start.getDouble(0), l = limit.getDouble(0), d = delta.getDouble(0);
    if (d == 0)
      c.fail("delta must not be 0");
    double count = std::ceil((l - s) / d);
    if (!(count <= static_cast<double>(kMaxTensorElements))) // also NaN
      c.fail(cat("result has ", count, " elements, above the limit of ", kMaxTensorElements,
                 " per tensor"));
    auto n = static_cast<int64_t>(std::max(0.0, count));
    checkConstantSize(c, TensorType(t, {n}));
    out = Tensor(TensorType(t, {n}));
    for (int64_t i = 0; i < n; ++i)
      out.setDouble(i, s + static_cast<double>(i) * d);
  } else {
    int64_t s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0)
      c.fail("delta must not be 0");
    // In 128 bits: l - s + d can overflow int64.
    __int128 count = (static_cast<__int128>(l) - s + d + (d > 0 ? -1 : 1)) / d;
    if (count > kMaxTensorElements)
      c.fail(cat("result has more than ", kMaxTensorElements, " elements, the limit per tensor"));
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
    checkConstantSize(c, TensorType(t, {n}));
    out = Tensor(TensorType(t, {n}));
    for (int64_t i = 0; i < n; ++i)
      out.setInt(i, s + i * d);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

void convConstant(ConvertCtx &c) {
  if (c.hasAttr("sparse_value"))
    c.fail("sparse_value is not supported");
  if (c.hasAttr("value_string") || c.hasAttr("value_strings"))
    c.fail("string constants are not supported");
  Tensor t;
  if (c.hasAttr("value")) {
    t = *c.attrTensor("value");
  } else if (c.hasAttr("value_float")) {
    t = Tensor::scalarF32(static_cast<float>(c.attrFloat("value_float", 0)));
  } else if (c.hasAttr("value_floats")) {
    std::vector<double> v = c.attrFloats("value_floats");
    t = Tensor::fromF32(std::vector<float>(v.begin(), v.end()), {static_cast<int64_t>(v.size())});
  } else if (c.hasAttr("value_int")) {
    t = Tensor::fromI64({c.attrInt("value_int", 0)}, {});
  } else if (c.hasAttr("value_ints")) {
    Shape v = c.attrInts("value_ints");
    t = Tensor::fromI64(v, {static_cast<int64_t>(v.size())});
  } else {
    c.fail("has no value attribute");
  }
  c.setOutput(0, c.modelConstant(std::move(t))); // the model's data: not charged
}

void convEyeLike(ConvertCtx &c) {
  const TensorType &in = c.type(0);
  if (in.rank() != 2)
    c.fail(cat("input must be 2-D, got ", in.str()));
  DType t =
      c.hasAttr("dtype") ? castTarget(c, static_cast<int32_t>(c.attrInt("dtype", 1))) : in.dtype;
  int64_t k = c.attrInt("k", 0);
  if (!in.isStatic() || in.isSymbolic())
    c.fail(cat("input must have a static shape, got ", in.str()));
  checkConstantSize(c, TensorType(t, in.shape));
  Tensor out(TensorType(t, in.shape));
  for (int64_t i = 0; i < in.shape[0]; ++i)
    if (i + k >= 0 && i + k < in.shape[1])
      out.setDouble(i * in.shape[1] + i + k, 1.0);
  c.setOutput(0, c.constant(std::move(out)));
}

// Hann, Hamming and Blackman windows of a constant size: constants.
void convWindow(ConvertCtx &c) {
  Shape sz = c.constInts(0, "size");
  if (sz.size() != 1 || sz[0] < 0)
    c.fail("size must be a non-negative scalar");
  int64_t n = sz[0];
  DType t = castTarget(c, static_cast<int32_t>(c.attrInt("output_datatype", 1)));
  double denom = static_cast<double>(c.attrInt("periodic", 1) ? n : n - 1);
  checkConstantSize(c, TensorType(t, {n}));
  Tensor out(TensorType(t, {n}));
  for (int64_t i = 0; i < n; ++i) {
    double a = denom > 0 ? 2.0 * std::numbers::pi * static_cast<double>(i) / denom : 0.0, v;
    if (c.opType() == "HannWindow")
      v = 0.5 - 0.5 * std::cos(a);
    else if (c.opType() == "HammingWindow")
      v = 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * std::cos(a);
    else
      v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    out.setDouble(i, v);
  }
  c.setOutput(0, c.constant(std::move(out)));
}

// Identity disappears: its output is its input.
void convIdentity(ConvertCtx &c) {
  alias(c, 0, c.input(0));
}

// Dropout at inference is the identity; its mask (if read) is all ones.
void convDropout(ConvertCtx &c) {
  if (c.opset() >= 12 && c.hasInput(2)) {
    const Tensor &training = c.requireConst(2, "training_mode");
    if (training.numel() != 1)
      c.fail("training_mode is not one value");
    if (training.getInt(0) != 0) {
      // Training mode drops at random unless the ratio is 0: then it is the identity too.
      const Tensor *ratio =
          c.hasInput(1) ? &c.requireConst(1, "ratio of a training-mode Dropout") : nullptr;
      if (!ratio || ratio->numel() != 1 || ratio->getDouble(0) != 0.0)
        c.fail("training-mode Dropout with a ratio other than 0 is random (not supported: "
               "inference only)");
    }
  }
  Value *x = c.input(0);
  alias(c, 0, x);
  if (c.outputUsed(1) && x->type().isSymbolic()) { // all ones, broadcast to x's dims
    Tensor one(TensorType(c.opset() >= 10 ? DType::Bool : x->type().dtype, {}));
    one.setDouble(0, 1.0);
    c.setOutput(1, c.emit(Op::Expand, {c.constant(std::move(one))},
                          symShapeAttrs(c, symShapeOf(x->type()))));
  } else if (c.outputUsed(1)) {
    Tensor mask(TensorType(c.opset() >= 10 ? DType::Bool : x->type().dtype, x->type().shape));
    for (int64_t i = 0; i < mask.numel(); ++i)
      mask.setDouble(i, 1.0);
    c.setOutput(1, c.constant(std::move(mask)));
  }
}

// ---- the table --------------------------------------------------------------------------------

constexpr OnnxOpEntry kTable[] = {
    // op type                   since  converter
    {"Abs", 1, convUnary<Op::Abs>},
    {"Acosh", 9, convInverseHyperbolic},
    {"Add", 1, convBinary<Op::Add>},
    {"And", 1, convBinary<Op::And>},
    {"ArgMax", 1, convArg<Op::ArgMax>},
    {"ArgMin", 1, convArg<Op::ArgMin>},
    {"Asinh", 9, convInverseHyperbolic},
    {"Atanh", 9, convInverseHyperbolic},
    {"Attention", 23, convAttention},
    {"AveragePool", 1, convPool<Op::AvgPool>},
    {"BatchNormalization", 1, convBatchNorm},
    {"BlackmanWindow", 17, convWindow},
    {"Cast", 1, convCast},
    {"CastLike", 15, convCastLike},
    {"Ceil", 1, convUnary<Op::Ceil>},
    {"Celu", 12, convCelu},
    {"Clip", 1, convClip},
    {"Compress", 9, convCompress},
    {"Concat", 1, convConcat},
    {"Constant", 1, convConstant},
    {"ConstantOfShape", 9, convConstantOfShape},
    {"Conv", 1, convConv},
    {"ConvTranspose", 1, convConvTranspose},
    {"Cos", 7, convUnary<Op::Cos>},
    {"Cosh", 9, convSinhCosh},
    {"CumSum", 11, convCumSum},
    {"DepthToSpace", 1, convDepthToSpace},
    {"Div", 1, convBinary<Op::Div>},
    {"Dropout", 1, convDropout},
    {"Elu", 1, convElu},
    {"Equal", 1, convBinary<Op::Equal>},
    {"Erf", 9, convUnary<Op::Erf>},
    {"Exp", 1, convUnary<Op::Exp>},
    {"Expand", 8, convExpand},
    {"EyeLike", 9, convEyeLike},
    {"Flatten", 1, convFlatten},
    {"Floor", 1, convUnary<Op::Floor>},
    {"Gather", 1, convGather},
    {"GatherElements", 11, convGatherElements},
    {"GatherND", 11, convGatherND},
    {"Gelu", 20, convGelu},
    {"Gemm", 1, convGemm},
    {"GlobalAveragePool", 1, convUnary<Op::GlobalAvgPool>},
    {"GlobalMaxPool", 1, convUnary<Op::GlobalMaxPool>},
    {"Greater", 1, convBinary<Op::Greater>},
    {"GreaterOrEqual", 12, convBinary<Op::GreaterEqual>},
    {"HammingWindow", 17, convWindow},
    {"HannWindow", 17, convWindow},
    {"HardSigmoid", 1, convHardSigmoid},
    {"HardSwish", 14, convUnary<Op::HardSwish>},
    {"Hardmax", 1, convHardmax},
    {"Identity", 1, convIdentity},
    {"InstanceNormalization", 1, convInstanceNorm},
    {"IsInf", 10, convIsInf},
    {"IsNaN", 9, convIsNaN},
    {"LRN", 1, convLrn},
    {"LSTM", 7, convLstm},
    {"LayerNormalization", 17, convLayerNorm},
    {"LeakyRelu", 1, convLeakyRelu},
    {"Less", 1, convBinary<Op::Less>},
    {"LessOrEqual", 12, convBinary<Op::LessEqual>},
    {"Log", 1, convUnary<Op::Log>},
    {"LogSoftmax", 1, convSoftmax<Op::LogSoftmax>},
    {"LpNormalization", 1, convLpNorm},
    {"MatMul", 1, convMatMul},
    {"Max", 1, convVariadic<Op::Max>},
    {"MaxPool", 1, convPool<Op::MaxPool>},
    {"Mean", 1, convSumMean},
    {"MeanVarianceNormalization", 9, convMeanVarianceNorm},
    {"Min", 1, convVariadic<Op::Min>},
    {"Mish", 18, convMish},
    {"Mod", 10, convMod},
    {"BitShift", 11, convBitShift},
    {"Mul", 1, convBinary<Op::Mul>},
    {"Neg", 1, convUnary<Op::Neg>},
    {"NonMaxSuppression", 10, convNonMaxSuppression},
    {"Unique", 11, convUnique},
    {"NonZero", 9, convNonZero},
    {"NegativeLogLikelihoodLoss", 12, convNllLoss},
    {"Not", 1, convUnary<Op::Not>},
    {"OneHot", 9, convOneHot},
    {"Or", 1, convBinary<Op::Or>},
    {"PRelu", 1, convPRelu},
    {"Pad", 1, convPad},
    {"Pow", 1, convPow},
    {"RMSNormalization", 23, convRmsNorm},
    {"Range", 11, convRange},
    {"Reciprocal", 1, convUnary<Op::Reciprocal>},
    {"ReduceL1", 1, convReduce<Op::ReduceL1>},
    {"ReduceL2", 1, convReduce<Op::ReduceL2>},
    {"ReduceLogSum", 1, convReduceLogSum},
    {"ReduceLogSumExp", 1, convReduce<Op::ReduceLogSumExp>},
    {"ReduceMax", 1, convReduce<Op::ReduceMax>},
    {"ReduceMean", 1, convReduce<Op::ReduceMean>},
    {"ReduceMin", 1, convReduce<Op::ReduceMin>},
    {"ReduceProd", 1, convReduce<Op::ReduceProd>},
    {"ReduceSum", 1, convReduce<Op::ReduceSum>},
    {"ReduceSumSquare", 1, convReduce<Op::ReduceSumSquare>},
    {"Relu", 1, convUnary<Op::Relu>},
    {"Reshape", 1, convReshape},
    {"Resize", 10, convResize},
    {"Round", 11, convUnary<Op::Round>},
    {"Scatter", 9, convScatterElements},
    {"ScatterElements", 11, convScatterElements},
    {"ScatterND", 11, convScatterND},
    {"Selu", 1, convSelu},
    {"Shape", 1, convShape},
    {"Shrink", 9, convShrink},
    {"Sigmoid", 1, convUnary<Op::Sigmoid>},
    {"Sign", 9, convUnary<Op::Sign>},
    {"Sin", 7, convUnary<Op::Sin>},
    {"Sinh", 9, convSinhCosh},
    {"Size", 1, convSize},
    {"Slice", 1, convSlice},
    {"Softmax", 1, convSoftmax<Op::Softmax>},
    {"SoftmaxCrossEntropyLoss", 12, convSoftmaxCrossEntropy},
    {"Softplus", 1, convUnary<Op::Softplus>},
    {"Softsign", 1, convSoftsign},
    {"SpaceToDepth", 1, convSpaceToDepth},
    {"Split", 1, convSplit},
    {"Sqrt", 1, convUnary<Op::Sqrt>},
    {"Squeeze", 1, convSqueeze},
    {"Sub", 1, convBinary<Op::Sub>},
    {"Sum", 1, convSumMean},
    {"Tan", 7, convTan},
    {"Tanh", 1, convUnary<Op::Tanh>},
    {"ThresholdedRelu", 10, convThresholdedRelu},
    {"Tile", 6, convTile},
    {"Transpose", 1, convTranspose},
    {"TopK", 1, convTopK},
    {"Trilu", 14, convTrilu},
    {"Unsqueeze", 1, convUnsqueeze},
    {"Upsample", 7, convUpsample},
    {"Where", 9, convWhere},
    {"Xor", 1, convBinary<Op::Xor>},
};

} // namespace

std::span<const OnnxOpEntry> onnxOpTable() {
  return kTable;
}

const OnnxOpEntry *findOnnxOp(std::string_view opType) {
  for (const OnnxOpEntry &e : kTable)
    if (opType == e.opType)
      return &e;
  return nullptr;
}

} // namespace aicf
