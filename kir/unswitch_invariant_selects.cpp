// See unswitch_invariant_selects.h.
#include "kir/unswitch_invariant_selects.h"

#include "support/diagnostics.h"

#include <functional>
#include <set>
#include <unordered_map>

namespace aicf::kir {

namespace {

// Whether evaluating c ahead of the loop is safe and gives the value every iteration sees.
bool invariant(const ExprP &c, const std::set<std::string> &loopVars) {
  bool ok = true;
  forEachExpr(c, [&](const Expr &x) {
    if (x.kind == Expr::Kind::Load || (x.kind == Expr::Kind::Var && loopVars.count(x.var)))
      ok = false;
    if (x.kind == Expr::Kind::Binary && (x.bop == BinOp::Div || x.bop == BinOp::Mod)) {
      const ExprP &d = x.args[1];
      if (d->kind != Expr::Kind::Int || d->ival == 0)
        ok = false;
    }
  });
  return ok;
}

// e with every select on a condition equal to `cond` replaced by its `then` side (or its `else`
// side); shared subtrees rewritten once.
class Resolve {
public:
  Resolve(ExprP cond, bool taken) : cond_(std::move(cond)), taken_(taken) {}

  ExprP operator()(const ExprP &e) {
    if (!e)
      return e;
    auto it = done_.find(e.get());
    if (it != done_.end())
      return it->second;
    ExprP out = e;
    if (e->kind == Expr::Kind::Select && exprEqual(e->args[0], cond_)) {
      out = (*this)(e->args[taken_ ? 1 : 2]);
    } else {
      std::vector<ExprP> args;
      bool changed = false;
      for (const ExprP &a : e->args) {
        args.push_back((*this)(a));
        changed = changed || args.back() != a;
      }
      if (changed) {
        auto copy = std::make_shared<Expr>(*e);
        copy->args = std::move(args);
        out = copy;
      }
    }
    done_[e.get()] = out;
    return out;
  }

  void stmts(std::vector<StmtP> &list) {
    for (StmtP &s : list) {
      for (E *e : {&s->begin, &s->extent, &s->value, &s->cond})
        *e = E((*this)(e->get()));
      for (E &e : s->indices)
        e = E((*this)(e.get()));
      stmts(s->body);
      stmts(s->elseBody);
    }
  }

private:
  ExprP cond_;
  bool taken_;
  std::unordered_map<const Expr *, ExprP> done_;
};

class Unswitcher {
public:
  // Each loop unswitched, or its inner loops where it is not.
  bool list(std::vector<StmtP> &stmts) {
    return rewriteLoops(stmts, [this](const StmtP &l) -> StmtP {
      int copies = 1;
      return unswitched(l, copies);
    });
  }

  // The loop unswitched while `copies` (the original loop's copies so far) allows, its copies'
  // inner loops visited where they are not; null when the loop has no choice to take out.
  StmtP unswitched(const StmtP &l, int &copies) {
    ExprP c = copies < kMaxUnswitchedCopies && !holdsBlockLevel(l->body) ? choice(*l) : nullptr;
    if (!c)
      return nullptr;
    ++copies;
    StmtP taken = deepCopy(l), other = deepCopy(l);
    Resolve(c, true).stmts(taken->body);
    Resolve(c, false).stmts(other->body);
    StmtP a = version(taken, copies); // (in this order: the then side spends the budget first)
    StmtP b = version(other, copies);
    return ifThen(E(c), {a}, {b});
  }

  // A copy unswitched further, or kept with its inner loops visited.
  StmtP version(const StmtP &copy, int &copies) {
    if (StmtP u = unswitched(copy, copies))
      return u;
    list(copy->body);
    return copy;
  }

  // The first select's condition (statements in order, expressions pre-order) the loop does
  // not change, or null.
  static ExprP choice(const Stmt &l) {
    std::set<std::string> loopVars = {l.var};
    forEachStmt(l.body, [&](const Stmt &s) {
      if (s.kind == Stmt::Kind::Decl || s.kind == Stmt::Kind::Assign || s.kind == Stmt::Kind::For)
        loopVars.insert(s.var);
    });
    ExprP found;
    forEachStmt(l.body, [&](const Stmt &s) {
      for (const E *e : ownExprs(s))
        if (!found && static_cast<bool>(*e))
          forEachExpr(e->get(), [&](const Expr &x) {
            if (!found && x.kind == Expr::Kind::Select && invariant(x.args[0], loopVars))
              found = x.args[0];
          });
    });
    return found;
  }
};

} // namespace

bool holdsBlockLevel(const std::vector<StmtP> &body) {
  bool any = false;
  forEachStmt(body, [&](const Stmt &s) {
    any = any || s.kind == Stmt::Kind::Barrier || s.kind == Stmt::Kind::BlockReduce ||
          s.kind == Stmt::Kind::MmaTile || s.kind == Stmt::Kind::Region ||
          s.kind == Stmt::Kind::Reduce;
  });
  return any;
}

bool unswitchInvariantSelects(Kernel &k, std::vector<std::string> &notes) {
  Unswitcher u;
  if (!u.list(k.body))
    return false;
  notes.push_back(cat(k.name, ": loops choose once between the sides of selects they do not "
                              "change"));
  return true;
}

} // namespace aicf::kir
