// The Kernel IR verifier (kir::verifyKernel): checks a kernel's structure and the SIMT rule of
// docs/architecture.md, so that both printers can spell it without adding logic:
//   * structure: declared buffers only, indices count = rank, integer indices, vars defined
//     before use (with the type they were declared with), loop / grid / thread vars never
//     assigned, Decl/Assign/Store value types, positive loop steps, bool conditions,
//     block_reduce src/dst/combiner shapes and types, mma_tile shapes, names that are C
//     identifiers (the host and CUDA printers use them verbatim; the prefix aicf_ is reserved
//     for the printers' own names);
//   * the SIMT rule: no barrier / collective / region inside a region; block-level loop and
//     reduce bounds and block-level if conditions are uniform (no thread var, no region-local
//     scalar); region scalars die with their region; the thread var and `local` buffers are
//     used only inside regions, locals indexed by the thread var first; stores happen only in
//     regions; a region never assigns a block-level scalar; `in` params are never stored to.
// Every violation is returned as "kernel NAME: message" (deduplicated, in program order).
#include "kir/kir.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

namespace aicf::kir {
namespace {

DType computeType(DType t) {
  return (t == DType::F16 || t == DType::BF16) ? DType::F32 : t;
}

bool isIndexType(DType t) {
  return isInteger(t);
}

bool isIdentifier(const std::string &s) {
  static const std::set<std::string> keywords = {
      "alignas",  "alignof",  "and",       "asm",      "auto",      "bool",      "break",
      "case",     "catch",    "char",      "class",    "const",     "constexpr", "continue",
      "default",  "delete",   "do",        "double",   "else",      "enum",      "explicit",
      "extern",   "false",    "float",     "for",      "friend",    "goto",      "if",
      "inline",   "int",      "long",      "mutable",  "namespace", "new",       "noexcept",
      "not",      "nullptr",  "operator",  "or",       "private",   "protected", "public",
      "register", "return",   "short",     "signed",   "sizeof",    "static",    "struct",
      "switch",   "template", "this",      "throw",    "true",      "try",       "typedef",
      "typename", "union",    "unsigned",  "using",    "virtual",   "void",      "volatile",
      "while",    "xor",      "args",      "int64_t",  "int32_t",   "int8_t",    "uint16_t",
      "uint8_t",  "std",      "threadIdx", "blockIdx", "blockDim",  "gridDim"};
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return !keywords.count(s);
}

enum class VarKind : uint8_t { Grid, Thread, Loop, Scalar };

struct VarInfo {
  DType type;
  VarKind kind;
  bool regionLocal; // declared inside a region
};

class Verifier {
public:
  explicit Verifier(const Kernel &k) : k_(k) {}

  std::vector<std::string> run() {
    kernelLevel();
    scopes_.emplace_back();
    for (const auto &[axis, extent] : k_.grid)
      scopes_.back()[axis] = {DType::I64, VarKind::Grid, false};
    // A symbolic dim's value is uniform, known at launch, like a grid axis.
    for (const std::string &d : k_.dims)
      scopes_.back()[dimVar(d)] = {DType::I64, VarKind::Grid, false};
    body(k_.body, /*newScope=*/false);
    return errs_;
  }

private:
  const Kernel &k_;
  std::vector<std::string> errs_;
  std::vector<std::map<std::string, VarInfo>> scopes_;
  std::set<std::string> regionScalars_; // every name declared inside some region so far
  std::set<const Buffer *> bufs_;
  std::set<std::string> names_; // grid axes, thread var, buffers
  bool inRegion_ = false;
  std::string boundWhat_; // set while checking a block-level bound or condition

  void err(const std::string &msg) {
    std::string m = "kernel " + k_.name + ": " + msg;
    if (std::find(errs_.begin(), errs_.end(), m) == errs_.end())
      errs_.push_back(m);
  }

  void checkName(const std::string &name) {
    if (!isIdentifier(name))
      err("name '" + name + "' is not a valid identifier");
    else if (name.rfind("aicf_", 0) == 0)
      err("name " + name + " uses the reserved prefix aicf_");
    if (!names_.insert(name).second)
      err("name " + name + " is defined twice");
  }

  std::string describe(const BufferP &b) {
    static const char *scopes[] = {"global", "shared", "local"};
    return b->name + ": " + scopes[static_cast<int>(b->scope)] + " " + dtypeName(b->dtype) +
           shapeStr(b->shape);
  }

  void kernelLevel() {
    if (!isIdentifier(k_.name))
      err("kernel name is not a valid identifier");
    if (k_.threads < 1)
      err("threads must be positive, got " + std::to_string(k_.threads));
    for (const auto &[axis, extent] : k_.grid) {
      checkName(axis);
      if (extent < 1)
        err("grid axis " + axis + " has extent " + std::to_string(extent));
    }
    for (const std::string &d : k_.dims)
      checkName(dimVar(d));
    if (!k_.symGrid.empty() && k_.symGrid.size() != k_.grid.size())
      err("the symbolic grid has " + std::to_string(k_.symGrid.size()) + " extents for " +
          std::to_string(k_.grid.size()) + " axes");
    for (const SymExtent &e : k_.symGrid)
      for (const std::string &sym : e.num.symbols())
        if (std::find(k_.dims.begin(), k_.dims.end(), sym) == k_.dims.end())
          err("a grid extent uses '" + sym + "', not one of the kernel's dims");
    checkName(k_.threadVar);
    auto common = [&](const BufferP &b) {
      if (!b) {
        err("null buffer in params or allocs");
        return false;
      }
      checkName(b->name);
      if (!bufs_.insert(b.get()).second)
        err("buffer " + b->name + " is listed twice");
      // A symbolic param's shape is one point of its dims' ranges, which may be 0 (a length
      // known only at run time at its minimum, as the shape-generic certificate relowers).
      for (int64_t d : b->shape)
        if (d < (b->sym.empty() ? 1 : 0))
          err("buffer " + describe(b) + " has a " + (d < 0 ? "negative" : "non-positive") +
              " dimension");
      return true;
    };
    for (const BufferP &b : k_.params) {
      if (!common(b))
        continue;
      if (b->scope != Scope::Global)
        err("param " + b->name + " must be a global buffer");
      if (b->role == Role::Temp)
        err("param " + b->name + " must have role in or out");
    }
    for (const BufferP &b : k_.allocs) {
      if (!common(b))
        continue;
      if (b->scope == Scope::Global)
        err("allocation " + b->name + " must be shared or local");
      if (b->scope == Scope::Local && (b->shape.empty() || b->shape[0] != k_.threads))
        err("local buffer " + b->name + ": first dimension must be the thread count " +
            std::to_string(k_.threads));
    }
  }

  const VarInfo *find(const std::string &name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end())
        return &f->second;
    }
    return nullptr;
  }

  void define(const std::string &name, VarInfo info) {
    if (!isIdentifier(name))
      err("name '" + name + "' is not a valid identifier");
    else if (name.rfind("aicf_", 0) == 0)
      err("name " + name + " uses the reserved prefix aicf_");
    if (find(name) || names_.count(name))
      err(name + " is already defined");
    scopes_.back()[name] = info;
    if (inRegion_ && info.kind == VarKind::Scalar)
      regionScalars_.insert(name);
  }

  // ---- expressions ----------------------------------------------------------------------------

  void expr(const ExprP &e) {
    if (!e) {
      err("null expression");
      return;
    }
    size_t arity = 0;
    switch (e->kind) {
    case Expr::Kind::Int:
    case Expr::Kind::Float: return;
    case Expr::Kind::Var: useVar(e->var, e->type); return;
    case Expr::Kind::Load: access(e->buf, e->args, false); return;
    case Expr::Kind::Unary:
    case Expr::Kind::Cast: arity = 1; break;
    case Expr::Kind::Binary: arity = 2; break;
    case Expr::Kind::Select: arity = 3; break;
    }
    if (e->args.size() != arity) {
      err("expression with " + std::to_string(e->args.size()) + " operands, expected " +
          std::to_string(arity));
      return;
    }
    for (const ExprP &a : e->args)
      expr(a);
  }

  void useVar(const std::string &name, DType type) {
    if (name == k_.threadVar && !inRegion_) {
      err(boundWhat_.empty() ? "thread var " + name + " used outside a region"
                             : boundWhat_ + " depends on thread var " + name);
      return;
    }
    const VarInfo *v = find(name);
    if (!v) {
      if (regionScalars_.count(name))
        err(boundWhat_.empty()
                ? "scalar " + name + " declared in a region is not visible outside it"
                : boundWhat_ + " depends on region-local scalar " + name);
      else
        err("var " + name + " used before definition");
      return;
    }
    if (v->type != type)
      err("var " + name + " used as " + dtypeName(type) + " but declared " + dtypeName(v->type));
  }

  bool declared(const BufferP &b) {
    if (!b) {
      err("null buffer");
      return false;
    }
    if (!bufs_.count(b.get())) {
      err("buffer " + b->name + " is not a param or allocation of this kernel");
      return false;
    }
    return true;
  }

  void access(const BufferP &b, const std::vector<ExprP> &idx, bool isStore) {
    if (!declared(b))
      return;
    if (idx.size() != b->shape.size())
      err(b->name + " indexed with " + std::to_string(idx.size()) + " indices, rank is " +
          std::to_string(b->shape.size()));
    for (size_t i = 0; i < idx.size(); ++i) {
      expr(idx[i]);
      if (idx[i] != nullptr && !isIndexType(idx[i]->type))
        err("index " + std::to_string(i) + " of " + b->name + " has type " +
            dtypeName(idx[i]->type) + ", expected an integer");
    }
    if (b->scope == Scope::Local) {
      if (!inRegion_)
        err("local buffer " + b->name + " accessed outside a region");
      else if (idx.empty() || !idx[0] || idx[0]->kind != Expr::Kind::Var ||
               idx[0]->var != k_.threadVar)
        err("local buffer " + b->name + " must be indexed by thread var " + k_.threadVar +
            " as its first index");
    }
    if (isStore) {
      if (!inRegion_)
        err("store to " + b->name + " outside a region");
      if (b->scope == Scope::Global && b->role == Role::In)
        err("store to input param " + b->name);
    }
  }

  // A block-level bound or condition: uniform across the block's threads.
  void uniform(const E &e, const std::string &what) {
    if (!inRegion_)
      boundWhat_ = what;
    expr(e.get());
    boundWhat_.clear();
  }

  void integerBounds(const Stmt &s, const std::string &what) {
    uniform(s.begin, "bound of block-level " + what + " " + s.var);
    uniform(s.extent, "bound of block-level " + what + " " + s.var);
    if ((s.begin.get() != nullptr && !isIndexType(s.begin->type)) ||
        (s.extent.get() != nullptr && !isIndexType(s.extent->type)))
      err(what + " " + s.var + ": bounds must be integers");
    if (s.step < 1)
      err(what + " " + s.var + ": step must be positive, got " + std::to_string(s.step));
  }

  // ---- statements -----------------------------------------------------------------------------

  void body(const std::vector<StmtP> &stmts, bool newScope = true) {
    if (newScope)
      scopes_.emplace_back();
    for (const StmtP &s : stmts)
      stmt(s);
    if (newScope)
      scopes_.pop_back();
  }

  void stmt(const StmtP &sp) {
    if (!sp) {
      err("null statement");
      return;
    }
    const Stmt &s = *sp;
    switch (s.kind) {
    case Stmt::Kind::Seq: body(s.body); return;
    case Stmt::Kind::For:
      integerBounds(s, "loop");
      scopes_.emplace_back();
      define(s.var, {DType::I64, VarKind::Loop, inRegion_});
      body(s.body, false);
      scopes_.pop_back();
      return;
    case Stmt::Kind::Region:
      if (inRegion_) {
        err("region nested inside region " + k_.threadVar);
        return;
      }
      if (s.var != k_.threadVar)
        err("region var " + s.var + " differs from the kernel's thread var " + k_.threadVar);
      inRegion_ = true;
      scopes_.emplace_back();
      scopes_.back()[k_.threadVar] = {DType::I64, VarKind::Thread, true};
      body(s.body, false);
      scopes_.pop_back();
      inRegion_ = false;
      return;
    case Stmt::Kind::If:
      uniform(s.cond, "condition of block-level if");
      if (s.cond.get() != nullptr && s.cond->type != DType::Bool)
        err(std::string("if condition has type ") + dtypeName(s.cond->type) + ", expected bool");
      body(s.body);
      body(s.elseBody);
      return;
    case Stmt::Kind::Store:
      access(s.buf, exprs(s.indices), true);
      expr(s.value.get());
      if (s.buf && s.value.get() != nullptr && s.value->type != s.buf->dtype &&
          s.value->type != computeType(s.buf->dtype))
        err("store to " + s.buf->name + ": value has type " + dtypeName(s.value->type) +
            ", buffer is " + dtypeName(s.buf->dtype));
      return;
    case Stmt::Kind::Decl:
      expr(s.value.get());
      if (s.value.get() != nullptr && s.value->type != s.dtype)
        err("decl " + s.var + ": " + dtypeName(s.dtype) + " initialised with an " +
            dtypeName(s.value->type) + " value");
      define(s.var, {s.dtype, VarKind::Scalar, inRegion_});
      return;
    case Stmt::Kind::Assign: assign(s); return;
    case Stmt::Kind::Barrier:
      if (inRegion_)
        err("barrier inside region " + k_.threadVar);
      return;
    case Stmt::Kind::BlockReduce:
      if (inRegion_)
        err("block_reduce inside region " + k_.threadVar);
      else
        blockReduce(s);
      return;
    case Stmt::Kind::MmaTile:
      if (inRegion_)
        err("mma_tile inside region " + k_.threadVar);
      else
        mmaTile(s);
      return;
    case Stmt::Kind::Reduce:
      integerBounds(s, "reduce");
      body(s.init, false); // init's declarations stay visible after the reduce
      scopes_.emplace_back();
      define(s.var, {DType::I64, VarKind::Loop, inRegion_});
      body(s.update, false);
      scopes_.pop_back();
      return;
    case Stmt::Kind::Comment: return;
    }
  }

  static std::vector<ExprP> exprs(const std::vector<E> &es) {
    std::vector<ExprP> out;
    for (const E &e : es)
      out.push_back(e.get());
    return out;
  }

  void assign(const Stmt &s) {
    expr(s.value.get());
    if (s.var == k_.threadVar) {
      err("assignment to thread var " + s.var);
      return;
    }
    const VarInfo *v = find(s.var);
    if (!v) {
      err(regionScalars_.count(s.var)
              ? "scalar " + s.var + " declared in a region is not visible outside it"
              : "assignment to undeclared scalar " + s.var);
      return;
    }
    switch (v->kind) {
    case VarKind::Loop: err("assignment to loop variable " + s.var); return;
    case VarKind::Grid: err("assignment to grid axis " + s.var); return;
    case VarKind::Thread: err("assignment to thread var " + s.var); return;
    case VarKind::Scalar: break;
    }
    if (inRegion_ && !v->regionLocal)
      err("region assigns block-level scalar " + s.var);
    if (s.value.get() != nullptr && s.value->type != v->type)
      err("assign " + s.var + ": " + dtypeName(v->type) + " scalar assigned an " +
          dtypeName(s.value->type) + " value");
  }

  // Combiner expressions see only a_<field>, b_<field> and the lets before them.
  void combinerExpr(const std::string &what, const ExprP &e,
                    const std::map<std::string, std::pair<DType, DType>> &vars) {
    if (!e) {
      err(what + ": null expression");
      return;
    }
    if (e->kind == Expr::Kind::Load) {
      err(what + ": combiner expressions must not load buffers");
      return;
    }
    if (e->kind == Expr::Kind::Var) {
      auto it = vars.find(e->var);
      if (it == vars.end())
        err(what + ": combiner uses unknown var " + e->var);
      else if (e->type != it->second.first && e->type != it->second.second)
        err(what + ": var " + e->var + " used as " + dtypeName(e->type) + " but is " +
            dtypeName(it->second.first));
      return;
    }
    for (const ExprP &a : e->args)
      combinerExpr(what, a, vars);
  }

  void blockReduce(const Stmt &s) {
    const Combiner &c = s.combiner;
    std::string what = "block_reduce " + c.name;
    size_t nf = c.fields.size();
    if (s.src.size() != nf || s.dst.size() != nf) {
      err(what + ": " + std::to_string(nf) + " fields but " + std::to_string(s.src.size()) +
          " src and " + std::to_string(s.dst.size()) + " dst buffers");
      return;
    }
    if (c.merged.size() != nf)
      err(what + ": " + std::to_string(nf) + " fields but " + std::to_string(c.merged.size()) +
          " merged expressions");
    std::map<std::string, std::pair<DType, DType>> vars;
    for (size_t i = 0; i < nf; ++i) {
      const auto &[field, dt] = c.fields[i];
      vars["a_" + field] = vars["b_" + field] = {dt, computeType(dt)};
      const BufferP &src = s.src[i], &dst = s.dst[i];
      if (declared(src)) {
        if (src->scope != Scope::Local || src->shape != std::vector<int64_t>{k_.threads})
          err(what + ": src " + describe(src) + " must be a local buffer of shape [" +
              std::to_string(k_.threads) + "]");
        if (src->dtype != dt)
          err(what + ": field " + field + " is " + dtypeName(dt) + " but src " + src->name +
              " is " + dtypeName(src->dtype));
      }
      if (declared(dst)) {
        if (dst->scope != Scope::Shared || dst->shape != std::vector<int64_t>{1})
          err(what + ": dst " + describe(dst) + " must be a shared buffer of shape [1]");
        if (dst->dtype != dt)
          err(what + ": field " + field + " is " + dtypeName(dt) + " but dst " + dst->name +
              " is " + dtypeName(dst->dtype));
      }
    }
    for (const auto &[name, e] : c.lets) {
      combinerExpr(what, e.get(), vars);
      if (e)
        vars[name] = {e->type, e->type};
    }
    for (size_t i = 0; i < c.merged.size() && i < nf; ++i) {
      const ExprP &e = c.merged[i].get();
      combinerExpr(what, e, vars);
      DType dt = c.fields[i].second;
      if (e != nullptr && e->type != dt && e->type != computeType(dt))
        err(what + ": merged field " + c.fields[i].first + " has type " + dtypeName(e->type) +
            ", expected " + dtypeName(dt));
    }
  }

  void mmaTile(const Stmt &s) {
    if (!declared(s.a) || !declared(s.b) || !declared(s.c))
      return;
    if (s.m < 1 || s.n < 1 || s.k < 1 || s.tm < 1 || s.tn < 1) {
      err("mma_tile: m, n, k, tm and tn must be positive");
      return;
    }
    auto operand = [&](const char *name, const BufferP &b, std::vector<int64_t> shape) {
      if (b->scope != Scope::Shared || b->shape != shape || !isFloat(b->dtype))
        err(std::string("mma_tile: ") + name + " must be a shared float buffer of shape " +
            shapeStr(shape) + ", got " + describe(b));
    };
    if (s.views) {
      // Views read f32 buffers where they lie, one thread owning the whole tile.
      if (s.indices.size() != s.viewIndices() || ((s.bFirstCol || s.bPrefetch) && !s.bPanel) ||
          std::any_of(s.indices.begin(), s.indices.end(), [](const E &e) { return !e; })) {
        err("mma_tile: a view needs A's and B's offsets, the valid rows, columns and depth");
        return;
      }
      for (const E &e : s.indices) {
        expr(e.get());
        if (e->type != DType::I64)
          err(std::string("mma_tile: a view's offset or extent has type ") + dtypeName(e->type) +
              ", expected i64");
      }
      // (B may be a bf16 weight packed in k pairs or an int8 one in k quads, read as panels; A's
      // blocks of any length are packed in pairs / quads per K chunk, which may straddle blocks.)
      const bool groups = (s.b->dtype == DType::BF16 || s.b->dtype == DType::I8) && s.bPanel > 0;
      if (s.a->dtype != DType::F32)
        err("mma_tile: a view reads f32 buffers, got " + describe(s.a));
      if (s.b->dtype != DType::F32 && !groups)
        err("mma_tile: a view reads f32 buffers, or bf16 pair or int8 quad panels, got " +
            describe(s.b));
      if (s.bTiles && !groups)
        err("mma_tile: AMX tiles need B in bf16 pair or int8 quad panels, got " + describe(s.b));
      if (s.aShift < 0 || s.aShift > 255 || (s.aShift != 0 && s.b->dtype != DType::I8))
        err("mma_tile: A's shift " + std::to_string(s.aShift) +
            " must lie in [0, 255], and be 0 unless B is an int8 weight");
      if (k_.threads != 1 || s.tm != s.m || s.tn != s.n)
        err("mma_tile: views need one thread owning the whole tile");
      if (!s.aBlocks.empty() &&
          (s.aBlocks.size() != 6 || s.aBlocks[3] < 1 || s.aBlocks[4] < 1 || s.aBlocks[5] < 1))
        err("mma_tile: A's blocks need {s0, s1, s2, n1 >= 1, n2 >= 1, L >= 1}");
      if (!s.aGroups.empty() &&
          (s.aBlocks.empty() || s.aGroups.size() != 2 || s.aGroups[0] < 1 || s.aGroups[1] < 1))
        err("mma_tile: A's row groups need A's blocks and {G >= 1, stride >= 1}");
      if (!s.aTaps.empty() &&
          (s.aBlocks.empty() || s.aTaps.size() != 7 || s.aTaps[0] < 1 || s.aTaps[1] < 1 ||
           s.aTaps[2] < 0 || s.aTaps[4] < 1 || s.aTaps[5] < 1 || s.aTaps[6] < 0 ||
           ((s.aTaps[2] != 0 || s.aTaps[6] != 0) && s.aGroups.empty())))
        err("mma_tile: A's taps need A's blocks and {d >= 1, H >= 1, s >= 0, c0, cs >= 1, cd >= "
            "1, W >= 0}, s and W 0 without row groups");
      if (s.lda < 1 || (s.bPanel == 0 && s.ldb < 1) ||
          (s.bPanel != 0 && (s.bPanel % 16 != 0 || s.n % 16 != 0 || s.bPanelStride < 1)))
        err("mma_tile: bad view strides (lda " + std::to_string(s.lda) + ", ldb " +
            std::to_string(s.ldb) + ", panels " + std::to_string(s.bPanel) + " x " +
            std::to_string(s.bPanelStride) + ")");
    } else {
      operand("A", s.a, {s.m, s.k});
      operand("B", s.b, {s.k, s.n});
    }
    std::vector<int64_t> cshape{k_.threads, s.tm, s.tn};
    if (s.frag != MmaFrag::None) {
      fragments(s, cshape);
      return;
    }
    if (s.c->scope != Scope::Local || s.c->shape != cshape || s.c->dtype != DType::F32)
      err("mma_tile: C must be a local f32 buffer of shape " + shapeStr(cshape) + ", got " +
          describe(s.c));
    if (s.m % s.tm != 0)
      err("mma_tile: tm " + std::to_string(s.tm) + " does not divide m " + std::to_string(s.m));
    if (s.n % s.tn != 0)
      err("mma_tile: tn " + std::to_string(s.tn) + " does not divide n " + std::to_string(s.n));
    if (s.m % s.tm == 0 && s.n % s.tn == 0 && (s.m / s.tm) * (s.n / s.tn) != k_.threads)
      err("mma_tile: (m/tm)*(n/tn) = " + std::to_string((s.m / s.tm) * (s.n / s.tn)) +
          " thread tiles for " + std::to_string(k_.threads) + " threads");
    if (s.fused)
      fusedBodies(s);
    else if (!s.init.empty() || !s.body.empty() || s.first || s.last)
      err("mma_tile: an init or epilogue body without `fused`");
  }

  // Tensor-core fragments (kir.h): staged operands of the instruction's type, warp tiles that
  // cover the tile, k in whole instruction steps.
  void fragments(const Stmt &s, const std::vector<int64_t> &cshape) {
    const char *name = mmaFragName(s.frag);
    if (s.views || s.fused) {
      err(std::string("mma_tile: ") + name + " fragments read staged operands (no views)");
      return;
    }
    bool half = s.a->dtype == s.b->dtype && (s.a->dtype == DType::F16 || s.a->dtype == DType::BF16);
    if (s.frag == MmaFrag::M16N8K16 ? !half : s.a->dtype != DType::F32 || s.b->dtype != DType::F32)
      err(std::string("mma_tile: ") + name + " needs A and B " +
          (s.frag == MmaFrag::M16N8K16 ? "both f16 or both bf16" : "f32 (read as tf32)") +
          ", got " + describe(s.a) + " and " + describe(s.b));
    if (s.c->scope != Scope::Local || s.c->shape != cshape || s.c->dtype != DType::F32)
      err("mma_tile: C must be a local f32 buffer of shape " + shapeStr(cshape) + ", got " +
          describe(s.c));
    int64_t wm = 8 * s.tm, wn = 4 * s.tn;
    if (s.tm % 2 || s.tn % 2 || s.m % wm || s.n % wn || s.k % mmaFragK(s.frag)) {
      err(std::string("mma_tile: ") + name + " needs tm and tn even, m a multiple of 8 tm (" +
          std::to_string(wm) + "), n of 4 tn (" + std::to_string(wn) + ") and k of " +
          std::to_string(mmaFragK(s.frag)) + ", got m " + std::to_string(s.m) + ", n " +
          std::to_string(s.n) + ", k " + std::to_string(s.k));
      return;
    }
    int64_t threads = (s.m / wm) * (s.n / wn) * 32;
    if (threads != k_.threads)
      err("mma_tile: " + std::to_string((s.m / wm) * (s.n / wn)) + " warp tiles need " +
          std::to_string(threads) + " threads, the block has " + std::to_string(k_.threads));
  }

  // A fused init and epilogue (kir.h): per-element code over (t, i, jo, jl), run as if inside
  // the thread region, C accessed only at its element [t, i, j], j = jo * 16 + jl.
  void fusedBodies(const Stmt &s) {
    if (!s.views || s.tn % 16 != 0) {
      err("mma_tile: a fused init and epilogue need views and tn a multiple of 16");
      return;
    }
    for (const E *e : {&s.first, &s.last}) {
      if (!*e) {
        err("mma_tile: fused without its first and last conditions");
        return;
      }
      expr(e->get());
      if ((*e)->type != DType::Bool)
        err(std::string("mma_tile: a fused first / last condition has type ") +
            dtypeName((*e)->type) + ", expected bool");
    }
    auto elementBody = [&](const std::vector<StmtP> &stmts, const char *what, bool init) {
      const Stmt *d = stmts.empty() ? nullptr : stmts.front().get();
      if (!d || d->kind != Stmt::Kind::Decl || d->var != "j" ||
          printExpr(d->value) != "jo * 16 + jl") {
        err(std::string("mma_tile: the fused ") + what +
            " must start with var j: i64 = jo * 16 + jl");
        return;
      }
      // C's element only (the init stores it; an epilogue may update it before reading it).
      int cStores = 0;
      bool bad = false;
      forEachStmt(stmts, [&](const Stmt &x) {
        for (const E *e : ownExprs(x))
          forEachExpr(e->get(), [&](const Expr &l) {
            bad |= l.kind == Expr::Kind::Load && l.buf == s.c && !atElement(l.args);
          });
        if (x.kind == Stmt::Kind::Store && x.buf == s.c) {
          ++cStores;
          std::vector<ExprP> idx;
          for (const E &e : x.indices)
            idx.push_back(e.get());
          bad |= !atElement(idx);
        }
        if (x.kind == Stmt::Kind::Region || x.kind == Stmt::Kind::MmaTile ||
            x.kind == Stmt::Kind::BlockReduce || x.kind == Stmt::Kind::Barrier ||
            x.kind == Stmt::Kind::Reduce)
          err(std::string("mma_tile: the fused ") + what + " holds a " +
              (x.kind == Stmt::Kind::Region ? "region" : "block-level statement"));
      });
      if (bad)
        err(std::string("mma_tile: the fused ") + what + " accesses " + s.c->name +
            " other than at its element [" + k_.threadVar + ", i, j]");
      if (init && cStores == 0)
        err("mma_tile: the fused init does not store " + s.c->name);
      bool saved = inRegion_;
      inRegion_ = true;
      scopes_.emplace_back();
      scopes_.back()[k_.threadVar] = {DType::I64, VarKind::Thread, true};
      for (const char *v : {"i", "jo", "jl"})
        define(v, {DType::I64, VarKind::Loop, true});
      body(stmts, false);
      scopes_.pop_back();
      inRegion_ = saved;
    };
    elementBody(s.init, "init", true);
    elementBody(s.body, "epilogue", false);
  }

  bool atElement(const std::vector<ExprP> &idx) const {
    auto isVar = [](const ExprP &e, const std::string &v) {
      return e && e->kind == Expr::Kind::Var && e->var == v;
    };
    return idx.size() == 3 && isVar(idx[0], k_.threadVar) && isVar(idx[1], "i") &&
           isVar(idx[2], "j");
  }
};

} // namespace

std::vector<std::string> verifyKernel(const Kernel &k) {
  return Verifier(k).run();
}

std::string verifyKernelText(const Kernel &k) {
  std::string all;
  for (const std::string &e : verifyKernel(k))
    all += "\n  " + e;
  return all;
}

} // namespace aicf::kir
