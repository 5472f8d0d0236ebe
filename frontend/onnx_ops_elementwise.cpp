// Elementwise ONNX ops: unary and binary arithmetic, activations, casts, comparisons, Where.
// Converters of the ONNX op table (onnx_ops.cpp; conventions in its comment).
#include "frontend/onnx_ops_internal.h"

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

namespace aicf::onnx_ops {

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

// The instances the table (onnx_ops.cpp) names.
template void convUnary<Op::Abs>(ConvertCtx &);
template void convBinary<Op::Add>(ConvertCtx &);
template void convBinary<Op::And>(ConvertCtx &);
template void convUnary<Op::Ceil>(ConvertCtx &);
template void convUnary<Op::Cos>(ConvertCtx &);
template void convBinary<Op::Div>(ConvertCtx &);
template void convBinary<Op::Equal>(ConvertCtx &);
template void convUnary<Op::Erf>(ConvertCtx &);
template void convUnary<Op::Exp>(ConvertCtx &);
template void convUnary<Op::Floor>(ConvertCtx &);
template void convUnary<Op::GlobalAvgPool>(ConvertCtx &);
template void convUnary<Op::GlobalMaxPool>(ConvertCtx &);
template void convBinary<Op::Greater>(ConvertCtx &);
template void convBinary<Op::GreaterEqual>(ConvertCtx &);
template void convUnary<Op::HardSwish>(ConvertCtx &);
template void convBinary<Op::Less>(ConvertCtx &);
template void convBinary<Op::LessEqual>(ConvertCtx &);
template void convUnary<Op::Log>(ConvertCtx &);
template void convVariadic<Op::Max>(ConvertCtx &);
template void convVariadic<Op::Min>(ConvertCtx &);
template void convBinary<Op::Mul>(ConvertCtx &);
template void convUnary<Op::Neg>(ConvertCtx &);
template void convUnary<Op::Not>(ConvertCtx &);
template void convBinary<Op::Or>(ConvertCtx &);
template void convUnary<Op::Reciprocal>(ConvertCtx &);
template void convUnary<Op::Relu>(ConvertCtx &);
template void convUnary<Op::Round>(ConvertCtx &);
template void convUnary<Op::Sigmoid>(ConvertCtx &);
template void convUnary<Op::Sign>(ConvertCtx &);
template void convUnary<Op::Sin>(ConvertCtx &);
template void convUnary<Op::Softplus>(ConvertCtx &);
template void convUnary<Op::Sqrt>(ConvertCtx &);
template void convBinary<Op::Sub>(ConvertCtx &);
template void convUnary<Op::Tanh>(ConvertCtx &);
template void convBinary<Op::Xor>(ConvertCtx &);

} // namespace aicf::onnx_ops
