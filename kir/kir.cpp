// Kernel IR builders and expression utilities (see kir.h). The printer and verifier live in
// kir_printer.cpp and kir_verifier.cpp.
#include "kir/kir.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace aicf::kir {

int64_t Buffer::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

const char *unOpName(UnOp op) {
  switch (op) {
  case UnOp::Neg: return "neg";
  case UnOp::Abs: return "abs";
  case UnOp::Exp: return "exp";
  case UnOp::Log: return "log";
  case UnOp::Sqrt: return "sqrt";
  case UnOp::Rsqrt: return "rsqrt";
  case UnOp::Tanh: return "tanh";
  case UnOp::Erf: return "erf";
  case UnOp::Sigmoid: return "sigmoid";
  case UnOp::Floor: return "floor";
  case UnOp::Ceil: return "ceil";
  case UnOp::Round: return "round";
  case UnOp::Sin: return "sin";
  case UnOp::Cos: return "cos";
  case UnOp::Not: return "not";
  case UnOp::Sign: return "sign";
  }
  return "?";
}

const char *binOpName(BinOp op) {
  switch (op) {
  case BinOp::Add: return "+";
  case BinOp::Sub: return "-";
  case BinOp::Mul: return "*";
  case BinOp::Div: return "/";
  case BinOp::Mod: return "%";
  case BinOp::Min: return "min";
  case BinOp::Max: return "max";
  case BinOp::Pow: return "pow";
  case BinOp::Lt: return "<";
  case BinOp::Le: return "<=";
  case BinOp::Gt: return ">";
  case BinOp::Ge: return ">=";
  case BinOp::Eq: return "==";
  case BinOp::Ne: return "!=";
  case BinOp::And: return "&&";
  case BinOp::Or: return "||";
  }
  return "?";
}

// ---- expressions ------------------------------------------------------------------------------

static ExprP make(Expr e) {
  return std::make_shared<const Expr>(std::move(e));
}

static Expr mkExpr(Expr::Kind kind, DType type) {
  Expr e;
  e.kind = kind;
  e.type = type;
  return e;
}

E::E(int64_t v) {
  Expr e = mkExpr(Expr::Kind::Int, DType::I64);
  e.ival = v;
  p_ = make(std::move(e));
}

E fconst(double v, DType t) {
  Expr e = mkExpr(Expr::Kind::Float, t);
  e.fval = v;
  return make(std::move(e));
}

E var(const std::string &name, DType t) {
  Expr e = mkExpr(Expr::Kind::Var, t);
  e.var = name;
  return make(std::move(e));
}

static DType computeType(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

E load(const BufferP &b, std::vector<E> idx) {
  AICF_CHECK(idx.size() == b->shape.size(), "load of ", b->name, " with ", idx.size(),
             " indices for rank ", b->shape.size());
  Expr e = mkExpr(Expr::Kind::Load, computeType(b->dtype));
  e.buf = b;
  for (E &i : idx)
    e.args.push_back(i.get());
  return make(std::move(e));
}

E unary(UnOp op, E a) {
  Expr e = mkExpr(Expr::Kind::Unary, op == UnOp::Not ? DType::Bool : a->type);
  e.uop = op;
  e.args = {a.get()};
  return make(std::move(e));
}

static bool isCompare(BinOp op) {
  return op >= BinOp::Lt;
}

E binary(BinOp op, E a, E b) {
  AICF_CHECK(a.get() != nullptr && b.get() != nullptr, "binary ", binOpName(op),
             " with a null operand");
  DType t = isCompare(op) ? DType::Bool : a->type;
  // Mixed int/float arithmetic promotes to the float side; f32 with f64 to f64.
  if (!isCompare(op) && a->type != b->type && isFloat(b->type) && a->type != DType::F64)
    t = b->type;
  Expr e = mkExpr(Expr::Kind::Binary, t);
  e.bop = op;
  e.args = {a.get(), b.get()};
  return make(std::move(e));
}

E select(E c, E a, E b) {
  Expr e = mkExpr(Expr::Kind::Select, a->type);
  e.args = {c.get(), a.get(), b.get()};
  return make(std::move(e));
}

E cast(E a, DType to) {
  if (a->type == to)
    return a;
  Expr e = mkExpr(Expr::Kind::Cast, to);
  e.args = {a.get()};
  return make(std::move(e));
}

// Constant folding of index arithmetic keeps printed kernels readable (i*1+0 -> i).
static bool isInt(const E &e, int64_t v) {
  return e->kind == Expr::Kind::Int && e->ival == v;
}

// Re-joining the digits of a flat index (issue 17). Composed index maps flatten an unflattened
// index again: a [2, 2, 64, 64] tensor read at its own flat position i prints as
// i / 8192 * 8192 + i / 4096 % 2 * 4096 + i / 64 % 64 * 64 + i % 64, which the host compiler
// cannot fold (the divisions are signed) and which stops it vectorising the loop (the K
// rotary of the LLaMA block: 50 us for 16 K elements). Two identities of C's truncating
// division, for any integer x and c, m > 0, fold adjacent digits while the sum is built:
//   x / (c m) * (c m) + x / c % m * c  =  x / c * c      (x when c = 1)
//   x / c % m * c     + x % c          =  x % (c m)
// (with y = x / c, x / (c m) = y / m, so the first is c (y / m * m + y % m) = c y; the second
// is x - x / (c m) * (c m) written two ways). They apply where the left operand is the digit
// or a sum ending in it, as a row-major flattening builds the sum outermost first.
namespace {

bool isBin(const ExprP &e, BinOp op) {
  return e->kind == Expr::Kind::Binary && e->bop == op && e->type == DType::I64;
}
bool intArg(const ExprP &e, size_t i, int64_t &v) {
  if (e->args[i]->kind != Expr::Kind::Int || e->args[i]->ival <= 0)
    return false;
  v = e->args[i]->ival;
  return true;
}

// e = x / c * c (c > 1).
bool floorTerm(const ExprP &e, ExprP &x, int64_t &c) {
  int64_t c2 = 0;
  if (!isBin(e, BinOp::Mul) || !intArg(e, 1, c2) || !isBin(e->args[0], BinOp::Div) ||
      !intArg(e->args[0], 1, c) || c != c2)
    return false;
  x = e->args[0]->args[0];
  return true;
}

// e = x / c % m * c, or x % m (c = 1).
bool digitTerm(const ExprP &e, ExprP &x, int64_t &c, int64_t &m) {
  if (isBin(e, BinOp::Mod) && intArg(e, 1, m)) {
    x = e->args[0];
    c = 1;
    return true;
  }
  int64_t c2 = 0;
  if (!isBin(e, BinOp::Mul) || !intArg(e, 1, c) || !isBin(e->args[0], BinOp::Mod) ||
      !intArg(e->args[0], 1, m))
    return false;
  const ExprP &d = e->args[0]->args[0];
  if (!isBin(d, BinOp::Div) || !intArg(d, 1, c2) || c2 != c)
    return false;
  x = d->args[0];
  return true;
}

// a + b with the two identities above, or null.
E joinDigits(const E &a, const E &b) {
  ExprP xa, xb;
  int64_t ca = 0, cb = 0, mb = 0, ma = 0;
  if (floorTerm(a.get(), xa, ca) && digitTerm(b.get(), xb, cb, mb) && ca == cb * mb &&
      exprEqual(xa, xb))
    return cb == 1 ? E(xa) : E(xa) / E(cb) * E(cb);
  if (digitTerm(a.get(), xa, ca, ma) && isBin(b.get(), BinOp::Mod) && intArg(b.get(), 1, cb) &&
      ca == cb && exprEqual(xa, b->args[0]))
    return E(xa) % E(ca * ma);
  return E();
}

} // namespace

E operator+(E a, E b) {
  if (isInt(a, 0))
    return b;
  if (isInt(b, 0))
    return a;
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int)
    return E(a->ival + b->ival);
  if (a->type == DType::I64 && b->type == DType::I64) {
    // a + (c - a) is c (a loop's end from its begin and extent; integers, so exact)
    if (isBin(b.get(), BinOp::Sub) && exprEqual(b->args[1], a.get()))
      return E(b->args[0]);
    if (E j = joinDigits(a, b))
      return j;
    if (isBin(a.get(), BinOp::Add))
      if (E j = joinDigits(E(a->args[1]), b))
        return E(a->args[0]) + j;
  }
  return binary(BinOp::Add, a, b);
}
E operator-(E a, E b) {
  if (isInt(b, 0))
    return a;
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int)
    return E(a->ival - b->ival);
  return binary(BinOp::Sub, a, b);
}
E operator*(E a, E b) {
  if (isInt(a, 1))
    return b;
  if (isInt(b, 1))
    return a;
  if (isInt(a, 0) || isInt(b, 0))
    return E(int64_t(0));
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int)
    return E(a->ival * b->ival);
  return binary(BinOp::Mul, a, b);
}
E operator/(E a, E b) {
  if (isInt(b, 1))
    return a;
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int && b->ival != 0)
    return E(a->ival / b->ival);
  return binary(BinOp::Div, a, b);
}
E operator%(E a, E b) {
  if (isInt(b, 1))
    return E(int64_t(0));
  if (a->kind == Expr::Kind::Int && b->kind == Expr::Kind::Int && b->ival != 0)
    return E(a->ival % b->ival);
  return binary(BinOp::Mod, a, b);
}
E min(E a, E b) {
  return binary(BinOp::Min, a, b);
}
E max(E a, E b) {
  return binary(BinOp::Max, a, b);
}
E operator<(E a, E b) {
  return binary(BinOp::Lt, a, b);
}
E operator<=(E a, E b) {
  return binary(BinOp::Le, a, b);
}
E operator>(E a, E b) {
  return binary(BinOp::Gt, a, b);
}
E operator>=(E a, E b) {
  return binary(BinOp::Ge, a, b);
}
E operator==(E a, E b) {
  return binary(BinOp::Eq, a, b);
}
E operator&&(E a, E b) {
  return binary(BinOp::And, a, b);
}

// ---- statements -------------------------------------------------------------------------------

static StmtP mk(Stmt::Kind k) {
  auto s = std::make_shared<Stmt>();
  s->kind = k;
  return s;
}

StmtP seq(std::vector<StmtP> body) {
  StmtP s = mk(Stmt::Kind::Seq);
  s->body = std::move(body);
  return s;
}

bool readsVar(const ExprP &e, const std::string &v) {
  if (!e)
    return false;
  if (e->kind == Expr::Kind::Var && e->var == v)
    return true;
  for (const ExprP &o : e->args)
    if (readsVar(o, v))
      return true;
  return false;
}

void forEachExpr(const ExprP &e, const std::function<void(const Expr &)> &fn) {
  if (!e)
    return;
  fn(*e);
  for (const ExprP &a : e->args)
    forEachExpr(a, fn);
}

std::vector<const E *> ownExprs(const Stmt &s) {
  std::vector<const E *> es = {&s.begin, &s.extent, &s.value, &s.cond, &s.first, &s.last};
  for (const E &e : s.indices)
    es.push_back(&e);
  for (const auto &[name, e] : s.combiner.lets)
    es.push_back(&e);
  for (const E &e : s.combiner.merged)
    es.push_back(&e);
  return es;
}

void forEachStmt(const std::vector<StmtP> &list, const std::function<void(const Stmt &)> &fn) {
  for (const StmtP &s : list) {
    fn(*s);
    forEachStmt(s->body, fn);
    forEachStmt(s->elseBody, fn);
    forEachStmt(s->init, fn);
    forEachStmt(s->update, fn);
  }
}

bool rewriteLoops(std::vector<StmtP> &stmts, const std::function<StmtP(const StmtP &)> &fn) {
  bool changed = false;
  for (StmtP &s : stmts) {
    switch (s->kind) {
    case Stmt::Kind::Seq:
    case Stmt::Kind::Region: changed |= rewriteLoops(s->body, fn); break;
    case Stmt::Kind::If:
      changed |= rewriteLoops(s->body, fn);
      changed |= rewriteLoops(s->elseBody, fn);
      break;
    case Stmt::Kind::Reduce:
      changed |= rewriteLoops(s->init, fn);
      changed |= rewriteLoops(s->update, fn);
      break;
    case Stmt::Kind::For:
      if (StmtP r = fn(s)) {
        s = r;
        changed = true;
      } else {
        changed |= rewriteLoops(s->body, fn);
      }
      break;
    default: break;
    }
  }
  return changed;
}

StmtP deepCopy(const StmtP &s) {
  auto c = std::make_shared<Stmt>(*s);
  for (std::vector<StmtP> *l : {&c->body, &c->elseBody, &c->init, &c->update})
    for (StmtP &x : *l)
      x = deepCopy(x);
  return c;
}

std::optional<std::vector<LoopReduction>> loopReductions(const Stmt &loop) {
  std::vector<LoopReduction> out;
  std::vector<std::string> declared = {loop.var};
  bool ok = true;
  std::function<void(const std::vector<StmtP> &)> walk = [&](const std::vector<StmtP> &body) {
    for (const StmtP &s : body) {
      if (s->kind == Stmt::Kind::Decl || s->kind == Stmt::Kind::For)
        declared.push_back(s->var);
      if (s->kind == Stmt::Kind::Assign &&
          std::find(declared.begin(), declared.end(), s->var) == declared.end()) {
        const ExprP &v = s->value.get();
        bool pattern = v->kind == Expr::Kind::Binary &&
                       (v->bop == BinOp::Add || v->bop == BinOp::Max || v->bop == BinOp::Min) &&
                       v->args.size() == 2 && v->args[0]->kind == Expr::Kind::Var &&
                       v->args[0]->var == s->var && !readsVar(v->args[1], s->var);
        auto seen = std::find_if(out.begin(), out.end(),
                                 [&](const LoopReduction &r) { return r.var == s->var; });
        if (!pattern || (seen != out.end() && seen->op != v->bop)) {
          ok = false;
          return;
        }
        if (seen == out.end())
          out.push_back({s->var, v->bop});
      }
      walk(s->body);
      walk(s->elseBody);
      walk(s->init);
      walk(s->update);
    }
  };
  walk(loop.body);
  if (!ok)
    return std::nullopt;
  return out;
}

StmtP forLoop(const std::string &v, E begin, E extent, std::vector<StmtP> body, int64_t step,
              Stmt::LoopKind kind) {
  StmtP s = mk(Stmt::Kind::For);
  s->var = v;
  s->begin = std::move(begin);
  s->extent = std::move(extent);
  s->body = std::move(body);
  s->step = step;
  s->loop = kind;
  return s;
}

StmtP region(const std::string &threadVar, std::vector<StmtP> body) {
  StmtP s = mk(Stmt::Kind::Region);
  s->var = threadVar;
  s->body = std::move(body);
  return s;
}

StmtP ifThen(E cond, std::vector<StmtP> then, std::vector<StmtP> otherwise) {
  StmtP s = mk(Stmt::Kind::If);
  s->cond = std::move(cond);
  s->body = std::move(then);
  s->elseBody = std::move(otherwise);
  return s;
}

StmtP store(const BufferP &b, std::vector<E> idx, E value) {
  AICF_CHECK(idx.size() == b->shape.size(), "store to ", b->name, " with ", idx.size(),
             " indices for rank ", b->shape.size());
  StmtP s = mk(Stmt::Kind::Store);
  s->buf = b;
  s->indices = std::move(idx);
  s->value = std::move(value);
  return s;
}

StmtP decl(const std::string &name, DType t, E init) {
  StmtP s = mk(Stmt::Kind::Decl);
  s->var = name;
  s->dtype = t;
  s->value = std::move(init);
  return s;
}

StmtP assign(const std::string &name, E value) {
  StmtP s = mk(Stmt::Kind::Assign);
  s->var = name;
  s->value = std::move(value);
  return s;
}

StmtP barrier() {
  return mk(Stmt::Kind::Barrier);
}

StmtP blockReduce(Combiner c, std::vector<BufferP> src, std::vector<BufferP> dst) {
  AICF_CHECK(src.size() == c.fields.size() && dst.size() == c.fields.size(), "block_reduce ",
             c.name, ": one src and dst buffer per field");
  StmtP s = mk(Stmt::Kind::BlockReduce);
  s->combiner = std::move(c);
  s->src = std::move(src);
  s->dst = std::move(dst);
  return s;
}

const char *mmaFragName(MmaFrag f) {
  switch (f) {
  case MmaFrag::None: return "simt";
  case MmaFrag::M16N8K16: return "m16n8k16";
  case MmaFrag::M16N8K8: return "m16n8k8";
  }
  return "?";
}

std::optional<MmaFrag> mmaFragByName(std::string_view s) {
  for (MmaFrag f : {MmaFrag::None, MmaFrag::M16N8K16, MmaFrag::M16N8K8})
    if (s == mmaFragName(f))
      return f;
  return std::nullopt;
}

int64_t mmaFragK(MmaFrag f) {
  return f == MmaFrag::M16N8K16 ? 16 : f == MmaFrag::M16N8K8 ? 8 : 1;
}

E mmaTileRow(MmaFrag f, int64_t n, int64_t tm, int64_t tn, const E &t, const E &i) {
  if (f == MmaFrag::None)
    return (t / E(n / tn)) * E(tm) + i;
  E w = t / E(int64_t(32)), l = t % E(int64_t(32));
  return (w / E(n / (4 * tn))) * E(8 * tm) + (i / E(int64_t(2))) * E(int64_t(16)) +
         (i % E(int64_t(2))) * E(int64_t(8)) + l / E(int64_t(4));
}

E mmaTileCol(MmaFrag f, int64_t n, int64_t tm, int64_t tn, const E &t, const E &j) {
  (void)tm;
  if (f == MmaFrag::None)
    return (t % E(n / tn)) * E(tn) + j;
  E w = t / E(int64_t(32)), l = t % E(int64_t(32));
  return (w % E(n / (4 * tn))) * E(4 * tn) + (j / E(int64_t(2))) * E(int64_t(8)) +
         (l % E(int64_t(4))) * E(int64_t(2)) + j % E(int64_t(2));
}

Precision kernelPrecision(const Kernel &k) {
  Precision p = Precision::F32;
  forEachStmt(k.body, [&](const Stmt &s) {
    if (s.kind != Stmt::Kind::MmaTile)
      return;
    if (s.frag == MmaFrag::None) { // the host's bf16 / int8 micro-kernels: B in group panels
      if (s.views && s.b->dtype == DType::BF16)
        p = Precision::BF16;
      if (s.views && s.b->dtype == DType::I8 && p == Precision::F32)
        p = Precision::I8;
      return;
    }
    p = s.frag == MmaFrag::M16N8K8  ? Precision::TF32
        : s.a->dtype == DType::BF16 ? Precision::BF16
                                    : Precision::F16;
  });
  return p;
}

StmtP mmaTile(BufferP c, BufferP a, BufferP b, int64_t m, int64_t n, int64_t k, int64_t tm,
              int64_t tn) {
  StmtP s = mk(Stmt::Kind::MmaTile);
  s->c = std::move(c);
  s->a = std::move(a);
  s->b = std::move(b);
  s->m = m;
  s->n = n;
  s->k = k;
  s->tm = tm;
  s->tn = tn;
  return s;
}

StmtP mmaTileViews(BufferP c, BufferP a, BufferP b, int64_t m, int64_t n, int64_t k, int64_t tm,
                   int64_t tn, const MmaViews &v) {
  StmtP s = mmaTile(std::move(c), std::move(a), std::move(b), m, n, k, tm, tn);
  s->views = true;
  s->indices = {v.aOffset, v.bOffset, v.rows, v.cols, v.depth};
  s->lda = v.lda;
  s->ldb = v.ldb;
  s->bPanel = v.bPanel;
  s->bPanelStride = v.bPanelStride;
  s->bPrefetch = v.bPrefetch;
  s->bTiles = v.bTiles;
  s->aShift = v.aShift;
  s->aBlocks = v.aBlocks;
  s->aGroups = v.aGroups;
  s->aTaps = v.aTaps;
  if (!v.aBlocks.empty())
    s->indices.push_back(v.firstBlock);
  if (!v.aTaps.empty()) {
    s->indices.push_back(v.tapLo);
    s->indices.push_back(v.tapHi);
  }
  if (v.bPanel != 0 && static_cast<bool>(v.bFirstCol)) {
    s->bFirstCol = true;
    s->indices.push_back(v.bFirstCol);
  }
  return s;
}

StmtP comment(std::string text) {
  StmtP s = mk(Stmt::Kind::Comment);
  s->text = std::move(text);
  return s;
}

StmtP reduce(const std::string &v, E begin, E extent, std::vector<StmtP> init,
             std::vector<StmtP> update, int64_t step) {
  StmtP s = mk(Stmt::Kind::Reduce);
  s->var = v;
  s->begin = std::move(begin);
  s->extent = std::move(extent);
  s->init = std::move(init);
  s->update = std::move(update);
  s->step = step;
  return s;
}

// ---- expression utilities (shared by Kernel IR passes) ----------------------------------------

bool exprEqual(const ExprP &a, const ExprP &b) {
  if (a == b)
    return true;
  if (!a || !b || a->kind != b->kind || a->type != b->type || a->args.size() != b->args.size())
    return false;
  switch (a->kind) {
  case Expr::Kind::Int:
    if (a->ival != b->ival)
      return false;
    break;
  case Expr::Kind::Float:
    if (!(a->fval == b->fval || (std::isnan(a->fval) && std::isnan(b->fval))))
      return false;
    break;
  case Expr::Kind::Var:
    if (a->var != b->var)
      return false;
    break;
  case Expr::Kind::Load:
    if (a->buf != b->buf)
      return false;
    break;
  case Expr::Kind::Unary:
    if (a->uop != b->uop)
      return false;
    break;
  case Expr::Kind::Binary:
    if (a->bop != b->bop)
      return false;
    break;
  default: break;
  }
  for (size_t i = 0; i < a->args.size(); ++i)
    if (!exprEqual(a->args[i], b->args[i]))
      return false;
  return true;
}

E rewriteExpr(const E &e, const std::map<std::string, std::string> &rename, const BufferP &from,
              const BufferP &to) {
  if (!e)
    return e;
  const Expr &x = *e.get();
  if (x.kind == Expr::Kind::Var) {
    auto it = rename.find(x.var);
    return it == rename.end() ? e : var(it->second, x.type);
  }
  if (x.args.empty())
    return e;
  Expr copy = x;
  bool changed = false;
  for (ExprP &a : copy.args) {
    E r = rewriteExpr(E(a), rename, from, to);
    changed |= r.get() != a;
    a = r.get();
  }
  if (x.kind == Expr::Kind::Load && from && x.buf == from) {
    copy.buf = to;
    changed = true;
  }
  return changed ? E(std::make_shared<const Expr>(std::move(copy))) : e;
}

std::string dimVar(const std::string &name) {
  return "sym_" + name;
}

E symE(const SymExpr &e) {
  E sum = int64_t(0);
  for (const auto &[mono, c] : e.terms()) {
    E t = c;
    for (const std::string &s : mono)
      t = t * var(dimVar(s));
    sum = sum + t;
  }
  return sum;
}

E symE(const SymExtent &e) {
  if (e.div == 1)
    return symE(e.num);
  return (symE(e.num) + E(e.div - 1)) / E(e.div);
}

} // namespace aicf::kir
