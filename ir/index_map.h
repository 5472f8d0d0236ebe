// Index maps (issue 17): layout ops as quasi-affine maps from a reader's index to the index of
// the buffer it reads, so a transpose, reshape, split, slice, expand or concat can be folded into
// its neighbours instead of moving bytes.
//
// An IndexMap sends an index of its `domain` shape (the reader's, e.g. a transpose's result) to
// an index of its `range` shape (the buffer read, e.g. the transpose's operand). Each result
// coordinate is an IndexExpr over the domain dims d0..dn-1 built from constants, +, * by a
// constant, floordiv and mod by a positive constant (MLIR's quasi-affine expressions). Maps
// compose (`compose(inner, outer)`: reshape -> transpose -> reshape is one map) and every
// expression is kept simplified with the domain dims' ranges, so the flatten/unflatten pairs of
// reshapes cancel: [b, s, h * 64 + d] read through split and reshape is (b * 64 + s, h * 64 + d)
// of the gemm output, not a chain of divisions.
//
// A layout op's maps are listed by layoutPieces: one piece per operand region the result reads
// (concat has one per operand, guarded by the range of its axis; every other op has one).
// scatterMap is the inverse direction where it exists (each operand element lands in exactly one
// result element: transpose, reshape, concat), which a producer uses to store straight into the
// layout op's result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace aicf {

class Node;

struct IndexExprNode;
using IndexExpr = std::shared_ptr<const IndexExprNode>;

struct IndexExprNode {
  enum class Kind : uint8_t { Const, Dim, Add, Mul, FloorDiv, Mod };
  Kind kind = Kind::Const;
  int64_t value = 0; // Const: the constant; Dim: the dim; Mul / FloorDiv / Mod: the constant
  IndexExpr a, b;    // Add: a + b; Mul / FloorDiv / Mod: a
};

IndexExpr ixConst(int64_t c);
IndexExpr ixDim(int d);
IndexExpr ixAdd(IndexExpr a, IndexExpr b);
IndexExpr ixMul(IndexExpr a, int64_t c);
IndexExpr ixFloorDiv(IndexExpr a, int64_t c); // c > 0
IndexExpr ixMod(IndexExpr a, int64_t c);      // c > 0

// `e` simplified knowing each dim d lies in [0, domain[d]): constants fold, sums are collected
// into coefficient form, and floordiv / mod drop whatever the ranges make exact.
IndexExpr simplify(const IndexExpr &e, const std::vector<int64_t> &domain);
// The inclusive range [lo, hi] of `e` over the domain.
std::pair<int64_t, int64_t> rangeOf(const IndexExpr &e, const std::vector<int64_t> &domain);
// `e` with each dim d replaced by subst[d].
IndexExpr substitute(const IndexExpr &e, const std::vector<IndexExpr> &subst);
int64_t evaluate(const IndexExpr &e, const std::vector<int64_t> &idx);
// Whether dim d appears anywhere in `e`.
bool readsDim(const IndexExpr &e, int d);
// "d0 * 64 + d1", "(d2 floordiv 4) mod 16".
std::string str(const IndexExpr &e);

struct IndexMap {
  std::vector<int64_t> domain;  // the reader's index space
  std::vector<int64_t> range;   // the shape of the buffer read
  std::vector<IndexExpr> exprs; // one per range dim, over the domain dims

  static IndexMap identity(const std::vector<int64_t> &shape);
  bool isIdentity() const;
  std::vector<int64_t> apply(const std::vector<int64_t> &idx) const;
  // "(d0, d1, d2, d3) -> (d0 * 64 + d2, d1 * 64 + d3)".
  std::string str() const;
  // The row-major element offset into `range` read at a domain index, simplified.
  IndexExpr flatOffset() const;
  // How the read moves in `range` (elements, row-major) as domain dim d steps: by `step`
  // elements, for runs of `run` consecutive values of d (a floordiv or mod of d restarts the
  // walk every run: a head split's d1 mod 64). nullopt when d enters nonlinearly otherwise
  // (an irregular gather).
  struct Stride {
    int64_t step = 0;
    int64_t run = 1;
  };
  std::optional<Stride> strideOf(int d) const;
};

// The map `first` then `then`: `first` sends A to B, `then` sends B to C; the result sends A
// to C, simplified over A.
IndexMap compose(const IndexMap &first, const IndexMap &then);

// ---- layout ops --------------------------------------------------------------------------------

// Whether `n` is a layout op with static index maps: reshape, transpose, split, slice, expand,
// concat (every operand and result static).
bool isLayoutOp(const Node &n);

// One region of a layout op's result and where it reads: result `result` at an index i (in the
// guard's range, when there is one) is operand `operand` at map(i).
struct LayoutPiece {
  int operand = 0;
  IndexMap map;       // domain: the result's shape; range: the operand's
  int guardAxis = -1; // concat: the piece covers result indices with i[axis] in [lo, hi)
  int64_t lo = 0, hi = 0;
};
std::vector<LayoutPiece> layoutPieces(const Node &n, int result = 0);

// Where operand `operand`'s element at index j lands in result 0 (domain: the operand's shape;
// range: the result's), when every operand element lands exactly once: transpose, reshape,
// concat. nullopt for the others.
std::optional<IndexMap> scatterMap(const Node &n, int operand);

// A bound on a store: the element at index j is kept only when lo <= e(j) < hi.
struct IndexBound {
  IndexExpr e;
  int64_t lo = 0, hi = 0;
};
// scatterMap where only a window of the operand lands in the result: a slice with unit steps
// keeps operand elements whose sliced coordinates lie in [start, end), at index - start. The
// exact scatters (transpose, reshape, concat) have no bounds; nullopt where neither exists.
struct Scatter {
  IndexMap map;                 // domain: the operand's shape; range: the result's
  std::vector<IndexBound> keep; // over the domain; all must hold
};
std::optional<Scatter> partialScatter(const Node &n, int operand);

} // namespace aicf
