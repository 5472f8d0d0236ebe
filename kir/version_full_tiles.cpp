// See version_full_tiles.h.
#include "kir/version_full_tiles.h"

#include "support/diagnostics.h"

#include <map>
#include <optional>
#include <set>

namespace aicf::kir {

namespace {

struct Range {
  int64_t lo = 0, hi = 0;
};
using Env = std::map<std::string, Range>;

bool isBin(const ExprP &e, BinOp op) {
  return e && e->kind == Expr::Kind::Binary && e->bop == op;
}

std::optional<int64_t> mulR(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

class Versioner {
public:
  Versioner(const Kernel &k, std::string axis, E m, int64_t bm)
      : axis_(std::move(axis)), m_(std::move(m)), bm_(bm) {
    // i64 scalars declared once and never assigned: their definitions stand for them.
    std::set<std::string> assigned;
    forEachStmt(k.body, [&](const Stmt &s) {
      if (s.kind == Stmt::Kind::Assign)
        assigned.insert(s.var);
    });
    forEachStmt(k.body, [&](const Stmt &s) {
      if (s.kind == Stmt::Kind::Decl && s.dtype == DType::I64 && !assigned.count(s.var)) {
        if (defs_.count(s.var))
          ambiguous_.insert(s.var);
        defs_[s.var] = s.value.get();
      }
    });
    for (const std::string &v : ambiguous_)
      defs_.erase(v);
    minTarget_ = kir::min(E(bm_), m_ - var(axis_) * E(bm_)).get();
  }

  std::vector<StmtP> list(const std::vector<StmtP> &in, const Env &env) {
    std::vector<StmtP> out;
    for (const StmtP &s : in)
      stmt(s, env, out);
    return out;
  }

  bool changed() const { return changed_; }

private:
  std::string axis_;
  E m_;
  int64_t bm_;
  ExprP minTarget_;
  std::map<std::string, ExprP> defs_;
  std::set<std::string> ambiguous_;
  bool changed_ = false;

  std::optional<Range> range(const ExprP &e, const Env &env, int depth = 0) const {
    if (!e || depth > 32)
      return std::nullopt;
    switch (e->kind) {
    case Expr::Kind::Int: return Range{e->ival, e->ival};
    case Expr::Kind::Var: {
      if (auto it = env.find(e->var); it != env.end())
        return it->second;
      if (auto d = defs_.find(e->var); d != defs_.end())
        return range(d->second, env, depth + 1);
      return std::nullopt;
    }
    case Expr::Kind::Binary: {
      auto a = range(e->args[0], env, depth + 1), b = range(e->args[1], env, depth + 1);
      if (!a || !b)
        return std::nullopt;
      switch (e->bop) {
      case BinOp::Add: return Range{a->lo + b->lo, a->hi + b->hi};
      case BinOp::Sub: return Range{a->lo - b->hi, a->hi - b->lo};
      case BinOp::Mul: {
        std::optional<int64_t> p[4] = {mulR(a->lo, b->lo), mulR(a->lo, b->hi), mulR(a->hi, b->lo),
                                       mulR(a->hi, b->hi)};
        Range r{INT64_MAX, INT64_MIN};
        for (auto &v : p) {
          if (!v)
            return std::nullopt;
          r.lo = std::min(r.lo, *v);
          r.hi = std::max(r.hi, *v);
        }
        return r;
      }
      case BinOp::Div:
        if (b->lo == b->hi && b->lo > 0 && a->lo >= 0)
          return Range{a->lo / b->lo, a->hi / b->lo};
        return std::nullopt;
      case BinOp::Mod:
        if (b->lo == b->hi && b->lo > 0 && a->lo >= 0)
          return Range{0, std::min(a->hi, b->lo - 1)};
        return std::nullopt;
      case BinOp::Min: return Range{std::min(a->lo, b->lo), std::min(a->hi, b->hi)};
      case BinOp::Max: return Range{std::max(a->lo, b->lo), std::max(a->hi, b->hi)};
      default: return std::nullopt;
      }
    }
    default: return std::nullopt;
    }
  }

  // The additive terms of e, with unassigned i64 scalars expanded.
  void terms(const ExprP &e, std::vector<ExprP> &out, int depth = 0) const {
    if (depth < 16 && isBin(e, BinOp::Add)) {
      terms(e->args[0], out, depth + 1);
      terms(e->args[1], out, depth + 1);
      return;
    }
    if (depth < 16 && e->kind == Expr::Kind::Var && defs_.count(e->var))
      return terms(defs_.at(e->var), out, depth + 1);
    out.push_back(e);
  }

  bool isAxisTile(const ExprP &t) const {
    if (!isBin(t, BinOp::Mul))
      return false;
    auto isV = [&](const ExprP &x) { return x->kind == Expr::Kind::Var && x->var == axis_; };
    auto isBM = [&](const ExprP &x) { return x->kind == Expr::Kind::Int && x->ival == bm_; };
    return (isV(t->args[0]) && isBM(t->args[1])) || (isBM(t->args[0]) && isV(t->args[1]));
  }

  // Whether `l < r` holds on a full tile: r is M and l = axis * BM + x with x in [0, BM).
  bool holds(const ExprP &l, const ExprP &r, const Env &env) const {
    if (!exprEqual(r, m_.get()))
      return false;
    std::vector<ExprP> ts;
    terms(l, ts);
    bool tile = false;
    Range rest{0, 0};
    for (const ExprP &t : ts) {
      if (!tile && isAxisTile(t)) {
        tile = true;
        continue;
      }
      auto rt = range(t, env);
      if (!rt)
        return false;
      rest.lo += rt->lo;
      rest.hi += rt->hi;
    }
    return tile && rest.lo >= 0 && rest.hi < bm_;
  }

  // A condition on a full tile: nullptr when it holds, else what is left of it.
  ExprP cond(const ExprP &e, const Env &env) {
    if (isBin(e, BinOp::And)) {
      ExprP a = cond(e->args[0], env), b = cond(e->args[1], env);
      if (!a || !b)
        return a ? a : b;
      if (a == e->args[0] && b == e->args[1])
        return e;
      return binary(BinOp::And, E(a), E(b)).get();
    }
    if (isBin(e, BinOp::Lt) && holds(e->args[0], e->args[1], env)) {
      changed_ = true;
      return nullptr;
    }
    return expr(e, env);
  }

  ExprP expr(const ExprP &e, const Env &env) {
    if (!e)
      return e;
    if (exprEqual(e, minTarget_)) {
      changed_ = true;
      return E(bm_).get();
    }
    if (e->kind == Expr::Kind::Select) {
      ExprP c = cond(e->args[0], env);
      if (!c)
        return expr(e->args[1], env);
      ExprP a = expr(e->args[1], env), b = expr(e->args[2], env);
      if (c == e->args[0] && a == e->args[1] && b == e->args[2])
        return e;
      return select(E(c), E(a), E(b)).get();
    }
    bool same = true;
    std::vector<ExprP> args;
    for (const ExprP &a : e->args) {
      args.push_back(expr(a, env));
      same = same && args.back() == a;
    }
    if (same)
      return e;
    auto c = std::make_shared<Expr>(*e);
    c->args = std::move(args);
    return c;
  }

  void rewriteOwn(Stmt &c, const Env &env) {
    for (E *e : {&c.begin, &c.extent, &c.value, &c.first, &c.last})
      if (*e)
        *e = E(expr(e->get(), env));
    for (E &e : c.indices)
      e = E(expr(e.get(), env));
  }

  // Env inside a loop over `var` from `begin` for `extent` iterations.
  Env loopEnv(const Env &env, const Stmt &s) const {
    Env inner = env;
    inner.erase(s.var);
    auto b = range(s.begin.get(), env), x = range(s.extent.get(), env);
    if (b && x && x->hi >= 1)
      inner[s.var] = Range{b->lo, b->hi + x->hi - 1};
    return inner;
  }

  void stmt(const StmtP &s, const Env &env, std::vector<StmtP> &out) {
    auto c = std::make_shared<Stmt>(*s);
    switch (s->kind) {
    case Stmt::Kind::If: {
      ExprP k = cond(s->cond.get(), env);
      if (!k) { // holds on a full tile: its then-branch only
        for (const StmtP &t : list(s->body, env))
          out.push_back(t);
        return;
      }
      c->cond = E(k);
      c->body = list(s->body, env);
      c->elseBody = list(s->elseBody, env);
      break;
    }
    case Stmt::Kind::For: {
      rewriteOwn(*c, env);
      c->body = list(s->body, loopEnv(env, *s));
      break;
    }
    case Stmt::Kind::Reduce: {
      rewriteOwn(*c, env);
      c->init = list(s->init, env);
      c->update = list(s->update, loopEnv(env, *s));
      break;
    }
    case Stmt::Kind::Region: {
      Env inner = env;
      inner[s->var] = Range{0, threads_ - 1};
      c->body = list(s->body, inner);
      break;
    }
    default:
      rewriteOwn(*c, env);
      c->body = list(s->body, env);
      c->elseBody = list(s->elseBody, env);
      c->init = list(s->init, env);
      c->update = list(s->update, env);
      break;
    }
    out.push_back(c);
  }

public:
  int64_t threads_ = 1;
};

} // namespace

bool versionFullTiles(Kernel &k, std::vector<std::string> &notes) {
  if (k.symGrid.empty())
    return false;
  bool any = false;
  for (size_t a = 0; a < k.symGrid.size(); ++a) {
    const SymExtent &x = k.symGrid[a];
    if (x.num.isConstant() || x.div <= 1)
      continue;
    const std::string &axis = k.grid[a].first;
    E m = symE(x.num);
    Versioner v(k, axis, m, x.div);
    v.threads_ = k.threads;
    std::vector<StmtP> full = v.list(k.body, {});
    if (!v.changed()) {
      notes.push_back(cat("VersionFullTiles(", axis, "): nothing to simplify on a full tile"));
      continue;
    }
    E fullTile = var(axis) * E(x.div) + E(x.div) <= m;
    k.body = {ifThen(fullTile, full, k.body)};
    notes.push_back(cat("VersionFullTiles(", axis, "): applied: tiles with ", axis, " * ", x.div,
                        " + ", x.div, " <= ", x.num.str(),
                        " run without the ragged tile's guards"));
    any = true;
  }
  return any;
}

} // namespace aicf::kir
