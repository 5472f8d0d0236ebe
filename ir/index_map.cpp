// See index_map.h. Simplification works on a linear form: a constant plus coefficients of atoms,
// an atom being a dim or a floordiv / mod of a simplified linear form. Ranges come from the
// domain (each dim d in [0, domain[d])), so a floordiv whose remainder part cannot reach the
// divisor vanishes and a mod whose argument stays below the modulus is the argument itself.
#include "ir/index_map.h"

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>

namespace aicf {

namespace {

using Kind = IndexExprNode::Kind;

IndexExpr make(Kind k, int64_t v, IndexExpr a = {}, IndexExpr b = {}) {
  auto n = std::make_shared<IndexExprNode>();
  n->kind = k;
  n->value = v;
  n->a = std::move(a);
  n->b = std::move(b);
  return n;
}

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t floorMod(int64_t a, int64_t b) {
  return a - floorDiv(a, b) * b;
}

// A constant plus coef * atom terms, atoms keyed by their printed form (deterministic order).
struct Linear {
  int64_t constant = 0;
  std::map<std::string, std::pair<IndexExpr, int64_t>> terms;

  void add(const IndexExpr &atom, int64_t coef) {
    if (coef == 0)
      return;
    std::string key = str(atom);
    auto it = terms.find(key);
    if (it == terms.end()) {
      terms.emplace(key, std::make_pair(atom, coef));
    } else if ((it->second.second += coef) == 0) {
      terms.erase(it);
    }
  }
  void addAll(const Linear &o, int64_t scale) {
    constant += o.constant * scale;
    for (const auto &[k, t] : o.terms)
      add(t.first, t.second * scale);
  }
};

class Simplifier {
public:
  explicit Simplifier(const std::vector<int64_t> &domain) : domain_(domain) {}

  Linear linear(const IndexExpr &e) {
    Linear l;
    switch (e->kind) {
    case Kind::Const: l.constant = e->value; break;
    case Kind::Dim:
      if (e->value < static_cast<int64_t>(domain_.size()) && domain_[e->value] == 1)
        break; // a size-1 dim is always 0
      l.add(e, 1);
      break;
    case Kind::Add:
      l = linear(e->a);
      l.addAll(linear(e->b), 1);
      break;
    case Kind::Mul: l.addAll(linear(e->a), e->value); break;
    case Kind::FloorDiv: l = floorDivOf(linear(e->a), e->value); break;
    case Kind::Mod: l = modOf(linear(e->a), e->value); break;
    }
    return l;
  }

  std::pair<int64_t, int64_t> range(const Linear &l) {
    int64_t lo = l.constant, hi = l.constant;
    for (const auto &[k, t] : l.terms) {
      auto [alo, ahi] = atomRange(t.first);
      int64_t c = t.second;
      lo += c > 0 ? c * alo : c * ahi;
      hi += c > 0 ? c * ahi : c * alo;
    }
    return {lo, hi};
  }

  static IndexExpr build(const Linear &l) {
    IndexExpr out;
    auto push = [&](IndexExpr t) { out = out ? make(Kind::Add, 0, out, t) : t; };
    // Dims first, in dim order, then the other atoms by key: "d0 * 64 + d1 + (d2 floordiv 4)".
    std::vector<std::pair<IndexExpr, int64_t>> ordered;
    for (const auto &[k, t] : l.terms)
      ordered.push_back(t);
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto &x, const auto &y) {
      bool dx = x.first->kind == Kind::Dim, dy = y.first->kind == Kind::Dim;
      if (dx != dy)
        return dx;
      return dx && x.first->value < y.first->value;
    });
    for (const auto &[atom, coef] : ordered)
      push(coef == 1 ? atom : make(Kind::Mul, coef, atom));
    if (l.constant != 0 || !out)
      push(make(Kind::Const, l.constant));
    return out;
  }

private:
  std::pair<int64_t, int64_t> atomRange(const IndexExpr &a) {
    switch (a->kind) {
    case Kind::Dim: {
      int64_t n = a->value < static_cast<int64_t>(domain_.size()) ? domain_[a->value] : 1;
      return {0, std::max<int64_t>(n, 1) - 1};
    }
    case Kind::FloorDiv: {
      auto [lo, hi] = range(linear(a->a));
      return {floorDiv(lo, a->value), floorDiv(hi, a->value)};
    }
    case Kind::Mod: return {0, a->value - 1};
    default: throw InternalError("index map: unexpected atom " + str(a));
    }
  }

  // The part of `l` whose coefficients (and constant) are multiples of k, divided by k, and the
  // rest (constant reduced into [0, k)).
  static void splitBy(const Linear &l, int64_t k, Linear &quot, Linear &rest) {
    quot.constant = floorDiv(l.constant, k);
    rest.constant = floorMod(l.constant, k);
    for (const auto &[key, t] : l.terms) {
      if (t.second % k == 0)
        quot.add(t.first, t.second / k);
      else
        rest.add(t.first, t.second);
    }
  }

  static int64_t gcdOf(const Linear &l, int64_t k) {
    int64_t g = std::gcd(k, l.constant);
    for (const auto &[key, t] : l.terms)
      g = std::gcd(g, t.second);
    return g;
  }

  static Linear scaled(const Linear &l, int64_t div) {
    Linear o;
    o.constant = l.constant / div;
    for (const auto &[key, t] : l.terms)
      o.add(t.first, t.second / div);
    return o;
  }

  // l as c * x + r, with c > 1 a proper divisor of k taken from l's coefficients, x the terms
  // whose coefficients c divides (divided by c) and r the rest, in [0, c). The largest such c
  // wins; nullopt when none exists.
  struct Peeled {
    Linear x, r;
    int64_t c = 1;
  };
  std::optional<Peeled> peel(const Linear &l, int64_t k) {
    std::vector<int64_t> cands;
    for (const auto &[key, t] : l.terms)
      if (t.second > 1 && t.second < k && k % t.second == 0)
        cands.push_back(t.second);
    std::sort(cands.rbegin(), cands.rend());
    for (int64_t c : cands) {
      Peeled p;
      p.c = c;
      p.x.constant = floorDiv(l.constant, c);
      p.r.constant = floorMod(l.constant, c);
      for (const auto &[key, t] : l.terms) {
        if (t.second % c == 0)
          p.x.add(t.first, t.second / c);
        else
          p.r.add(t.first, t.second);
      }
      auto [lo, hi] = range(p.r);
      if (lo >= 0 && hi < c)
        return p;
    }
    return std::nullopt;
  }

  Linear floorDivOf(const Linear &l, int64_t k) {
    AICF_CHECK(k > 0, "index map: floordiv by ", k);
    if (k == 1)
      return l;
    Linear quot, rest;
    splitBy(l, k, quot, rest);
    auto [lo, hi] = range(rest);
    if (floorDiv(lo, k) == floorDiv(hi, k)) {
      quot.constant += floorDiv(lo, k);
      return quot;
    }
    // (c * x + r) floordiv k = x floordiv (k / c) when c divides k and r stays in [0, c).
    if (auto p = peel(rest, k)) {
      quot.addAll(floorDivOf(p->x, k / p->c), 1);
      return quot;
    }
    // (g * r) floordiv (g * k') = r floordiv k'.
    int64_t g = gcdOf(rest, k);
    if (g > 1) {
      rest = scaled(rest, g);
      k /= g;
    }
    // (x floordiv a) floordiv k = x floordiv (a * k).
    if (rest.constant == 0 && rest.terms.size() == 1) {
      const auto &[atom, coef] = rest.terms.begin()->second;
      if (coef == 1 && atom->kind == Kind::FloorDiv) {
        quot.addAll(floorDivOf(linear(atom->a), atom->value * k), 1);
        return quot;
      }
    }
    quot.add(make(Kind::FloorDiv, k, build(rest)), 1);
    return quot;
  }

  Linear modOf(const Linear &l, int64_t k) {
    AICF_CHECK(k > 0, "index map: mod by ", k);
    Linear out;
    if (k == 1)
      return out;
    Linear quot, rest;
    splitBy(l, k, quot, rest);
    auto [lo, hi] = range(rest);
    if (floorDiv(lo, k) == floorDiv(hi, k)) { // no wrap: rest minus a constant multiple of k
      rest.constant -= floorDiv(lo, k) * k;
      return rest;
    }
    // (c * x + r) mod k = c * (x mod (k / c)) + r when c divides k and r stays in [0, c).
    if (auto p = peel(rest, k)) {
      out.addAll(modOf(p->x, k / p->c), p->c);
      out.addAll(p->r, 1);
      return out;
    }
    // (g * r) mod (g * k') = g * (r mod k').
    int64_t g = gcdOf(rest, k);
    if (g > 1) {
      Linear inner = modOf(scaled(rest, g), k / g);
      out.addAll(inner, g);
      return out;
    }
    // (x mod a) mod k = x mod k when k divides a.
    if (rest.constant == 0 && rest.terms.size() == 1) {
      const auto &[atom, coef] = rest.terms.begin()->second;
      if (coef == 1 && atom->kind == Kind::Mod && atom->value % k == 0)
        return modOf(linear(atom->a), k);
    }
    out.add(make(Kind::Mod, k, build(rest)), 1);
    return out;
  }

  const std::vector<int64_t> &domain_;
};

std::string wrap(const IndexExpr &e) {
  std::string s = str(e);
  return e->kind == Kind::Add ? "(" + s + ")" : s;
}

// The row-major unflatten of `flat` into `shape`, simplified over `domain`.
std::vector<IndexExpr> unflatten(const IndexExpr &flat, const std::vector<int64_t> &shape,
                                 const std::vector<int64_t> &domain) {
  std::vector<int64_t> st = stridesOf(shape);
  std::vector<IndexExpr> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    IndexExpr q = ixFloorDiv(flat, st[d]);
    out.push_back(simplify(d == 0 ? q : ixMod(q, shape[d]), domain));
  }
  return out;
}

IndexExpr flatten(const std::vector<IndexExpr> &idx, const std::vector<int64_t> &shape) {
  std::vector<int64_t> st = stridesOf(shape);
  IndexExpr f = ixConst(0);
  for (size_t d = 0; d < shape.size(); ++d)
    f = ixAdd(f, ixMul(idx[d], st[d]));
  return f;
}

std::vector<IndexExpr> dims(size_t n) {
  std::vector<IndexExpr> out;
  for (size_t d = 0; d < n; ++d)
    out.push_back(ixDim(static_cast<int>(d)));
  return out;
}

IndexMap mapOf(const std::vector<int64_t> &domain, const std::vector<int64_t> &range,
               std::vector<IndexExpr> exprs) {
  IndexMap m;
  m.domain = domain;
  m.range = range;
  for (IndexExpr &e : exprs)
    e = simplify(e, domain);
  m.exprs = std::move(exprs);
  return m;
}

int64_t normAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

} // namespace

IndexExpr ixConst(int64_t c) {
  return make(Kind::Const, c);
}
IndexExpr ixDim(int d) {
  return make(Kind::Dim, d);
}
IndexExpr ixAdd(IndexExpr a, IndexExpr b) {
  return make(Kind::Add, 0, std::move(a), std::move(b));
}
IndexExpr ixMul(IndexExpr a, int64_t c) {
  return make(Kind::Mul, c, std::move(a));
}
IndexExpr ixFloorDiv(IndexExpr a, int64_t c) {
  AICF_CHECK(c > 0, "index map: floordiv by ", c);
  return make(Kind::FloorDiv, c, std::move(a));
}
IndexExpr ixMod(IndexExpr a, int64_t c) {
  AICF_CHECK(c > 0, "index map: mod by ", c);
  return make(Kind::Mod, c, std::move(a));
}

IndexExpr simplify(const IndexExpr &e, const std::vector<int64_t> &domain) {
  Simplifier s(domain);
  return Simplifier::build(s.linear(e));
}

std::pair<int64_t, int64_t> rangeOf(const IndexExpr &e, const std::vector<int64_t> &domain) {
  Simplifier s(domain);
  return s.range(s.linear(e));
}

IndexExpr substitute(const IndexExpr &e, const std::vector<IndexExpr> &subst) {
  switch (e->kind) {
  case Kind::Const: return e;
  case Kind::Dim:
    AICF_CHECK(e->value < static_cast<int64_t>(subst.size()), "index map: d", e->value,
               " has no substitute");
    return subst[e->value];
  case Kind::Add: return ixAdd(substitute(e->a, subst), substitute(e->b, subst));
  case Kind::Mul: return ixMul(substitute(e->a, subst), e->value);
  case Kind::FloorDiv: return ixFloorDiv(substitute(e->a, subst), e->value);
  case Kind::Mod: return ixMod(substitute(e->a, subst), e->value);
  }
  return e;
}

bool readsDim(const IndexExpr &e, int d) {
  if (!e)
    return false;
  if (e->kind == IndexExprNode::Kind::Dim)
    return e->value == d;
  return readsDim(e->a, d) || readsDim(e->b, d);
}

int64_t evaluate(const IndexExpr &e, const std::vector<int64_t> &idx) {
  switch (e->kind) {
  case Kind::Const: return e->value;
  case Kind::Dim: return idx.at(static_cast<size_t>(e->value));
  case Kind::Add: return evaluate(e->a, idx) + evaluate(e->b, idx);
  case Kind::Mul: return evaluate(e->a, idx) * e->value;
  case Kind::FloorDiv: return floorDiv(evaluate(e->a, idx), e->value);
  case Kind::Mod: return floorMod(evaluate(e->a, idx), e->value);
  }
  return 0;
}

std::string str(const IndexExpr &e) {
  switch (e->kind) {
  case Kind::Const: return std::to_string(e->value);
  case Kind::Dim: return "d" + std::to_string(e->value);
  case Kind::Add: {
    // a + (-c) prints as a - c.
    if (e->b->kind == Kind::Const && e->b->value < 0)
      return str(e->a) + " - " + std::to_string(-e->b->value);
    if (e->b->kind == Kind::Mul && e->b->value < 0)
      return str(e->a) + " - " + str(ixMul(e->b->a, -e->b->value));
    return str(e->a) + " + " + str(e->b);
  }
  case Kind::Mul:
    if (e->value == -1)
      return "-" + wrap(e->a);
    return wrap(e->a) + " * " + std::to_string(e->value);
  case Kind::FloorDiv: return "(" + wrap(e->a) + " floordiv " + std::to_string(e->value) + ")";
  case Kind::Mod: return "(" + wrap(e->a) + " mod " + std::to_string(e->value) + ")";
  }
  return "?";
}

// ---- IndexMap ----------------------------------------------------------------------------------

IndexMap IndexMap::identity(const std::vector<int64_t> &shape) {
  return mapOf(shape, shape, dims(shape.size()));
}

bool IndexMap::isIdentity() const {
  if (domain != range)
    return false;
  for (size_t d = 0; d < exprs.size(); ++d)
    if (range[d] != 1 && !(exprs[d]->kind == Kind::Dim && exprs[d]->value == int64_t(d)))
      return false;
  return true;
}

std::vector<int64_t> IndexMap::apply(const std::vector<int64_t> &idx) const {
  std::vector<int64_t> out;
  for (const IndexExpr &e : exprs)
    out.push_back(evaluate(e, idx));
  return out;
}

std::string IndexMap::str() const {
  std::string s = "(";
  for (size_t d = 0; d < domain.size(); ++d)
    s += (d ? ", d" : "d") + std::to_string(d);
  s += ") -> (";
  for (size_t d = 0; d < exprs.size(); ++d)
    s += (d ? ", " : "") + aicf::str(exprs[d]);
  return s + ")";
}

IndexExpr IndexMap::flatOffset() const {
  return simplify(flatten(exprs, range), domain);
}

std::optional<IndexMap::Stride> IndexMap::strideOf(int d) const {
  std::function<bool(const IndexExpr &)> uses = [&](const IndexExpr &x) {
    return (x->kind == Kind::Dim && x->value == d) || (x->a && uses(x->a)) || (x->b && uses(x->b));
  };
  // The coefficient of d in a sum of coefficient * atom terms, nullopt if d hides in an atom.
  std::function<std::optional<int64_t>(const IndexExpr &)> linearCoef =
      [&](const IndexExpr &e) -> std::optional<int64_t> {
    switch (e->kind) {
    case Kind::Const: return 0;
    case Kind::Dim: return e->value == d ? 1 : 0;
    case Kind::Add: {
      auto a = linearCoef(e->a), b = linearCoef(e->b);
      if (!a || !b)
        return std::nullopt;
      return *a + *b;
    }
    case Kind::Mul: {
      auto a = linearCoef(e->a);
      if (!a)
        return std::nullopt;
      return *a * e->value;
    }
    default: return uses(e) ? std::nullopt : std::optional<int64_t>(0);
    }
  };
  Stride st;
  st.run = d < static_cast<int>(domain.size()) ? domain[d] : 1;
  bool ok = true;
  // Top-level terms of the offset: coefficient * atom.
  std::function<void(const IndexExpr &, int64_t)> walk = [&](const IndexExpr &e, int64_t scale) {
    switch (e->kind) {
    case Kind::Const: break;
    case Kind::Dim:
      if (e->value == d)
        st.step += scale;
      break;
    case Kind::Add:
      walk(e->a, scale);
      walk(e->b, scale);
      break;
    case Kind::Mul: walk(e->a, scale * e->value); break;
    case Kind::FloorDiv:
    case Kind::Mod: {
      if (!uses(e->a))
        break;
      std::optional<int64_t> a = linearCoef(e->a);
      if (!a || *a <= 0 || *a >= e->value) {
        ok = false;
        break;
      }
      st.run = std::min(st.run, std::max<int64_t>(1, e->value / *a));
      if (e->kind == Kind::Mod)
        st.step += scale * *a;
      break;
    }
    }
  };
  walk(flatOffset(), 1);
  if (!ok)
    return std::nullopt;
  return st;
}

IndexMap compose(const IndexMap &first, const IndexMap &then) {
  AICF_CHECK(first.range == then.domain, "index map: composing ", first.str(), " then ", then.str(),
             ": shapes differ");
  std::vector<IndexExpr> exprs;
  for (const IndexExpr &e : then.exprs)
    exprs.push_back(substitute(e, first.exprs));
  return mapOf(first.domain, then.range, std::move(exprs));
}

// ---- layout ops --------------------------------------------------------------------------------

bool isLayoutOp(const Node &n) {
  switch (n.op()) {
  case Op::Reshape:
  case Op::Transpose:
  case Op::Split:
  case Op::Slice:
  case Op::Expand:
  case Op::Concat: break;
  default: return false;
  }
  for (const Value *v : n.operands())
    if (!v->type().isStatic())
      return false;
  for (const Value *v : n.results())
    if (!v->type().isStatic())
      return false;
  return true;
}

std::vector<LayoutPiece> layoutPieces(const Node &n, int result) {
  const std::vector<int64_t> &out = n.result(result)->type().shape;
  const std::vector<int64_t> &in = n.operand(0)->type().shape;
  std::vector<IndexExpr> d = dims(out.size());
  auto one = [&](std::vector<IndexExpr> exprs) {
    LayoutPiece p;
    p.map = mapOf(out, in, std::move(exprs));
    return std::vector<LayoutPiece>{p};
  };
  switch (n.op()) {
  case Op::Reshape: return one(unflatten(flatten(d, out), in, out));
  case Op::Transpose: {
    // result dim i is operand dim perm[i].
    const std::vector<int64_t> &perm = n.ints("perm");
    std::vector<IndexExpr> e(in.size());
    for (size_t i = 0; i < perm.size(); ++i)
      e[static_cast<size_t>(perm[i])] = d[i];
    return one(e);
  }
  case Op::Split: {
    int64_t axis = normAxis(n.i("axis"), in.size());
    int64_t offset = 0;
    for (int r = 0; r < result; ++r)
      offset += n.result(r)->type().shape[static_cast<size_t>(axis)];
    d[static_cast<size_t>(axis)] = ixAdd(d[static_cast<size_t>(axis)], ixConst(offset));
    return one(d);
  }
  case Op::Slice: {
    const std::vector<int64_t> &starts = n.ints("starts"), &axes = n.ints("axes"),
                               &steps = n.ints("steps");
    for (size_t k = 0; k < axes.size(); ++k) {
      size_t a = static_cast<size_t>(normAxis(axes[k], in.size()));
      d[a] = ixAdd(ixMul(d[a], steps[k]), ixConst(starts[k]));
    }
    return one(d);
  }
  case Op::Expand: {
    // numpy broadcast: leading dims dropped, size-1 dims read at 0.
    std::vector<IndexExpr> e;
    size_t lead = out.size() - in.size();
    for (size_t k = 0; k < in.size(); ++k)
      e.push_back(in[k] == 1 ? ixConst(0) : d[lead + k]);
    return one(e);
  }
  case Op::Concat: {
    size_t axis = static_cast<size_t>(normAxis(n.i("axis"), out.size()));
    std::vector<LayoutPiece> pieces;
    int64_t offset = 0;
    for (size_t k = 0; k < n.numOperands(); ++k) {
      int64_t len = n.operand(k)->type().shape[axis];
      if (len == 0)
        continue;
      std::vector<IndexExpr> e = d;
      e[axis] = ixAdd(d[axis], ixConst(-offset));
      LayoutPiece p;
      p.operand = static_cast<int>(k);
      p.map = mapOf(out, n.operand(k)->type().shape, std::move(e));
      p.guardAxis = static_cast<int>(axis);
      p.lo = offset;
      p.hi = offset + len;
      pieces.push_back(std::move(p));
      offset += len;
    }
    return pieces;
  }
  default: break;
  }
  throw InternalError(cat("layoutPieces: ", n.name(), " is not a layout op"));
}

std::optional<IndexMap> scatterMap(const Node &n, int operand) {
  const std::vector<int64_t> &in = n.operand(operand)->type().shape;
  const std::vector<int64_t> &out = n.result(0)->type().shape;
  std::vector<IndexExpr> d = dims(in.size());
  switch (n.op()) {
  case Op::Reshape: return mapOf(in, out, unflatten(flatten(d, in), out, in));
  case Op::Transpose: {
    const std::vector<int64_t> &perm = n.ints("perm");
    std::vector<IndexExpr> e;
    for (int64_t p : perm)
      e.push_back(d[static_cast<size_t>(p)]);
    return mapOf(in, out, std::move(e));
  }
  case Op::Concat: {
    size_t axis = static_cast<size_t>(normAxis(n.i("axis"), out.size()));
    int64_t offset = 0;
    for (int k = 0; k < operand; ++k)
      offset += n.operand(k)->type().shape[axis];
    d[axis] = ixAdd(d[axis], ixConst(offset));
    return mapOf(in, out, std::move(d));
  }
  default: return std::nullopt;
  }
}

std::optional<Scatter> partialScatter(const Node &n, int operand) {
  if (std::optional<IndexMap> m = scatterMap(n, operand))
    return Scatter{*m, {}};
  if (n.op() != Op::Slice || operand != 0)
    return std::nullopt;
  const std::vector<int64_t> &in = n.operand(0)->type().shape;
  const std::vector<int64_t> &out = n.result(0)->type().shape;
  const std::vector<int64_t> &starts = n.ints("starts"), &axes = n.ints("axes"),
                             &steps = n.ints("steps");
  std::vector<IndexExpr> d = dims(in.size());
  Scatter s;
  for (size_t k = 0; k < axes.size(); ++k) {
    if (steps[k] != 1)
      return std::nullopt;
    size_t a = static_cast<size_t>(normAxis(axes[k], in.size()));
    if (starts[k] == 0 && out[a] == in[a])
      continue;
    s.keep.push_back(IndexBound{d[a], starts[k], starts[k] + out[a]});
    d[a] = ixAdd(d[a], ixConst(-starts[k]));
  }
  s.map = mapOf(in, out, std::move(d));
  return s;
}

} // namespace aicf
