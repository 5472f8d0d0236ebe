// See name_shared_exprs.h.
#include "kir/name_shared_exprs.h"

#include "support/diagnostics.h"

#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace aicf::kir {

namespace {

// The args of `e` that every evaluation of `e` evaluates: not a select's branches, not the right
// side of && / || (printed as C++'s short-circuit operators).
bool unconditionalArg(const Expr &e, size_t i) {
  if (e.kind == Expr::Kind::Select)
    return i == 0;
  if (e.kind == Expr::Kind::Binary && (e.bop == BinOp::And || e.bop == BinOp::Or))
    return i == 0;
  return true;
}

bool isLeaf(const Expr &e) {
  return e.kind == Expr::Kind::Int || e.kind == Expr::Kind::Float || e.kind == Expr::Kind::Var;
}

class Namer {
public:
  explicit Namer(const Kernel &k) {
    // Every name the kernel uses already, so a new one cannot clash.
    forEachStmt(k.body, [&](const Stmt &s) {
      if (!s.var.empty())
        used_.insert(s.var);
      for (const E *e : ownExprs(s))
        if (*e)
          forEachExpr(e->get(), [&](const Expr &x) {
            if (x.kind == Expr::Kind::Var)
              used_.insert(x.var);
          });
    });
    for (const auto &[axis, extent] : k.grid)
      used_.insert(axis);
    used_.insert(k.threadVar);
  }

  std::string fresh() {
    std::string n;
    do
      n = cat("cse", next_++);
    while (used_.count(n));
    used_.insert(n);
    return n;
  }

  int named() const { return named_; }

  // The statement's expressions rewritten with its large shared subexpressions named; the
  // declarations to put before it (in order) are appended to `decls`.
  void rewrite(Stmt &s, std::vector<StmtP> &decls) {
    std::vector<E *> roots;
    if (s.kind == Stmt::Kind::Store)
      for (E &i : s.indices)
        roots.push_back(&i);
    if (s.value)
      roots.push_back(&s.value);
    // In-degree of every node reached (a node's edges counted on its first visit), and the
    // nodes reached unconditionally.
    std::unordered_map<const Expr *, int> indeg;
    std::unordered_set<const Expr *> seen, uncond;
    std::function<void(const Expr *)> count = [&](const Expr *e) {
      if (!seen.insert(e).second)
        return;
      for (const ExprP &a : e->args) {
        ++indeg[a.get()];
        count(a.get());
      }
    };
    std::function<void(const Expr *)> always = [&](const Expr *e) {
      if (!uncond.insert(e).second)
        return;
      for (size_t i = 0; i < e->args.size(); ++i)
        if (unconditionalArg(*e, i))
          always(e->args[i].get());
    };
    for (E *r : roots) {
      ++indeg[r->get().get()];
      count(r->get().get());
      always(r->get().get());
    }
    auto name = [&](const ExprP &e, double printedSize) {
      return indeg[e.get()] >= 2 && uncond.count(e.get()) && !isLeaf(*e) &&
             printedSize >= kMinTreeSize && (s.kind != Stmt::Kind::Assign || !readsVar(e, s.var));
    };
    // Rebuild innermost first; a named node becomes its variable. The size that decides is the
    // node's printed size once the names inside it are made (a name prints as one node).
    struct Built {
      ExprP e;
      double size;
    };
    std::unordered_map<const Expr *, Built> done;
    std::function<Built(const ExprP &)> build = [&](const ExprP &e) -> Built {
      auto it = done.find(e.get());
      if (it != done.end())
        return it->second;
      Built out{e, 1};
      if (!e->args.empty()) {
        auto copy = std::make_shared<Expr>(*e);
        bool changed = false;
        for (ExprP &a : copy->args) {
          Built b = build(a);
          changed = changed || b.e != a;
          out.size += b.size;
          a = b.e;
        }
        if (changed)
          out.e = copy;
      }
      if (name(e, out.size)) {
        std::string v = fresh();
        decls.push_back(decl(v, e->type, E(out.e)));
        out = {var(v, e->type).get(), 1};
        ++named_;
      }
      return done[e.get()] = out;
    };
    for (E *r : roots)
      *r = E(build(r->get()).e);
  }

private:
  std::set<std::string> used_;
  int next_ = 0;
  int named_ = 0;
};

bool rewritable(const Stmt &s) {
  return s.kind == Stmt::Kind::Store || s.kind == Stmt::Kind::Decl || s.kind == Stmt::Kind::Assign;
}

void rewriteList(std::vector<StmtP> &list, Namer &namer) {
  std::vector<StmtP> out;
  out.reserve(list.size());
  for (StmtP &s : list) {
    if (rewritable(*s)) {
      std::vector<StmtP> decls;
      namer.rewrite(*s, decls);
      out.insert(out.end(), decls.begin(), decls.end());
    } else if (s->kind != Stmt::Kind::MmaTile) {
      rewriteList(s->body, namer);
      rewriteList(s->elseBody, namer);
      rewriteList(s->init, namer);
      rewriteList(s->update, namer);
    }
    out.push_back(s);
  }
  list = std::move(out);
}

} // namespace

bool nameSharedExprs(Kernel &k, std::vector<std::string> &notes) {
  Namer namer(k);
  rewriteList(k.body, namer);
  if (namer.named() == 0)
    return false;
  notes.push_back(
      cat("name-shared-exprs: ", namer.named(),
          " shared subexpressions declared once (printed as a tree they would repeat)"));
  return true;
}

} // namespace aicf::kir
