// Scalar Kernel IR expressions for the values of a kernel group (see group_expr.h): every
// elementwise op of ir/ops.def (which are also the contraction epilogue steps), numpy broadcasting
// of indices, and GroupExpr, which inlines a group's elementwise nodes into the recipe that asks
// for a value.
//
// Semantics follow the interpreter (interp/kernels.cpp): float ops compute in f32 here (the
// interpreter uses double and rounds once, so results agree to an f32 rounding per op); integer
// ops compute in i64 with wrap-around and narrow to the result dtype after every node, so a
// fused chain gives the interpreter's values exactly; integer division truncates; min/max and
// clip propagate NaN; round is half-to-even; float -> integer casts truncate toward zero, give
// 0 for NaN and saturate. Where the interpreter reports an error (integer division by zero) the
// kernel yields 0 instead of trapping. f16/bf16 values are widened to f32 by their loads,
// computed in f32 and rounded to their dtype after every node, as the interpreter does.
#include "lower/group_expr.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aicf {

using kir::BinOp;
using kir::E;
using kir::UnOp;

namespace {

E ne(E a, E b) {
  return kir::binary(BinOp::Ne, std::move(a), std::move(b));
}
E orE(E a, E b) {
  return kir::binary(BinOp::Or, std::move(a), std::move(b));
}
E isNaN(const E &x) {
  return ne(x, x);
}

// NaN-propagating min / max, like numpy.minimum / maximum (and the interpreter).
E nanMin(E a, E b) {
  return kir::select(orE(a < b, isNaN(a)), a, b);
}
E nanMax(E a, E b) {
  return kir::select(orE(a > b, isNaN(a)), a, b);
}

E sigmoid(E x) {
  return kir::unary(UnOp::Sigmoid, x);
}

// The constant value of a scalar weight operand, if it is one.
bool scalarConstant(const Value *v, double &out) {
  if (!v->hasData() || v->data()->numel() != 1)
    return false;
  out = v->data()->getDouble(0);
  return true;
}

// One node's scalar expression. Floats compute in `ft_` (f64 when the node reads or makes f64,
// else f32: f16 / bf16 loads are already widened), integers in `it_` (u64 when the node reads or
// makes u64, else i64) and narrow to the result dtype.
class NodeExpr {
public:
  explicit NodeExpr(const Node &n) : n_(n) {
    auto any = [&](DType t) {
      if (n.result(0)->type().dtype == t)
        return true;
      for (const Value *o : n.operands())
        if (o->type().dtype == t)
          return true;
      return false;
    };
    ft_ = any(DType::F64) ? DType::F64 : DType::F32;
    it_ = any(DType::U64) ? DType::U64 : DType::I64;
  }

  E expr(const std::vector<E> &ops) const;

private:
  E f(double v) const { return kir::fconst(v, ft_); }
  E izero() const { return kir::cast(E(int64_t(0)), it_); }
  E toF(E e) const {
    return e->type == ft_ || (isFloat(e->type) && e->type != DType::F64 && ft_ == DType::F32)
               ? e
               : kir::cast(e, ft_);
  }
  E toI(E e) const { return e->type == it_ ? e : kir::cast(e, it_); }

  // An integer result narrowed to its dtype (wrap-around), as the interpreter stores it.
  E narrowInt(E e, DType t) const {
    if (t == it_)
      return toI(e);
    if (t == DType::Bool)
      return ne(toI(e), izero());
    return kir::cast(toI(e), t);
  }

  // Float -> integer truncating toward zero; NaN gives 0; out-of-range values saturate (i64:
  // to the largest float below 2^63, the nearest the float arithmetic can express). u64: values
  // from 2^63 convert directly.
  E floatToInt(E x) const {
    const double lim = ft_ == DType::F64 ? 9.2233720368547748e18 // < 2^63, exact in f64
                                         : 9.2233714e18;         // < 2^63, exact in f32
    E c = kir::select(x > f(lim), f(lim), kir::select(x < f(-lim), f(-lim), x));
    E s = kir::select(isNaN(x), E(int64_t(0)), kir::cast(c, DType::I64));
    if (it_ != DType::U64)
      return s;
    const double two63 = 9.2233720368547758e18,
                 umax = ft_ == DType::F64 ? 1.8446744073709550e19 : 1.8446743e19;
    return kir::select(x >= f(two63), kir::cast(kir::select(x > f(umax), f(umax), x), DType::U64),
                       kir::cast(s, DType::U64));
  }

  E geluErf(E x) const {
    return f(0.5) * x * (f(1.0) + kir::unary(UnOp::Erf, x * f(0.7071067811865476)));
  }

  // 0.5 * x * (1 + tanh(u)) is x * sigmoid(2u) exactly ((1 + tanh u) / 2 = sigmoid(2u)): one
  // exp and one division instead of tanh's two branches, and no cancellation in 1 + tanh(u) for
  // large negative x, where the tanh form loses every digit of its small result.
  E geluTanh(E x) const {
    E twiceInner = f(1.5957691216057308) * (x + f(0.044715) * x * x * x);
    return x * sigmoid(twiceInner);
  }

  // Round half to even: the round primitive, which both printers write as a half-to-even
  // rounding (std::nearbyint in the default rounding mode, which nothing in a plan changes;
  // CUDA's rintf), one instruction where a floor-based spelling read x eight times.
  E roundHalfEven(E x) const { return kir::unary(UnOp::Round, x); }

  // log(1 + e) for e in [0, 1], accurate for small e (a log1p without the library call).
  E log1pSmall(E e) const {
    return kir::select(e < f(1e-4), e * (f(1.0) - f(0.5) * e), kir::unary(UnOp::Log, f(1.0) + e));
  }

  // softplus(x) = max(x, 0) + log1p(exp(-|x|)): the interpreter's stable form.
  E softplus(E x) const {
    E e = kir::unary(UnOp::Exp, kir::unary(UnOp::Neg, kir::unary(UnOp::Abs, x)));
    return kir::select(x > f(0.0), x, f(0.0)) + log1pSmall(e);
  }

  // e^x - 1 for x <= 0, with a short series near 0 where exp(x) - 1 would cancel.
  E expm1Neg(E x) const {
    E series = x * (f(1.0) + x * (f(0.5) + x * (f(1.0 / 6.0) + x * f(1.0 / 24.0))));
    return kir::select(x > f(-1e-2), series, kir::unary(UnOp::Exp, x) - f(1.0));
  }

  E powExpr(E a, E b, DType outT) const {
    if (isFloat(outT)) {
      double c = 0;
      if (scalarConstant(n_.operand(1), c)) {
        // Exponents exporters write (x^2 in norms, x^3 in tanh-GELU): exact products.
        if (c == 1.0)
          return toF(a);
        if (c == 2.0)
          return toF(a) * toF(a);
        if (c == 3.0)
          return toF(a) * toF(a) * toF(a);
        if (c == 0.5)
          return kir::unary(UnOp::Sqrt, toF(a));
      }
      return kir::binary(BinOp::Pow, toF(a), toF(b));
    }
    // Integer base: the interpreter raises in int64 (float exponents via double, truncated).
    // Through double pow, exact below 2^53.
    E r = kir::binary(BinOp::Pow, kir::cast(a, DType::F64), kir::cast(b, DType::F64));
    NodeExpr d = *this;
    d.ft_ = DType::F64;
    return narrowInt(d.floatToInt(r), outT);
  }

  E castExpr(E x, DType from, DType to) const {
    if (from == to)
      return x;
    if (to == DType::Bool)
      return isFloat(from) ? ne(x, f(0.0)) : ne(toI(x), izero());
    if (isFloat(to)) { // to f16/bf16: elementwiseExpr rounds the f32 value
      DType ct = to == DType::F64 ? DType::F64 : DType::F32;
      return x->type == ct ? x : kir::cast(x, ct);
    }
    if (isFloat(from))
      return narrowInt(floatToInt(x), to);
    return narrowInt(x, to); // integer or bool -> integer: widen, then wrap
  }

  // Integer division truncating toward zero; a zero divisor gives 0 (the interpreter reports an
  // error) and INT64_MIN / -1 wraps, instead of trapping.
  E intDiv(E a, E b) const {
    E zero = izero(), one = kir::cast(E(int64_t(1)), it_);
    if (it_ == DType::U64)
      return kir::select(b == zero, zero, a / kir::select(b == zero, one, b));
    E minus1 = E(int64_t(-1));
    E safe = kir::select(orE(b == zero, b == minus1), one, b);
    return kir::select(b == zero, zero, kir::select(b == minus1, zero - a, a / safe));
  }

  const Node &n_;
  DType ft_ = DType::F32, it_ = DType::I64;
};

} // namespace

E elementwiseExpr(const Node &n, const std::vector<E> &ops) {
  E e = NodeExpr(n).expr(ops);
  // f16 / bf16 results are rounded to their dtype, as the interpreter stores every node's
  // result (the cast prints as a round trip through the narrow type and stays a float).
  DType outT = n.result(0)->type().dtype;
  // (Arithmetic on f16-typed operands is itself typed f16: go through f32 so the cast is kept.)
  if (outT == DType::F16 || outT == DType::BF16)
    return kir::cast(kir::cast(e, DType::F32), outT);
  return e;
}

E NodeExpr::expr(const std::vector<E> &ops) const {
  const Node &n = n_;
  const OpInfo &info = n.info();
  if (!info.has(EW))
    throw InternalError(
        cat("elementwiseExpr: ", n.name(), " (", n.where(), ") is not an elementwise op"));
  AICF_CHECK(ops.size() == n.numOperands(), n.name(), ": ", ops.size(), " operands for ",
             n.numOperands());
  for (const E &o : ops)
    AICF_CHECK(o, n.name(), ": null operand expression");
  DType outT = n.result(0)->type().dtype;
  DType inT = n.operand(0)->type().dtype;
  bool fl = isFloat(inT);
  const E &x = ops[0];

  // Integer arithmetic in i64, narrowed to the result dtype.
  auto intBin = [&](BinOp op) {
    return narrowInt(kir::binary(op, toI(ops[0]), toI(ops[1])), outT);
  };

  switch (n.op()) {
  case Op::Identity: return x;
  case Op::Neg: return fl ? kir::unary(UnOp::Neg, x) : narrowInt(izero() - toI(x), outT);
  case Op::Abs:
    if (fl)
      return kir::unary(UnOp::Abs, x);
    return narrowInt(kir::select(toI(x) < izero(), izero() - toI(x), toI(x)), outT);
  case Op::Sqrt: return kir::unary(UnOp::Sqrt, toF(x));
  case Op::Reciprocal: return f(1.0) / toF(x);
  case Op::Exp: return kir::unary(UnOp::Exp, toF(x));
  case Op::Log: return kir::unary(UnOp::Log, toF(x));
  case Op::Erf: return kir::unary(UnOp::Erf, toF(x));
  case Op::Tanh: return kir::unary(UnOp::Tanh, toF(x));
  case Op::Sigmoid: return sigmoid(toF(x));
  case Op::Relu:
    if (fl)
      return kir::select(x < f(0.0), f(0.0), x); // keeps NaN
    return narrowInt(kir::select(toI(x) < izero(), izero(), toI(x)), outT);
  case Op::Softplus: return softplus(toF(x));
  case Op::Floor: return kir::unary(UnOp::Floor, toF(x));
  case Op::Ceil: return kir::unary(UnOp::Ceil, toF(x));
  case Op::Round: return roundHalfEven(toF(x));
  case Op::Sign:
    if (fl) // NaN stays NaN; +-0 give 0
      return kir::select(x > f(0.0), f(1.0), kir::select(x < f(0.0), f(-1.0), x * f(0.0)));
    return narrowInt(kir::select(toI(x) > izero(), E(int64_t(1)),
                                 kir::select(toI(x) < izero(), E(int64_t(-1)), izero())),
                     outT);
  case Op::Sin: return kir::unary(UnOp::Sin, toF(x));
  case Op::Cos: return kir::unary(UnOp::Cos, toF(x));
  case Op::Not: return kir::unary(UnOp::Not, x);
  case Op::LeakyRelu: {
    E v = toF(x);
    return kir::select(v < f(0.0), f(n.f("alpha")) * v, v);
  }
  case Op::Elu: {
    E v = toF(x);
    return kir::select(v < f(0.0), f(n.f("alpha")) * expm1Neg(v), v);
  }
  case Op::HardSigmoid: {
    E v = f(n.f("alpha")) * toF(x) + f(n.f("beta"));
    return kir::max(f(0.0), kir::min(f(1.0), v));
  }
  case Op::HardSwish: {
    E v = toF(x);
    return v * kir::max(f(0.0), kir::min(f(1.0), v / f(6.0) + f(0.5)));
  }
  case Op::Clip: {
    double lo = n.f("min"), hi = n.f("max");
    if (fl) { // min(max(x, lo), hi) with std::max / std::min: NaN passes through
      E v = x;
      if (lo != -INFINITY) // the default bounds are +-inf: no comparison needed
        v = kir::select(v < f(lo), f(lo), v);
      if (hi != INFINITY)
        v = kir::select(f(hi) < v, f(hi), v);
      return v;
    }
    auto trunc = [](double d) -> int64_t {
      if (std::isnan(d))
        return 0;
      if (d >= 9.2233720368547758e18)
        return std::numeric_limits<int64_t>::max();
      if (d <= -9.2233720368547758e18)
        return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(d);
    };
    E v = toI(x);
    if (lo != -INFINITY)
      v = kir::select(v < E(trunc(lo)), E(trunc(lo)), v);
    if (hi != INFINITY)
      v = kir::select(E(trunc(hi)) < v, E(trunc(hi)), v);
    return narrowInt(v, outT);
  }
  case Op::Cast: return castExpr(x, inT, outT);
  case Op::Gelu:
    if (n.s("approximate") == "tanh")
      return geluTanh(toF(x));
    if (n.s("approximate") == "none")
      return geluErf(toF(x));
    throw UserError(cat(n.where(), ": gelu: approximate must be \"none\" or \"tanh\", got \"",
                        n.s("approximate"), "\""));
  case Op::Silu: return toF(x) * sigmoid(toF(x));

  case Op::Add: return fl ? ops[0] + ops[1] : intBin(BinOp::Add);
  case Op::Sub: return fl ? ops[0] - ops[1] : intBin(BinOp::Sub);
  case Op::Mul: return fl ? ops[0] * ops[1] : intBin(BinOp::Mul);
  case Op::Div: return fl ? ops[0] / ops[1] : narrowInt(intDiv(toI(ops[0]), toI(ops[1])), outT);
  case Op::Pow: return powExpr(ops[0], ops[1], outT);
  case Op::Min:
  case Op::Max: {
    bool isMin = n.op() == Op::Min;
    E acc = fl ? ops[0] : toI(ops[0]);
    for (size_t k = 1; k < ops.size(); ++k) {
      if (fl)
        acc = isMin ? nanMin(acc, ops[k]) : nanMax(acc, ops[k]);
      else
        acc = isMin ? kir::min(acc, toI(ops[k])) : kir::max(acc, toI(ops[k]));
    }
    return fl ? acc : narrowInt(acc, outT);
  }
  case Op::Equal:
  case Op::Less:
  case Op::LessEqual:
  case Op::Greater:
  case Op::GreaterEqual: {
    // Floats compare as f32 values, everything else as i64 (bool included).
    E a = fl ? ops[0] : toI(ops[0]), b = fl ? ops[1] : toI(ops[1]);
    switch (n.op()) {
    case Op::Equal: return a == b;
    case Op::Less: return a < b;
    case Op::LessEqual: return a <= b;
    case Op::Greater: return a > b;
    default: return a >= b;
    }
  }
  case Op::And: return ops[0] && ops[1];
  case Op::Or: return orE(ops[0], ops[1]);
  case Op::Xor: return ne(ops[0], ops[1]);
  case Op::Where: return kir::select(ops[0], ops[1], ops[2]);
  default: break;
  }
  throw InternalError(cat("elementwiseExpr: no expression for elementwise op ", n.name()));
}

E epilogueStepExpr(const EpilogueStep &step, E acc, E operand) {
  AICF_CHECK(step.takesOperand() == static_cast<bool>(operand), "epilogue step '", step.str(),
             "': ", step.takesOperand() ? "needs its operand" : "takes no operand");
  // The step's op on f32 values: the op's own expression (f32 results are not re-rounded).
  StepNode sn = stepNode(step);
  std::vector<E> ops = {std::move(acc)};
  if (operand)
    ops.push_back(std::move(operand));
  return elementwiseExpr(*sn.node, ops);
}

std::vector<E> broadcastIndex(const std::vector<int64_t> &from, const std::vector<int64_t> &to,
                              const std::vector<E> &idx) {
  AICF_CHECK(idx.size() == to.size(), "broadcastIndex: ", idx.size(), " indices for rank ",
             to.size());
  AICF_CHECK(from.size() <= to.size(), "broadcastIndex: cannot broadcast ", shapeStr(from), " to ",
             shapeStr(to));
  size_t lead = to.size() - from.size();
  std::vector<E> out;
  out.reserve(from.size());
  for (size_t d = 0; d < from.size(); ++d) {
    AICF_CHECK(from[d] == to[lead + d] || from[d] == 1, "broadcastIndex: cannot broadcast ",
               shapeStr(from), " to ", shapeStr(to));
    out.push_back(from[d] == 1 ? E(int64_t(0)) : idx[lead + d]);
  }
  return out;
}

E flatIndex(const std::vector<int64_t> &shape, const std::vector<E> &idx) {
  AICF_CHECK(idx.size() == shape.size(), "flatIndex: ", idx.size(), " indices for rank ",
             shape.size());
  E flat = E(int64_t(0));
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * E(shape[d]) + (shape[d] == 1 ? E(int64_t(0)) : idx[d]);
  return flat;
}

std::vector<E> unflatIndex(const std::vector<int64_t> &shape, E flat) {
  std::vector<int64_t> st = stridesOf(shape);
  std::vector<E> idx(shape.size());
  // The leading non-trivial dim needs no modulo: flat < numel.
  size_t firstBig = 0;
  while (firstBig < shape.size() && shape[firstBig] == 1)
    ++firstBig;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) {
      idx[d] = E(int64_t(0));
      continue;
    }
    E q = flat / E(st[d]);
    idx[d] = d == firstBig ? q : q % E(shape[d]);
  }
  return idx;
}

std::vector<E> unflat(const std::vector<int64_t> &shape, E flat) {
  std::vector<E> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (d == 0) {
      idx[d] = flat;
    } else {
      idx[d] = shape[d] == 1 ? E(int64_t(0)) : flat % E(shape[d]);
      flat = shape[d] == 1 ? flat : flat / E(shape[d]);
    }
  }
  return idx;
}

SymExpr symNumel(const SymShape &shape) {
  SymExpr n = 1;
  for (const SymExpr &d : shape) {
    std::optional<SymExpr> p = SymExpr::mul(n, d);
    AICF_CHECK(p.has_value(), "symNumel: the element count overflows");
    n = *p;
  }
  return n;
}

bool isUnitDim(const SymExpr &d) {
  return d.isConstant() && d.constant() == 1;
}

bool sameShape(const TensorType &a, const TensorType &b) {
  return a.shape == b.shape && (a.sym == b.sym || symShapeOf(a) == symShapeOf(b));
}

std::vector<E> broadcastIndex(const SymShape &from, const SymShape &to, const std::vector<E> &idx) {
  AICF_CHECK(idx.size() == to.size(), "broadcastIndex: ", idx.size(), " indices for rank ",
             to.size());
  AICF_CHECK(from.size() <= to.size(), "broadcastIndex: cannot broadcast rank ", from.size(),
             " to rank ", to.size());
  size_t lead = to.size() - from.size();
  std::vector<E> out;
  out.reserve(from.size());
  for (size_t d = 0; d < from.size(); ++d) {
    AICF_CHECK(from[d] == to[lead + d] || isUnitDim(from[d]), "broadcastIndex: dim ", d, " (",
               from[d].str(), ") does not broadcast to ", to[lead + d].str());
    out.push_back(isUnitDim(from[d]) ? E(int64_t(0)) : idx[lead + d]);
  }
  return out;
}

E flatIndex(const SymShape &shape, const std::vector<E> &idx) {
  AICF_CHECK(idx.size() == shape.size(), "flatIndex: ", idx.size(), " indices for rank ",
             shape.size());
  E flat = E(int64_t(0));
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * kir::symE(shape[d]) + (isUnitDim(shape[d]) ? E(int64_t(0)) : idx[d]);
  return flat;
}

std::vector<E> unflatIndex(const SymShape &shape, E flat) {
  // Row-major strides as expressions, innermost 1.
  SymShape st(shape.size(), SymExpr(1));
  for (size_t d = shape.size(); d-- > 1;) {
    std::optional<SymExpr> s = SymExpr::mul(st[d], shape[d]);
    AICF_CHECK(s.has_value(), "unflatIndex: the strides overflow");
    st[d - 1] = *s;
  }
  std::vector<E> idx(shape.size());
  size_t firstBig = 0;
  while (firstBig < shape.size() && isUnitDim(shape[firstBig]))
    ++firstBig;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (isUnitDim(shape[d])) {
      idx[d] = E(int64_t(0));
      continue;
    }
    E q = flat / kir::symE(st[d]);
    idx[d] = d == firstBig ? q : q % kir::symE(shape[d]);
  }
  return idx;
}

std::vector<E> unflat(const SymShape &shape, E flat) {
  std::vector<E> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    if (d == 0) {
      idx[d] = flat;
    } else {
      bool unit = isUnitDim(shape[d]);
      idx[d] = unit ? E(int64_t(0)) : flat % kir::symE(shape[d]);
      flat = unit ? flat : flat / kir::symE(shape[d]);
    }
  }
  return idx;
}

bool isSymbolicLayout(const Node &n) {
  if (!isLayoutOp(n))
    return false;
  auto symbolic = [](const Value *v) { return v->type().isSymbolic(); };
  return std::any_of(n.operands().begin(), n.operands().end(), symbolic) ||
         std::any_of(n.results().begin(), n.results().end(), symbolic);
}

std::pair<size_t, size_t> keptDims(const SymShape &from, const SymShape &to) {
  size_t lead = 0, tail = 0;
  while (lead < from.size() && lead < to.size() && from[lead] == to[lead])
    ++lead;
  while (tail < from.size() - lead && tail < to.size() - lead &&
         from[from.size() - 1 - tail] == to[to.size() - 1 - tail])
    ++tail;
  return {lead, tail};
}

std::vector<E> regroupIndex(const SymShape &from, const SymShape &to, const std::vector<E> &idx) {
  AICF_CHECK(idx.size() == from.size(), "regroupIndex: ", idx.size(), " indices for rank ",
             from.size());
  auto [lead, tail] = keptDims(from, to);
  auto part = [](const SymShape &s, size_t lo, size_t hi) {
    return SymShape(s.begin() + static_cast<std::ptrdiff_t>(lo),
                    s.begin() + static_cast<std::ptrdiff_t>(hi));
  };
  std::vector<E> mid(idx.begin() + static_cast<std::ptrdiff_t>(lead),
                     idx.end() - static_cast<std::ptrdiff_t>(tail));
  std::vector<E> out(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(lead));
  for (const E &e : unflatIndex(part(to, lead, to.size() - tail),
                                flatIndex(part(from, lead, from.size() - tail), mid)))
    out.push_back(e);
  out.insert(out.end(), idx.end() - static_cast<std::ptrdiff_t>(tail), idx.end());
  return out;
}

// ---- GroupExpr ----------------------------------------------------------------------------------

GroupExpr::GroupExpr(const KernelGroup &g, std::map<const Value *, kir::BufferP> params)
    : g_(g), params_(std::move(params)) {}

E indexExpr(const IndexExpr &e, const std::vector<E> &dims) {
  using K = IndexExprNode::Kind;
  switch (e->kind) {
  case K::Const: return E(e->value);
  case K::Dim: return dims.at(static_cast<size_t>(e->value));
  case K::Add:
    // x + (-c) as x - c.
    if (e->b->kind == K::Const && e->b->value < 0)
      return indexExpr(e->a, dims) - E(-e->b->value);
    return indexExpr(e->a, dims) + indexExpr(e->b, dims);
  case K::Mul: return indexExpr(e->a, dims) * E(e->value);
  // Index arguments of floordiv / mod are never negative (the simplifier's ranges start at 0
  // for in-bounds indices), so C's truncating / and % are the floor forms.
  case K::FloorDiv: return indexExpr(e->a, dims) / E(e->value);
  case K::Mod: return indexExpr(e->a, dims) % E(e->value);
  }
  throw InternalError("indexExpr: unknown kind");
}

bool GroupExpr::inlines(const Value *v) const {
  const Node *def = v->def();
  if (subst_.count(v) || !member(def) || !(isLayoutOp(*def) || def->info().has(EW)))
    return false;
  return std::all_of(def->operands().begin(), def->operands().end(), [&](const Value *o) {
    return subst_.count(o) || params_.count(o) || inlines(o);
  });
}

bool GroupExpr::member(const Node *n) const {
  return n && std::find(g_.nodes.begin(), g_.nodes.end(), n) != g_.nodes.end();
}

E GroupExpr::atMapped(const Value *v, const IndexMap &map, const std::vector<E> &idx) const {
  const Node *def = v->def();
  // A layout op over symbolic dims is read op by op (at: atSymbolicLayout), not by composing
  // its planning-point map.
  if (!(def && isLayoutOp(*def) && member(def) && !subst_.count(v)) || isSymbolicLayout(*def)) {
    std::vector<E> at_;
    for (const IndexExpr &e : map.exprs)
      at_.push_back(indexExpr(e, idx));
    return at(v, at_);
  }
  int r = 0;
  while (def->result(static_cast<size_t>(r)) != v)
    ++r;
  // A concat's pieces become a select chain on the guard axis, first piece outermost; only the
  // taken branch is evaluated (the printers spell select as ?:), so no piece reads out of bounds.
  std::vector<LayoutPiece> pieces = layoutPieces(*def, r);
  E out;
  for (size_t k = pieces.size(); k-- > 0;) {
    const LayoutPiece &pc = pieces[k];
    E val = atMapped(def->operand(static_cast<size_t>(pc.operand)), compose(map, pc.map), idx);
    if (!out) {
      out = val;
      continue;
    }
    E axis = indexExpr(map.exprs.at(static_cast<size_t>(pc.guardAxis)), idx);
    out = kir::select(axis < E(pc.hi), val, out);
  }
  return out;
}

E GroupExpr::atSymbolicLayout(const Value *v, const std::vector<E> &idx) const {
  const Node &n = *v->def();
  const Value *x = n.operand(0);
  SymShape in = symShapeOf(x->type()), out = symShapeOf(v->type());
  auto axisOf = [&](int64_t a) {
    return static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(in.size()) : a);
  };
  switch (n.op()) {
  case Op::Reshape: return at(x, regroupIndex(out, in, idx));
  case Op::Transpose: {
    const std::vector<int64_t> &perm = n.ints("perm");
    std::vector<E> i(in.size());
    for (size_t d = 0; d < perm.size(); ++d)
      i.at(static_cast<size_t>(perm[d])) = idx[d];
    return at(x, i);
  }
  case Op::Split: {
    // Piece r starts after the earlier pieces along the (static) axis.
    size_t axis = axisOf(n.i("axis"));
    SymExpr begin = 0;
    for (int k = 0; k < v->resultIndex(); ++k)
      begin = *SymExpr::add(begin, n.result(static_cast<size_t>(k))->type().symDim(axis));
    std::vector<E> i = idx;
    i[axis] = idx[axis] + kir::symE(begin);
    return at(x, i);
  }
  case Op::Slice: {
    const auto &starts = n.ints("starts"), &axes = n.ints("axes"), &steps = n.ints("steps");
    static const std::vector<std::string> none;
    const std::vector<std::string> &symStarts =
        n.hasAttr("sym_starts") ? n.strs("sym_starts") : none;
    std::vector<E> i = idx;
    for (size_t k = 0; k < axes.size(); ++k) {
      size_t a = axisOf(axes[k]);
      E start = E(starts[k]);
      if (!symStarts.empty()) {
        std::optional<SymExpr> e = SymExpr::parse(symStarts.at(k));
        AICF_CHECK(e.has_value(), n.where(), ": slice sym_starts '", symStarts.at(k), "'");
        start = kir::symE(*e);
      }
      i[a] = start + idx[a] * E(steps[k]);
    }
    return at(x, i);
  }
  case Op::Expand: return at(x, broadcastIndex(in, out, idx));
  case Op::Concat: {
    // A select chain on the axis, first piece outermost: only the taken branch is evaluated
    // (the printers spell select as ?:), so no piece reads out of bounds.
    size_t axis = axisOf(n.i("axis"));
    std::vector<std::pair<SymExpr, const Value *>> ends; // each piece's end, and its operand
    SymExpr end = 0;
    for (const Value *o : n.operands()) {
      SymExpr len = o->type().symDim(axis);
      if (len.isConstant() && len.constant() == 0)
        continue;
      end = *SymExpr::add(end, len);
      ends.emplace_back(end, o);
    }
    AICF_CHECK(!ends.empty(), n.where(), ": concat with no elements");
    E val;
    for (size_t k = ends.size(); k-- > 0;) {
      SymExpr begin = k == 0 ? SymExpr(0) : ends[k - 1].first;
      std::vector<E> i = idx;
      i[axis] = idx[axis] - kir::symE(begin);
      E piece = at(ends[k].second, i);
      val = val ? kir::select(idx[axis] < kir::symE(ends[k].first), piece, val) : piece;
    }
    return val;
  }
  default: break;
  }
  throw InternalError(cat("GroupExpr: no symbolic index rule for layout op ", n.name()));
}

E GroupExpr::at(const Value *v, const std::vector<E> &idx) const {
  AICF_CHECK(idx.size() == v->type().shape.size(), "GroupExpr::at(%", v->name(), "): ", idx.size(),
             " indices for rank ", v->type().rank());
  if (auto it = subst_.find(v); it != subst_.end())
    return it->second(idx);
  // Computed inside the group by an elementwise node: inline it (recompute, never reload an
  // output buffer the kernel is still writing).
  const Node *def = v->def();
  if (def && isLayoutOp(*def) && member(def)) {
    if (isSymbolicLayout(*def))
      return atSymbolicLayout(v, idx);
    return atMapped(v, IndexMap::identity(v->type().shape), idx);
  }
  if (def && def->info().has(EW) &&
      std::find(g_.nodes.begin(), g_.nodes.end(), def) != g_.nodes.end()) {
    SymShape shape = symShapeOf(v->type());
    std::vector<E> ops;
    ops.reserve(def->numOperands());
    for (const Value *o : def->operands())
      ops.push_back(at(o, broadcastIndex(symShapeOf(o->type()), shape, idx)));
    return elementwiseExpr(*def, ops);
  }
  if (auto it = params_.find(v); it != params_.end())
    return kir::load(it->second, idx);
  throw InternalError(cat("GroupExpr: value %", v->name(), " is neither a param of group ", g_.id,
                          " nor computed by one of its elementwise nodes"));
}

std::vector<const Node *> GroupExpr::consumersInGroup(const Value *v) const {
  std::vector<const Value *> reach = {v};
  std::vector<const Node *> out;
  for (const Node *n : g_.nodes) {
    if (!n->info().has(EW))
      continue;
    bool uses = std::any_of(n->operands().begin(), n->operands().end(), [&](const Value *o) {
      return std::find(reach.begin(), reach.end(), o) != reach.end();
    });
    if (!uses)
      continue;
    out.push_back(n);
    for (const Value *r : n->results())
      reach.push_back(r);
  }
  return out;
}

const kir::BufferP &GroupExpr::param(const Value *v) const {
  auto it = params_.find(v);
  if (it == params_.end())
    throw InternalError(cat("GroupExpr: %", v->name(), " is not a param of group ", g_.id));
  return it->second;
}

std::vector<kir::StmtP> storeGroupOutputs(const KernelGroup &g, GroupExpr &gx,
                                          const Value *anchorResult, const E &anchorValue,
                                          const std::vector<E> &idx, const std::string &bindPrefix,
                                          const std::map<const Value *, std::vector<E>> &storeAt) {
  std::vector<kir::StmtP> out;
  bool bind = !bindPrefix.empty();
  auto bindValue = [&](const Value *v, const std::string &name, E e) {
    DType t = e->type;
    out.push_back(kir::decl(name, t, e));
    gx.substitute(v, [name, t](const std::vector<E> &) { return kir::var(name, t); });
  };
  if (!bind) {
    gx.substitute(anchorResult, [anchorValue](const std::vector<E> &) { return anchorValue; });
  } else {
    // A recipe may store one group in several scopes (a branch per range of taps): each binds
    // its own scalars, so the epilogue is computed from its definition again, not read from the
    // scalars another scope declared.
    for (const Node *n : gx.consumersInGroup(anchorResult))
      gx.unsubstitute(n->result(0));
    bindValue(anchorResult, bindPrefix + "_r", anchorValue);
    int k = 0;
    for (const Node *n : gx.consumersInGroup(anchorResult)) {
      const Value *r = n->result(0);
      AICF_CHECK(sameShape(r->type(), anchorResult->type()), "group ", g.id, ": epilogue %",
                 r->name(), " ", r->type().str(), " does not have the anchor's shape ",
                 anchorResult->type().str());
      bindValue(r, cat(bindPrefix, "_e", k++), gx.at(r, idx));
    }
  }
  for (const Value *v : g.outputs) {
    AICF_CHECK(!bind || sameShape(v->type(), anchorResult->type()), "group ", g.id, ": output %",
               v->name(), " ", v->type().str(), " does not have the anchor's shape ",
               anchorResult->type().str());
    auto at = storeAt.find(v);
    out.push_back(storeOutput(g, gx.param(v), v, idx,
                              !bind && v == anchorResult ? anchorValue : gx.at(v, idx),
                              at != storeAt.end() ? &at->second : nullptr));
  }
  return out;
}

namespace {

// storeIndex through a layout op over symbolic dims (isSymbolicLayout): the views between the
// stored value and the layout op regroup the index, then the layout op places it (a transpose
// permutes, a concat offsets it along the axis), each from the dims' expressions.
std::vector<E> symbolicStoreIndex(const KernelGroup::StoreThrough &st, std::vector<E> idx) {
  const Node &n = *st.into->def();
  for (size_t k = 0; k < n.numOperands(); ++k) {
    // The views from the stored value to operand k, outermost first.
    std::vector<const Node *> views;
    const Value *o = n.operand(k);
    while (o != st.value && o->def() && o->def()->info().has(VIEW)) {
      views.push_back(o->def());
      o = o->def()->operand(0);
    }
    if (o != st.value)
      continue;
    for (size_t j = views.size(); j-- > 0;) {
      AICF_CHECK(views[j]->op() == Op::Reshape, "store through ", n.name(), ": view ",
                 views[j]->name(), " is not a reshape");
      idx = regroupIndex(symShapeOf(views[j]->operand(0)->type()),
                         symShapeOf(views[j]->result(0)->type()), idx);
    }
    if (n.op() == Op::Transpose) {
      const std::vector<int64_t> &perm = n.ints("perm");
      std::vector<E> out(perm.size());
      for (size_t d = 0; d < perm.size(); ++d)
        out[d] = idx.at(static_cast<size_t>(perm[d]));
      return out;
    }
    AICF_CHECK(n.op() == Op::Concat, "store through ", n.name(), ": not a transpose or concat");
    int64_t a = n.i("axis");
    size_t axis = static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(idx.size()) : a);
    SymExpr begin = 0;
    for (size_t p = 0; p < k; ++p)
      begin = *SymExpr::add(begin, n.operand(p)->type().symDim(axis));
    idx[axis] = idx[axis] + kir::symE(begin);
    return idx;
  }
  throw InternalError(
      cat("store through ", n.name(), ": %", st.value->name(), " reaches none of its operands"));
}

} // namespace

std::vector<E> storeIndex(const KernelGroup &g, const Value *v, const std::vector<E> &idx) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st)
    return idx;
  if (isSymbolicLayout(*st->into->def()) || v->type().isSymbolic())
    return symbolicStoreIndex(*st, idx);
  std::vector<E> out;
  out.reserve(st->map.exprs.size());
  for (const IndexExpr &e : st->map.exprs)
    out.push_back(indexExpr(e, idx));
  return out;
}

E storeKept(const KernelGroup &g, const Value *v, const std::vector<E> &idx) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st)
    return E();
  E cond;
  for (const IndexBound &b : st->keep) {
    E e = indexExpr(b.e, idx);
    std::pair<int64_t, int64_t> r = rangeOf(b.e, st->map.domain);
    E c = r.first >= b.lo ? E() : e >= E(b.lo);
    c = r.second < b.hi ? c : c ? (c && e < E(b.hi)) : e < E(b.hi);
    if (c)
      cond = cond ? (cond && c) : c;
  }
  return cond;
}

kir::StmtP storeOutput(const KernelGroup &g, const kir::BufferP &b, const Value *v,
                       const std::vector<E> &idx, E value, const std::vector<E> *at) {
  kir::StmtP s = kir::store(b, at ? *at : storeIndex(g, v, idx), std::move(value));
  if (E cond = storeKept(g, v, idx))
    return kir::ifThen(cond, {s});
  return s;
}

namespace {

// Whether `e` is a sum in which dim d appears exactly once, as a bare term (coefficient 1).
bool plusDimOnce(const IndexExpr &e, int d, int &seen) {
  if (e->kind == IndexExprNode::Kind::Add)
    return plusDimOnce(e->a, d, seen) && plusDimOnce(e->b, d, seen);
  if (e->kind == IndexExprNode::Kind::Dim && e->value == d) {
    ++seen;
    return true;
  }
  return !readsDim(e, d);
}

} // namespace

std::optional<std::vector<IndexExpr>> laneSplitStore(const KernelGroup &g, const Value *v) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st || st->map.domain.empty() || st->map.range.empty() || st->map.domain.back() % 16 != 0)
    return std::nullopt;
  // Over symbolic dims the map holds at the planning point only: storeIndex computes the index.
  if (isSymbolicLayout(*st->into->def()) || v->type().isSymbolic())
    return std::nullopt;
  std::vector<int64_t> domain = st->map.domain;
  int last = static_cast<int>(domain.size()) - 1;
  int q = last, l = last + 1;
  domain[static_cast<size_t>(last)] /= 16;
  domain.push_back(16);
  std::vector<IndexExpr> subst;
  for (int d = 0; d < last; ++d)
    subst.push_back(ixDim(d));
  subst.push_back(ixAdd(ixMul(ixDim(q), 16), ixDim(l)));
  std::vector<IndexExpr> out;
  for (size_t k = 0; k < st->map.exprs.size(); ++k) {
    IndexExpr e = simplify(substitute(st->map.exprs[k], subst), domain);
    int seen = 0;
    bool lastDim = k + 1 == st->map.exprs.size();
    if (lastDim ? !plusDimOnce(e, l, seen) || seen != 1 : readsDim(e, l))
      return std::nullopt;
    out.push_back(e);
  }
  return out;
}

bool planeWiseStore(const KernelGroup &g, const Value *v) {
  const KernelGroup::StoreThrough *st = g.storedThrough(v);
  if (!st || st->map.domain.size() != 5 || st->map.domain[4] != 16 || v->type().isSymbolic())
    return false;
  int64_t w = st->map.domain[3];
  std::optional<IndexMap::Stride> lane = st->map.strideOf(4), x = st->map.strideOf(3),
                                  y = st->map.strideOf(2);
  if (!(lane && x && y && lane->step >= 16 && x->step == 1 && x->run == w && y->step == w &&
        w * st->map.domain[2] >= 16))
    return false;
  // A row keeping a few lanes only (a 2-class head's block of 16) stores them row by row: its
  // scatter is short, and the row walk keeps the epilogue on the micro-kernel's registers
  // (unet_small's head 0.19 ms row-wise, 0.21 lane-wise).
  int64_t kept = 0;
  for (int64_t q = 0; q < st->map.domain[1]; ++q)
    for (int64_t l = 0; l < 16; ++l)
      kept += std::all_of(st->keep.begin(), st->keep.end(), [&](const IndexBound &b) {
        int64_t at = evaluate(b.e, {0, q, 0, 0, l});
        return b.lo <= at && at < b.hi;
      });
  return kept >= 4 * st->map.domain[1];
}

} // namespace aicf
