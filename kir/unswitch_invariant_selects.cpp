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

// Whether the statements hold a block-level statement a GPU block must reach together.
bool blockLevel(const std::vector<StmtP> &body) {
  bool any = false;
  forEachStmt(body, [&](const Stmt &s) {
    any = any || s.kind == Stmt::Kind::Barrier || s.kind == Stmt::Kind::BlockReduce ||
          s.kind == Stmt::Kind::MmaTile || s.kind == Stmt::Kind::Region ||
          s.kind == Stmt::Kind::Reduce;
  });
  return any;
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
  bool list(std::vector<StmtP> &stmts) {
    bool changed = false;
    for (StmtP &s : stmts) {
      switch (s->kind) {
      case Stmt::Kind::Seq:
      case Stmt::Kind::Region: changed |= list(s->body); break;
      case Stmt::Kind::If:
        changed |= list(s->body);
        changed |= list(s->elseBody);
        break;
      case Stmt::Kind::Reduce:
        changed |= list(s->init);
        changed |= list(s->update);
        break;
      case Stmt::Kind::For: {
        int copies = 1;
        s = loop(s, copies, changed);
        break;
      }
      default: break; // (an mma_tile's fused init and epilogue: the micro-kernel's contract)
      }
    }
    return changed;
  }

private:
  // The loop unswitched while `copies` (the original loop's copies so far) allows; its inner
  // loops visited where it is not.
  StmtP loop(const StmtP &l, int &copies, bool &changed) {
    ExprP c = copies < kMaxUnswitchedCopies && !blockLevel(l->body) ? choice(*l) : nullptr;
    if (!c) {
      changed |= list(l->body);
      return l;
    }
    ++copies;
    changed = true;
    StmtP taken = deepCopy(l), other = deepCopy(l);
    Resolve(c, true).stmts(taken->body);
    Resolve(c, false).stmts(other->body);
    StmtP a = loop(taken, copies, changed);
    StmtP b = loop(other, copies, changed);
    return ifThen(E(c), {a}, {b});
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

bool unswitchInvariantSelects(Kernel &k, std::vector<std::string> &notes) {
  Unswitcher u;
  if (!u.list(k.body))
    return false;
  notes.push_back(cat(k.name, ": loops choose once between the sides of selects they do not "
                              "change"));
  return true;
}

} // namespace aicf::kir
