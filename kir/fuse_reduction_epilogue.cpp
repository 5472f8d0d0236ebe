// FuseReductionEpilogue (see fuse_reduction_epilogue.h): finds each reduction whose init zeroes
// an accumulator, locates the first statement after it that reads the accumulator (the
// epilogue), checks the legality conditions and, when they hold, moves the additive term into
// the init. The statement tree is walked with explicit paths (frames) so the epilogue's loop
// nest can be matched against the reduction's and its variables renamed.
#include "kir/fuse_reduction_epilogue.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace aicf {

using kir::E;
using kir::Expr;
using kir::ExprP;
using kir::Stmt;
using kir::StmtP;

// ---- expression utilities -----------------------------------------------------------------------

namespace {

// An expression as the pass quotes it in reasons: the Kernel IR text form, f32 constants as
// their f32 values.
std::string quoted(const E &e) {
  return kir::exprStr(e, /*f32Values=*/true);
}

bool indicesEqual(const std::vector<E> &a, const std::vector<E> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!kir::exprEqual(a[i].get(), b[i].get()))
      return false;
  return true;
}

std::string indexText(const std::vector<E> &idx) {
  std::string s;
  for (size_t i = 0; i < idx.size(); ++i)
    s += (i ? ", " : "") + quoted(idx[i]);
  return s;
}

void forEachExpr(const E &e, const std::function<void(const Expr &)> &fn) {
  if (!e)
    return;
  fn(*e.get());
  for (const ExprP &a : e->args)
    forEachExpr(E(a), fn);
}

int countLoads(const E &e, const kir::BufferP &b) {
  int n = 0;
  forEachExpr(e, [&](const Expr &x) { n += x.kind == Expr::Kind::Load && x.buf == b; });
  return n;
}

std::set<std::string> varsOf(const E &e) {
  std::set<std::string> vs;
  forEachExpr(e, [&](const Expr &x) {
    if (x.kind == Expr::Kind::Var)
      vs.insert(x.var);
  });
  return vs;
}

std::set<const kir::Buffer *> loadsOf(const E &e) {
  std::set<const kir::Buffer *> bs;
  forEachExpr(e, [&](const Expr &x) {
    if (x.kind == Expr::Kind::Load)
      bs.insert(x.buf.get());
  });
  return bs;
}

bool isZero(const E &e) {
  return static_cast<bool>(e) && ((e->kind == Expr::Kind::Int && e->ival == 0) ||
                                  (e->kind == Expr::Kind::Float && e->fval == 0.0));
}

// ---- statement utilities ------------------------------------------------------------------------

// The child statement lists of a statement, in execution order.
std::vector<std::vector<StmtP> *> childLists(Stmt &s) {
  if (s.kind == Stmt::Kind::Reduce)
    return {&s.init, &s.update};
  if (s.kind == Stmt::Kind::If)
    return {&s.body, &s.elseBody};
  return {&s.body};
}

void forEachStmt(const StmtP &s, const std::function<void(Stmt &)> &fn) {
  fn(*s);
  for (std::vector<StmtP> *l : childLists(*s))
    for (const StmtP &c : *l)
      forEachStmt(c, fn);
}

int readsIn(const StmtP &s, const kir::BufferP &b) {
  int n = 0;
  forEachStmt(s, [&](Stmt &x) {
    for (const E *pe : kir::ownExprs(x))
      n += countLoads(*pe, b);
    if (x.kind == Stmt::Kind::MmaTile && (x.a == b || x.b == b))
      ++n;
    if (x.kind == Stmt::Kind::BlockReduce)
      n += static_cast<int>(std::count(x.src.begin(), x.src.end(), b));
  });
  return n;
}

int writesIn(const StmtP &s, const kir::BufferP &b) {
  int n = 0;
  forEachStmt(s, [&](Stmt &x) {
    n += (x.kind == Stmt::Kind::Store && x.buf == b) || (x.kind == Stmt::Kind::MmaTile && x.c == b);
    if (x.kind == Stmt::Kind::BlockReduce)
      n += static_cast<int>(std::count(x.dst.begin(), x.dst.end(), b));
  });
  return n;
}

void collectWrites(const StmtP &s, std::set<const kir::Buffer *> &out) {
  forEachStmt(s, [&](Stmt &x) {
    if (x.kind == Stmt::Kind::Store)
      out.insert(x.buf.get());
    if (x.kind == Stmt::Kind::MmaTile)
      out.insert(x.c.get());
    if (x.kind == Stmt::Kind::BlockReduce)
      for (const kir::BufferP &d : x.dst)
        out.insert(d.get());
  });
}

// A scalar a statement declares into its enclosing body (nested declarations are scoped).
void collectBinders(const StmtP &s, std::set<std::string> &out) {
  if (s->kind == Stmt::Kind::Decl)
    out.insert(s->var);
}

// A position in the statement tree: list `list` of statement `owner` (null: the kernel body),
// element `index`.
struct Frame {
  Stmt *owner = nullptr;
  std::vector<StmtP> *list = nullptr;
  size_t index = 0;
  bool inElse = false; // the list is an If's else branch
};
using Path = std::vector<Frame>;

// Finds `target` under `list`; `path` receives the frames from `list` down to it.
bool findPath(std::vector<StmtP> &list, Stmt *owner, bool inElse, const Stmt *target, Path &path) {
  for (size_t i = 0; i < list.size(); ++i) {
    path.push_back({owner, &list, i, inElse});
    if (list[i].get() == target)
      return true;
    Stmt &s = *list[i];
    std::vector<std::vector<StmtP> *> lists = childLists(s);
    for (size_t li = 0; li < lists.size(); ++li)
      if (findPath(*lists[li], &s, s.kind == Stmt::Kind::If && li == 1, target, path))
        return true;
    path.pop_back();
  }
  return false;
}

// The first Store (pre-order, execution order) under `s` whose value, indices or enclosing
// conditions read `b`, with the path from `s`'s list down to it; or any other kind of read.
struct FirstRead {
  Path path; // frames below the starting list, ending at the reading statement
  Stmt *stmt = nullptr;
};

bool findFirstRead(std::vector<StmtP> &list, Stmt *owner, bool inElse, size_t from,
                   const kir::BufferP &b, FirstRead &out) {
  for (size_t i = from; i < list.size(); ++i) {
    out.path.push_back({owner, &list, i, inElse});
    Stmt &s = *list[i];
    bool own = false;
    for (const E *pe : kir::ownExprs(s))
      own |= countLoads(*pe, b) > 0;
    own |= (s.kind == Stmt::Kind::MmaTile && (s.a == b || s.b == b)) ||
           (s.kind == Stmt::Kind::BlockReduce &&
            std::find(s.src.begin(), s.src.end(), b) != s.src.end());
    if (own) {
      out.stmt = &s;
      return true;
    }
    std::vector<std::vector<StmtP> *> lists = childLists(s);
    for (size_t li = 0; li < lists.size(); ++li)
      if (findFirstRead(*lists[li], &s, s.kind == Stmt::Kind::If && li == 1, 0, b, out))
        return true;
    out.path.pop_back();
  }
  return false;
}

const char *kindWord(const Stmt &s) {
  switch (s.kind) {
  case Stmt::Kind::Region: return "region";
  case Stmt::Kind::For: return "for";
  case Stmt::Kind::If: return "if";
  case Stmt::Kind::Reduce: return "reduce";
  case Stmt::Kind::Decl: return "decl";
  case Stmt::Kind::Assign: return "assign";
  case Stmt::Kind::Store: return "store";
  case Stmt::Kind::BlockReduce: return "block_reduce";
  case Stmt::Kind::MmaTile: return "mma_tile";
  default: return "statement";
  }
}

std::string nestText(const std::vector<Stmt *> &loops) {
  if (loops.empty())
    return "no loops";
  std::string s;
  for (size_t i = 0; i < loops.size(); ++i)
    s += (i ? ", " : "") + std::string(kindWord(*loops[i])) + " " + loops[i]->var;
  return s;
}

// Removes the statement at the end of `path` and every container that becomes empty.
void removeAt(Path &path) {
  while (!path.empty()) {
    Frame f = path.back();
    path.pop_back();
    f.list->erase(f.list->begin() + static_cast<std::ptrdiff_t>(f.index));
    if (!f.list->empty() || !f.owner)
      return;
    Stmt &o = *f.owner;
    bool empty = o.kind == Stmt::Kind::If       ? o.body.empty() && o.elseBody.empty()
                 : o.kind == Stmt::Kind::Reduce ? false
                                                : o.body.empty();
    if (!empty)
      return;
  }
}

// Rewrites loads and stores of `from` to `to` in a statement tree.
void replaceBuffer(const StmtP &s, const kir::BufferP &from, const kir::BufferP &to) {
  forEachStmt(s, [&](Stmt &x) {
    std::map<std::string, std::string> none;
    x.begin = kir::rewriteExpr(x.begin, none, from, to);
    x.extent = kir::rewriteExpr(x.extent, none, from, to);
    x.value = kir::rewriteExpr(x.value, none, from, to);
    x.cond = kir::rewriteExpr(x.cond, none, from, to);
    for (E &i : x.indices)
      i = kir::rewriteExpr(i, none, from, to);
    if (x.buf == from)
      x.buf = to;
    if (x.c == from)
      x.c = to;
  });
}

// ---- the pass -----------------------------------------------------------------------------------

struct Candidate {
  StmtP reduce;
  kir::BufferP acc;
};

// The accumulator of a reduction: a buffer its init stores literal 0 into exactly once and its
// update accumulates into (acc = acc + x, either order, or mma_tile). Null if none.
kir::BufferP accumulatorOf(Stmt &r) {
  std::vector<kir::BufferP> zeroed;
  for (const StmtP &s : r.init)
    forEachStmt(s, [&](Stmt &x) {
      if (x.kind == Stmt::Kind::Store && isZero(x.value))
        zeroed.push_back(x.buf);
    });
  for (const kir::BufferP &b : zeroed) {
    int inits = 0;
    for (const StmtP &s : r.init)
      inits += writesIn(s, b);
    if (inits != 1)
      continue;
    bool accumulated = false;
    for (const StmtP &s : r.update)
      forEachStmt(s, [&](Stmt &x) {
        if (x.kind == Stmt::Kind::MmaTile && x.c == b)
          accumulated = true;
        if (x.kind == Stmt::Kind::Store && x.buf == b && x.value->kind == Expr::Kind::Binary &&
            x.value->bop == kir::BinOp::Add)
          accumulated = true;
      });
    if (accumulated)
      return b;
  }
  return nullptr;
}

struct Rejected {
  std::string reason;
};

// The update only accumulates into acc.
void checkUpdate(Stmt &r, const kir::BufferP &acc) {
  for (const StmtP &s : r.update)
    forEachStmt(s, [&](Stmt &x) {
      if (x.kind == Stmt::Kind::Store && x.buf == acc) {
        const E &v = x.value;
        bool ok = v->kind == Expr::Kind::Binary && v->bop == kir::BinOp::Add;
        if (ok) {
          E l(v->args[0]), rr(v->args[1]);
          auto isSelf = [&](const E &e) {
            return e->kind == Expr::Kind::Load && e->buf == acc &&
                   indicesEqual(std::vector<E>(e->args.begin(), e->args.end()), x.indices);
          };
          ok = (isSelf(l) && countLoads(rr, acc) == 0) || (isSelf(rr) && countLoads(l, acc) == 0);
        }
        if (!ok)
          throw Rejected{cat("the update is not an accumulation into ", acc->name, ": ", acc->name,
                             "[", indexText(x.indices), "] = ", quoted(v))};
        return;
      }
      if (x.kind == Stmt::Kind::BlockReduce &&
          std::find(x.dst.begin(), x.dst.end(), acc) != x.dst.end())
        throw Rejected{cat("the update overwrites ", acc->name, " with a block_reduce")};
      if (x.kind == Stmt::Kind::MmaTile && x.c == acc)
        return;
      for (const E *pe : kir::ownExprs(x))
        if (countLoads(*pe, acc))
          throw Rejected{
              cat("the update reads ", acc->name, " outside its accumulation (", kindWord(x), ")")};
      if (x.kind == Stmt::Kind::MmaTile && (x.a == acc || x.b == acc))
        throw Rejected{cat("the update reads ", acc->name, " as an mma_tile operand")};
    });
}

// One fusion attempt (fuseOne), step by step; a step that finds the candidate unfit throws
// Rejected. The members are what the steps find and the later steps use.
struct Attempt {
  Attempt(kir::Kernel &k, const Candidate &cand)
      : k(k), cand(cand), acc(cand.acc), R(*cand.reduce) {}

  kir::Kernel &k;
  const Candidate &cand;
  const kir::BufferP &acc;
  Stmt &R;
  Path rPath;                             // from the kernel body down to R
  FirstRead read;                         // the epilogue: the first read of acc after R
  size_t level = 0;                       // the frame of rPath whose list holds the epilogue
  Stmt *epi = nullptr;                    // the epilogue store
  E accLoad, g;                           // its value: accLoad + g
  bool selfUpdate = false;                // the epilogue stores into acc itself
  std::vector<Stmt *> rNest, eNest;       // the init's and the epilogue's loop nests
  std::vector<std::pair<E, bool>> guards; // the epilogue's ifs: condition, negated (else branch)
  Path initPath;                          // from R's init down to its store into acc
  Stmt *initStore = nullptr;
  std::vector<E> ai, ei;                     // the init's and the epilogue's indices of acc
  std::map<std::string, std::string> rename; // epilogue loop variable -> the init's
  E gR, guardR;                              // g and the guards in the init's variables
  std::string reason;                        // what the rewrite did

  // The epilogue: the first read of acc after R, a store.
  void findEpilogue() {
    // The epilogue: the first read of acc after R, walking outwards through R's ancestors.
    level = rPath.size();
    for (size_t lv = rPath.size(); lv-- > 0;) {
      Frame &f = rPath[lv];
      FirstRead r;
      if (findFirstRead(*f.list, f.owner, f.inElse, f.index + 1, acc, r)) {
        read = std::move(r);
        level = lv;
        break;
      }
    }
    if (!read.stmt)
      throw Rejected{cat("no epilogue reads ", acc->name, " after the reduction")};
    epi = read.stmt;
    if (epi->kind != Stmt::Kind::Store)
      throw Rejected{
          cat(acc->name, " is first read by a ", kindWord(*epi), ", not by an epilogue store")};
  }

  // The epilogue stores acc[ei] + g (either order), acc read nowhere else in it.
  void splitAdditive() {
    Stmt &epi = *this->epi;
    for (const E &i : epi.indices)
      if (countLoads(i, acc))
        throw Rejected{cat(acc->name, " is read in the index of the epilogue store")};

    // Additive: acc[ei] + g or g + acc[ei] at the top of the stored value.
    const E &val = epi.value;
    if (val->kind == Expr::Kind::Binary && val->bop == kir::BinOp::Add) {
      E l(val->args[0]), r(val->args[1]);
      if (l->kind == Expr::Kind::Load && l->buf == acc)
        accLoad = l, g = r;
      else if (r->kind == Expr::Kind::Load && r->buf == acc)
        accLoad = r, g = l;
    }
    int readsInValue = countLoads(val, acc);
    if (!accLoad) {
      if (readsInValue > 1)
        throw Rejected{cat("accumulator read ",
                           readsInValue == 2 ? "twice" : cat(readsInValue, " times"),
                           " in the epilogue: ", quoted(val))};
      throw Rejected{cat("epilogue is not additive: ", quoted(val))};
    }
    if (countLoads(g, acc) > 0)
      throw Rejected{cat("accumulator read ",
                         readsInValue == 2 ? "twice" : cat(readsInValue, " times"),
                         " in the epilogue: ", quoted(val))};
    selfUpdate = epi.buf == acc;
  }

  void checkSoleConsumer() {
    // Nothing else consumes acc: every read outside R is the epilogue's, except reads that
    // follow a self-update (they read the updated value); no other writes.
    int total = 0, after = 0;
    for (const StmtP &s : k.body)
      total += readsIn(s, acc);
    total -= readsIn(cand.reduce, acc);
    if (selfUpdate) {
      // Reads after the epilogue store in the walk from the epilogue's list outwards.
      Path full(rPath.begin(), rPath.begin() + static_cast<std::ptrdiff_t>(level) + 1);
      full.back().index = read.path.front().index;
      full.insert(full.end(), read.path.begin() + 1, read.path.end());
      for (size_t lv = full.size(); lv-- > 0;)
        for (size_t i = full[lv].index + 1; i < full[lv].list->size(); ++i)
          after += readsIn((*full[lv].list)[i], acc);
    }
    if (total - after > 1)
      throw Rejected{cat("accumulator read ",
                         total - after == 2 ? "twice" : cat(total - after, " times"),
                         " after the reduction (exactly once required, by the epilogue)")};
    int writes = 0;
    for (const StmtP &s : k.body)
      writes += writesIn(s, acc);
    writes -= writesIn(cand.reduce, acc) + (selfUpdate ? 1 : 0);
    if (writes > 0)
      throw Rejected{cat(acc->name, " is also written outside the reduction")};
  }

  void matchNests() {
    // Loop nests: the reduction side (R's ancestors below the common list, then the init's
    // nest down to the zero store) against the epilogue side (its ancestors below the common
    // list). If's on the epilogue side are guards; on the reduction side they are rejected.
    auto addFrameOwner = [&](Stmt *owner, std::vector<Stmt *> &nest, bool eSide, bool inElse) {
      if (!owner || owner->kind == Stmt::Kind::Seq)
        return;
      if (owner->kind == Stmt::Kind::Region || owner->kind == Stmt::Kind::For) {
        nest.push_back(owner);
      } else if (owner->kind == Stmt::Kind::If && eSide) {
        guards.emplace_back(owner->cond, inElse);
      } else if (owner != &R) {
        throw Rejected{
            cat("the ", eSide ? "epilogue" : "reduction", " is nested in a ", kindWord(*owner))};
      }
    };
    for (size_t lv = level + 1; lv < rPath.size(); ++lv)
      addFrameOwner(rPath[lv].owner, rNest, false, rPath[lv].inElse);
    for (size_t i = 0; i < R.init.size() && !initStore; ++i) {
      forEachStmt(R.init[i], [&](Stmt &x) {
        if (x.kind == Stmt::Kind::Store && x.buf == acc)
          initStore = &x;
      });
      if (initStore)
        findPath(R.init, &R, false, initStore, initPath);
    }
    AICF_CHECK(initStore, "accumulator init store vanished");
    ai = initStore->indices;
    for (size_t i = 1; i < initPath.size(); ++i)
      addFrameOwner(initPath[i].owner, rNest, false, initPath[i].inElse);
    for (size_t i = 1; i < read.path.size(); ++i)
      addFrameOwner(read.path[i].owner, eNest, true, read.path[i].inElse);

    auto nestMismatch = [&] {
      return Rejected{cat("index maps do not line up: the epilogue's loop nest (", nestText(eNest),
                          ") does not match the init's (", nestText(rNest), ")")};
    };
    if (rNest.size() != eNest.size())
      throw nestMismatch();
    for (size_t i = 0; i < rNest.size(); ++i) {
      Stmt &a = *rNest[i], &b = *eNest[i];
      if (a.kind != b.kind)
        throw nestMismatch();
      if (a.kind == Stmt::Kind::For &&
          (a.step != b.step ||
           !kir::exprEqual(a.begin.get(), kir::rewriteExpr(b.begin, rename, {}, {}).get()) ||
           !kir::exprEqual(a.extent.get(), kir::rewriteExpr(b.extent, rename, {}, {}).get())))
        throw Rejected{cat("index maps do not line up: loop ", b.var,
                           " of the epilogue does not "
                           "have the bounds of loop ",
                           a.var, " of the init")};
      if (a.var != b.var)
        rename[b.var] = a.var;
    }
    ei.assign(accLoad->args.begin(), accLoad->args.end());
    std::vector<E> eiR;
    for (const E &i : ei)
      eiR.push_back(kir::rewriteExpr(i, rename, {}, {}));
    if (!indicesEqual(eiR, ai))
      throw Rejected{cat("index maps do not line up: the epilogue reads ", acc->name, "[",
                         indexText(ei), "], the init writes ", acc->name, "[", indexText(ai), "]")};
  }

  void checkMovable() {
    // g (and the guards) move to the init: their variables must be bound there, and nothing
    // they read may be written by the reduction or between it and the epilogue.
    gR = kir::rewriteExpr(g, rename, {}, {});
    for (const auto &[c, negated] : guards) {
      E cr = kir::rewriteExpr(c, rename, {}, {});
      if (negated)
        cr = kir::unary(kir::UnOp::Not, cr);
      guardR = guardR ? (guardR && cr) : cr;
    }
    std::set<std::string> unavailable = {R.var};
    std::set<const kir::Buffer *> written;
    for (const StmtP &s : R.init)
      collectWrites(s, written);
    for (const StmtP &s : R.update)
      collectWrites(s, written);
    for (size_t lv = level + 1; lv < rPath.size(); ++lv) // after R inside R's ancestors
      for (size_t i = rPath[lv].index + 1; i < rPath[lv].list->size(); ++i)
        collectWrites((*rPath[lv].list)[i], written);
    {
      Frame &common = rPath[level];
      for (size_t i = common.index + 1; i < read.path.front().index; ++i) {
        collectBinders((*common.list)[i], unavailable);
        collectWrites((*common.list)[i], written);
      }
      for (size_t i = 0; i + 1 < read.path.size(); ++i) {
        const Frame &f = read.path[i + 1];
        for (size_t j = 0; j < f.index; ++j) { // siblings before the path inside the epilogue
          collectBinders((*f.list)[j], unavailable);
          collectWrites((*f.list)[j], written);
        }
      }
      for (Stmt *s : eNest)
        if (!rename.count(s->var) && std::find_if(rNest.begin(), rNest.end(), [&](Stmt *r) {
                                       return r->var == s->var;
                                     }) == rNest.end())
          unavailable.insert(s->var);
    }
    for (const E &e : {gR, guardR}) {
      for (const std::string &v : varsOf(e))
        if (unavailable.count(v))
          throw Rejected{cat("index maps do not line up: g uses '", v,
                             "', which is not available at the reduction's init")};
      for (const kir::Buffer *b : loadsOf(e))
        if (written.count(b))
          throw Rejected{cat("g reads ", b->name, ", which the reduction writes")};
    }
  }

  void rewrite() {
    Stmt &epi = *this->epi;
    // Rewrite. The init store becomes acc = g' (or, guarded, if (guard') acc = g' else the old
    // init); the epilogue store keeps only acc, or disappears.
    std::vector<E> di;
    for (const E &i : epi.indices)
      di.push_back(kir::rewriteExpr(i, rename, {}, {}));
    std::string initText = cat(acc->name, "[", indexText(ai), "] = ", quoted(gR));
    if (guardR) {
      StmtP zero = kir::store(acc, ai, initStore->value);
      StmtP fused = kir::store(acc, ai, gR);
      Frame &f = initPath.back();
      (*f.list)[f.index] = kir::ifThen(guardR, {fused}, {zero});
      initText += cat(" where ", quoted(guardR));
    } else {
      initStore->value = gR;
    }
    Path epiPath(rPath.begin(), rPath.begin() + static_cast<std::ptrdiff_t>(level));
    epiPath.insert(epiPath.end(), read.path.begin(), read.path.end());
    bool dIsAcc = !selfUpdate && epi.buf->dtype == acc->dtype && epi.buf->shape == acc->shape &&
                  !guardR && indicesEqual(di, ai) &&
                  std::find(k.allocs.begin(), k.allocs.end(), acc) != k.allocs.end();
    if (dIsAcc) {
      int dReads = 0, dWrites = 0;
      for (const StmtP &s : k.body) {
        dReads += readsIn(s, epi.buf);
        dWrites += writesIn(s, epi.buf);
      }
      dIsAcc = dReads == 0 && dWrites == 1;
    }
    if (selfUpdate) {
      if (!indicesEqual(epi.indices, ei))
        throw Rejected{cat("index maps do not line up: ", acc->name, "[", indexText(epi.indices),
                           "] = ", acc->name, "[", indexText(ei), "] + ...")};
      removeAt(epiPath);
      reason = cat("init ", initText, "; the epilogue ", acc->name, " += g disappears");
    } else if (dIsAcc) {
      kir::BufferP d = epi.buf;
      std::string dName = d->name;
      removeAt(epiPath);
      replaceBuffer(cand.reduce, acc, d);
      k.allocs.erase(std::find(k.allocs.begin(), k.allocs.end(), acc));
      reason = cat("init ", initText, "; the reduction accumulates into ", dName,
                   ": the temporary ", acc->name, " and the epilogue store disappear");
    } else {
      epi.value = accLoad;
      reason = cat("init ", initText, "; the epilogue stores ", epi.buf->name, "[",
                   indexText(epi.indices), "] = ", quoted(accLoad));
    }
  }
};

ReductionEpilogueOutcome fuseOne(kir::Kernel &k, const Candidate &cand) {
  ReductionEpilogueOutcome out;
  const kir::BufferP &acc = cand.acc;
  out.accumulator = acc->name;
  try {
    Attempt at(k, cand);
    AICF_CHECK(findPath(k.body, nullptr, false, cand.reduce.get(), at.rPath),
               "reduction not found in kernel ", k.name);
    checkUpdate(at.R, acc);
    at.findEpilogue();
    out.hasEpilogue = true;
    at.splitAdditive();
    at.checkSoleConsumer();
    at.matchNests();
    at.checkMovable();
    at.rewrite();
    out.reason = at.reason + " (reassociated: g is added first)";
    out.applied = true;
  } catch (const Rejected &r) {
    out.applied = false;
    out.reason = r.reason;
  }
  return out;
}

} // namespace

std::string ReductionEpilogueOutcome::text() const {
  return cat("FuseReductionEpilogue(", accumulator,
             "): ", applied ? "applied: " : "rejected: ", reason);
}

bool FuseReductionEpilogueResult::applied() const {
  return std::any_of(outcomes.begin(), outcomes.end(),
                     [](const ReductionEpilogueOutcome &o) { return o.applied; });
}

FuseReductionEpilogueResult fuseReductionEpilogue(kir::Kernel &k, bool annotate,
                                                  bool onlyWithEpilogue) {
  // Candidates first (the rewrites below change the tree), as the owning pointers.
  std::vector<Candidate> cands;
  std::function<void(const std::vector<StmtP> &)> collect = [&](const std::vector<StmtP> &list) {
    for (const StmtP &s : list) {
      if (s->kind == Stmt::Kind::Reduce)
        if (kir::BufferP acc = accumulatorOf(*s))
          cands.push_back({s, acc});
      for (std::vector<StmtP> *l : childLists(*s))
        collect(*l);
    }
  };
  collect(k.body);
  FuseReductionEpilogueResult res;
  for (const Candidate &c : cands) {
    ReductionEpilogueOutcome o = fuseOne(k, c);
    if (onlyWithEpilogue && !o.hasEpilogue)
      continue;
    if (annotate) {
      Path q;
      AICF_CHECK(findPath(k.body, nullptr, false, c.reduce.get(), q), "reduction not found");
      q.back().list->insert(q.back().list->begin() + static_cast<std::ptrdiff_t>(q.back().index),
                            kir::comment(o.text()));
    }
    res.outcomes.push_back(std::move(o));
  }
  return res;
}

} // namespace aicf
