// Tests of the recipe objects and their selection (lower/recipe.h): the registry holds each
// recipe once under a unique label, every recipe's knobs round-trip through its typed knobs
// struct, the candidates a recipe generates are expressed in its own knob names; recipes are
// selected by the anchor's certified properties, a failed certificate sends the node to its
// family's generic recipe naming the failed condition, and the norm kernel is generated from
// the certificate's NormSpec rather than from the op.
#include "ir/parser.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipes.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "support/diagnostics.h"
#include "target/hardware.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <set>

using namespace aicf;

namespace {

// A graph partitioned into groups (the graph is kept alive by `keep`).
Partition partitionText(const char *text, std::unique_ptr<Graph> &keep) {
  keep = parseGraph(text, "recipe_selection_test.mcir");
  return partitionGraph(*keep);
}

// As partitionText, after annotate-properties (the certificates the selection reads).
Partition annotatedPartition(const char *text, std::unique_ptr<Graph> &keep) {
  keep = parseGraph(text, "recipe_selection_test.mcir");
  PassContext ctx;
  createAnnotatePropertiesPass()->run(*keep, ctx);
  return partitionGraph(*keep);
}

// Marks `n`'s certificate for `p` failed on a condition named `what` (as a checker would).
void failCertificate(Node &n, MemProperty p, const std::string &what) {
  for (Certificate &c : n.certificates)
    if (c.property == p)
      c.conditions.push_back({what, "forced by the test", false});
  n.props.remove(p);
}

const KernelGroup &anchorGroup(const Partition &p, Op op) {
  for (const KernelGroup &g : p.groups)
    if (g.anchor && g.anchor->op() == op)
      return g;
  FAIL("no group anchored by the op");
  return p.groups.front();
}

} // namespace

TEST_CASE("recipe registry: seventeen recipes, each once, under unique labels") {
  const std::vector<const Recipe *> &reg = recipeRegistry();
  CHECK(reg.size() == 17);
  std::set<const Recipe *> objects(reg.begin(), reg.end());
  CHECK(objects.size() == reg.size());
  std::set<std::string> names;
  for (const Recipe *r : reg)
    names.insert(r->name());
  CHECK(names.size() == reg.size());
  CHECK(names == std::set<std::string>{"pointwise", "reduction", "pooling", "data_movement",
                                       "online_norm", "streaming_attention", "chained_contraction",
                                       "conv_chain", "tiled_contraction", "direct_conv", "scatter",
                                       "top_k", "non_zero", "set_dim", "non_max_suppression",
                                       "unique", "choose"});
}

TEST_CASE("recipe knobs: every recipe's knobs round-trip through its typed struct") {
  // Each recipe's knob names, with the values a plan.yaml may carry; a foreign name is dropped.
  struct Case {
    const Recipe *recipe;
    KnobSet knobs;
  };
  Case cases[] = {
      {&pointwiseRecipe(), {{"threads", 128}, {"vec", 4}}},
      {&dataMovementRecipe(), {{"threads", 1}, {"vec", 16}}},
      {&poolingRecipe(), {{"threads", 64}, {"vec", 2}}},
      {&reductionRecipe(), {{"threads", 256}}},
      {&directConvRecipe(), {{"threads", 32}}},
      {&onlineNormRecipe(), {{"cache_row", 1}, {"threads", 64}, {"vec", 4}}},
      {&streamingAttentionRecipe(), {{"BC", 32}, {"BR", 64}, {"threads", 64}}},
      {&tiledContractionRecipe(),
       {{"BK", 32}, {"BM", 64}, {"BN", 128}, {"TM", 4}, {"TN", 8}, {"threads", 256}}},
      {&chainedContractionRecipe(),
       {{"BH", 16}, {"BK", 32}, {"BM", 32}, {"TM", 2}, {"TN", 1}, {"threads", 256}}},
      {&convChainRecipe(), {{"BK", 64}, {"G", 2}, {"rows", 14}}},
      {&scatterRecipe(), {{"threads", 64}, {"vec", 1}}},
      {&topKRecipe(), {{"threads", 1}, {"vec", 1}}},
      {&nonZeroRecipe(), {{"threads", 1}, {"vec", 1}}},
      {&setDimRecipe(), {{"threads", 1}, {"vec", 1}}},
      {&nmsRecipe(), {{"threads", 1}, {"vec", 1}}},
      {&uniqueRecipe(), {{"threads", 1}, {"vec", 1}}},
      {&chooseRecipe(), {{"threads", 4}, {"vec", 1}}},
  };
  std::set<std::string> covered;
  for (const Case &c : cases) {
    CAPTURE(c.recipe->name());
    covered.insert(c.recipe->name());
    CHECK(c.recipe->canonicalKnobs(c.knobs) == c.knobs);
    KnobSet withForeign = c.knobs;
    withForeign["not_a_knob"] = 7;
    CHECK(c.recipe->canonicalKnobs(withForeign) == c.knobs);
    CHECK(c.recipe->canonicalKnobs({}).empty());
  }
  CHECK(covered.size() == recipeRegistry().size());
  // The typed structs directly: absent fields stay absent.
  NormKnobs nk = knobsFromMap<NormKnobs>({{"vec", 2}});
  CHECK(!nk.threads);
  CHECK(*nk.vec == 2);
  CHECK(knobsToMap(ContractionKnobs{64, 32, 16, 8, 4, std::nullopt, std::nullopt}) ==
        KnobSet{{"BK", 16}, {"BM", 64}, {"BN", 32}, {"TM", 8}, {"TN", 4}});
}

TEST_CASE("recipe candidates: in the recipe's own knob names, built kernels record them") {
  std::unique_ptr<Graph> g;
  Partition p =
      partitionText(R"(graph @t(%x: f32[32,64], %w: f32[64,48], %g: f32[48]) -> (%y: f32[32,48]) {
  %m = matmul(%x, %w) : f32[32,48]
  %y = layer_norm(%m, %g) {axis = -1, epsilon = 1e-5} : f32[32,48]
  return %y
}
)",
                    g);
  for (const char *hwName : {"a100", "h100"}) {
    Hardware hw = builtinHardware(hwName);
    Knobs base;
    base.planFor = Target::parseSpec("cuda:sm_80");
    for (Op op : {Op::MatMul, Op::LayerNorm}) {
      const KernelGroup &grp = anchorGroup(p, op);
      const Recipe &r = *selectRecipe(grp).recipe;
      kir::Kernel dflt = r.build(grp, "k", base);
      std::vector<KnobSet> cands = r.candidates(dflt, hw);
      CHECK(!cands.empty());
      for (const KnobSet &ks : cands) {
        CHECK(r.canonicalKnobs(ks) == ks);
        Knobs kn = base;
        kn.values = ks;
        kir::Kernel k = r.build(grp, "k", kn);
        for (const auto &[name, v] : ks)
          CHECK(k.knobs.at(name) == v);
      }
    }
  }
}

TEST_CASE("recipe selection: by certified property") {
  std::unique_ptr<Graph> g;
  Partition p = annotatedPartition(
      R"(graph @t(%x: f32[32,64], %w: f32[64,48]) -> (%y: f32[32,48], %z: f32[32,64]) {
  %m = matmul(%x, %w) : f32[32,48]
  %y = layer_norm(%m) {axis = -1, epsilon = 1e-5} : f32[32,48]
  %z = softmax(%x) {axis = -1} : f32[32,64]
  return %y, %z
}
)",
      g);
  RecipeSelection mm = selectRecipe(anchorGroup(p, Op::MatMul));
  CHECK(mm.recipe == &tiledContractionRecipe());
  CHECK(mm.reason == "tile_compatible_compute holds");
  CHECK(!mm.fallback);
  RecipeSelection ln = selectRecipe(anchorGroup(p, Op::LayerNorm));
  CHECK(ln.recipe == &onlineNormRecipe());
  CHECK(ln.reason == "online_reducible_norm holds");
  RecipeSelection sm = selectRecipe(anchorGroup(p, Op::Softmax));
  CHECK(sm.recipe == &onlineNormRecipe());
  CHECK(!sm.fallback);
  // Without annotate-properties the selection falls back on op facts, and says so.
  std::unique_ptr<Graph> raw;
  Partition q = partitionText(R"(graph @t(%x: f32[4,8], %w: f32[8,16]) -> (%y: f32[4,16]) {
  %y = matmul(%x, %w) : f32[4,16]
  return %y
}
)",
                              raw);
  RecipeSelection un = selectRecipe(q.groups[0]);
  CHECK(un.recipe == &tiledContractionRecipe());
  CHECK(un.reason == "tile_compatible_compute not checked (annotate-properties did not run)");
}

TEST_CASE("recipe selection: a failed certificate takes the generic recipe, naming why") {
  SUBCASE("softmax over a non-innermost axis: the norm family's generic form") {
    std::unique_ptr<Graph> g;
    Partition p = annotatedPartition(R"(graph @t(%x: f32[2,8,16]) -> (%y: f32[2,8,16]) {
  %y = softmax(%x) {axis = 1} : f32[2,8,16]
  return %y
}
)",
                                     g);
    const KernelGroup &grp = anchorGroup(p, Op::Softmax);
    CHECK_FALSE(grp.anchor->props.has(MemProperty::OnlineReducibleNorm));
    RecipeSelection s = selectRecipe(grp);
    CHECK(s.recipe == &onlineNormRecipe());
    CHECK(s.fallback);
    CHECK(s.reason == "generic form: online_reducible_norm fails: reduce axes trailing and "
                      "contiguous: axes [1] of f32[2,8,16] (not the innermost axis)");
    Knobs kn;
    kir::Kernel k = lowerGroup(grp, "k", kn);
    CHECK(k.knobs.at("vec") == 1); // strided rows: the plain form
  }
  SUBCASE("a group-1 conv whose tile does not fit: direct_conv, the generic conv lowering") {
    std::unique_ptr<Graph> g;
    Partition p = annotatedPartition(
        R"(graph @t(%x: f32[1,4,8,8], %w: f32[8,4,3,3]) -> (%y: f32[1,8,6,6]) {
  %y = conv(%x, %w) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]} : f32[1,8,6,6]
  return %y
}
)",
        g);
    const KernelGroup &grp = anchorGroup(p, Op::Conv);
    CHECK(selectRecipe(grp).recipe == &tiledContractionRecipe());
    failCertificate(*const_cast<Node *>(grp.anchor), MemProperty::TileCompatibleCompute,
                    "working set fits on chip");
    RecipeSelection s = selectRecipe(grp);
    CHECK(s.recipe == &directConvRecipe());
    CHECK(s.fallback);
    CHECK(s.reason == "generic form: tile_compatible_compute fails: working set fits on chip: "
                      "forced by the test");
    CHECK(lowerGroup(grp, "k", Knobs{}).recipe == "direct_conv");
  }
  SUBCASE("an attention that cannot stream has no generic recipe: refused, naming why") {
    std::unique_ptr<Graph> g;
    Partition p = annotatedPartition(
        R"(graph @t(%q: f32[1,2,8,16], %k: f32[1,2,8,16], %v: f32[1,2,8,16]) -> (%y: f32[1,2,8,16]) {
  %y = attention(%q, %k, %v) {causal = 0, scale = 0.25} : f32[1,2,8,16]
  return %y
}
)",
        g);
    const KernelGroup &grp = anchorGroup(p, Op::Attention);
    CHECK(selectRecipe(grp).recipe == &streamingAttentionRecipe());
    failCertificate(*const_cast<Node *>(grp.anchor), MemProperty::WeightedStreamingReduction,
                    "mask applicable per tile");
    CHECK_THROWS_WITH_AS(selectRecipe(grp),
                         doctest::Contains("weighted_streaming_reduction fails: mask applicable "
                                           "per tile: forced by the test, and no generic recipe"),
                         UserError);
  }
}

TEST_CASE("recipe selection: the norm kernel is generated from the certificate's NormSpec") {
  // A softmax node whose certificate declares the log_softmax algebra (as a checker for a new
  // norm op would declare its own): the kernel follows the NormSpec, not the op.
  std::unique_ptr<Graph> g;
  Partition p = annotatedPartition(R"(graph @t(%x: f32[4,32]) -> (%y: f32[4,32]) {
  %y = softmax(%x) {axis = -1} : f32[4,32]
  return %y
}
)",
                                   g);
  const KernelGroup &grp = anchorGroup(p, Op::Softmax);
  Node &n = *const_cast<Node *>(grp.anchor);
  kir::Kernel before = lowerGroup(grp, "k", Knobs{});
  CHECK(kir::printKernel(before).find("state algebra 'softmax'") != std::string::npos);
  bool set = false;
  for (Certificate &c : n.certificates)
    if (c.property == MemProperty::OnlineReducibleNorm) {
      c.norm = NormSpec{NormAlgebra::LogSoftmax, 1, 1, 0.0, -1, -1};
      set = true;
    }
  REQUIRE(set);
  kir::Kernel after = lowerGroup(grp, "k", Knobs{});
  CHECK(after.recipe == "online_norm");
  CHECK(kir::printKernel(after).find("state algebra 'log_softmax'") != std::string::npos);
  CHECK(problemOf<NormProblem>(after).algebra == NormAlgebra::LogSoftmax);
}
