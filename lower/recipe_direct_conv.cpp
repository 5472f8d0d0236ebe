// The direct_conv recipe object (lower/recipe.h): grouped / depthwise conv and conv_transpose,
// and the generic conv lowering (a group-1 conv whose tile_compatible_compute certificate
// fails). The kernel itself (recipeDirectConv) shares the conv geometry with the implicit GEMM
// in recipe_tiled_contraction.cpp. Knobs: ThreadsKnobs (threads over output pixels).
#include "lower/recipes.h"
#include "support/int_math.h"

namespace aicf {

namespace {

class DirectConvRecipe final : public Recipe {
public:
  const char *name() const override { return "direct_conv"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::Conv || a->op() == Op::ConvTranspose);
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeDirectConv(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<ThreadsKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    int64_t pixels = problemOf<DirectConvProblem>(d).pixels;
    std::vector<KnobSet> out;
    for (int64_t t : hw.gpu ? std::vector<int64_t>{32, 64, 128, 256} : std::vector<int64_t>{1, 4})
      if (t == (hw.gpu ? 32 : 1) || t / 2 < pixels)
        out.push_back(knobsToMap(ThreadsKnobs{t}));
    return out;
  }
  // Each thread sums its pixels' taps serially.
  CostShape costShape(const KernelGroup &, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
    int64_t threads = std::max<int64_t>(1, k.threads);
    const DirectConvProblem &p = problemOf<DirectConvProblem>(k);
    s.vectorShare = hw.gpu ? 0.3 : 1.0 / double(lanes);
    s.chainSteps = double(p.taps) * double(ceilDiv(p.pixels, threads));
    s.chainCycles = 4;
    return s;
  }
  int64_t registers(const kir::Kernel &) const override { return 28; }
};

} // namespace

const Recipe &directConvRecipe() {
  static const DirectConvRecipe recipe;
  return recipe;
}

} // namespace aicf
