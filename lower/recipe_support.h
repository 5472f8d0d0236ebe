// Helpers shared by the anchor recipes (norm, attention, contraction): shape arithmetic, index
// helpers and the writer of a group's outputs through its fused epilogue.
#pragma once

#include "lower/group_expr.h"
#include "lower/lower.h"
#include "support/int_math.h"

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace aicf::recipe {

// ceilDiv, roundUp, nextPow2, product: support/int_math.h.
using aicf::ceilDiv;
using aicf::nextPow2;
using aicf::product;
using aicf::roundUp;

// isGpuPlan: lower/lower.h.

// unflat (row-major multi-index of a flat index): lower/group_expr.h.
// `e` as an f32 value: group expressions of f16 / bf16 values carry their own (rounded) dtype;
// recipes compute in f32.
kir::E asF32(const kir::E &e);

// The concatenation of two index lists.
std::vector<kir::E> concat(std::vector<kir::E> a, const std::vector<kir::E> &b);
// Conjunction of the non-null conditions (null when there are none).
kir::E allOf(const std::vector<kir::E> &conds);

// The outputs o in [0, outputs) whose input position o * stride + offset lies in [0, limit), as
// [first, last): a window tap's branch-free range in a row walk (host pooling and direct conv).
std::pair<int64_t, int64_t> insideRange(int64_t outputs, int64_t stride, int64_t offset,
                                        int64_t limit);

// InternalError unless every group output has the anchor result's shape.
void requireShapePreservingEpilogue(const KernelGroup &g, const Value *anchorResult);

// storeGroupOutputs (a group's outputs through its fused epilogue): lower/group_expr.h.

} // namespace aicf::recipe
