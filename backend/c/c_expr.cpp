// See c_expr.h. One printer for both C-family targets; every target-specific spelling comes
// from the Dialect.
#include "backend/c/c_expr.h"

#include "ir/attributes.h"
#include "kir/version_lane_guards.h"

#include "support/diagnostics.h"
#include "support/half.h"

#include <charconv>
#include <cmath>

namespace aicf::cexpr {

using namespace kir;

const char *valueType(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16: return "float";
  case DType::F64: return "double";
  case DType::I64: return "int64_t";
  case DType::I32: return "int32_t";
  case DType::I16: return "int16_t";
  case DType::I8: return "int8_t";
  case DType::U64: return "uint64_t";
  case DType::U32: return "uint32_t";
  case DType::U16: return "uint16_t";
  case DType::U8: return "uint8_t";
  case DType::Bool: return "bool";
  }
  return "float";
}

const char *storageType(const Dialect &d, DType t) {
  switch (t) {
  case DType::F16: return d.f16Storage;
  case DType::BF16: return d.bf16Storage;
  case DType::Bool: return "uint8_t";
  default: return valueType(t);
  }
}

std::string floatLiteral(const Dialect &d, float f) {
  if (std::isnan(f))
    return d.nan;
  if (std::isinf(f))
    return f > 0 ? d.inf : d.negInf;
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s + "f";
}

std::string doubleLiteral(const Dialect &d, double v) {
  if (std::isnan(v))
    return std::string("static_cast<double>(") + d.nan + ")";
  if (std::isinf(v))
    return std::string("static_cast<double>(") + (v > 0 ? d.inf : d.negInf) + ")";
  return formatFloat(v); // shortest round trip, always with '.' or an exponent
}

std::string intLiteral(int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807L - 1L)";
  return std::to_string(v) + "L";
}

namespace {

constexpr int kPrecOr = 1, kPrecAnd = 2, kPrecEq = 3, kPrecRel = 4, kPrecAdd = 5, kPrecMul = 6,
              kPrecUnary = 7, kPrecPrimary = 8;

struct Printed {
  std::string text;
  int prec;
  bool logical = false; // a comparison or && / || (parenthesised inside another one)
};

std::string wrap(const Printed &p, bool w) {
  return w ? "(" + p.text + ")" : p.text;
}

class Printer {
public:
  Printer(const Dialect &d, const Lane *lane) : d_(d), lane_(lane) {}

  Printed print(const ExprP &e) const {
    AICF_CHECK(e, d_.who, ": null expression");
    switch (e->kind) {
    case Expr::Kind::Int: return {intLiteral(e->ival), e->ival < 0 ? kPrecUnary : kPrecPrimary};
    case Expr::Kind::Float: {
      if (e->type == DType::F64) {
        std::string s = doubleLiteral(d_, e->fval);
        return {s, s[0] == '-' ? kPrecUnary : kPrecPrimary};
      }
      float f = static_cast<float>(e->fval);
      if (e->type == DType::F16)
        f = f16ToFloat(floatToF16(f));
      else if (e->type == DType::BF16)
        f = bf16ToFloat(floatToBf16(f));
      if (!isFloat(e->type)) // a float literal typed as an integer: C++ converts
        return {"static_cast<" + std::string(valueType(e->type)) + ">(" + floatLiteral(d_, f) + ")",
                kPrecPrimary};
      std::string s = floatLiteral(d_, f);
      return {s, s[0] == '-' ? kPrecUnary : kPrecPrimary};
    }
    case Expr::Kind::Var: return {e->var, kPrecPrimary};
    case Expr::Kind::Load: return load(*e);
    case Expr::Kind::Unary: return unary(*e);
    case Expr::Kind::Binary: return binary(*e);
    case Expr::Kind::Select:
      return {"(" + text(e->args.at(0)) + " ? " + text(e->args.at(1)) + " : " +
                  text(e->args.at(2)) + ")",
              kPrecPrimary};
    case Expr::Kind::Cast: return cast(*e);
    }
    return {"0", kPrecPrimary};
  }

  std::string text(const ExprP &e) const { return print(e).text; }

private:
  Printed load(const Expr &e) const {
    return {widen(d_, e.buf->dtype, elemRef(d_, e.buf, e.args, lane_)), kPrecPrimary};
  }

  Printed unary(const Expr &e) const {
    const ExprP &x = e.args.at(0);
    Printed a = print(x);
    std::string T = valueType(e.type);
    // f32 math: the float spellings; f64 (and integers, through double) the double ones.
    bool fl = isFloat(e.type) && e.type != DType::F64;
    switch (e.uop) {
    case UnOp::Neg: return {"-" + wrap(a, a.prec <= kPrecUnary), kPrecUnary};
    case UnOp::Not: return {"!" + wrap(a, a.prec <= kPrecUnary), kPrecUnary};
    case UnOp::Abs:
      if (fl)
        return {std::string(d_.absFloat) + "(" + a.text + ")", kPrecPrimary};
      return {std::string(d_.absOther) + (d_.absOtherTemplated ? "<" + T + ">" : "") + "(" +
                  a.text + ")",
              kPrecPrimary};
    case UnOp::Sign: return {"aicf_sign<" + T + ">(" + a.text + ")", kPrecPrimary};
    case UnOp::Rsqrt:
      if (fl)
        return {"(1.0f / " + std::string(d_.math(UnOp::Sqrt, true)) + "(" + a.text + "))",
                kPrecPrimary};
      return {"static_cast<" + T + ">(1.0 / " + d_.math(UnOp::Sqrt, false) +
                  "(static_cast<double>(" + a.text + ")))",
              kPrecPrimary};
    case UnOp::Sigmoid:
      if (fl)
        return {std::string(d_.sigmoid) + "(" + a.text + ")", kPrecPrimary};
      if (e.type == DType::F64)
        return {"(1.0 / (1.0 + " + std::string(d_.math(UnOp::Exp, false)) + "(-" +
                    wrap(a, a.prec <= kPrecUnary) + ")))",
                kPrecPrimary};
      return {"static_cast<" + T + ">(" + d_.sigmoid + "(static_cast<float>(" + a.text + ")))",
              kPrecPrimary};
    default: break;
    }
    const char *fn = d_.math(e.uop, fl);
    AICF_CHECK(fn, d_.who, ": unary op ", unOpName(e.uop));
    if ((fl && isFloat(x->type) && x->type != DType::F64) ||
        (e.type == DType::F64 && x->type == DType::F64))
      return {std::string(fn) + "(" + a.text + ")", kPrecPrimary};
    if (fl)
      return {std::string(fn) + "(static_cast<float>(" + a.text + "))", kPrecPrimary};
    return {"static_cast<" + T + ">(" + fn + "(static_cast<double>(" + a.text + ")))",
            kPrecPrimary};
  }

  Printed binary(const Expr &e) const {
    Printed a = print(e.args.at(0)), b = print(e.args.at(1));
    std::string T = valueType(e.type);
    bool fl = isFloat(e.type) && e.type != DType::F64; // f64 takes the double spellings
    int p = 0;
    switch (e.bop) {
    case BinOp::Min: return {"aicf_min<" + T + ">(" + a.text + ", " + b.text + ")", kPrecPrimary};
    case BinOp::Max: return {"aicf_max<" + T + ">(" + a.text + ", " + b.text + ")", kPrecPrimary};
    case BinOp::Pow:
      if (fl)
        return {std::string(d_.powF32) + "(static_cast<float>(" + a.text +
                    "), static_cast<float>(" + b.text + "))",
                kPrecPrimary};
      return {"static_cast<" + T + ">(" + d_.powF64 + "(static_cast<double>(" + a.text +
                  "), static_cast<double>(" + b.text + ")))",
              kPrecPrimary};
    case BinOp::Mod:
      if (fl)
        return {std::string(d_.fmodF32) + "(static_cast<float>(" + a.text +
                    "), static_cast<float>(" + b.text + "))",
                kPrecPrimary};
      if (e.type == DType::F64)
        return {std::string(d_.fmodF64) + "(static_cast<double>(" + a.text +
                    "), static_cast<double>(" + b.text + "))",
                kPrecPrimary};
      p = kPrecMul;
      break;
    case BinOp::Add:
    case BinOp::Sub: p = kPrecAdd; break;
    case BinOp::Mul:
    case BinOp::Div: p = kPrecMul; break;
    case BinOp::Lt:
    case BinOp::Le:
    case BinOp::Gt:
    case BinOp::Ge: p = kPrecRel; break;
    case BinOp::Eq:
    case BinOp::Ne: p = kPrecEq; break;
    case BinOp::And: p = kPrecAnd; break;
    case BinOp::Or: p = kPrecOr; break;
    }
    bool logical = p <= kPrecRel;
    // Inside a comparison or logical operator, nested ones are parenthesised (-Wparentheses).
    std::string l = wrap(a, a.prec < p || (logical && a.logical));
    std::string r = wrap(b, b.prec <= p || (logical && b.logical));
    return {l + " " + binOpName(e.bop) + " " + r, p, logical};
  }

  Printed cast(const Expr &e) const {
    std::string a = text(e.args.at(0));
    switch (e.type) {
    case DType::F16:
      return {std::string(d_.roundH) + "(static_cast<float>(" + a + "))", kPrecPrimary};
    case DType::BF16:
      return {std::string(d_.roundBf) + "(static_cast<float>(" + a + "))", kPrecPrimary};
    case DType::Bool: return {"(" + a + " != 0)", kPrecPrimary};
    case DType::I8:
    case DType::I16:
      if (d_.narrowSigned && isInteger(e.args.at(0)->type) &&
          dtypeSize(e.args.at(0)->type) > dtypeSize(e.type))
        return {std::string(d_.narrowSigned) + "<" + valueType(e.type) + ">(" + a + ")",
                kPrecPrimary};
      [[fallthrough]];
    default:
      return {"static_cast<" + std::string(valueType(e.type)) + ">(" + a + ")", kPrecPrimary};
    }
  }

  const Dialect &d_;
  const Lane *lane_;
};

} // namespace

std::string str(const Dialect &d, const ExprP &e, const Lane *lane) {
  return Printer(d, lane).text(e);
}

std::string elemRef(const Dialect &d, const BufferP &b, const std::vector<ExprP> &idx,
                    const Lane *gatherLane) {
  size_t first = d.localPerThread && b->scope == Scope::Local ? 1 : 0;
  if (!b->sym.empty()) {
    // Symbolic dims (a global param): row-major strides as expressions in the dims' variables.
    // Adjacent dims indexed [a / W, a % W] where W is the second dim (a row of a merged
    // [batch * seq, ...] view split back) are a times the second's stride, as for static dims
    // below: no division by a run-time size per element.
    std::vector<E> strides(idx.size());
    E stride(int64_t(1));
    for (size_t i = idx.size(); i-- > 0;) {
      strides[i] = stride;
      stride = stride * kir::symE(b->sym[i]);
    }
    auto bin = [](const ExprP &e, kir::BinOp op) {
      return e && e->kind == Expr::Kind::Binary && e->bop == op;
    };
    E off(int64_t(0));
    for (size_t i = 0; i < idx.size(); ++i) {
      if (i + 1 < idx.size() && bin(idx[i], kir::BinOp::Div) && bin(idx[i + 1], kir::BinOp::Mod) &&
          kir::exprEqual(idx[i]->args[0], idx[i + 1]->args[0]) &&
          kir::exprEqual(idx[i]->args[1], idx[i + 1]->args[1]) &&
          kir::exprEqual(idx[i]->args[1], kir::symE(b->sym[i + 1]).get())) {
        off = off + E(idx[i]->args[0]) * strides[i + 1];
        ++i;
        continue;
      }
      off = off + E(idx[i]) * strides[i];
    }
    return b->name + "[" + str(d, off.get()) + "]";
  }
  std::vector<int64_t> dims(b->shape.begin() + static_cast<std::ptrdiff_t>(first), b->shape.end());
  std::vector<int64_t> strides = stridesOf(dims);
  E off(int64_t(0));
  for (size_t i = first; i < idx.size(); ++i) {
    // Adjacent dims indexed [a / W, a % W] with strides W * s and s (a flat pixel index split
    // into a row and a column of a W-wide map) are a * s: (a / W) W + a % W = a for C's
    // division, so the offset needs no division at all (joinIndexDigits: host only).
    const ExprP &q = idx[i];
    const ExprP *r = i + 1 < idx.size() ? &idx[i + 1] : nullptr;
    auto isBin = [](const ExprP &e, kir::BinOp op) {
      return e && e->kind == Expr::Kind::Binary && e->bop == op &&
             e->args[1]->kind == Expr::Kind::Int && e->args[1]->ival > 0;
    };
    if (d.joinIndexDigits && r && isBin(q, kir::BinOp::Div) && isBin(*r, kir::BinOp::Mod) &&
        q->args[1]->ival == (*r)->args[1]->ival && kir::exprEqual(q->args[0], (*r)->args[0]) &&
        strides[i - first] == q->args[1]->ival * strides[i + 1 - first]) {
      E term = E(q->args[0]) * E(strides[i + 1 - first]);
      off = off->kind == Expr::Kind::Int && off->ival == 0
                ? term
                : kir::binary(kir::BinOp::Add, off, term);
      ++i;
      continue;
    }
    E term = E(idx[i]) * E(strides[i - first]);
    if (d.joinIndexDigits)
      off = off + term;
    else if (off->kind == Expr::Kind::Int && off->ival == 0)
      off = term;
    else if (term->kind == Expr::Kind::Int && term->ival == 0)
      continue;
    else if (off->kind == Expr::Kind::Int && term->kind == Expr::Kind::Int)
      off = E(off->ival + term->ival);
    else
      off = kir::binary(kir::BinOp::Add, off, term);
  }
  if (gatherLane && d.narrowGathers && b->numel() <= INT32_MAX) {
    ExprP flat = kir::inlineDefs(off.get(), gatherLane->defs);
    if (flat && kir::readsVar(flat, gatherLane->var) && !kir::affineIn(flat, gatherLane->var))
      return b->name + "[static_cast<int32_t>(" + str(d, off.get()) + ")]";
  }
  return b->name + "[" + str(d, off.get()) + "]";
}

std::string widen(const Dialect &d, DType t, const std::string &ref) {
  switch (t) {
  case DType::F16: return std::string(d.h2f) + "(" + ref + ")";
  case DType::BF16: return std::string(d.bf2f) + "(" + ref + ")";
  case DType::Bool: return "(" + ref + " != 0)";
  default: return ref;
  }
}

std::string narrowStr(const Dialect &d, DType t, DType vt, const std::string &s) {
  switch (t) {
  case DType::F16: return std::string(d.f2h) + "(" + s + ")";
  case DType::BF16: return std::string(d.f2bf) + "(" + s + ")";
  case DType::Bool: return "static_cast<uint8_t>(" + s + ")";
  default:
    if (vt == t)
      return s;
    return "static_cast<" + std::string(storageType(d, t)) + ">(" + s + ")";
  }
}

std::string narrow(const Dialect &d, DType t, const ExprP &v, const Lane *lane) {
  // A 16-bit float copied between buffers of the same type: move the bits (no round trip).
  if ((t == DType::F16 || t == DType::BF16) && v->kind == Expr::Kind::Load && v->buf->dtype == t)
    return elemRef(d, v->buf, v->args, lane);
  return narrowStr(d, t, v->type, str(d, v, lane));
}

void Uses::expr(const ExprP &e) {
  if (!e)
    return;
  if (e->kind == Expr::Kind::Var)
    vars.insert(e->var);
  if (e->kind == Expr::Kind::Load)
    bufs.insert(e->buf.get());
  // A per-thread local buffer's first (thread) index is not printed: it is not a use.
  size_t first =
      d_.localPerThread && e->kind == Expr::Kind::Load && e->buf->scope == Scope::Local ? 1 : 0;
  for (size_t i = first; i < e->args.size(); ++i)
    expr(e->args[i]);
}

void Uses::stmts(const std::vector<StmtP> &ss) {
  for (const StmtP &s : ss)
    stmt(*s);
}

void Uses::stmt(const Stmt &s) {
  for (const E *e : {&s.begin, &s.extent, &s.value, &s.cond, &s.first, &s.last})
    expr(e->get());
  size_t first = d_.localPerThread && s.buf && s.buf->scope == Scope::Local ? 1 : 0;
  for (size_t i = first; i < s.indices.size(); ++i)
    expr(s.indices[i].get());
  if (s.buf)
    bufs.insert(s.buf.get());
  for (const BufferP &b : s.src)
    bufs.insert(b.get());
  for (const BufferP &b : s.dst)
    bufs.insert(b.get());
  for (const BufferP *b : {&s.a, &s.b, &s.c})
    if (*b)
      bufs.insert(b->get());
  stmts(s.body);
  stmts(s.elseBody);
  stmts(s.init);
  stmts(s.update);
}

} // namespace aicf::cexpr
