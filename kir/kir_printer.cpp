// The Kernel IR text form (kir::printKernel): a readable, deterministic spelling of a kernel for
// golden tests and `aicfc --emit kernels`, in the form docs/ir-format.md describes:
//
//   kernel @ln grid(row: 128) block(t: 128) knobs {threads = 128}
//       (X: global f32[128,256] in, Y: global f32[128,256] out) {
//     local st: f32[128]
//     region t {
//       var acc: f32 = 0.0
//       ...
//     }
//     block_reduce sum(st) -> (tot) { s: f32 = a_s + b_s }
//   }
//
// Expressions print with the fewest parentheses that keep the tree unambiguous (binary
// operators are left-associative, so a right operand of equal precedence is parenthesised);
// floats print via formatFloat, so the text is byte-stable across runs and platforms.
#include "kir/kir.h"

#include "ir/attributes.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace aicf::kir {
namespace {

// Precedence levels; higher binds tighter. Function-style forms are primaries.
constexpr int kPrecOr = 1, kPrecAnd = 2, kPrecEq = 3, kPrecRel = 4, kPrecAdd = 5, kPrecMul = 6,
              kPrecUnary = 7, kPrecPrimary = 8;

int binPrec(BinOp op) {
  switch (op) {
  case BinOp::Or: return kPrecOr;
  case BinOp::And: return kPrecAnd;
  case BinOp::Eq:
  case BinOp::Ne: return kPrecEq;
  case BinOp::Lt:
  case BinOp::Le:
  case BinOp::Gt:
  case BinOp::Ge: return kPrecRel;
  case BinOp::Add:
  case BinOp::Sub: return kPrecAdd;
  case BinOp::Mul:
  case BinOp::Div:
  case BinOp::Mod: return kPrecMul;
  case BinOp::Min:
  case BinOp::Max:
  case BinOp::Pow: return kPrecPrimary; // printed as calls
  }
  return kPrecPrimary;
}

struct Printed {
  std::string text;
  int prec;
};

std::string paren(const Printed &p, bool wrap);

// Float constants print as stored (the double, so the text round-trips), or, with `f32Values`,
// f32 constants as the f32 value the kernel computes with (shortest float form).
struct ExprPrinter {
  bool f32Values = false;

  std::string floatText(const Expr &e) const {
    if (!f32Values || e.type != DType::F32 || std::isnan(e.fval) || std::isinf(e.fval))
      return formatFloat(e.fval);
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(e.fval));
    std::string s(buf, res.ptr);
    if (s.find_first_of(".eE") == std::string::npos)
      s += ".0";
    return s;
  }

  std::string joinArgs(const std::vector<ExprP> &args, size_t from = 0) const {
    std::string s;
    for (size_t i = from; i < args.size(); ++i)
      s += (i > from ? ", " : "") + print(args[i]).text;
    return s;
  }

  Printed print(const ExprP &e) const {
    if (!e)
      return {"<null>", kPrecPrimary};
    switch (e->kind) {
    case Expr::Kind::Int: return {std::to_string(e->ival), e->ival < 0 ? kPrecUnary : kPrecPrimary};
    case Expr::Kind::Float: {
      std::string s = floatText(*e);
      if (e->type != DType::F32)
        return {std::string(dtypeName(e->type)) + "(" + s + ")", kPrecPrimary};
      return {s, s[0] == '-' ? kPrecUnary : kPrecPrimary};
    }
    case Expr::Kind::Var: return {e->var, kPrecPrimary};
    case Expr::Kind::Load:
      return {(e->buf ? e->buf->name : std::string("<null>")) + "[" + joinArgs(e->args) + "]",
              kPrecPrimary};
    case Expr::Kind::Unary: {
      if (e->uop == UnOp::Neg || e->uop == UnOp::Not) {
        Printed a = print(e->args.at(0));
        return {std::string(e->uop == UnOp::Neg ? "-" : "!") + paren(a, a.prec <= kPrecUnary),
                kPrecUnary};
      }
      return {std::string(unOpName(e->uop)) + "(" + joinArgs(e->args) + ")", kPrecPrimary};
    }
    case Expr::Kind::Binary: {
      int p = binPrec(e->bop);
      if (p == kPrecPrimary)
        return {std::string(binOpName(e->bop)) + "(" + joinArgs(e->args) + ")", kPrecPrimary};
      Printed a = print(e->args.at(0)), b = print(e->args.at(1));
      return {paren(a, a.prec < p) + " " + binOpName(e->bop) + " " + paren(b, b.prec <= p), p};
    }
    case Expr::Kind::Select: return {"select(" + joinArgs(e->args) + ")", kPrecPrimary};
    case Expr::Kind::Cast:
      return {std::string(dtypeName(e->type)) + "(" + joinArgs(e->args) + ")", kPrecPrimary};
    }
    return {"<?>", kPrecPrimary};
  }
};

std::string paren(const Printed &p, bool wrap) {
  return wrap ? "(" + p.text + ")" : p.text;
}

std::string ex(const E &e) {
  return ExprPrinter{}.print(e.get()).text;
}

const char *scopeName(Scope s) {
  switch (s) {
  case Scope::Global: return "global";
  case Scope::Shared: return "shared";
  case Scope::Local: return "local";
  }
  return "?";
}

const char *roleName(Role r) {
  switch (r) {
  case Role::In: return "in";
  case Role::Out: return "out";
  case Role::Temp: return "temp";
  }
  return "?";
}

std::string bufType(const BufferP &b) {
  if (b->sym.empty())
    return std::string(dtypeName(b->dtype)) + shapeStr(b->shape);
  std::string s = std::string(dtypeName(b->dtype)) + "[";
  for (size_t i = 0; i < b->sym.size(); ++i)
    s += (i ? "," : "") + b->sym[i].str();
  return s + "]";
}

std::string bufNames(const std::vector<BufferP> &bs) {
  std::string s;
  for (size_t i = 0; i < bs.size(); ++i)
    s += (i ? ", " : "") + (bs[i] ? bs[i]->name : std::string("<null>"));
  return s;
}

// "i in 0 .. 256 step 4"
std::string range(const Stmt &s) {
  std::string r = s.var + " in " + ex(s.begin) + " .. " + ex(s.begin + s.extent);
  if (s.step != 1)
    r += " step " + std::to_string(s.step);
  return r;
}

class Printer {
public:
  std::ostringstream os;

  void line(int ind, const std::string &text) { os << std::string(2 * ind, ' ') << text << "\n"; }

  void block(int ind, const std::vector<StmtP> &body) {
    for (const StmtP &s : body)
      stmt(ind, s);
  }

  void stmt(int ind, const StmtP &sp) {
    if (!sp) {
      line(ind, "<null statement>");
      return;
    }
    const Stmt &s = *sp;
    switch (s.kind) {
    case Stmt::Kind::Seq:
      line(ind, "{");
      block(ind + 1, s.body);
      line(ind, "}");
      return;
    case Stmt::Kind::For: {
      std::string kind = s.loop == Stmt::LoopKind::Unrolled     ? " unroll"
                         : s.loop == Stmt::LoopKind::Vectorized ? " vectorize"
                                                                : "";
      line(ind, "for " + range(s) + kind + " {");
      block(ind + 1, s.body);
      line(ind, "}");
      return;
    }
    case Stmt::Kind::Region:
      line(ind, "region " + s.var + " {");
      block(ind + 1, s.body);
      line(ind, "}");
      return;
    case Stmt::Kind::If:
      line(ind, "if " + ex(s.cond) + " {");
      block(ind + 1, s.body);
      if (!s.elseBody.empty()) {
        line(ind, "} else {");
        block(ind + 1, s.elseBody);
      }
      line(ind, "}");
      return;
    case Stmt::Kind::Store: {
      std::string idx;
      for (size_t i = 0; i < s.indices.size(); ++i)
        idx += (i ? ", " : "") + ex(s.indices[i]);
      line(ind, (s.buf ? s.buf->name : std::string("<null>")) + "[" + idx + "] = " + ex(s.value));
      return;
    }
    case Stmt::Kind::Decl:
      line(ind, "var " + s.var + ": " + dtypeName(s.dtype) + " = " + ex(s.value));
      return;
    case Stmt::Kind::Assign: line(ind, s.var + " = " + ex(s.value)); return;
    case Stmt::Kind::Barrier: line(ind, "barrier"); return;
    case Stmt::Kind::BlockReduce: {
      const Combiner &c = s.combiner;
      line(ind,
           "block_reduce " + c.name + "(" + bufNames(s.src) + ") -> (" + bufNames(s.dst) + ") {");
      for (const auto &[name, e] : c.lets)
        line(ind + 1, "let " + name + " = " + ex(e));
      for (size_t i = 0; i < c.merged.size(); ++i) {
        std::string field = i < c.fields.size()
                                ? c.fields[i].first + ": " + dtypeName(c.fields[i].second)
                                : "<field " + std::to_string(i) + ">";
        line(ind + 1, field + " = " + ex(c.merged[i]));
      }
      line(ind, "}");
      return;
    }
    case Stmt::Kind::MmaTile: {
      auto nm = [](const BufferP &b) { return b ? b->name : std::string("<null>"); };
      std::string sizes = "(m = " + std::to_string(s.m) + ", n = " + std::to_string(s.n) +
                          ", k = " + std::to_string(s.k) + ", tm = " + std::to_string(s.tm) +
                          ", tn = " + std::to_string(s.tn);
      if (s.frag != MmaFrag::None)
        sizes += std::string(", frag = ") + mmaFragName(s.frag);
      if (!s.views || s.indices.size() != s.viewIndices()) {
        line(ind, "mma_tile " + nm(s.c) + " += " + nm(s.a) + " x " + nm(s.b) + " " + sizes + ")");
        return;
      }
      std::string bView = s.bPanel
                              ? "panels = " + std::to_string(s.bPanel) +
                                    ", panel_stride = " + std::to_string(s.bPanelStride) +
                                    (s.bFirstCol ? ", first = " + ex(s.indices.back()) : "") +
                                    (s.bPrefetch ? ", prefetch" : "") + (s.bTiles ? ", tiles" : "")
                              : "ld = " + std::to_string(s.ldb);
      std::string aBlocks;
      if (!s.aBlocks.empty()) {
        aBlocks = ", blocks = [";
        for (size_t i = 0; i < s.aBlocks.size(); ++i)
          aBlocks += (i ? ", " : "") + std::to_string(s.aBlocks[i]);
        aBlocks += "], first = " + ex(s.indices[5]);
        if (s.aGroups.size() == 2)
          aBlocks += ", groups = [" + std::to_string(s.aGroups[0]) + ", " +
                     std::to_string(s.aGroups[1]) + "]";
        if (!s.aTaps.empty()) {
          aBlocks += ", taps = [" + ex(s.indices[6]) + ", " + ex(s.indices[7]);
          for (int64_t t : s.aTaps)
            aBlocks += ", " + std::to_string(t);
          aBlocks += "]";
        }
      }
      std::string head = "mma_tile " + nm(s.c) + " += " + nm(s.a) + "[at = " + ex(s.indices[0]) +
                         ", ld = " + std::to_string(s.lda) +
                         (s.b->dtype == DType::I8 ? ", shift = " + std::to_string(s.aShift) : "") +
                         aBlocks + "] x " + nm(s.b) + "[at = " + ex(s.indices[1]) + ", " + bView +
                         "] " + sizes + ", rows = " + ex(s.indices[2]) +
                         ", cols = " + ex(s.indices[3]) + ", depth = " + ex(s.indices[4]) + ")";
      if (!s.fused) {
        line(ind, head);
        return;
      }
      // The fused init and epilogue (t, i, jo and jl bound inside: kir.h).
      line(ind, head + " fused first = " + ex(s.first) + ", last = " + ex(s.last) + " {");
      line(ind + 1, "init {");
      block(ind + 2, s.init);
      line(ind + 1, "}");
      line(ind + 1, "epilogue {");
      block(ind + 2, s.body);
      line(ind + 1, "}");
      line(ind, "}");
      return;
    }
    case Stmt::Kind::Reduce:
      line(ind, "reduce " + range(s) + " {");
      line(ind + 1, "init {");
      block(ind + 2, s.init);
      line(ind + 1, "}");
      line(ind + 1, "update {");
      block(ind + 2, s.update);
      line(ind + 1, "}");
      line(ind, "}");
      return;
    case Stmt::Kind::Comment: {
      std::istringstream lines(s.text);
      std::string l;
      bool any = false;
      while (std::getline(lines, l)) {
        line(ind, "# " + l);
        any = true;
      }
      if (!any)
        line(ind, "#");
      return;
    }
    }
  }
};

} // namespace

std::string exprStr(const E &e, bool f32Values) {
  return ExprPrinter{f32Values}.print(e.get()).text;
}

std::string printExpr(const E &e) {
  return ex(e);
}

std::string printKernel(const Kernel &k) {
  Printer p;
  std::string head = "kernel @" + k.name;
  if (!k.recipe.empty())
    head += " recipe(" + k.recipe + ")";
  if (!k.dims.empty()) {
    head += " dims(";
    for (size_t i = 0; i < k.dims.size(); ++i)
      head += (i ? ", " : "") + k.dims[i];
    head += ")";
  }
  // A symbolic grid prints its extents only: the planning-point values are the cost model's.
  head += " grid(";
  for (size_t i = 0; i < k.grid.size(); ++i)
    head += (i ? ", " : "") + k.grid[i].first + ": " +
            (k.symGrid.empty() ? std::to_string(k.grid[i].second) : k.symGrid[i].str());
  head += ") block(" + k.threadVar + ": " + std::to_string(k.threads) + ")";
  if (!k.knobs.empty()) {
    head += " knobs {";
    bool first = true;
    for (const auto &[name, v] : k.knobs) {
      head += (first ? "" : ", ") + name + " = " + std::to_string(v);
      first = false;
    }
    head += "}";
  }
  p.line(0, head);
  std::string params;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const BufferP &b = k.params[i];
    params += (i ? ", " : "") + b->name + ": " + scopeName(b->scope) + " " + bufType(b) + " " +
              roleName(b->role);
  }
  p.line(2, "(" + params + ") {");
  for (const BufferP &b : k.allocs)
    p.line(1, std::string(scopeName(b->scope)) + " " + b->name + ": " + bufType(b));
  p.block(1, k.body);
  p.line(0, "}");
  return p.os.str();
}

} // namespace aicf::kir
