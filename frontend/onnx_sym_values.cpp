#include "frontend/onnx_sym_values.h"

#include "ir/instantiate.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <limits>

namespace aicf {

std::optional<SymExpr> divExactSym(const SymExpr &a, const SymExpr &b) {
  if (b.terms().size() != 1)
    return std::nullopt;
  const auto &[divMono, divCoef] = *b.terms().begin();
  if (divCoef == 0)
    return std::nullopt;
  SymExpr out;
  for (const auto &[mono, coef] : a.terms()) {
    // The quotient's term: the symbols of `mono` less those of the divisor (as multisets).
    std::vector<std::string> rest = mono;
    for (const std::string &s : divMono) {
      auto it = std::find(rest.begin(), rest.end(), s);
      if (it == rest.end())
        return std::nullopt;
      rest.erase(it);
    }
    if (coef % divCoef != 0)
      return std::nullopt;
    SymExpr term = coef / divCoef;
    for (const std::string &s : rest) {
      auto p = SymExpr::mul(term, SymExpr::symbol(s));
      if (!p)
        return std::nullopt;
      term = *p;
    }
    auto sum = SymExpr::add(out, term);
    if (!sum)
      return std::nullopt;
    out = *sum;
  }
  return out;
}

std::string symElemsStr(const SymElems &e) {
  std::string s = "[";
  for (size_t i = 0; i < e.size(); ++i)
    s += (i ? "," : "") + e[i].str();
  return s + "]";
}

namespace {

struct SymT {
  std::vector<int64_t> shape;
  SymElems e;
};

std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + idx[d];
  return i;
}

// The flat index into a numpy-broadcast operand of shape `in` for the output index `out`.
int64_t ravelBroadcast(const std::vector<int64_t> &out, const std::vector<int64_t> &in) {
  size_t off = out.size() - in.size();
  int64_t i = 0;
  for (size_t d = 0; d < in.size(); ++d)
    i = i * in[d] + (in[d] == 1 ? 0 : out[off + d]);
  return i;
}

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

class SymEval {
public:
  SymEval(const Node &n, const std::vector<const SymElems *> &syms,
          const std::vector<DimRange> &dims)
      : n_(n), dims_(dims) {
    for (size_t k = 0; k < n.numOperands(); ++k) {
      const Value *v = n.operand(k);
      SymT t{v->type().shape, {}};
      if (syms[k]) {
        t.e = *syms[k];
      } else {
        const Tensor &d = *v->data();
        if (isFloat(d.dtype()))
          floatOperand_ = true;
        else
          for (int64_t i = 0; i < d.numel(); ++i)
            t.e.emplace_back(d.getInt(i));
      }
      ops_.push_back(std::move(t));
    }
  }

  std::vector<SymElems> run() {
    for (const Value *r : n_.results())
      if (isFloat(r->type().dtype) || floatOperand_)
        fail(cat("computes a floating-point value from the symbolic dims (", symbolsOfOperands(),
                 "): only integer shape arithmetic is supported"));
    std::vector<SymElems> out = compute();
    for (size_t r = 0; r < out.size(); ++r)
      out[r] = narrow(out[r], n_.result(r)->type().dtype);
    return out;
  }

private:
  [[noreturn]] void fail(const std::string &msg) const { throw UserError(msg); }

  std::string symbolsOfOperands() const {
    std::vector<std::string> names;
    for (const SymT &t : ops_)
      for (const SymExpr &e : t.e)
        for (const std::string &s : e.symbols())
          if (std::find(names.begin(), names.end(), s) == names.end())
            names.push_back(s);
    std::sort(names.begin(), names.end());
    std::string s;
    for (const std::string &x : names)
      s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  std::string rangesStr(const SymExpr &e) const {
    std::string s;
    for (const std::string &name : e.symbols())
      for (const DimRange &d : dims_)
        if (d.name == name)
          s += cat(s.empty() ? "" : ", ", name, " in ", d.min, "..", d.max);
    return s;
  }

  SymExpr chk(std::optional<SymExpr> e) const {
    if (!e)
      fail("shape arithmetic on the symbolic dims overflows int64");
    return *e;
  }

  // -1, 0 or 1: the sign `e` has for every value of the dims; refused when it varies.
  int sign(const SymExpr &e, const std::string &what) const {
    if (e == SymExpr(0))
      return 0;
    auto b = symBounds(e, dims_);
    if (b && b->lo > 0)
      return 1;
    if (b && b->hi < 0)
      return -1;
    fail(cat(what, " depends on the values of the symbolic dims (", rangesStr(e),
             "): it is not the same for the whole ranges"));
  }

  // Values as the result dtype holds them: constants wrap as the interpreter's narrowing does;
  // an expression must fit the dtype over the whole ranges.
  SymElems narrow(SymElems v, DType dt) const {
    if (dt == DType::I64)
      return v;
    for (SymExpr &e : v) {
      if (e.isConstant()) {
        Tensor t(TensorType(dt, {}));
        t.setInt(0, e.constant());
        e = SymExpr(t.getInt(0));
        continue;
      }
      auto b = symBounds(e, dims_);
      Tensor lo(TensorType(dt, {})), hi(TensorType(dt, {}));
      bool fits = b.has_value();
      if (fits) {
        lo.setInt(0, b->lo);
        hi.setInt(0, b->hi);
        fits = lo.getInt(0) == b->lo && hi.getInt(0) == b->hi && dt != DType::Bool;
      }
      if (!fits)
        fail(cat("the ", dtypeName(dt), " result ", e.str(),
                 " does not fit its type for every value of the symbolic dims (", rangesStr(e),
                 ")"));
    }
    return v;
  }

  const std::vector<int64_t> &outShape(size_t r = 0) const { return n_.result(r)->type().shape; }

  template <typename F>
  SymElems elementwise(F f) const {
    const auto &os = outShape();
    SymElems out;
    for (int64_t i = 0; i < numel(os); ++i) {
      std::vector<int64_t> idx = unravel(i, os);
      std::vector<SymExpr> args;
      for (const SymT &t : ops_)
        args.push_back(t.e[static_cast<size_t>(ravelBroadcast(idx, t.shape))]);
      out.push_back(f(args));
    }
    return out;
  }

  SymExpr constantOf(const SymExpr &e, const char *what) const {
    if (!e.isConstant())
      fail(cat(what, " ", e.str(), " is computed from the symbolic dims: not supported"));
    return e;
  }

  SymExpr pick(const std::vector<SymExpr> &a, bool wantMax) const {
    SymExpr best = a[0];
    for (size_t k = 1; k < a.size(); ++k) {
      int s = sign(chk(SymExpr::sub(a[k], best)),
                   cat(wantMax ? "max(" : "min(", best.str(), ", ", a[k].str(), ")"));
      if ((wantMax && s > 0) || (!wantMax && s < 0))
        best = a[k];
    }
    return best;
  }

  SymExpr divide(const SymExpr &a, const SymExpr &b) const {
    SymExpr d = constantOf(b, "the divisor");
    if (d.constant() == 0)
      fail("divides by zero");
    if (a.isConstant())
      return SymExpr(a.constant() / d.constant());
    int64_t m = d.constant() < 0 ? -d.constant() : d.constant();
    auto q = SymExpr::divExact(a, m);
    if (!q)
      fail(cat("divides ", a.str(), " by ", d.constant(),
               ", which is not exact for every value of the symbolic dims: a floor division of "
               "dims is not supported"));
    return d.constant() < 0 ? chk(SymExpr::mul(*q, SymExpr(-1))) : *q;
  }

  std::vector<SymElems> compute() const {
    const SymT &x = ops_[0];
    switch (n_.op()) {
    case Op::Identity:
    case Op::Reshape: return {x.e};
    case Op::Cast:
      if (n_.result()->type().dtype == DType::Bool)
        return {elementwise([&](const std::vector<SymExpr> &a) {
          return SymExpr(sign(a[0], cat("whether ", a[0].str(), " is 0")) != 0 ? 1 : 0);
        })};
      return {x.e};
    case Op::Neg:
      return {elementwise(
          [&](const std::vector<SymExpr> &a) { return chk(SymExpr::mul(a[0], SymExpr(-1))); })};
    case Op::Abs:
      return {elementwise([&](const std::vector<SymExpr> &a) {
        return sign(a[0], cat("the sign of ", a[0].str())) < 0
                   ? chk(SymExpr::mul(a[0], SymExpr(-1)))
                   : a[0];
      })};
    case Op::Add:
      return {elementwise(
          [&](const std::vector<SymExpr> &a) { return chk(SymExpr::add(a[0], a[1])); })};
    case Op::Sub:
      return {elementwise(
          [&](const std::vector<SymExpr> &a) { return chk(SymExpr::sub(a[0], a[1])); })};
    case Op::Mul:
      return {elementwise(
          [&](const std::vector<SymExpr> &a) { return chk(SymExpr::mul(a[0], a[1])); })};
    case Op::Div:
      return {elementwise([&](const std::vector<SymExpr> &a) { return divide(a[0], a[1]); })};
    case Op::Min:
    case Op::Max: {
      bool wantMax = n_.op() == Op::Max;
      return {elementwise([&](const std::vector<SymExpr> &a) { return pick(a, wantMax); })};
    }
    case Op::Equal:
    case Op::Less:
    case Op::LessEqual:
    case Op::Greater:
    case Op::GreaterEqual: {
      Op op = n_.op();
      return {elementwise([&](const std::vector<SymExpr> &a) {
        const char *rel = op == Op::Equal       ? " == "
                          : op == Op::Less      ? " < "
                          : op == Op::LessEqual ? " <= "
                          : op == Op::Greater   ? " > "
                                                : " >= ";
        int s = sign(chk(SymExpr::sub(a[0], a[1])), cat(a[0].str(), rel, a[1].str()));
        bool v = op == Op::Equal       ? s == 0
                 : op == Op::Less      ? s < 0
                 : op == Op::LessEqual ? s <= 0
                 : op == Op::Greater   ? s > 0
                                       : s >= 0;
        return SymExpr(v ? 1 : 0);
      })};
    }
    case Op::Where:
      return {elementwise([&](const std::vector<SymExpr> &a) {
        return constantOf(a[0], "the condition").constant() != 0 ? a[1] : a[2];
      })};
    case Op::Expand: return {elementwise([&](const std::vector<SymExpr> &a) { return a[0]; })};
    case Op::Gather: {
      const SymT &idx = ops_[1];
      size_t axis = static_cast<size_t>(n_.i("axis"));
      const auto &os = outShape();
      SymElems out;
      for (int64_t i = 0; i < numel(os); ++i) {
        std::vector<int64_t> o = unravel(i, os), in;
        in.assign(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(axis));
        std::vector<int64_t> ii(o.begin() + static_cast<std::ptrdiff_t>(axis),
                                o.begin() + static_cast<std::ptrdiff_t>(axis + idx.shape.size()));
        int64_t k =
            constantOf(idx.e[static_cast<size_t>(ravel(ii, idx.shape))], "the index").constant();
        in.push_back(k < 0 ? k + x.shape[axis] : k);
        in.insert(in.end(), o.begin() + static_cast<std::ptrdiff_t>(axis + idx.shape.size()),
                  o.end());
        out.push_back(x.e[static_cast<size_t>(ravel(in, x.shape))]);
      }
      return {out};
    }
    case Op::Slice: {
      const auto &starts = n_.ints("starts"), &axes = n_.ints("axes"), &steps = n_.ints("steps");
      const auto &os = outShape();
      SymElems out;
      for (int64_t i = 0; i < numel(os); ++i) {
        std::vector<int64_t> idx = unravel(i, os);
        for (size_t k = 0; k < axes.size(); ++k)
          idx[axes[k]] = starts[k] + idx[axes[k]] * steps[k];
        out.push_back(x.e[static_cast<size_t>(ravel(idx, x.shape))]);
      }
      return {out};
    }
    case Op::Concat: {
      size_t axis =
          static_cast<size_t>(n_.i("axis") < 0 ? n_.i("axis") + x.shape.size() : n_.i("axis"));
      const auto &os = outShape();
      SymElems out;
      for (int64_t i = 0; i < numel(os); ++i) {
        std::vector<int64_t> idx = unravel(i, os);
        size_t k = 0;
        while (idx[axis] >= ops_[k].shape[axis])
          idx[axis] -= ops_[k++].shape[axis];
        out.push_back(ops_[k].e[static_cast<size_t>(ravel(idx, ops_[k].shape))]);
      }
      return {out};
    }
    case Op::Split: {
      size_t axis = static_cast<size_t>(n_.i("axis"));
      std::vector<SymElems> outs;
      int64_t offset = 0;
      for (size_t r = 0; r < n_.numResults(); ++r) {
        const auto &os = outShape(r);
        SymElems out;
        for (int64_t i = 0; i < numel(os); ++i) {
          std::vector<int64_t> idx = unravel(i, os);
          idx[axis] += offset;
          out.push_back(x.e[static_cast<size_t>(ravel(idx, x.shape))]);
        }
        offset += os[axis];
        outs.push_back(std::move(out));
      }
      return outs;
    }
    case Op::Transpose: {
      const auto &perm = n_.ints("perm");
      const auto &os = outShape();
      SymElems out;
      for (int64_t i = 0; i < numel(os); ++i) {
        std::vector<int64_t> o = unravel(i, os), in(o.size());
        for (size_t d = 0; d < perm.size(); ++d)
          in[static_cast<size_t>(perm[d])] = o[d];
        out.push_back(x.e[static_cast<size_t>(ravel(in, x.shape))]);
      }
      return {out};
    }
    case Op::Tile: {
      const auto &os = outShape();
      SymElems out;
      for (int64_t i = 0; i < numel(os); ++i) {
        std::vector<int64_t> idx = unravel(i, os);
        for (size_t d = 0; d < idx.size(); ++d)
          idx[d] %= x.shape[d];
        out.push_back(x.e[static_cast<size_t>(ravel(idx, x.shape))]);
      }
      return {out};
    }
    case Op::ReduceSum:
    case Op::ReduceProd:
    case Op::ReduceMin:
    case Op::ReduceMax: {
      std::vector<int64_t> axes = n_.ints("axes");
      if (axes.empty())
        for (size_t d = 0; d < x.shape.size(); ++d)
          axes.push_back(static_cast<int64_t>(d));
      // Group the input's elements by their output position (the reduced axes dropped).
      std::vector<std::vector<SymExpr>> groups(static_cast<size_t>(numel(outShape())));
      std::vector<int64_t> kept;
      for (size_t d = 0; d < x.shape.size(); ++d)
        if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
          kept.push_back(x.shape[d]);
      for (int64_t i = 0; i < numel(x.shape); ++i) {
        std::vector<int64_t> idx = unravel(i, x.shape), k;
        for (size_t d = 0; d < idx.size(); ++d)
          if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
            k.push_back(idx[d]);
        groups[static_cast<size_t>(ravel(k, kept))].push_back(x.e[static_cast<size_t>(i)]);
      }
      SymElems out;
      for (const auto &g : groups) {
        if (n_.op() == Op::ReduceMin || n_.op() == Op::ReduceMax) {
          if (g.empty())
            fail("reduces an empty shape value");
          out.push_back(pick(g, n_.op() == Op::ReduceMax));
          continue;
        }
        SymExpr acc = n_.op() == Op::ReduceSum ? 0 : 1;
        for (const SymExpr &e : g)
          acc = chk(n_.op() == Op::ReduceSum ? SymExpr::add(acc, e) : SymExpr::mul(acc, e));
        out.push_back(acc);
      }
      return {out};
    }
    default:
      fail(cat(n_.name(), " of a value computed from the symbolic dims (", symbolsOfOperands(),
               ") is not supported"));
    }
  }

  const Node &n_;
  const std::vector<DimRange> &dims_;
  std::vector<SymT> ops_;
  bool floatOperand_ = false;
};

} // namespace

std::vector<SymElems> evalSymbolic(const Node &n, const std::vector<const SymElems *> &operandSyms,
                                   const std::vector<DimRange> &dims) {
  return SymEval(n, operandSyms, dims).run();
}

} // namespace aicf
