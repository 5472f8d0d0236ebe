// The direct_conv recipe object (lower/recipe.h): grouped / depthwise conv and conv_transpose,
// and the generic conv lowering (a group-1 conv whose tile_compatible_compute certificate
// fails). The kernel itself (recipeDirectConv) shares the conv geometry with the implicit GEMM
// in recipe_tiled_contraction.cpp. Knobs: DirectConvKnobs (threads over output pixels; host: rows
// per block).
#include "ir/epilogue.h"
#include "lower/recipes.h"
#include "support/int_math.h"

namespace aicf {

namespace {

class DirectConvRecipe final : public Recipe {
public:
  const char *name() const override { return "direct_conv"; }
  bool lowers(const Node *a) const override {
    return a && (a->op() == Op::Conv || a->op() == Op::ConvTranspose || directBlockedConv(*a));
  }
  kir::Kernel build(const KernelGroup &g, const std::string &n, const Knobs &k) const override {
    return labelled(recipeDirectConv(g, n, k), name());
  }
  KnobSet canonicalKnobs(const KnobSet &k) const override {
    return knobsToMap(knobsFromMap<DirectConvKnobs>(k));
  }
  std::vector<KnobSet> candidates(const kir::Kernel &d, const Hardware &hw) const override {
    const auto &p = problemOf<DirectConvProblem>(d);
    std::vector<KnobSet> out;
    if (p.width > 0) { // host: output rows per block, or the padded-plane form
      int64_t rows = p.pixels / p.width;
      for (int64_t r : {1, 4, 16})
        if (r == 1 || r / 2 < rows)
          out.push_back(knobsToMap(DirectConvKnobs{std::nullopt, r, std::nullopt}));
      // The plane form streams its two planes once per tap: they must stay in L1 (measured:
      // 112 x 112 planes, ~100 KiB, run at ~6 cycles per vector, slower than the row form).
      if (p.planeLegal && (p.plane + p.padded) * 4 <= hw.l1dBytes) // a phase plane + the grid
        out.push_back(knobsToMap(DirectConvKnobs{std::nullopt, std::nullopt, 1}));
      return out;
    }
    for (int64_t t : hw.gpu ? std::vector<int64_t>{32, 64, 128, 256} : std::vector<int64_t>{1, 4})
      if (t == (hw.gpu ? 32 : 1) || t / 2 < p.pixels)
        out.push_back(knobsToMap(DirectConvKnobs{t, std::nullopt, std::nullopt}));
    return out;
  }
  // Pixel per thread (GPU, conv_transpose): each thread sums its pixels' taps serially. Host row
  // form: per block, rows x taps vector loops over the row (a strided input load and an FMA per
  // vector, ~1.5 cycles) plus ~40 cycles per tap loop of set-up, trip-count remainders and the
  // scalar weight load.
  CostShape costShape(const KernelGroup &g, const kir::Kernel &k, const Hardware &hw,
                      int64_t flops) const override {
    CostShape s;
    s.flops = double(flops);
    int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
    int64_t threads = std::max<int64_t>(1, k.threads);
    const DirectConvProblem &p = problemOf<DirectConvProblem>(k);
    if (p.blocked) {
      // Per pixel one 16-lane vector: an FMA and an input load per tap, ~2 cycles for a
      // depthwise conv (one chain of FMAs; the weights stay in registers), ~1.3 for a dense
      // one (4 interleaved sums), ~11 cycles of loop, bias and store, and the epilogue's steps
      // (an exponential and a division for sigmoid / silu / gelu / tanh / elu: ~28). Fitted on
      // MobileNet-V2 (3 x 3 depthwise with relu6: ~31 cycles a pixel), EfficientNet-B0
      // (depthwise with silu: ~53) and the bundled cnn (its 27-tap first conv: ~45), in cycles
      // of the clock the core really runs (bench-costmodel's calibration; first fitted
      // against the VM's nominal 2.6 GHz, 1.4x fewer). The taps are all of the work: the FLOP
      // term would count them twice.
      double epilogue = 0;
      for (const EpilogueStep &st : epilogueSteps(*g.anchor)) {
        bool transcendental = st.op == Op::Sigmoid || st.op == Op::Silu || st.op == Op::Gelu ||
                              st.op == Op::Tanh || st.op == Op::Elu;
        epilogue += transcendental ? 28.0 : 1.4;
      }
      s.flops = 0;
      s.vectorShare = 0.5;
      s.scalarCycles = double(knobOf(k, &DirectConvKnobs::rows, 1)) * double(p.width) *
                       ((p.taps > p.kernelTaps ? 1.3 : 2.0) * double(p.taps) + 11.0 + epilogue);
      return s;
    }
    if (p.width > 0 && !hw.gpu) {
      s.vectorShare = 0.5;
      // A vector loop of len elements: ~12 cycles of set-up, ~1.5 per full vector, and the
      // remainder scalar, ~1 cycle per element (measured on EfficientNet-B0's depthwise convs:
      // 28-wide rows ~21 cycles per tap, 14-wide ~7.5).
      // A strided input load is a gather: ~4 cycles per vector.
      double perVector = p.stride > 1 ? 4.0 : 1.5;
      auto loop = [lanes, perVector](int64_t len) { return hostLoopCycles(len, lanes, perVector); };
      if (knobOf(k, &DirectConvKnobs::plane) != 0) {
        // Per block and input channel: zero the phase planes, copy the plane in (strided
        // loads at stride > 1), then one unit-stride loop over the grid per tap.
        int64_t cg = std::max<int64_t>(1, p.taps / std::max<int64_t>(1, p.kernelTaps));
        auto unit = [lanes](int64_t len) { return hostLoopCycles(len, lanes, 1.5); };
        double perChannel = 1.5 * double(ceilDiv(p.padded * p.stride * p.stride, lanes)) +
                            double(p.inputRows * p.stride) * loop(p.inputWidth / p.stride) +
                            double(p.kernelTaps) * unit(p.plane);
        s.scalarCycles = double(cg) * perChannel + double(p.pixels / p.width) * unit(p.width);
        return s;
      }
      int64_t R = knobOf(k, &DirectConvKnobs::rows, 1);
      s.scalarCycles = double(R) * double(p.taps) * loop(p.width);
      return s;
    }
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
