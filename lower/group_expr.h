// Scalar expressions for the values of a kernel group. Recipes use it to inline the group's
// fused elementwise nodes: asking for a value at an index yields a load when the value is a
// kernel param, an inlined expression when an elementwise node of the group produces it, or
// whatever the recipe substituted (e.g. the anchor's result is the accumulator register).
// Elementwise semantics here must match the interpreter's (interp/kernels.cpp) exactly.
#pragma once

#include "ir/epilogue.h"
#include "kir/kir.h"
#include "lower/fusion.h"
#include "support/sym_expr.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aicf {

// Kernel IR expression of one elementwise registry op applied to operand values (already
// broadcast and loaded). Throws InternalError for a non-elementwise op.
kir::E elementwiseExpr(const Node &n, const std::vector<kir::E> &operands);

// One contraction epilogue step (ir/epilogue.h) applied to the f32 accumulator value: its op's
// elementwiseExpr; `operand` is a binary step's extra operand (as an f32 value).
kir::E epilogueStepExpr(const EpilogueStep &step, kir::E acc, kir::E operand = {});

// Index into a value of shape `from` that numpy-broadcasts to `to`, given indices in `to`:
// leading dims dropped, size-1 dims indexed by 0.
std::vector<kir::E> broadcastIndex(const std::vector<int64_t> &from, const std::vector<int64_t> &to,
                                   const std::vector<kir::E> &idx);

// Row-major flat index and its inverse, for recipes that iterate over flat element ranges.
// Two spellings of the inverse give the same values and different kernel text, so each recipe
// keeps the one it was written with (changing it changes the generated code):
//   unflatIndex: each index is flat / stride % extent (the leading dim without the modulo);
//   unflat:      innermost dim first, peeling flat % extent then flat / extent (the leading dim
//                takes what is left).
// Size-1 dims are indexed by 0 in both.
kir::E flatIndex(const std::vector<int64_t> &shape, const std::vector<kir::E> &idx);
std::vector<kir::E> unflatIndex(const std::vector<int64_t> &shape, kir::E flat);
std::vector<kir::E> unflat(const std::vector<int64_t> &shape, kir::E flat);

// Symbolic dims (issue 21): the same helpers over a value's dims as expressions (symShapeOf,
// ir/graph.h; every dim a constant for a static value). A symbolic extent or stride is read
// from the dims' variables (kir::symE) where the static forms have its value, and a dim counts
// as 1 (indexed by 0, broadcast) only when it is the constant 1 (a symbol whose planning value
// is 1 is not). With constant dims they build exactly the static forms' expressions, so a
// recipe can use them for every value and its static kernels print as before.
using SymShape = std::vector<SymExpr>;
// The element count; InternalError on overflow (types are range-checked where they are made).
SymExpr symNumel(const SymShape &shape);
// Whether the dim is the constant 1.
bool isUnitDim(const SymExpr &d);
// Whether two types have the same dims at every point of the dims' ranges (their planning
// shapes may agree by chance: [n, 128] and [128, 128] at n = 128).
bool sameShape(const TensorType &a, const TensorType &b);
std::vector<kir::E> broadcastIndex(const SymShape &from, const SymShape &to,
                                   const std::vector<kir::E> &idx);
kir::E flatIndex(const SymShape &shape, const std::vector<kir::E> &idx);
std::vector<kir::E> unflatIndex(const SymShape &shape, kir::E flat);
std::vector<kir::E> unflat(const SymShape &shape, kir::E flat);

// Layout ops over symbolic dims (issue 21). Their index maps (ir/index_map.h) hold
// planning-point integers and are simplified over planning-point ranges, so GroupExpr reads a
// folded one, and storeIndex stores through one, op by op instead, computing each index from
// the dims' expressions: exact at every value of the dims.
// Whether layout op `n` reads or writes a value with symbolic dims.
bool isSymbolicLayout(const Node &n);
// The index into shape `to` of the element at index `idx` of shape `from`, the two holding the
// same elements in the same row-major order (a reshape, either way): the dims both keep at
// either end pass through, the rest is flattened with `from`'s dims and unflattened with
// `to`'s.
std::vector<kir::E> regroupIndex(const SymShape &from, const SymShape &to,
                                 const std::vector<kir::E> &idx);
// How many dims a reshape `from` -> `to` keeps at its start and at its end (equal dims on both
// sides); the dims between are the ones it regroups.
std::pair<size_t, size_t> keptDims(const SymShape &from, const SymShape &to);

// An index expression (ir/index_map.h) with its dims replaced by `dims`.
kir::E indexExpr(const IndexExpr &e, const std::vector<kir::E> &dims);

// Where output `v` of group `g` is stored for its element at `idx`: idx itself, or for an
// output stored through a layout op (KernelGroup::storeThrough) the layout op's result index.
std::vector<kir::E> storeIndex(const KernelGroup &g, const Value *v,
                               const std::vector<kir::E> &idx);

// Whether output `v` of group `g` is stored at `idx`: null when every element is, or the
// bounds of a store through a slice (KernelGroup::StoreThrough::keep) over idx.
kir::E storeKept(const KernelGroup &g, const Value *v, const std::vector<kir::E> &idx);
// The store of output `v`'s element `idx` into its param `b` at `at` (storeIndex(g, v, idx)
// unless given), inside an if on storeKept when the store is bounded.
kir::StmtP storeOutput(const KernelGroup &g, const kir::BufferP &b, const Value *v,
                       const std::vector<kir::E> &idx, kir::E value,
                       const std::vector<kir::E> *at = nullptr);

class GroupExpr;

// Stores every output of group `g` at `idx` through its fused epilogue, the anchor's result
// being `anchorValue`. With an empty `bindPrefix` the epilogue is inlined into each store; with
// a prefix the anchor value and each epilogue value are declared once, in graph order, as
// scalars <prefix>_r, <prefix>_e0, ... (every output must then have the anchor's shape, as the
// flat-loop recipes require). The recipes chose one or the other; kept as they are, since the
// two give different (equally correct) kernel text.
// `storeAt` (optional) overrides the store index of the outputs it names (a recipe that knows
// a cheaper spelling of storeIndex for its loop, e.g. one affine in the vector lane).
std::vector<kir::StmtP>
storeGroupOutputs(const KernelGroup &g, GroupExpr &gx, const Value *anchorResult,
                  const kir::E &anchorValue, const std::vector<kir::E> &idx,
                  const std::string &bindPrefix = "",
                  const std::map<const Value *, std::vector<kir::E>> &storeAt = {});

// The lane split of a store through a layout op (KernelGroup::storeThrough), for a loop that
// walks output `v`'s last dim 16 elements at a time: the map with that dim d replaced by
// 16 q + l, as expressions over (v's other dims..., q, l), when the 16 lanes of a group land
// in consecutive elements of the destination's last dim (l enters that coordinate with
// coefficient 1 and no other); nullopt otherwise, or when v is not stored through a map or its
// last dim is no multiple of 16. The store index is then indexExpr(e, (..., q, 0)) plus the
// lane on the last coordinate, with no division per lane.
std::optional<std::vector<IndexExpr>> laneSplitStore(const KernelGroup &g, const Value *v);

// Whether output v of a blocked conv ([N, C / 16, H, W, 16]) is stored plane-wise: through a
// map (the conversion back to NCHW, a concat of NCHW values) where each lane lands a plane
// apart and consecutive pixels land consecutively. Stored row by row, each row of the tile is
// 16 scalar stores a plane apart (power-of-two planes alias in the L1 sets: keras_style_
// segmenter's 192 x 192 head 4.6x its prediction); walked a lane at a time, a column of the
// tile is one run of vector stores.
bool planeWiseStore(const KernelGroup &g, const Value *v);

class GroupExpr {
public:
  // `params`: the kernel's global buffers for the group's inputs and outputs.
  GroupExpr(const KernelGroup &g, std::map<const Value *, kir::BufferP> params);

  using Producer = std::function<kir::E(const std::vector<kir::E> &idx)>;
  // The recipe computes `v` itself (e.g. the anchor's result as an accumulator).
  void substitute(const Value *v, Producer p) { subst_[v] = std::move(p); }
  // `v` computed from its definition again (a substitution made for another scope dropped).
  void unsubstitute(const Value *v) { subst_.erase(v); }

  // The value of `v` at `idx` (indices in v's own shape). A value of a layout op folded into the
  // group (lower/fusion.h, rule 0) is read from its source through the composed index map.
  kir::E at(const Value *v, const std::vector<kir::E> &idx) const;

  // The group's elementwise nodes that consume `v` (directly or through other elementwise
  // nodes of the group), i.e. the epilogue chain after v, in graph order.
  std::vector<const Node *> consumersInGroup(const Value *v) const;

  const kir::BufferP &param(const Value *v) const; // InternalError if v is not a param
  // Whether `at(v)` recomputes v from the group's own elementwise or folded layout nodes (a
  // fused prologue) over params and substitutions made so far, rather than loading a param or
  // calling a substitution (false too where it reaches a value neither provides yet: a conv
  // chain's inner result before its recipe substitutes it).
  bool inlines(const Value *v) const;

private:
  // `v` at map(idx), where `map` sends the reader's index `idx` to v's index.
  kir::E atMapped(const Value *v, const IndexMap &map, const std::vector<kir::E> &idx) const;
  // `v`, the result of a folded layout op over symbolic dims (isSymbolicLayout), at `idx`: its
  // operand read at the index the op's semantics give, from the dims' expressions.
  kir::E atSymbolicLayout(const Value *v, const std::vector<kir::E> &idx) const;
  bool member(const Node *n) const;

  const KernelGroup &g_;
  std::map<const Value *, kir::BufferP> params_;
  std::map<const Value *, Producer> subst_;
};

} // namespace aicf
