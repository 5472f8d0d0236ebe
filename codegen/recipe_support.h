// Helpers shared by the anchor recipes (norm, attention, contraction): shape arithmetic, index
// helpers and the writer of a group's outputs through its fused epilogue.
#pragma once

#include "codegen/group_expr.h"
#include "codegen/lower.h"

#include <cstdint>
#include <limits>
#include <vector>

namespace aicf::recipe {

// Product of dims[from, to).
int64_t product(const std::vector<int64_t> &dims, size_t from = 0,
                size_t to = std::numeric_limits<size_t>::max());
int64_t ceilDiv(int64_t a, int64_t b);
int64_t roundUp(int64_t a, int64_t b);
int64_t nextPow2(int64_t v);

// True for "cuda:*" plans.
bool isGpuPlan(const Knobs &k);

// Row-major multi-index of `flat` in `shape`.
std::vector<kir::E> unflat(const std::vector<int64_t> &shape, kir::E flat);
// `e` as an f32 value: group expressions of f16 / bf16 values carry their own (rounded) dtype;
// recipes compute in f32.
kir::E asF32(const kir::E &e);

// The concatenation of two index lists.
std::vector<kir::E> concat(std::vector<kir::E> a, const std::vector<kir::E> &b);
// Conjunction of the non-null conditions (null when there are none).
kir::E allOf(const std::vector<kir::E> &conds);

// InternalError unless every group output has the anchor result's shape.
void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult);

// Stores every group output at `idx`, the anchor's result being `anchorValue` (substituted
// into the fused epilogue).
std::vector<kir::StmtP> storeGroupOutputs(const KernelGroup &g, GroupExpr &gx,
                                          const Value *anchorResult, const kir::E &anchorValue,
                                          const std::vector<kir::E> &idx);

} // namespace aicf::recipe
