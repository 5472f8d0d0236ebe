// The C-family statement printer shared by the host C++ printer (host_printer.cpp) and the
// CUDA printer (cuda_printer.cpp): one walk over Kernel IR statements that spells sequences,
// loops, ifs, stores, declarations, assignments, reductions and comments the same way for both
// targets (expressions through c_expr.h's Dialect). What differs is a hook: the loop pragma,
// what a thread region becomes (a loop over thread ids on the host, threadIdx.x on CUDA), a
// barrier, whether a declaration is used (for [[maybe_unused]]), block_reduce and mma_tile.
// The Kernel IR text form (kir/kir_printer.cpp) is not C and keeps its own walk.
#pragma once

#include "backend/c/c_expr.h"

#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace aicf::cstmt {

class StmtPrinter {
public:
  StmtPrinter(const cexpr::Dialect &d, const kir::Kernel &k, std::ostringstream &os);
  virtual ~StmtPrinter() = default;
  StmtPrinter(const StmtPrinter &) = delete;
  StmtPrinter &operator=(const StmtPrinter &) = delete;

protected:
  void line(int ind, const std::string &text);
  std::string ex(const kir::E &e) const { return cexpr::ex(d_, e, lane_ ? &*lane_ : nullptr); }
  // for (int64_t v = begin; v < begin + extent; v += step) {
  std::string forHead(const kir::Stmt &s) const;
  // "// kernel NAME (recipe): grid(axis: extent, ...) block(t: threads)" and a newline.
  void kernelComment();
  // "[[maybe_unused]] " unless the kernel body uses the buffer / the variable.
  std::string maybeUnused(const kir::BufferP &b) const;
  std::string maybeUnusedVar(const std::string &v) const {
    return uses_.vars.count(v) ? "" : "[[maybe_unused]] ";
  }

  virtual void block(int ind, const std::vector<kir::StmtP> &body);
  void stmt(int ind, const kir::Stmt &s);
  // A block_reduce combiner merging state a_<field> with b_<field> into aicf_r<i>: its lets,
  // its merged fields as aicf_m<i>, then the assignments (identical on both targets).
  void combinerMerge(int ind, const kir::Combiner &c);

  // ---- what differs between the targets
  // The pragma line before a non-serial loop ("" for none); `unroll` is its trip count clamped
  // to [1, 64] (8 when not constant).
  virtual std::string loopPragma(const kir::Stmt &s, int64_t unroll) const = 0;
  virtual void region(int ind, const kir::Stmt &s) = 0;
  virtual std::string barrier() const = 0;
  // Whether the declared scalar is read (else it is printed [[maybe_unused]]).
  virtual bool declUsed(const kir::Stmt &s) const = 0;
  virtual void blockReduce(int ind, const kir::Stmt &s) = 0;
  virtual void mmaTile(int ind, const kir::Stmt &s) = 0;

  const cexpr::Dialect &d_;
  const kir::Kernel &k_;
  std::ostringstream &os_;
  cexpr::Uses uses_; // of the whole kernel body
  // The innermost vectorised loop being printed (its i64 declarations so far), for the loads
  // that gather across its lanes (cexpr::Dialect::narrowGathers).
  std::optional<cexpr::Lane> lane_;
};

} // namespace aicf::cstmt
