// Helpers shared by the pointwise, reduction, pooling and data-movement recipes (see
// flat_loop.h).
#include "lower/flat_loop.h"

#include "lower/recipes.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <set>

namespace aicf::flatloop {

using kir::E;

Schedule schedule(const Knobs &k, int64_t n, int64_t maxVec, std::optional<SymExpr> symN) {
  Schedule s;
  if (symN && symN->isConstant())
    symN.reset();
  // The default knobs are the planning-point count's: build keeps the guard wherever the chunk
  // does not divide a symbolic count for every value of the dims (a guarded 16-wide loop beats
  // one element per block).
  s.symN = symN;
  if (isGpuPlan(k)) {
    s.threads = k.get("threads", n >= 65536 ? 256 : 128);
    s.vec = k.get("vec", (maxVec >= 4 && n % 4 == 0) ? 4 : 1);
  } else {
    int64_t v = 16;
    while (v > 1 && (v > maxVec || n % v != 0))
      v /= 2;
    s.threads = k.get("threads", 1);
    s.vec = k.get("vec", v);
  }
  AICF_CHECK(s.threads >= 1 && s.vec >= 1, "bad schedule: threads ", s.threads, ", vec ", s.vec);
  int64_t chunk = s.threads * s.vec;
  s.blocks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
  return s;
}

namespace {

// `e` with every subexpression `f` replaces (non-null) replaced, outermost first; a
// replacement is itself mapped. Unchanged subtrees are shared.
using ExprMap = std::function<E(const E &)>;
E mapExpr(const E &e, const ExprMap &f) {
  if (E r = f(e))
    return mapExpr(r, f);
  if (e->args.empty())
    return e;
  kir::Expr copy = *e.get();
  bool changed = false;
  for (kir::ExprP &a : copy.args) {
    E r = mapExpr(E(a), f);
    changed |= r.get() != a;
    a = r.get();
  }
  return changed ? E(std::make_shared<const kir::Expr>(std::move(copy))) : e;
}
// Copies of the statements with every expression mapped by `f`.
std::vector<kir::StmtP> mapStmts(const std::vector<kir::StmtP> &ss, const ExprMap &f) {
  std::vector<kir::StmtP> out;
  for (const kir::StmtP &s : ss) {
    auto c = std::make_shared<kir::Stmt>(*s);
    for (E *e : {&c->begin, &c->extent, &c->value, &c->cond})
      if (*e)
        *e = mapExpr(*e, f);
    for (E &e : c->indices)
      e = mapExpr(e, f);
    for (auto *b : {&c->body, &c->elseBody, &c->init, &c->update})
      *b = mapStmts(*b, f);
    out.push_back(c);
  }
  return out;
}

// The lane split of a flat index (issue 53). Inside the vector loop the element is i = i0 + v,
// i0 the vector's first element (a multiple of vec) and v < vec its lane, so a digit of i by a
// constant D needs no division per element:
//   vec | D:  i / D = i0 / D            i % D = i0 % D + v
//   D | vec:  i / D = i0 / D + v / D    i % D = v % D
// (i0 / D and i0 % D are the same for every lane: the host compiler computes them once per
// vector, outside the lane loop, and the lane's index stays linear in v). Without it the
// multi-index of every element of a transposing read, a resize or a broadcast was a chain of
// 64-bit divisions (10 ns per element: 60x the cost model's prediction for a fused
// elementwise kernel reading a blocked tensor through an NCHW index). Exact for i >= 0.
// Whether the lane split may rewrite the statements: only the kinds a flat loop's body holds,
// none rebinding i, i0 or v.
bool splittable(const std::vector<kir::StmtP> &ss) {
  using K = kir::Stmt::Kind;
  for (const kir::StmtP &s : ss) {
    if (s->kind != K::Seq && s->kind != K::For && s->kind != K::If && s->kind != K::Store &&
        s->kind != K::Decl && s->kind != K::Assign && s->kind != K::Reduce && s->kind != K::Comment)
      return false;
    if ((s->kind == K::For || s->kind == K::Decl || s->kind == K::Reduce) &&
        (s->var == "i" || s->var == "i0" || s->var == "v"))
      return false;
    for (auto *b : {&s->body, &s->elseBody, &s->init, &s->update})
      if (!splittable(*b))
        return false;
  }
  return true;
}

// i / d or i % d (d > 0) split into vector start and lane, or null (`used` set when split).
E laneSplit(const E &e, int64_t vec, bool &used) {
  const kir::Expr &x = *e.get();
  if (x.kind != kir::Expr::Kind::Binary || x.type != DType::I64 ||
      (x.bop != kir::BinOp::Div && x.bop != kir::BinOp::Mod) ||
      x.args[0]->kind != kir::Expr::Kind::Var || x.args[0]->var != "i" ||
      x.args[1]->kind != kir::Expr::Kind::Int || x.args[1]->ival <= 0)
    return E();
  int64_t d = x.args[1]->ival;
  E i0 = kir::var("i0"), v = lane();
  bool div = x.bop == kir::BinOp::Div;
  if (d % vec == 0) {
    used = true;
    return div ? i0 / E(d) : i0 % E(d) + v;
  }
  if (vec % d == 0) {
    used = true;
    return div ? i0 / E(d) + v / E(d) : v % E(d);
  }
  return E();
}

// Lane-invariant selects decided once per vector (issue 53). A select whose condition reads
// neither the lane nor anything computed per element (a concat's "which input" test, with the
// lane split above: i0 / 3136 < 16) picks the same arm for every lane of a vector. Left in the
// lane loop, the host compiler either gave up vectorising it or if-converted the chain,
// loading every arm for every element (DenseNet's concat -> BN -> ReLU over 26 inputs: 1.5 ms
// against 0.008 predicted). Unswitched, the vector loop is versioned per arm: the test runs
// once per vector and each version is one straight, vectorisable lane loop. At most kMaxVersions
// versions; the rest stays a select.
constexpr int kMaxVersions = 64;

bool readsAny(const kir::ExprP &e, const std::set<std::string> &names) {
  bool hit = false;
  kir::forEachExpr(e, [&](const kir::Expr &x) {
    hit |=
        (x.kind == kir::Expr::Kind::Var && names.count(x.var)) || x.kind == kir::Expr::Kind::Load;
  });
  return hit;
}

void declared(const std::vector<kir::StmtP> &ss, std::set<std::string> &names) {
  for (const kir::StmtP &s : ss) {
    if (s->kind == kir::Stmt::Kind::Decl || s->kind == kir::Stmt::Kind::For ||
        s->kind == kir::Stmt::Kind::Reduce)
      names.insert(s->var);
    for (auto *b : {&s->body, &s->elseBody, &s->init, &s->update})
      declared(*b, names);
  }
}

// The first select (outermost first, statements in order) whose condition reads none of
// `varying` and no buffer.
kir::E invariantSelect(const kir::E &e, const std::set<std::string> &varying) {
  if (e->kind == kir::Expr::Kind::Select && !readsAny(e->args[0], varying))
    return E(e->args[0]);
  for (const kir::ExprP &a : e->args)
    if (E c = invariantSelect(E(a), varying))
      return c;
  return E();
}
kir::E invariantSelect(const std::vector<kir::StmtP> &ss, const std::set<std::string> &varying) {
  for (const kir::StmtP &s : ss) {
    for (const E *e : {&s->begin, &s->extent, &s->value, &s->cond})
      if (*e)
        if (E c = invariantSelect(*e, varying))
          return c;
    for (const E &e : s->indices)
      if (E c = invariantSelect(e, varying))
        return c;
    for (auto *b : {&s->body, &s->elseBody, &s->init, &s->update})
      if (E c = invariantSelect(*b, varying))
        return c;
  }
  return E();
}

// The statements with every select on `cond` replaced by its arm.
std::vector<kir::StmtP> takeArm(const std::vector<kir::StmtP> &ss, const kir::E &cond, bool arm) {
  return mapStmts(ss, [&](const E &e) {
    return e->kind == kir::Expr::Kind::Select && kir::exprEqual(e->args[0], cond.get())
               ? E(e->args[arm ? 1 : 2])
               : E();
  });
}

// The lane loop over `inner`, versioned on its lane-invariant selects.
kir::StmtP unswitchedLaneLoop(const std::vector<kir::StmtP> &inner, int64_t vec,
                              const std::set<std::string> &varying, int &budget) {
  E cond = budget > 1 ? invariantSelect(inner, varying) : E();
  if (!cond)
    return kir::forLoop("v", E(int64_t(0)), E(vec), inner, 1, kir::Stmt::LoopKind::Vectorized);
  --budget;
  kir::StmtP yes = unswitchedLaneLoop(takeArm(inner, cond, true), vec, varying, budget);
  kir::StmtP no = unswitchedLaneLoop(takeArm(inner, cond, false), vec, varying, budget);
  return kir::ifThen(cond, {yes}, {no});
}

// Lane-invariant declarations hoisted out of the lane loop (issue 53). A top-level declaration
// of the element's body whose value reads no lane-varying name and no buffer (with the lane
// split: a resize's source row and column and their weights, computed from i0) and that is
// never assigned is the same for every lane: declared once per vector, before the lane loop.
// Left inside, its float math and NaN-aware clamps sat between the loop and the loads they
// index, and g++ vectorised neither (a blocked resize: 16 contiguous lanes per tap, run one
// float at a time).
void assignedNames(const std::vector<kir::StmtP> &ss, std::set<std::string> &names) {
  for (const kir::StmtP &s : ss) {
    if (s->kind == kir::Stmt::Kind::Assign)
      names.insert(s->var);
    for (auto *b : {&s->body, &s->elseBody, &s->init, &s->update})
      assignedNames(*b, names);
  }
}

std::vector<kir::StmtP> hoistInvariantDecls(std::vector<kir::StmtP> &work) {
  std::set<std::string> assigned, varying = {"v", "i"};
  assignedNames(work, assigned);
  declared(work, varying);
  std::vector<kir::StmtP> hoisted, rest;
  for (const kir::StmtP &s : work) {
    if (s->kind == kir::Stmt::Kind::Decl && !assigned.count(s->var) &&
        !readsAny(s->value.get(), varying)) {
      varying.erase(s->var);
      hoisted.push_back(s);
    } else {
      rest.push_back(s);
    }
  }
  work = std::move(rest);
  return hoisted;
}

} // namespace

void build(kir::Kernel &kern, int64_t n, const Schedule &s,
           const std::function<std::vector<kir::StmtP>(E i)> &body) {
  kern.grid = {{"b", s.blocks}};
  kern.threadVar = "t";
  kern.threads = s.threads;
  kern.knobs["threads"] = s.threads;
  kern.knobs["vec"] = s.vec;
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = n;
  kern.problem = problem;
  int64_t chunk = s.threads * s.vec;
  bool guard = s.blocks * chunk != n;
  E count = E(n);
  if (s.symN) {
    // The grid and the guard from the dims: exact blocks when the chunk divides the count for
    // every value, else ceil and a guard.
    std::optional<SymExpr> exact = SymExpr::divExact(*s.symN, chunk);
    kern.symGrid = {exact ? SymExtent{*exact, 1} : SymExtent{*s.symN, chunk}};
    guard = !exact.has_value();
    count = kir::symE(*s.symN);
  }
  E base = kir::var("b") * E(s.threads) + kir::var(kern.threadVar);
  E i = s.vec == 1 ? base : vectorStart(kern, s) + lane();
  std::vector<kir::StmtP> inner = {kir::decl("i", DType::I64, i)};
  std::vector<kir::StmtP> work = body(kir::var("i"));
  bool split = false;
  if (s.vec > 1 && splittable(work)) {
    std::vector<kir::StmtP> splitWork =
        mapStmts(work, [&](const E &e) { return laneSplit(e, s.vec, split); });
    if (split)
      work = std::move(splitWork);
  }
  std::vector<kir::StmtP> hoisted;
  if (s.vec > 1)
    hoisted = hoistInvariantDecls(work);
  if (guard)
    inner.push_back(kir::ifThen(kir::var("i") < count, work));
  else
    inner.insert(inner.end(), work.begin(), work.end());
  std::vector<kir::StmtP> regionBody;
  if (s.vec == 1)
    regionBody = inner;
  else {
    std::set<std::string> varying = {"v", "i"};
    declared(inner, varying);
    int budget = kMaxVersions;
    regionBody = hoisted;
    regionBody.push_back(unswitchedLaneLoop(inner, s.vec, varying, budget));
  }
  if (split)
    regionBody.insert(regionBody.begin(), kir::decl("i0", DType::I64, vectorStart(kern, s)));
  kern.body.push_back(kir::region(kern.threadVar, regionBody));
}

std::optional<size_t>
laneBlockAxis(const std::vector<int64_t> &shape,
              const std::function<std::vector<kir::StmtP>(const std::vector<E> &)> &body) {
  size_t r = shape.size();
  if (r < 2 || shape[r - 1] < 2)
    return std::nullopt;
  std::vector<E> idx;
  for (size_t d = 0; d < r; ++d)
    idx.push_back(kir::var(cat("q", d)));
  auto axisOf = [&](const kir::Expr &e) -> std::optional<size_t> {
    for (size_t d = 0; d < r; ++d)
      if (e.kind == kir::Expr::Kind::Var && e.var == cat("q", d))
        return d;
    return std::nullopt;
  };
  std::optional<size_t> found;
  kir::forEachStmt(body(idx), [&](const kir::Stmt &st) {
    for (const E *e : kir::ownExprs(st))
      if (*e)
        kir::forEachExpr(e->get(), [&](const kir::Expr &x) {
          if (found || x.kind != kir::Expr::Kind::Load || x.args.size() < 2 || !x.buf ||
              x.buf->shape.size() != x.args.size())
            return;
          int64_t L = x.buf->shape.back();
          std::optional<size_t> a = axisOf(*x.args.back());
          std::optional<size_t> w = axisOf(*x.args[x.args.size() - 2]);
          if ((L == 4 || L == 8 || L == 16) && a && *a + 1 < r && shape[*a] == L && w &&
              *w == r - 1)
            found = a;
        });
  });
  return found;
}

std::function<std::vector<kir::StmtP>(const std::vector<E> &)>
laneBlock(size_t axis, int64_t L,
          std::function<std::vector<kir::StmtP>(const std::vector<E> &)> body) {
  return [axis, L, body = std::move(body)](const std::vector<E> &oidx) {
    std::vector<E> idx = oidx;
    idx[axis] = kir::var("c_l");
    return std::vector<kir::StmtP>{
        kir::forLoop("c_l", E(int64_t(0)), E(L), body(idx), 1, kir::Stmt::LoopKind::Unrolled)};
  };
}

std::optional<Planes> planes(const std::vector<int64_t> &shape, int64_t vec) {
  if (vec <= 1 || shape.size() < 2)
    return std::nullopt;
  // The lane split alone serves a shape whose inner digits divide the vector up to one that
  // the vector divides (8 x 8, or rows of 16): no plane.
  int64_t inner = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    inner *= shape[d];
    if (inner % vec == 0)
      return std::nullopt;
    if (inner <= 0 || vec % inner != 0)
      break;
  }
  // Planes of the innermost one or two dims (two: [p / W, p % W] joins back into p); the first
  // a multiple of the vector, else the one least padded of those at least two vectors long.
  std::optional<Planes> best;
  inner = 1;
  for (size_t d = shape.size(); d-- > 1 && d + 2 >= shape.size();) {
    inner *= shape[d];
    if (inner <= 0)
      return std::nullopt;
    Planes p{d, inner, (inner + vec - 1) / vec * vec};
    if (p.padded == inner)
      return p;
    if (inner >= 2 * vec &&
        (!best || double(p.padded) / double(p.inner) < double(best->padded) / double(best->inner)))
      best = p;
  }
  return best;
}

void buildPlanes(kir::Kernel &kern, const std::vector<int64_t> &shape, const Planes &p, Schedule s,
                 const std::function<std::vector<kir::StmtP>(const std::vector<E> &)> &body) {
  auto at = shape.begin() + static_cast<std::ptrdiff_t>(p.split);
  std::vector<int64_t> outer(shape.begin(), at), inner(at, shape.end());
  int64_t planesN = 1;
  for (int64_t d : outer)
    planesN *= d;
  int64_t n = planesN * p.padded, chunk = s.threads * s.vec;
  s.blocks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
  s.symN.reset();
  build(kern, n, s, [&](E i) {
    std::vector<E> idx = unflatIndex(outer, i / E(p.padded));
    E off = i % E(p.padded);
    for (const E &e : unflatIndex(inner, off))
      idx.push_back(e);
    std::vector<kir::StmtP> work = body(idx);
    if (p.padded == p.inner)
      return work;
    return std::vector<kir::StmtP>{kir::ifThen(off < E(p.inner), work)};
  });
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = planesN * p.inner;
  problem->planes = true;
  kern.problem = problem;
}

E vectorStart(const kir::Kernel &kern, const Schedule &s) {
  return (kir::var("b") * E(s.threads) + kir::var(kern.threadVar)) * E(s.vec);
}

E lane() {
  return kir::var("v");
}

std::vector<kir::StmtP> splitLaneDigits(const std::vector<kir::StmtP> &body, int64_t vec) {
  if (vec <= 1 || !splittable(body))
    return body;
  bool split = false;
  std::vector<kir::StmtP> out =
      mapStmts(body, [&](const E &e) { return laneSplit(e, vec, split); });
  return split ? out : body;
}

E ne(E a, E b) {
  return kir::binary(kir::BinOp::Ne, std::move(a), std::move(b));
}

E orE(E a, E b) {
  return kir::binary(kir::BinOp::Or, std::move(a), std::move(b));
}

std::vector<KnobSet> candidates(const kir::Kernel &k, const Hardware &hw, int64_t maxVec) {
  int64_t n = problemOf<FlatLoopProblem>(k).n;
  bool anyVec = problemOf<FlatLoopProblem>(k).planes;
  std::vector<KnobSet> out;
  for (int64_t t :
       hw.gpu ? std::vector<int64_t>{64, 128, 256, 512} : std::vector<int64_t>{1, 4, 16})
    for (int64_t v : {1, 2, 4, 8, 16}) {
      if (v > maxVec || (v > 1 && n % v != 0 && !anyVec) || (hw.gpu && v > 4))
        continue;
      if (t * v > 16 && t * v / 2 >= n)
        continue; // one mostly idle block
      out.push_back(knobsToMap(FlatLoopKnobs{t, v}));
    }
  return out;
}

namespace {

// Host cycles one integer division or remainder by a constant takes per element when its
// dividend changes from lane to lane: a 64-bit multiply-high sequence, which AVX-512 has no
// vector form of, so the lane loop runs scalar around it (a store through the channel shuffle
// of a QDQ model, [c / 196 % 116 ...] per lane: 100 us measured where the vector loop's 6 were
// predicted). The fixed part is the scalar element the loop then is.
constexpr double kLaneDivisionCycles = 1.0;
constexpr double kScalarElementCycles = 1.0;

bool readsAny(const E &e, const std::set<std::string> &vars) {
  bool found = false;
  kir::forEachExpr(e.get(), [&](const kir::Expr &x) {
    found = found || (x.kind == kir::Expr::Kind::Var && vars.count(x.var));
  });
  return found;
}

// The digit pairs [a / W, a % W] of an access to `b` at adjacent dims whose strides are W s and
// s: the host printer joins them back into a s (backend/c/c_expr.cpp), so they divide nothing.
void joinedDigits(const kir::BufferP &b, const std::vector<kir::ExprP> &idx,
                  std::set<const kir::Expr *> &joined) {
  if (!b || !b->sym.empty() || idx.size() != b->shape.size())
    return;
  auto digit = [](const kir::ExprP &e, kir::BinOp op) {
    return e && e->kind == kir::Expr::Kind::Binary && e->bop == op &&
           e->args[1]->kind == kir::Expr::Kind::Int && e->args[1]->ival > 0;
  };
  for (size_t d = 0; d + 1 < idx.size(); ++d)
    if (digit(idx[d], kir::BinOp::Div) && digit(idx[d + 1], kir::BinOp::Mod) &&
        idx[d]->args[1]->ival == idx[d + 1]->args[1]->ival &&
        idx[d]->args[1]->ival == b->shape[d + 1] &&
        kir::exprEqual(idx[d]->args[0], idx[d + 1]->args[0])) {
      joined.insert(idx[d].get());
      joined.insert(idx[d + 1].get());
    }
}

// The distinct integer divisions and remainders in `body` whose dividend reads a variable of
// `varying` (grown by the scalars declared from them, in order), less the digits an access
// joins back.
size_t elementDivisions(const std::vector<kir::StmtP> &body, std::set<std::string> varying) {
  std::set<const kir::Expr *> joined;
  kir::forEachStmt(body, [&](const kir::Stmt &st) {
    std::vector<kir::ExprP> idx;
    for (const E &e : st.indices)
      idx.push_back(e.get());
    if (st.kind == kir::Stmt::Kind::Store)
      joinedDigits(st.buf, idx, joined);
    for (const E *e : kir::ownExprs(st))
      if (*e)
        kir::forEachExpr(e->get(), [&](const kir::Expr &x) {
          if (x.kind == kir::Expr::Kind::Load)
            joinedDigits(x.buf, x.args, joined);
        });
  });
  std::set<std::string> seen;
  kir::forEachStmt(body, [&](const kir::Stmt &st) {
    if ((st.kind == kir::Stmt::Kind::Decl || st.kind == kir::Stmt::Kind::Assign) &&
        readsAny(st.value, varying))
      varying.insert(st.var);
    for (const E *e : kir::ownExprs(st))
      if (*e)
        kir::forEachExpr(e->get(), [&](const kir::Expr &x) {
          if (x.kind == kir::Expr::Kind::Binary && x.type == DType::I64 &&
              (x.bop == kir::BinOp::Div || x.bop == kir::BinOp::Mod) && !joined.count(&x) &&
              readsAny(E(x.args[0]), varying))
            seen.insert(kir::printExpr(E(std::make_shared<kir::Expr>(x))));
        });
  });
  return seen.size();
}

} // namespace

double elementIndexCycles(const kir::Kernel &k) {
  size_t most = 0;
  bool lanes = false;
  kir::forEachStmt(k.body, [&](const kir::Stmt &st) {
    if (st.kind == kir::Stmt::Kind::For && st.loop == kir::Stmt::LoopKind::Vectorized) {
      lanes = true;
      most = std::max(most, elementDivisions(st.body, {st.var}));
    }
  });
  if (!lanes)
    most = elementDivisions(k.body, {"i"});
  return most == 0 ? 0.0 : kScalarElementCycles + kLaneDivisionCycles * double(most);
}

CostShape costShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                    double hostCyclesPerElement) {
  CostShape s;
  s.flops = double(flops);
  int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
  int64_t threads = std::max<int64_t>(1, k.threads);
  int64_t vec = knobOf(k, &FlatLoopKnobs::vec, 1);
  // Independent elements; the vector width is the explicit inner loop's.
  s.vectorShare =
      hw.gpu ? 0.5 : 0.6 * double(std::min(std::max<int64_t>(vec, 1), lanes)) / double(lanes);
  if (!hw.gpu && hostCyclesPerElement > 0)
    s.scalarCycles =
        hostCyclesPerElement * double(std::max<int64_t>(threads, 1) * std::max<int64_t>(vec, 1));
  return s;
}

E isNaN(E x) {
  return ne(x, x);
}

E nanMaxUpdate(E acc, E x) {
  // (x > acc || isnan(x)) && !isnan(acc) ? x : acc
  return kir::select(orE(x > acc, isNaN(x)) && (acc == acc), x, acc);
}

E nanMinUpdate(E acc, E x) {
  return kir::select(orE(x < acc, isNaN(x)) && (acc == acc), x, acc);
}

void buildLines(kir::Kernel &kern, const Knobs &k, int64_t lines, int64_t lineWork,
                const std::function<std::vector<kir::StmtP>(kir::E line)> &body) {
  Schedule s = schedule(k, lines, 1);
  s.vec = 1;
  s.blocks = (lines + s.threads - 1) / s.threads;
  build(kern, lines, s, body);
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = lines;
  problem->lineWork = std::max<int64_t>(1, lineWork);
  kern.problem = problem;
}

void buildSerial(kir::Kernel &kern, const Knobs &k, int64_t work,
                 const std::function<std::vector<kir::StmtP>()> &body) {
  Knobs one = k;
  one.values["threads"] = 1;
  one.values["vec"] = 1;
  buildLines(kern, one, 1, work, [&](E) { return body(); });
}

CostShape lineCostShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                        double hostCyclesPerStep) {
  const FlatLoopProblem &p = problemOf<FlatLoopProblem>(k);
  CostShape s = costShape(k, hw, flops, hostCyclesPerStep * double(p.lineWork));
  s.chainSteps = double(p.lineWork);
  return s;
}

kir::E computeValue(kir::E v) {
  if (v->type == DType::F16 || v->type == DType::BF16)
    return kir::cast(v, DType::F32);
  return v;
}

} // namespace aicf::flatloop
