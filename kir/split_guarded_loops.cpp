// See split_guarded_loops.h.
#include "kir/split_guarded_loops.h"

#include "kir/unswitch_invariant_selects.h"
#include "kir/version_lane_guards.h"
#include "support/diagnostics.h"

#include <functional>
#include <map>
#include <optional>
#include <set>

namespace aicf::kir {

namespace {

// Whether e may be evaluated ahead of the loop: i64 arithmetic reading no load and none of
// `loopVars`, dividing only by non-zero constants.
bool hoistable(const ExprP &e, const std::set<std::string> &loopVars) {
  bool ok = e && e->type == DType::I64;
  forEachExpr(e, [&](const Expr &x) {
    if (x.kind == Expr::Kind::Load || (x.kind == Expr::Kind::Var && loopVars.count(x.var)))
      ok = false;
    if (x.kind == Expr::Kind::Binary && (x.bop == BinOp::Div || x.bop == BinOp::Mod) &&
        (x.args[1]->kind != Expr::Kind::Int || x.args[1]->ival == 0))
      ok = false;
  });
  return ok;
}

// e as coef * v + rest, rest not reading v; nullopt when e is not affine in v with an integer
// coefficient.
struct Linear {
  int64_t coef = 0;
  E rest;
};
std::optional<Linear> linear(const ExprP &e, const std::string &v) {
  if (!e || e->type != DType::I64)
    return std::nullopt;
  if (!readsVar(e, v))
    return Linear{0, E(e)};
  if (e->kind == Expr::Kind::Var)
    return Linear{1, E(int64_t(0))};
  if (e->kind != Expr::Kind::Binary)
    return std::nullopt;
  std::optional<Linear> a = linear(e->args[0], v), b = linear(e->args[1], v);
  if (!a || !b)
    return std::nullopt;
  switch (e->bop) {
  case BinOp::Add: return Linear{a->coef + b->coef, a->rest + b->rest};
  case BinOp::Sub: return Linear{a->coef - b->coef, a->rest - b->rest};
  case BinOp::Mul: {
    const ExprP &k = a->coef == 0 ? e->args[0] : e->args[1];
    const Linear &l = a->coef == 0 ? *b : *a;
    if ((a->coef != 0 && b->coef != 0) || k->kind != Expr::Kind::Int)
      return std::nullopt;
    return Linear{l.coef * k->ival, l.rest * E(k->ival)};
  }
  default: return std::nullopt;
  }
}

// Folding min / max for the split points (the E builders keep min and max as written).
E foldMin(const E &a, const E &b) {
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int)
    return E(std::min(a->ival, b->ival));
  return exprEqual(a.get(), b.get()) ? a : min(a, b);
}
E foldMax(const E &a, const E &b) {
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int)
    return E(std::max(a->ival, b->ival));
  return exprEqual(a.get(), b.get()) ? a : max(a, b);
}

// a - b, with 0 - (x - y) as y - x (a bound from v + (x - y) < 0 reads as a person writes it).
E difference(const E &a, const E &b) {
  if (a->kind == Expr::Kind::Int && a->ival == 0 && b->kind == Expr::Kind::Binary &&
      b->bop == BinOp::Sub)
    return E(b->args[1]) - E(b->args[0]);
  return a - b;
}

// The bounds c puts on v: v >= each of `lo`, v < each of `hi`. False when c is not a conjunction
// of such comparisons.
bool bounds(const ExprP &c, const std::string &v, std::vector<E> &lo, std::vector<E> &hi) {
  if (!c || c->kind != Expr::Kind::Binary)
    return false;
  if (c->bop == BinOp::And)
    return bounds(c->args[0], v, lo, hi) && bounds(c->args[1], v, lo, hi);
  if (c->bop != BinOp::Lt && c->bop != BinOp::Le && c->bop != BinOp::Gt && c->bop != BinOp::Ge)
    return false;
  std::optional<Linear> l = linear(c->args[0], v), r = linear(c->args[1], v);
  if (!l || !r)
    return false;
  int64_t a = l->coef - r->coef;
  BinOp op = c->bop;
  E bound; // v op bound
  if (a == 1) {
    bound = difference(r->rest, l->rest);
  } else if (a == -1) { // -v + (lr - rr) op 0  <=>  v op' (lr - rr)
    bound = difference(l->rest, r->rest);
    op = op == BinOp::Lt   ? BinOp::Gt
         : op == BinOp::Le ? BinOp::Ge
         : op == BinOp::Gt ? BinOp::Lt
                           : BinOp::Le;
  } else {
    return false;
  }
  switch (op) {
  case BinOp::Lt: hi.push_back(bound); break;
  case BinOp::Le: hi.push_back(bound + E(int64_t(1))); break;
  case BinOp::Gt: lo.push_back(bound + E(int64_t(1))); break;
  default: lo.push_back(bound); break;
  }
  return true;
}

bool isZero(const E &e) {
  return e->kind == Expr::Kind::Int && e->ival <= 0;
}

StmtP split(const StmtP &loopP);

// Splits the loops below `body` too (a guarded loop nested in a split part).
std::vector<StmtP> splitBelow(std::vector<StmtP> body) {
  rewriteLoops(body, split);
  return body;
}

StmtP split(const StmtP &loopP) {
  const Stmt &loop = *loopP;
  if (loop.step != 1 || loop.body.empty() || loop.loop != Stmt::LoopKind::Serial)
    return nullptr;
  const StmtP &guard = loop.body.back();
  if (guard->kind != Stmt::Kind::If)
    return nullptr;
  if (holdsBlockLevel(loop.body))
    return nullptr;
  std::map<std::string, ExprP> defs;
  std::set<std::string> loopVars; // what the loop declares or assigns (v itself is allowed)
  for (size_t i = 0; i + 1 < loop.body.size(); ++i) {
    const Stmt &d = *loop.body[i];
    if (d.kind != Stmt::Kind::Decl)
      return nullptr;
    bool load = false;
    forEachExpr(d.value.get(), [&](const Expr &x) { load = load || x.kind == Expr::Kind::Load; });
    if (d.dtype == DType::I64 && !load)
      defs[d.var] = d.value.get();
  }
  forEachStmt(loop.body, [&](const Stmt &s) {
    if (s.kind == Stmt::Kind::Assign || s.kind == Stmt::Kind::Decl || s.kind == Stmt::Kind::For)
      loopVars.insert(s.var);
  });
  ExprP c = inlineDefs(guard->cond.get(), defs);
  if (!c || !readsVar(c, loop.var))
    return nullptr;
  std::vector<E> lo, hi;
  if (!bounds(c, loop.var, lo, hi))
    return nullptr;
  for (const std::vector<E> *list : {&lo, &hi})
    for (const E &b : *list)
      if (!hoistable(b.get(), loopVars))
        return nullptr;
  if (!hoistable(loop.begin.get(), loopVars) || !hoistable(loop.extent.get(), loopVars))
    return nullptr;

  // [L, H): where c holds, within [b, e). Without an else the middle part alone runs, and a
  // loop whose end is below its begin runs nothing; with one, the parts must tile [b, e).
  const bool otherwise = !guard->elseBody.empty();
  E b = loop.begin, e = loop.begin + loop.extent;
  E L = b;
  for (const E &x : lo)
    L = foldMax(L, x);
  if (otherwise)
    L = foldMin(L, e);
  E H = e;
  for (const E &x : hi)
    H = foldMin(H, x);
  if (otherwise)
    H = foldMax(H, L);

  std::vector<StmtP> decls(loop.body.begin(), loop.body.end() - 1);
  auto part = [&](const E &from, const E &to, const std::vector<StmtP> &tail) -> StmtP {
    E extent = to - from;
    if (tail.empty() || exprEqual(from.get(), to.get()) || isZero(extent))
      return nullptr;
    auto p = std::make_shared<Stmt>(loop);
    p->begin = from;
    p->extent = extent;
    std::vector<StmtP> body = decls;
    body.insert(body.end(), tail.begin(), tail.end());
    for (StmtP &s : body)
      s = deepCopy(s);
    p->body = splitBelow(std::move(body));
    return p;
  };
  std::vector<StmtP> parts;
  for (StmtP p :
       {part(b, L, guard->elseBody), part(L, H, guard->body), part(H, e, guard->elseBody)})
    if (p)
      parts.push_back(p);
  return seq(std::move(parts));
}

} // namespace

bool splitGuardedLoops(Kernel &k, std::vector<std::string> &notes) {
  if (!rewriteLoops(k.body, split))
    return false;
  notes.push_back(cat(k.name, ": loops split where their guard changes"));
  return true;
}

} // namespace aicf::kir
