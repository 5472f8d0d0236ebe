// Symbolic dims bound to values (issue 21). `symBounds` gives the range an expression takes over
// the dims' ranges, which is how the importer and the passes prove that a shape fact holds for
// every value the compiled folder runs (a slice end stays within its buffer, a comparison of
// dims always has the same outcome). `instantiate` turns a symbolic graph into the static graph
// it is at one point of the dims, so the reference interpreter can run the very graph a
// symbolic compile planned at shapes other than the planning point.
#pragma once

#include "ir/graph.h"
#include "support/sym_expr.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aicf {

struct SymBounds {
  int64_t lo = 0, hi = 0; // lo <= e <= hi for every valuation within the ranges
};

// Bounds of `e` over the box of the dims' ranges, from each term's own bounds (every symbol is
// >= 1, so a term's extremes sit at the box's corners): exact when no symbol appears in two
// terms, so that the terms vary independently (the shape arithmetic the importer meets: seq,
// 3*seq, batch*seq, 128-seq, seq-1), otherwise safe but possibly wider than the true range
// (batch*seq-seq). nullopt when `e` uses a symbol not in `dims`, or on int64 overflow.
std::optional<SymBounds> symBounds(const SymExpr &e, const std::vector<DimRange> &dims);

// Binds every symbolic dim of `g` to its value in `point` (each of g.dims() must be given, in its
// range): input types, the symbolic attributes (reshape and expand sym_shape, slice sym_starts /
// sym_ends, which replace the planning values in shape / starts / ends and are dropped), and
// every result type, re-inferred node by node (and checked against the expressions). The graph
// is static afterwards (no dims). Throws UserError naming the problem.
void instantiate(Graph &g, const std::map<std::string, int64_t> &point);

// n's attributes with its symbolic attributes (sym_shape, sym_starts / sym_ends, sym_k) bound to
// their values at `point` and dropped, as instantiate binds them; nullopt when n has none whose
// symbols `point` all gives (the reference interpreter binds a data dim's uses this way, once the
// node setting it has run).
std::optional<AttrMap> boundAttrs(const Node &n, const std::map<std::string, int64_t> &point);

} // namespace aicf
