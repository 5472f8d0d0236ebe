// See c_stmt.h. The statement switch both C-family printers used to repeat, with the
// target-specific cases as hooks.
#include "backend/c/c_stmt.h"

#include <algorithm>

namespace aicf::cstmt {

using namespace kir;

StmtPrinter::StmtPrinter(const cexpr::Dialect &d, const Kernel &k, std::ostringstream &os)
    : d_(d), k_(k), os_(os), uses_(d) {
  uses_.stmts(k.body);
}

void StmtPrinter::line(int ind, const std::string &text) {
  os_ << std::string(2 * ind, ' ') << text << "\n";
}

std::string StmtPrinter::forHead(const Stmt &s) const {
  std::string inc = s.step == 1 ? "++" + s.var : s.var + " += " + std::to_string(s.step) + "L";
  return "for (int64_t " + s.var + " = " + ex(s.begin) + "; " + s.var + " < " +
         ex(s.begin + s.extent) + "; " + inc + ") {";
}

void StmtPrinter::kernelComment() {
  os_ << "// kernel " << k_.name;
  if (!k_.recipe.empty())
    os_ << " (" << k_.recipe << ")";
  os_ << ": grid(";
  for (size_t i = 0; i < k_.grid.size(); ++i)
    os_ << (i ? ", " : "") << k_.grid[i].first << ": " << k_.grid[i].second;
  os_ << ") block(" << k_.threadVar << ": " << k_.threads << ")\n";
}

std::string StmtPrinter::maybeUnused(const BufferP &b) const {
  return uses_.bufs.count(b.get()) ? "" : "[[maybe_unused]] ";
}

void StmtPrinter::block(int ind, const std::vector<StmtP> &body) {
  for (const StmtP &s : body)
    stmt(ind, *s);
}

void StmtPrinter::stmt(int ind, const Stmt &s) {
  switch (s.kind) {
  case Stmt::Kind::Seq:
    line(ind, "{");
    block(ind + 1, s.body);
    line(ind, "}");
    return;
  case Stmt::Kind::For:
    if (s.loop != Stmt::LoopKind::Serial) {
      int64_t n = 8;
      if (s.extent->kind == Expr::Kind::Int)
        n = std::clamp<int64_t>((s.extent->ival + s.step - 1) / s.step, 1, 64);
      std::string pragma = loopPragma(s, n);
      if (!pragma.empty())
        line(0, pragma);
    }
    line(ind, forHead(s));
    if (s.loop == Stmt::LoopKind::Vectorized) {
      std::optional<cexpr::Lane> outer = lane_;
      lane_ = cexpr::Lane{s.var, {}};
      block(ind + 1, s.body);
      lane_ = outer;
    } else {
      block(ind + 1, s.body);
    }
    line(ind, "}");
    return;
  case Stmt::Kind::Region: region(ind, s); return;
  case Stmt::Kind::If:
    line(ind, "if (" + ex(s.cond) + ") {");
    block(ind + 1, s.body);
    if (!s.elseBody.empty()) {
      line(ind, "} else {");
      block(ind + 1, s.elseBody);
    }
    line(ind, "}");
    return;
  case Stmt::Kind::Store: {
    std::vector<ExprP> idx;
    for (const E &e : s.indices)
      idx.push_back(e.get());
    line(ind, cexpr::elemRef(d_, s.buf, idx) + " = " +
                  cexpr::narrow(d_, s.buf->dtype, s.value.get(), lane_ ? &*lane_ : nullptr) + ";");
    return;
  }
  case Stmt::Kind::Decl:
    line(ind, std::string(declUsed(s) ? "" : "[[maybe_unused]] ") + cexpr::valueType(s.dtype) +
                  " " + s.var + " = " + ex(s.value) + ";");
    if (lane_ && s.dtype == DType::I64)
      lane_->defs[s.var] = s.value.get();
    return;
  case Stmt::Kind::Assign: line(ind, s.var + " = " + ex(s.value) + ";"); return;
  case Stmt::Kind::Barrier: line(ind, barrier()); return;
  case Stmt::Kind::BlockReduce: blockReduce(ind, s); return;
  case Stmt::Kind::MmaTile: mmaTile(ind, s); return;
  case Stmt::Kind::Reduce:
    block(ind, s.init);
    line(ind, forHead(s) + " // reduce");
    block(ind + 1, s.update);
    line(ind, "}");
    return;
  case Stmt::Kind::Comment: {
    std::istringstream lines(s.text);
    std::string l;
    while (std::getline(lines, l))
      line(ind, "// " + l);
    return;
  }
  }
}

void StmtPrinter::combinerMerge(int ind, const Combiner &c) {
  for (const auto &[name, e] : c.lets)
    line(ind, "[[maybe_unused]] const " + std::string(cexpr::valueType(e->type)) + " " + name +
                  " = " + ex(e) + ";");
  for (size_t i = 0; i < c.fields.size(); ++i)
    line(ind, "const " + std::string(cexpr::valueType(c.fields[i].second)) + " aicf_m" +
                  std::to_string(i) + " = " + ex(c.merged[i]) + ";");
  for (size_t i = 0; i < c.fields.size(); ++i)
    line(ind, "aicf_r" + std::to_string(i) + " = aicf_m" + std::to_string(i) + ";");
}

} // namespace aicf::cstmt
