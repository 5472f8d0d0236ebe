// FuseMmaTileEpilogue (see fuse_mma_tile_epilogue.h): finds each reduction whose update is one
// view mma_tile, matches its init and the regions after it against the tile's lane nest
// (region t { for i { for jo { for jl vectorized { var j = jo * 16 + jl; ... } } } }), checks
// that C is used nowhere else, and moves the element bodies into the mma_tile.
#include "kir/fuse_mma_tile_epilogue.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <set>

namespace aicf {

using kir::Expr;
using kir::ExprP;
using kir::Stmt;
using kir::StmtP;

using kir::forEachExpr;
using kir::forEachStmt;
using kir::ownExprs;

namespace {

struct Rejected {
  std::string reason;
};

bool isInt(const kir::E &e, int64_t v) {
  return e.get() && e->kind == Expr::Kind::Int && e->ival == v;
}

bool isVar(const ExprP &e, const std::string &v) {
  return e && e->kind == Expr::Kind::Var && e->var == v;
}

// The element body of a region walking C's tile 16 lanes at a time (what the tiled contraction
// recipe's overLanes builds), or null.
const std::vector<StmtP> *laneElement(const StmtP &s, const Stmt &mma, const std::string &tv) {
  auto loop = [](const StmtP &x, const char *v, int64_t extent) {
    return x->kind == Stmt::Kind::For && x->var == v && isInt(x->begin, 0) &&
           isInt(x->extent, extent) && x->step == 1 && x->body.size() == 1;
  };
  if (s->kind != Stmt::Kind::Region || s->var != tv || s->body.size() != 1)
    return nullptr;
  const StmtP &li = s->body[0];
  if (!loop(li, "i", mma.tm) || !loop(li->body[0], "jo", mma.tn / 16))
    return nullptr;
  const StmtP &lj = li->body[0]->body[0];
  if (lj->kind != Stmt::Kind::For || lj->var != "jl" || !isInt(lj->begin, 0) ||
      !isInt(lj->extent, 16) || lj->step != 1 || lj->loop != Stmt::LoopKind::Vectorized)
    return nullptr;
  const std::vector<StmtP> &body = lj->body;
  if (body.empty() || body[0]->kind != Stmt::Kind::Decl || body[0]->var != "j" ||
      kir::printExpr(body[0]->value) != "jo * 16 + jl")
    return nullptr;
  return &body;
}

// Whether every access to C in the element body is at [t, i, j].
bool onlyAtElement(const std::vector<StmtP> &body, const kir::BufferP &c, const std::string &tv) {
  auto at = [&](const std::vector<ExprP> &idx) {
    return idx.size() == 3 && isVar(idx[0], tv) && isVar(idx[1], "i") && isVar(idx[2], "j");
  };
  bool ok = true;
  forEachStmt(body, [&](const Stmt &s) {
    for (const kir::E *e : ownExprs(s))
      forEachExpr(e->get(), [&](const Expr &x) {
        if (x.kind == Expr::Kind::Load && x.buf == c)
          ok &= at(x.args);
      });
    if (s.kind == Stmt::Kind::Store && s.buf == c) {
      std::vector<ExprP> idx;
      for (const kir::E &e : s.indices)
        idx.push_back(e.get());
      ok &= at(idx);
    }
  });
  return ok;
}

bool readsC(const std::vector<StmtP> &body, const kir::BufferP &c) {
  bool any = false;
  forEachStmt(body, [&](const Stmt &s) {
    for (const kir::E *e : ownExprs(s))
      forEachExpr(e->get(),
                  [&](const Expr &x) { any |= x.kind == Expr::Kind::Load && x.buf == c; });
  });
  return any;
}

// Every store of the element body that is not to C sits under an `if`.
bool storesGuarded(const std::vector<StmtP> &body, const kir::BufferP &c) {
  for (const StmtP &s : body) {
    if (s->kind == Stmt::Kind::If)
      continue;
    bool unguarded = false;
    forEachStmt({s},
                [&](const Stmt &x) { unguarded |= x.kind == Stmt::Kind::Store && x.buf != c; });
    if (unguarded)
      return false;
  }
  return true;
}

// Any use of C in the kernel outside the statements in `skip`.
bool usedElsewhere(const std::vector<StmtP> &list, const kir::BufferP &c,
                   const std::set<const Stmt *> &skip) {
  for (const StmtP &s : list) {
    if (skip.count(s.get()))
      continue;
    bool own =
        (s->kind == Stmt::Kind::Store && s->buf == c) ||
        (s->kind == Stmt::Kind::MmaTile && (s->a == c || s->b == c || s->c == c)) ||
        (s->kind == Stmt::Kind::BlockReduce && (std::count(s->src.begin(), s->src.end(), c) ||
                                                std::count(s->dst.begin(), s->dst.end(), c)));
    for (const kir::E *e : ownExprs(*s))
      forEachExpr(e->get(),
                  [&](const Expr &x) { own |= x.kind == Expr::Kind::Load && x.buf == c; });
    if (own)
      return true;
    for (const std::vector<StmtP> *l : {&s->body, &s->elseBody, &s->init, &s->update})
      if (usedElsewhere(*l, c, skip))
        return true;
  }
  return false;
}

// Fuses the reduction at list[at] (its update one view mma_tile) or throws Rejected.
void fuseAt(const kir::Kernel &k, std::vector<StmtP> &list, size_t at, Stmt &mma) {
  Stmt &r = *list[at];
  const std::string &tv = k.threadVar;
  const kir::BufferP &c = mma.c;
  if (mma.fused)
    throw Rejected{"already fused"};
  if (mma.tn % 16 != 0)
    throw Rejected{cat("the tile's ", mma.tn, " columns are not a multiple of 16")};
  if (c->scope != kir::Scope::Local)
    throw Rejected{cat(c->name, " is not the kernel's local tile")};
  if (r.init.size() != 1)
    throw Rejected{cat("the reduction's init is ", r.init.size(), " statements, not one region")};
  const std::vector<StmtP> *init = laneElement(r.init[0], mma, tv);
  if (!init)
    throw Rejected{"the init does not walk the tile 16 lanes at a time"};

  // The epilogue: the lane-nest regions right after the reduction.
  std::vector<const std::vector<StmtP> *> epi;
  std::set<const Stmt *> skip = {&r};
  size_t end = at + 1;
  for (; end < list.size(); ++end) {
    if (list[end]->kind == Stmt::Kind::Comment)
      break;
    const std::vector<StmtP> *e = laneElement(list[end], mma, tv);
    if (!e)
      break;
    epi.push_back(e);
    skip.insert(list[end].get());
  }
  bool reads = false;
  for (const std::vector<StmtP> *e : epi)
    reads |= readsC(*e, c);
  if (!reads)
    throw Rejected{cat("no region walking the tile reads ", c->name, " after the reduction")};
  for (const std::vector<StmtP> *e : epi)
    if (!onlyAtElement(*e, c, tv))
      throw Rejected{
          cat("the epilogue reads ", c->name, " other than at its element [", tv, ", i, j]")};
  if (!onlyAtElement(*init, c, tv))
    throw Rejected{cat("the init writes ", c->name, " other than at its element [", tv, ", i, j]")};
  if (usedElsewhere(k.body, c, skip))
    throw Rejected{cat(c->name, " is used outside the reduction and its epilogue")};
  bool whole = isInt(mma.indices[2], mma.tm) && isInt(mma.indices[3], mma.tn);
  if (!whole)
    for (const std::vector<StmtP> *e : epi)
      if (!storesGuarded(*e, c))
        throw Rejected{"a ragged tile's epilogue stores without a guard"};

  // The rewrite: the bodies into the mma_tile (the first epilogue body keeps its `var j`, the
  // others go in their own scopes without it), the regions out of the kernel.
  std::vector<StmtP> body;
  for (const std::vector<StmtP> *e : epi) {
    if (e->size() == 1)
      continue; // only `var j`: a region FuseReductionEpilogue emptied
    if (body.empty())
      body = *e;
    else
      body.push_back(kir::seq(std::vector<StmtP>(e->begin() + 1, e->end())));
  }
  mma.fused = true;
  mma.init = *init;
  mma.body = std::move(body);
  kir::E kv = kir::var(r.var);
  mma.first = kv == r.begin;
  mma.last = kv + kir::E(r.step) >= r.begin + r.extent;
  r.init.clear();
  list.erase(list.begin() + static_cast<std::ptrdiff_t>(at + 1),
             list.begin() + static_cast<std::ptrdiff_t>(end));
}

} // namespace

std::string MmaTileEpilogueOutcome::text() const {
  return cat("FuseMmaTileEpilogue(", accumulator,
             "): ", applied ? "applied: " : "rejected: ", reason);
}

std::vector<MmaTileEpilogueOutcome> fuseMmaTileEpilogue(kir::Kernel &k) {
  std::vector<MmaTileEpilogueOutcome> out;
  std::function<void(std::vector<StmtP> &)> visit = [&](std::vector<StmtP> &list) {
    for (size_t i = 0; i < list.size(); ++i) {
      Stmt &s = *list[i];
      if (s.kind == Stmt::Kind::Reduce && s.update.size() == 1 &&
          s.update[0]->kind == Stmt::Kind::MmaTile && s.update[0]->views) {
        Stmt &mma = *s.update[0];
        MmaTileEpilogueOutcome o;
        o.accumulator = mma.c ? mma.c->name : "<null>";
        try {
          fuseAt(k, list, i, mma);
          o.applied = true;
          o.reason = "the init and the epilogue run on the micro-kernel's registers";
        } catch (const Rejected &r) {
          o.reason = r.reason;
        }
        list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), kir::comment(o.text()));
        ++i;
        out.push_back(std::move(o));
        continue;
      }
      for (std::vector<StmtP> *l : {&s.body, &s.elseBody, &s.init, &s.update})
        visit(*l);
    }
  };
  visit(k.body);
  return out;
}

} // namespace aicf
