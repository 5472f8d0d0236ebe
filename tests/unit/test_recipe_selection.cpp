// Tests of the recipe objects and their selection (lower/recipe.h): the registry holds each
// recipe once under a unique label, every recipe's knobs round-trip through its typed knobs
// struct, and the candidates a recipe generates are expressed in its own knob names.
#include "ir/parser.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipes.h"
#include "target/hardware.h"

#include <doctest/doctest.h>

#include <set>

using namespace aicf;

namespace {

// A graph partitioned into groups (the graph is kept alive by `keep`).
Partition partitionText(const char *text, std::unique_ptr<Graph> &keep) {
  keep = parseGraph(text, "recipe_selection_test.mcir");
  return partitionGraph(*keep);
}

const KernelGroup &anchorGroup(const Partition &p, Op op) {
  for (const KernelGroup &g : p.groups)
    if (g.anchor && g.anchor->op() == op)
      return g;
  FAIL("no group anchored by the op");
  return p.groups.front();
}

} // namespace

TEST_CASE("recipe registry: eight recipes, each once, under unique labels") {
  const std::vector<const Recipe *> &reg = recipeRegistry();
  CHECK(reg.size() == 8);
  std::set<const Recipe *> objects(reg.begin(), reg.end());
  CHECK(objects.size() == reg.size());
  std::set<std::string> names;
  for (const Recipe *r : reg)
    names.insert(r->name());
  CHECK(names.size() == reg.size());
  CHECK(names == std::set<std::string>{"pointwise", "reduction", "pooling", "data_movement",
                                       "online_norm", "streaming_attention", "tiled_contraction",
                                       "direct_conv"});
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
  CHECK(knobsToMap(ContractionKnobs{64, 32, 16, 8, 4, std::nullopt}) ==
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
    base.planFor = "cuda:sm_80";
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
