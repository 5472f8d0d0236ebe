// The lowering recipes (see lower.h for the list). Each builds the whole kernel for a group:
// params are group.inputs then group.outputs (global buffers named p0, p1, ... or after the
// values), grid/threads from the knobs, body from the recipe. lower.cpp dispatches to these.
#pragma once

#include "lower/lower.h"

namespace aicf {

kir::Kernel recipePointwise(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeReduction(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipePooling(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeDataMovement(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeOnlineNorm(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeStreamingAttention(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeTiledContraction(const KernelGroup &g, const std::string &name, const Knobs &k);
kir::Kernel recipeDirectConv(const KernelGroup &g, const std::string &name, const Knobs &k);

// Shared by recipes: the kernel's param buffers for the group (inputs then outputs), created
// with the values' dtypes and shapes, roles In/Out, and a name -> buffer map.
std::vector<kir::BufferP> groupParams(const KernelGroup &g,
                                      std::map<const Value *, kir::BufferP> &byValue);

} // namespace aicf
