// Fusion rule 4 before a window (lower/fusion_rule_prologue.cpp): an elementwise chain read only
// by a depthwise conv is folded into it as a prologue, which the direct conv evaluates at every
// tap. With a cost model the fold is priced against storing the chain once, and the decision is
// recorded; the direct conv's cost shape counts the prologue at every tap
// (recipe::prologueCycles).
#include "driver/compile.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "lower/recipe_support.h"
#include "passes/pass.h"
#include "support/diagnostics.h"
#include "tests/unit/graph_checks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using namespace aicf;

namespace {

// conv 1x1 -> sigmoid -> mul (a SiLU spelled out, as a quantized model's QDQ steps leave it
// unrecognised) -> a 5 x 5 depthwise conv.
const char *const kNet = R"(graph @net(%x: f32[1,16,12,12]) -> (%y: f32[1,32,12,12]) {
  %w0 = weight f32[32,16,1,1]
  %b0 = weight f32[32]
  %wd = weight f32[32,1,5,5]
  %bd = weight f32[32]
  %c = conv(%x, %w0, %b0) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %s = sigmoid(%c)
  %m = mul(%c, %s)
  %y = conv(%m, %wd, %bd) {strides = [1, 1], pads = [2, 2, 2, 2], dilations = [1, 1], group = 32}
  return %y
}
)";

Partition partitionBlocked(Graph &g, const FusionOptions &fo) {
  PassManager pm;
  pm.add(createPass("block-channels"));
  PassContext ctx;
  REQUIRE(pm.run(g, ctx));
  return partitionGraph(g, fo);
}

const KernelGroup *depthwiseGroup(const Partition &p) {
  for (const KernelGroup &k : p.groups)
    if (k.anchor && k.anchor->op() == Op::BlockedConv && k.anchor->i("depthwise") == 1)
      return &k;
  return nullptr;
}

bool holds(const KernelGroup &k, Op op) {
  return std::any_of(k.nodes.begin(), k.nodes.end(), [&](const Node *n) { return n->op() == op; });
}

} // namespace

TEST_CASE("prologue pricing: a chain before a depthwise conv is folded only when priced so") {
  FusionOptions fo;
  // Without a cost model the chain is folded, as every prologue is.
  std::unique_ptr<Graph> g = parseGraph(kNet, "net.mcir");
  Partition p = partitionBlocked(*g, fo);
  const KernelGroup *dw = depthwiseGroup(p);
  REQUIRE(dw != nullptr);
  CHECK(holds(*dw, Op::Sigmoid));
  CHECK(p.remat.empty());

  // Recomputing it at the taps priced above storing it: stored, and the decision recorded.
  fo.kernelCost = [](const KernelGroup &k) {
    return k.anchor && holds(k, Op::Sigmoid) ? 100.0 : 10.0;
  };
  g = parseGraph(kNet, "net.mcir");
  p = partitionBlocked(*g, fo);
  dw = depthwiseGroup(p);
  REQUIRE(dw != nullptr);
  CHECK_FALSE(holds(*dw, Op::Sigmoid));
  REQUIRE(p.remat.size() == 1);
  CHECK_FALSE(p.remat[0].recomputed);
  CHECK(p.remat[0].consumers == 1);
  CHECK(p.remat[0].recomputeUs == 100.0);
  CHECK(p.remat[0].storeUs == 20.0);

  // Priced below: folded, recorded as recomputed.
  fo.kernelCost = [](const KernelGroup &k) {
    return k.anchor && holds(k, Op::Sigmoid) ? 15.0 : 10.0;
  };
  g = parseGraph(kNet, "net.mcir");
  p = partitionBlocked(*g, fo);
  dw = depthwiseGroup(p);
  REQUIRE(dw != nullptr);
  CHECK(holds(*dw, Op::Sigmoid));
  REQUIRE(p.remat.size() == 1);
  CHECK(p.remat[0].recomputed);
}

TEST_CASE("prologue pricing: the prologue's cycles per element, by op") {
  std::unique_ptr<Graph> g = parseGraph(kNet, "net.mcir");
  Partition p = partitionBlocked(*g, FusionOptions{});
  const KernelGroup *dw = depthwiseGroup(p);
  REQUIRE(dw != nullptr);
  // sigmoid (28) and mul (1.4); the blocked conv before them is another group.
  CHECK(recipe::prologueCycles(*dw) == doctest::Approx(29.4));
  // The real planner, on the CI host description, keeps the chain apart: 25 sigmoids per
  // output element cost more than one store and reload.
  g = parseGraph(kNet, "net.mcir");
  graph_checks::fillWeights(*g, 3);
  CompileOptions o;
  CompiledModel cm = buildModel(*g, o);
  int stored = 0;
  for (const RematDecision &d : cm.plan.remat)
    stored += d.consumers == 1 && !d.recomputed;
  CHECK(stored == 1);
}
