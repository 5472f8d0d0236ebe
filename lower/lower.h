// Lowering: one kernel group -> one Kernel IR kernel, by the recipe its anchor's op facts and
// certified memory properties select (lower/recipe.h selectRecipe). Recipes (one object and
// file each, lower/recipe_*.cpp), each parameterised by typed schedule knobs with defaults; the
// planner (plan/planner.h) chooses the knobs by cost:
//   pointwise            elementwise groups, numpy broadcasting, vectorised inner loop
//   reduction            reduce_*, arg_max/min, global pools
//   online_norm          every norm whose online_reducible_norm certificate names a state
//                        algebra (NormSpec) — generated from it (init / update / merge /
//                        finalize); also the generic form when the certificate fails
//   streaming_attention  attention: online softmax over K/V tiles staged in shared memory
//   tiled_contraction    matmul, batched matmul, gemm, conv (implicit GEMM) with fused
//                        prologue/epilogue, on mma_tile
//   direct_conv          depthwise / grouped conv and conv_transpose
//   pooling              max/avg pool windows
//   data_movement        transpose, concat, split, slice, gather, pad, resize, expand, tile, cast
//   non_zero, set_dim,   the ops that set a data dim (a length known only at run time),
//   non_max_suppression, results packed at the length they compute (one serial walk each;
//   choose               choose a flat copy)
//
// The kernel's params are the group's inputs then its outputs, in order: the launcher passes
// buffer pointers in exactly that order (see backend/host/host_printer.h).
#pragma once

#include "kir/kir.h"
#include "lower/fusion.h"
#include "target/target.h"

#include <map>
#include <string>

namespace aicf {

// Schedule knobs by name ("threads", "vec", "BM", "BN", "BK", "TM", "TN", "BR", "BC", ...).
// Missing knobs take the recipe's default for the plan target.
struct Knobs {
  // Whose plan: the cpu or a GPU target (a GPU plan is printed as CUDA, or emulated on the host).
  // Default: a cpu target without a hardware description (the recipes read only the kind).
  Target planFor;
  std::map<std::string, int64_t> values;
  int64_t get(const std::string &name, int64_t dflt) const {
    auto it = values.find(name);
    return it == values.end() ? dflt : it->second;
  }
};

// True for GPU plans (printed as CUDA, or emulated on the host): the one test recipes make.
inline bool isGpuPlan(const Knobs &k) {
  return k.planFor.gpu();
}

// The selected recipe's label for a group ("tiled_contraction", ...).
std::string recipeFor(const KernelGroup &g);

// Builds the kernel for `g`, named `name`, with the selected recipe. Throws UserError naming the
// node for an op no recipe handles.
kir::Kernel lowerGroup(const KernelGroup &g, const std::string &name, const Knobs &knobs);
// recipe.build, refusing a group with symbolic dims the recipe cannot lower, and recording the
// dims on a symbolic kernel (every caller builds kernels through here).
class Recipe;
kir::Kernel buildKernel(const Recipe &recipe, const KernelGroup &g, const std::string &name,
                        const Knobs &knobs);
// Whether any value the group reads, computes or writes has symbolic dims (issue 21).
bool groupIsSymbolic(const KernelGroup &g);

} // namespace aicf
