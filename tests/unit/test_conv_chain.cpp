// Conv chains (issue 18; lower/fusion.h rule 10, lower/recipe_conv_chain.cpp): an inverted
// residual's 1 x 1 expand, depthwise and 1 x 1 project convs on the channel-blocked layout in
// one host kernel, the expanded and depthwise tensors never stored. Which chains form (and which
// do not), the cost function's say and the decision recorded with both prices; then the chained
// kernel against the interpreter over the conv cases MobileNet-V2 / V3 and EfficientNet use:
// stride 1 and 2, 3 x 3 and 5 x 5 windows, dilation 2, a block without an expansion, channel
// counts that leave padded lanes, maps whose sides differ and do not divide the bands, relu6,
// hard_swish and sigmoid activations, a residual add; each at several schedules (candidate ranks:
// bands of fewer rows than the map, several output rows per projection step, a split k step).
// Tolerance |got - want| <= 1e-4 + 1e-4 |want| (the projection's k steps reassociate its sum).
// GPU plans have no channel-blocked layout (block-channels is a host stage): the same network
// planned for sm_80 keeps its convs apart and still matches.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "passes/pass.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"

#include <doctest/doctest.h>

#include <string>

using namespace aicf;
using graph_checks::fillWeights;

namespace {

struct ChainCase {
  const char *name;
  int64_t cin, hidden, cout, h, w, k, stride, pad, dil;
  const char *expandAct; // "" for a block without an expansion (hidden == cin)
  const char *dwAct;
  bool residual;
};

// The NCHW network of one inverted residual; a leading 1 x 1 conv makes the block's input a
// blocked value, as in a network (the graph input itself is reordered once).
std::string chainNet(const ChainCase &c) {
  int64_t oh = (c.h + 2 * c.pad - c.dil * (c.k - 1) - 1) / c.stride + 1;
  int64_t ow = (c.w + 2 * c.pad - c.dil * (c.k - 1) - 1) / c.stride + 1;
  std::string t = cat("graph @chain(%x: f32[1,16,", c.h, ",", c.w, "]) -> (%y: f32[1,", c.cout, ",",
                      oh, ",", ow, "]) {\n");
  t += cat("  %w0 = weight f32[", c.cin, ",16,1,1]\n  %b0 = weight f32[", c.cin, "]\n");
  if (*c.expandAct)
    t += cat("  %we = weight f32[", c.hidden, ",", c.cin, ",1,1]\n  %be = weight f32[", c.hidden,
             "]\n");
  t += cat("  %wd = weight f32[", c.hidden, ",1,", c.k, ",", c.k, "]\n  %bd = weight f32[",
           c.hidden, "]\n");
  t += cat("  %wp = weight f32[", c.cout, ",", c.hidden, ",1,1]\n  %bp = weight f32[", c.cout,
           "]\n");
  const char *pw = "strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]";
  t += cat("  %x0 = conv(%x, %w0, %b0) {", pw, ", epilogue = [\"relu\"]}\n");
  std::string in = "%x0";
  if (*c.expandAct) {
    t += cat("  %e = conv(%x0, %we, %be) {", pw, "}\n  %ea = ", c.expandAct, "(%e)",
             std::string(c.expandAct) == "clip" ? " {min = 0.0, max = 6.0}" : "", "\n");
    in = "%ea";
  }
  t += cat("  %d = conv(", in, ", %wd, %bd) {strides = [", c.stride, ", ", c.stride, "], pads = [",
           c.pad, ", ", c.pad, ", ", c.pad, ", ", c.pad, "], dilations = [", c.dil, ", ", c.dil,
           "], group = ", c.hidden, "}\n  %da = ", c.dwAct, "(%d)",
           std::string(c.dwAct) == "clip" ? " {min = 0.0, max = 6.0}" : "", "\n");
  t += cat("  %p = conv(%da, %wp, %bp) {", pw, "}\n");
  t += c.residual ? "  %y = add(%p, %x0)\n" : "  %y = identity(%p)\n";
  return t + "  return %y\n}\n";
}

const ChainCase kCases[] = {
    // MobileNet-V2's stride-1 block with a residual, 40 hidden channels (8 padded lanes).
    {"stride1_residual", 16, 40, 16, 9, 7, 3, 1, 1, 1, "clip", "clip", true},
    // Its stride-2 block, hard_swish (MobileNet-V3), rows of 7 over an even height.
    {"stride2", 16, 48, 24, 10, 7, 3, 2, 1, 1, "hard_swish", "relu", false},
    // A block of expansion 1 (MobileNet-V2's first): no expand conv, the input rows copied (the
    // residual reads the input too, so the conv before is no expansion of the chain).
    {"no_expand", 32, 32, 32, 8, 9, 3, 1, 1, 1, "", "relu", true},
    // EfficientNet's 5 x 5 at stride 2, sigmoid activations (transcendental epilogue steps);
    // 9 output columns: a step of 8 pixels and one alone.
    {"k5_stride2_sigmoid", 16, 64, 16, 11, 17, 5, 2, 2, 1, "sigmoid", "sigmoid", false},
    // A dilated window: rows 2 apart in the ring.
    {"dilated", 16, 32, 16, 8, 8, 3, 1, 2, 2, "clip", "clip", true},
};

std::unique_ptr<Graph> caseGraph(const ChainCase &c, unsigned seed) {
  std::unique_ptr<Graph> g = parseGraph(chainNet(c), cat(c.name, ".mcir"));
  fillWeights(*g, seed);
  return g;
}

int chainSteps(const CompiledModel &cm) {
  int n = 0;
  for (const PlanStep &st : cm.plan.steps)
    n += st.recipe == "conv_chain";
  return n;
}

Partition partitionBlocked(Graph &g, const FusionOptions &fo) {
  PassManager pm;
  pm.add(createPass("block-channels"));
  PassContext ctx;
  REQUIRE(pm.run(g, ctx));
  return partitionGraph(g, fo);
}

const KernelGroup *chainGroup(const Partition &p) {
  for (const KernelGroup &k : p.groups)
    if (!k.chained.empty())
      return &k;
  return nullptr;
}

} // namespace

TEST_CASE("conv chains: which chains form, priced and recorded, and the policy") {
  FusionOptions fo;
  // The chained kernel priced below the three it replaces (30): merged, the decision recorded.
  fo.kernelCost = [](const KernelGroup &k) { return !k.chained.empty() ? 25.0 : 10.0; };
  std::unique_ptr<Graph> g = caseGraph(kCases[0], 1);
  Partition p = partitionBlocked(*g, fo);
  const KernelGroup *k = chainGroup(p);
  REQUIRE(k != nullptr);
  CHECK(k->anchor->op() == Op::BlockedConv);
  REQUIRE(k->chained.size() == 2);
  CHECK(k->chained[0]->i("depthwise") == 0); // the expansion first
  CHECK(k->chained[1]->i("depthwise") == 1);
  // The activations between the convs ride in the group; its one output is the block's.
  CHECK(k->outputs.size() == 1);
  int chains = 0;
  for (const RematDecision &d : p.remat)
    if (d.kind == RematDecision::Kind::ConvChain) {
      ++chains;
      CHECK(d.recomputed);
      CHECK(d.values.size() == 2);
      CHECK(d.storeUs == 30.0);
      CHECK(d.recomputeUs == 25.0);
    }
  CHECK(chains == 1);
  // Priced above them: kept apart, still recorded.
  fo.kernelCost = [](const KernelGroup &k) { return !k.chained.empty() ? 40.0 : 10.0; };
  g = caseGraph(kCases[0], 1);
  p = partitionBlocked(*g, fo);
  CHECK(chainGroup(p) == nullptr);
  CHECK(p.remat.size() == 1);
  CHECK_FALSE(p.remat[0].recomputed);
  // The policy forces the chain, or keeps every conv a kernel.
  fo.convChains = FusePolicy::Fuse;
  g = caseGraph(kCases[0], 1);
  CHECK(chainGroup(partitionBlocked(*g, fo)) != nullptr);
  fo.convChains = FusePolicy::Store;
  g = caseGraph(kCases[0], 1);
  p = partitionBlocked(*g, fo);
  CHECK(chainGroup(p) == nullptr);
  CHECK(p.remat.empty());
  // Without an expansion the chain is the depthwise conv and the projection.
  fo.convChains = FusePolicy::Fuse;
  g = caseGraph(kCases[2], 1);
  Partition noExpand = partitionBlocked(*g, fo);
  k = chainGroup(noExpand);
  REQUIRE(k != nullptr);
  CHECK(k->chained.size() == 1);
  // A depthwise result read by anything else (here a graph output) is stored: no chain.
  g = parseGraph(R"(graph @two(%x: f32[1,16,8,8]) -> (%y: f32[1,16,8,8], %d: f32[1,32,8,8]) {
  %we = weight f32[32,16,1,1]
  %wd = weight f32[32,1,3,3]
  %wp = weight f32[16,32,1,1]
  %e = conv(%x, %we) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %d = conv(%e, %wd) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 32}
  %y = conv(%d, %wp) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  return %y, %d
}
)",
                 "two.mcir");
  fillWeights(*g, 2);
  CHECK(chainGroup(partitionBlocked(*g, fo)) == nullptr);
}

TEST_CASE("conv chains: host plans match the interpreter at every case and several schedules") {
  // Over all cases: bands of fewer rows than the map, several rows per projection step, and a
  // ragged last step (the band's rows no multiple of G, or the map's of the band's).
  bool banded = false, grouped = false, ragged = false;
  unsigned seed = 10;
  for (const ChainCase &c : kCases) {
    std::string name = c.name;
    CAPTURE(name);
    std::unique_ptr<Graph> g = caseGraph(c, seed++);
    std::vector<Tensor> in = randomInputs(*g, seed++);
    int64_t oh = g->outputs().at(0)->type().shape[2];
    for (int rank : {0, 1, 3, 6}) {
      CAPTURE(rank);
      CompileOptions opts;
      opts.convChains = FusePolicy::Fuse;
      opts.rank = rank;
      CompiledModel cm = compile_checks::compileRunCheck(*g, opts, in, "aicf_conv_chain_");
      REQUIRE(chainSteps(cm) == 1);
      for (const PlanStep &st : cm.plan.steps) {
        // No step computes the expanded or depthwise tensors on their own.
        CHECK(st.recipe != "direct_conv");
        if (st.recipe != "conv_chain")
          continue;
        int64_t rows = st.knobs.at("rows"), G = st.knobs.at("G");
        banded |= rows < oh;
        grouped |= G > 1;
        ragged |= G > 1 && (rows % G != 0 || oh % rows != 0);
      }
    }
    // Stored: the same numbers from three kernels.
    CompileOptions store;
    store.convChains = FusePolicy::Store;
    CHECK(chainSteps(compile_checks::compileRunCheck(*g, store, in, "aicf_conv_chain_")) == 0);
  }
  CHECK(banded);
  CHECK(grouped);
  CHECK(ragged);
}

TEST_CASE("conv chains: a GPU plan keeps the convs apart and matches the interpreter") {
  std::unique_ptr<Graph> g = caseGraph(kCases[1], 40);
  std::vector<Tensor> in = randomInputs(*g, 41);
  CompileOptions opts;
  opts.planFor = Target::parseSpec("cuda:sm_80");
  opts.convChains = FusePolicy::Fuse;
  CHECK(chainSteps(compile_checks::compileRunCheck(*g, opts, in, "aicf_conv_chain_")) == 0);
}
