// See version_lane_guards.h.
#include "kir/version_lane_guards.h"

#include "support/diagnostics.h"

#include <functional>
#include <set>

namespace aicf::kir {

namespace {

bool hasLoad(const ExprP &e) {
  bool any = false;
  forEachExpr(e, [&](const Expr &x) { any = any || x.kind == Expr::Kind::Load; });
  return any;
}

// e with the variables of `with` replaced by their values (unchanged subtrees shared).
ExprP substitute(const ExprP &e, const std::map<std::string, ExprP> &with, int depth = 0) {
  if (!e || depth > 64)
    return e;
  if (e->kind == Expr::Kind::Var) {
    auto it = with.find(e->var);
    return it == with.end() ? e : it->second;
  }
  std::vector<ExprP> args;
  bool changed = false;
  for (const ExprP &a : e->args) {
    args.push_back(substitute(a, with, depth + 1));
    changed = changed || args.back() != a;
  }
  if (!changed)
    return e;
  if (e->kind == Expr::Kind::Binary) { // (rebuilt by the folding builders: b * 16 + 0 is b * 16)
    E a(args[0]), b(args[1]);
    switch (e->bop) {
    case BinOp::Add: return (a + b).get();
    case BinOp::Sub: return (a - b).get();
    case BinOp::Mul: return (a * b).get();
    default: return binary(e->bop, a, b).get();
    }
  }
  auto copy = std::make_shared<Expr>(*e);
  copy->args = std::move(args);
  return copy;
}

} // namespace

bool affineIn(const ExprP &e, const std::string &v) {
  if (!e || e->type != DType::I64 || hasLoad(e))
    return false;
  if (!readsVar(e, v))
    return true;
  switch (e->kind) {
  case Expr::Kind::Var: return true;
  case Expr::Kind::Binary:
    switch (e->bop) {
    case BinOp::Add:
    case BinOp::Sub: return affineIn(e->args[0], v) && affineIn(e->args[1], v);
    case BinOp::Mul:
      return (affineIn(e->args[0], v) && !readsVar(e->args[1], v) && affineIn(e->args[1], v)) ||
             (affineIn(e->args[1], v) && !readsVar(e->args[0], v) && affineIn(e->args[0], v));
    default: return false;
    }
  default: return false;
  }
}

namespace {

// A conjunction of comparisons between expressions affine in v (a condition not reading v
// counts as one: constant over the loop).
bool convex(const ExprP &c, const std::string &v) {
  if (!c || hasLoad(c))
    return false;
  if (!readsVar(c, v))
    return true;
  if (c->kind != Expr::Kind::Binary)
    return false;
  switch (c->bop) {
  case BinOp::And: return convex(c->args[0], v) && convex(c->args[1], v);
  case BinOp::Lt:
  case BinOp::Le:
  case BinOp::Gt:
  case BinOp::Ge: return affineIn(c->args[0], v) && affineIn(c->args[1], v);
  default: return false;
  }
}

class Versioner {
public:
  // The versioned loop, or null.
  static StmtP version(const Stmt &loop) {
    if (loop.loop != Stmt::LoopKind::Vectorized || loop.step != 1 || loop.body.empty())
      return nullptr;
    const StmtP &guard = loop.body.back();
    if (guard->kind != Stmt::Kind::If || !guard->elseBody.empty())
      return nullptr;
    std::map<std::string, ExprP> defs;
    for (size_t i = 0; i + 1 < loop.body.size(); ++i) {
      const Stmt &d = *loop.body[i];
      if (d.kind != Stmt::Kind::Decl)
        return nullptr;
      if (d.dtype == DType::I64 && !hasLoad(d.value.get()))
        defs[d.var] = d.value.get();
    }
    // The loop's own variables (its index, what it declares or assigns): the ends may not
    // read them (those inlined are gone).
    std::set<std::string> assigned = {loop.var};
    forEachStmt(loop.body, [&](const Stmt &s) {
      if (s.kind == Stmt::Kind::Assign || s.kind == Stmt::Kind::Decl || s.kind == Stmt::Kind::For)
        assigned.insert(s.var);
    });
    std::optional<E> ends =
        guardAtEnds(guard->cond, loop.var, defs, loop.begin, loop.begin + loop.extent - E(1));
    if (!ends)
      return nullptr;
    bool readsAssigned = false;
    forEachExpr(ends->get(), [&](const Expr &x) {
      readsAssigned = readsAssigned || (x.kind == Expr::Kind::Var && assigned.count(x.var));
    });
    if (readsAssigned)
      return nullptr;
    std::vector<StmtP> body(loop.body.begin(), loop.body.end() - 1);
    body.insert(body.end(), guard->body.begin(), guard->body.end());
    auto full = std::make_shared<Stmt>(loop);
    full->body = std::move(body);
    return ifThen(*ends, {deepCopy(full)}, {deepCopy(std::make_shared<Stmt>(loop))});
  }
};

} // namespace

ExprP inlineDefs(const ExprP &e, const std::map<std::string, ExprP> &defs) {

  ExprP out = e;
  for (int round = 0; round < 16; ++round) {
    ExprP next = substitute(out, defs);
    if (next == out)
      return out;
    out = next;
  }
  return nullptr; // (a cycle: not a definition list)
}

std::optional<E> guardAtEnds(const E &cond, const std::string &v,
                             const std::map<std::string, ExprP> &defs, const E &first,
                             const E &last) {
  ExprP c = inlineDefs(cond.get(), defs);
  if (!c || !readsVar(c, v) || !convex(c, v))
    return std::nullopt;
  return E(substitute(c, {{v, first.get()}})) && E(substitute(c, {{v, last.get()}}));
}

bool versionLaneGuards(Kernel &k, std::vector<std::string> &notes) {
  if (!rewriteLoops(k.body, [](const StmtP &loop) { return Versioner::version(*loop); }))
    return false;
  notes.push_back(cat(k.name, ": vector loops whose guard holds on every lane run unguarded"));
  return true;
}

} // namespace aicf::kir
