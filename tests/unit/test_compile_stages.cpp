// The compile driver as named stages (driver/compile.h, compileStages) and the choose-attention
// graph pass (passes/choose_attention.h): the stage list and its order, the stages run one by one
// giving buildModel's result, the Kernel IR pipeline applied by the driver rather than the
// recipe, a broken kernel blamed on its recipe, and choose-attention under the pass manager with
// a fake cost callback choosing each way (the materialised nodes verified and annotated with
// their properties), its policies, its legality rules, and --attention through buildModel.
#include "driver/compile.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "kir/kir_pass.h"
#include "passes/choose_attention.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>

using namespace aicf;

namespace {

std::unique_ptr<Graph> graphOf(const std::string &text) {
  return parseGraph(text, "compile_stages_test.mcir");
}

// layer_norm -> matmul + bias (an additive term FuseReductionEpilogue moves into the init).
const char *kMlp =
    R"(graph @mlp(%x: f32[16,32], %g: f32[32], %w: f32[32,24], %c: f32[24]) -> (%y: f32[16,24]) {
  %0 = layer_norm(%x, %g) {axis = -1, epsilon = 1e-05} : f32[16,32]
  %y = matmul(%0, %w, %c) {epilogue = ["add"]} : f32[16,24]
  return %y
})";

// Causal self-attention (Sk = Sq: the materialised form is exact), then an elementwise consumer.
const char *kAttention =
    R"(graph @att(%q: f32[1,2,16,8], %k: f32[1,2,16,8], %v: f32[1,2,16,8]) -> (%y: f32[1,2,16,8]) {
  %o = attention(%q, %k, %v) {scale = 0.35, causal = 1} : f32[1,2,16,8]
  %y = relu(%o) : f32[1,2,16,8]
  return %y
})";

// Two attentions: the second reads the first.
const char *kTwoAttentions =
    R"(graph @two(%q: f32[1,2,16,8], %k: f32[1,2,16,8], %v: f32[1,2,16,8]) -> (%y: f32[1,2,16,8]) {
  %o = attention(%q, %k, %v) {scale = 0.35, causal = 1} : f32[1,2,16,8]
  %y = attention(%o, %k, %v) {scale = 0.35, causal = 0} : f32[1,2,16,8]
  return %y
})";

int countOp(const Graph &g, Op op) {
  int n = 0;
  for (const Node *x : g.nodes())
    n += x->op() == op;
  return n;
}

// The default pipeline's last pass, so the input looks like what aicfc hands the driver.
void annotate(Graph &g) {
  PassManager pm;
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  pm.run(g, ctx);
}

struct Run {
  bool changed = false;
  std::vector<AttentionDecision> decisions;
  std::vector<std::string> changedPasses; // as the pass manager reports them
  int costCalls = 0;
  std::vector<bool> offered; // the callback's offerMaterialized, per call
};

// choose-attention then annotate-properties under one pass manager (what the driver runs), with
// a fake cost callback giving fixed times.
Run runChooseAttention(Graph &g, AttentionPolicy policy, double streamingUs,
                       double materializedUs) {
  Run r;
  int attentions = countOp(g, Op::Attention);
  ChooseAttentionOptions o;
  o.policy = policy;
  o.decisions = &r.decisions;
  o.cost = [&](const Graph &graph, const Node &a, bool offer) {
    CHECK(a.op() == Op::Attention);
    CHECK(countOp(graph, Op::Attention) == attentions); // priced before any rewrite
    ++r.costCalls;
    r.offered.push_back(offer);
    AttentionCost c;
    c.streamingUs = streamingUs;
    if (streamingUs < 0)
      c.streamingWhy = "no streaming tile fits";
    c.materializedUs = offer ? materializedUs : -1;
    if (offer && materializedUs < 0)
      c.materializedWhy = "no materialised schedule fits";
    return c;
  };
  PassManagerOptions pmo;
  pmo.afterChangedPass = [&](const Pass &p, const Graph &after) {
    r.changedPasses.push_back(p.name());
    CHECK(verifyGraphDiagnostics(after).empty());
  };
  PassManager pm(pmo);
  pm.add(createChooseAttentionPass(o));
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  r.changed = pm.run(g, ctx);
  return r;
}

} // namespace

TEST_CASE("compile stages: listed once, in order") {
  std::vector<std::string> names;
  for (const CompileStage &s : compileStages()) {
    names.emplace_back(s.name);
    CHECK(static_cast<bool>(s.run));
  }
  CHECK(names == std::vector<std::string>{"legalize-f64",
                                          "io-precision",
                                          "block-channels",
                                          "fold-channel-scale",
                                          "separable-resize",
                                          "merge-siblings",
                                          "split-chains",
                                          "assign-precision",
                                          "pack-weights",
                                          "partition",
                                          "choose-attention",
                                          "split-k",
                                          "describe-plan",
                                          "value-buffers",
                                          "plan",
                                          "verify-kernel-ir",
                                          "fuse-reduction-epilogue",
                                          "fuse-mma-tile-epilogue",
                                          "unswitch-invariant-selects",
                                          "version-full-tiles",
                                          "version-lane-guards",
                                          "split-guarded-loops",
                                          "name-shared-exprs",
                                          "shape-generic",
                                          "plan-steps",
                                          "check-candidate-rank",
                                          "branch-guards",
                                          "memory-plan",
                                          "dispatch-groups",
                                          "loop-bodies",
                                          "print"});
}

TEST_CASE("compile stages: run one by one, they give buildModel's result") {
  auto g = graphOf(kMlp);
  annotate(*g);
  CompileOptions opts;
  opts.rowNorms =
      RowNormPolicy::Store; // the norm a kernel of its own (its fold: test_row_norm_fold.cpp)
  CompileState s(*g, opts);
  for (const CompileStage &st : compileStages()) {
    CAPTURE(st.name);
    st.run(s);
    std::string name = st.name;
    if (name == "partition")
      CHECK(s.part.groups.size() == 2);
    if (name == "choose-attention")
      CHECK(s.graph == g.get()); // no attention: the caller's graph, no copy
    if (name == "plan") {
      REQUIRE(s.groupKernels.size() == 2);
      CHECK(s.decisions.size() == 2);
      // The recipe leaves the bias as a self-update after the reduction.
      CHECK(kir::printKernel(s.groupKernels[1]).find("FuseReductionEpilogue") == std::string::npos);
    }
    if (name == "fuse-reduction-epilogue") // the driver's Kernel IR pass moved it into the init
      CHECK(kir::printKernel(s.groupKernels[1]).find("FuseReductionEpilogue(C): applied") !=
            std::string::npos);
    if (name == "plan-steps") {
      CHECK(s.model.plan.steps.size() == 2);
      CHECK(s.model.kernels.size() == 2);
    }
    if (name == "memory-plan")
      CHECK_FALSE(s.model.plan.layout.empty());
  }
  CompiledModel whole = buildModel(*g, opts);
  CHECK(s.model.source == whole.source);
  CHECK(s.model.source.find("FuseReductionEpilogue(C): applied") != std::string::npos);
  std::ostringstream a, b;
  s.model.plan.writeYaml(a);
  whole.plan.writeYaml(b);
  CHECK(a.str() == b.str());
}

TEST_CASE("compile stages: an invalid kernel is blamed on its recipe before any pass sees it") {
  auto g = graphOf(kMlp);
  CompileOptions opts;
  CompileState s(*g, opts);
  kir::Kernel k;
  k.name = "k0_bad";
  k.recipe = "pointwise";
  auto p = std::make_shared<kir::Buffer>();
  p->name = "p0";
  p->shape = {4};
  p->scope = kir::Scope::Shared; // params must be global
  p->role = kir::Role::In;
  k.params.push_back(p);
  s.groupKernels.push_back(k);
  auto verify =
      std::find_if(compileStages().begin(), compileStages().end(), [](const CompileStage &st) {
        return std::string(st.name) == "verify-kernel-ir";
      });
  REQUIRE(verify != compileStages().end());
  try {
    verify->run(s);
    FAIL("no error");
  } catch (const InternalError &e) {
    std::string what = e.what();
    CHECK(what.find("recipe pointwise built an invalid kernel k0_bad:") != std::string::npos);
    CHECK(what.find("param p0 must be a global buffer") != std::string::npos);
  }
}

TEST_CASE("choose-attention: a cheaper materialised form is rewritten, verified and annotated") {
  auto g = graphOf(kAttention);
  annotate(*g);
  Run r = runChooseAttention(*g, AttentionPolicy::Cost, 10.0, 5.0);
  CHECK(r.changed);
  CHECK(r.costCalls == 1);
  CHECK(r.offered == std::vector<bool>{true});
  REQUIRE(r.decisions.size() == 1);
  const AttentionDecision &d = r.decisions[0];
  CHECK(d.materialized);
  CHECK(d.streamingUs == 10.0);
  CHECK(d.materializedUs == 5.0);
  CHECK(d.nodeIndex == 0);
  CHECK(r.changedPasses == std::vector<std::string>{"choose-attention", "annotate-properties"});
  CHECK(countOp(*g, Op::Attention) == 0);
  CHECK(countOp(*g, Op::MatMul) == 2);
  CHECK(countOp(*g, Op::Softmax) == 1);
  CHECK(countOp(*g, Op::Where) == 1); // the causal mask
  CHECK(verifyGraphDiagnostics(*g).empty());
  // The new nodes carry their properties (annotate-properties ran on the result).
  for (const Node *n : g->nodes()) {
    CAPTURE(n->name());
    if (n->op() == Op::MatMul)
      CHECK(n->props.has(MemProperty::TileCompatibleCompute));
    if (n->op() == Op::Softmax)
      CHECK(n->props.has(MemProperty::OnlineReducibleNorm));
    if (n->op() == Op::MatMul || n->op() == Op::Softmax)
      CHECK_FALSE(n->certificates.empty());
  }
  // The relu now reads the final matmul.
  const Node *relu = g->nodes().back();
  REQUIRE(relu->op() == Op::Relu);
  CHECK(relu->operand(0)->def()->op() == Op::MatMul);
}

TEST_CASE("choose-attention: cheaper streaming leaves the graph as it is") {
  auto g = graphOf(kAttention);
  annotate(*g);
  std::string before = printGraph(*g);
  Run r = runChooseAttention(*g, AttentionPolicy::Cost, 5.0, 10.0);
  CHECK_FALSE(r.changed);
  CHECK(r.changedPasses.empty());
  REQUIRE(r.decisions.size() == 1);
  CHECK_FALSE(r.decisions[0].materialized);
  CHECK(printGraph(*g) == before);
}

TEST_CASE("choose-attention: --attention overrides the cost where the requested form fits") {
  SUBCASE("streaming requested, streaming fits") {
    auto g = graphOf(kAttention);
    Run r = runChooseAttention(*g, AttentionPolicy::Streaming, 10.0, 5.0);
    CHECK_FALSE(r.decisions.at(0).materialized);
    CHECK(countOp(*g, Op::Attention) == 1);
  }
  SUBCASE("streaming requested, no streaming schedule fits: materialised") {
    auto g = graphOf(kAttention);
    Run r = runChooseAttention(*g, AttentionPolicy::Streaming, -1, 5.0);
    CHECK(r.decisions.at(0).materialized);
    CHECK(r.decisions.at(0).streamingWhy == "no streaming tile fits");
    CHECK(countOp(*g, Op::Attention) == 0);
  }
  SUBCASE("materialised requested, although dearer") {
    auto g = graphOf(kAttention);
    Run r = runChooseAttention(*g, AttentionPolicy::Materialized, 5.0, 10.0);
    CHECK(r.decisions.at(0).materialized);
    CHECK(countOp(*g, Op::Attention) == 0);
  }
  SUBCASE("materialised requested, no materialised schedule fits: streaming") {
    auto g = graphOf(kAttention);
    Run r = runChooseAttention(*g, AttentionPolicy::Materialized, 5.0, -1);
    CHECK_FALSE(r.decisions.at(0).materialized);
    CHECK(r.decisions.at(0).materializedWhy == "no materialised schedule fits");
  }
}

TEST_CASE("choose-attention: the materialised form is offered only where it is exact") {
  struct Case {
    const char *ir;
    const char *why;
  };
  Case cases[] = {
      {R"(graph @c(%q: f32[1,2,8,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8]) -> (%o: f32[1,2,8,8]) {
  %o = attention(%q, %k, %v) {scale = 0.35, causal = 1} : f32[1,2,8,8]
  return %o
})",
       "a causal mask with Sk < Sq hides whole rows (attention gives zeros, softmax NaN)"},
      {R"(graph @m(%q: f32[1,2,8,8], %k: f32[1,2,8,8], %v: f32[1,2,8,8], %m: f32[1,1,8,8]) -> (%o: f32[1,2,8,8]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.35, causal = 0} : f32[1,2,8,8]
  return %o
})",
       "a non-constant additive mask may hold -inf rows"},
      {R"(graph @b(%q: f32[1,2,8,8], %k: f32[1,2,8,8], %v: f32[1,2,8,8], %m: bool[1,1,8,8]) -> (%o: f32[1,2,8,8]) {
  %o = attention(%q, %k, %v, %m) {scale = 0.35, causal = 0} : f32[1,2,8,8]
  return %o
})",
       "a bool mask may hide whole rows (attention gives zeros, softmax NaN)"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.why);
    auto g = graphOf(c.ir);
    Run r = runChooseAttention(*g, AttentionPolicy::Materialized, 10.0, 1.0);
    CHECK(r.offered == std::vector<bool>{false}); // not priced
    REQUIRE(r.decisions.size() == 1);
    CHECK_FALSE(r.decisions[0].materialized);
    CHECK(r.decisions[0].materializedUs == -1);
    CHECK(r.decisions[0].materializedWhy == c.why);
    CHECK(countOp(*g, Op::Attention) == 1);
  }
}

TEST_CASE("choose-attention: every node is priced before any is rewritten") {
  auto g = graphOf(kTwoAttentions);
  Run r = runChooseAttention(*g, AttentionPolicy::Cost, 10.0, 5.0);
  CHECK(r.costCalls == 2);
  REQUIRE(r.decisions.size() == 2);
  CHECK(r.decisions[0].nodeIndex == 0);
  CHECK(r.decisions[1].nodeIndex == 1);
  CHECK(countOp(*g, Op::Attention) == 0);
  CHECK(countOp(*g, Op::Softmax) == 2);
  CHECK(verifyGraphDiagnostics(*g).empty());
}

TEST_CASE("choose-attention: registered; without a cost callback it materialises where exact") {
  std::vector<std::string> names = allPassNames();
  CHECK(std::find(names.begin(), names.end(), "choose-attention") != names.end());
  auto g = graphOf(kAttention);
  PassManager pm;
  pm.add(createPass("choose-attention"));
  PassContext ctx;
  CHECK(pm.run(*g, ctx));
  CHECK(countOp(*g, Op::Attention) == 0);
}

TEST_CASE("buildModel: --attention cost | streaming | materialized through the pass") {
  auto g = graphOf(kAttention);
  annotate(*g);
  for (AttentionPolicy choice : {AttentionPolicy::Streaming, AttentionPolicy::Materialized}) {
    CAPTURE(enumName(choice));
    CompileOptions opts;
    opts.attention = choice;
    CompiledModel m = buildModel(*g, opts);
    REQUIRE(m.plan.attention.size() == 1);
    const AttentionDecision &d = m.plan.attention[0];
    CHECK(d.streamingUs > 0);
    CHECK(d.materializedUs > 0);
    bool mat = choice == AttentionPolicy::Materialized;
    CHECK(d.materialized == mat);
    CHECK((m.graph != nullptr) == mat);
    CHECK(countOp(*g, Op::Attention) == 1); // the caller's graph is never rewritten
    bool streamingStep = false, matmulWithProps = false;
    for (const PlanStep &st : m.plan.steps) {
      streamingStep = streamingStep || st.recipe == "streaming_attention";
      if (st.kind == "matmul")
        matmulWithProps =
            matmulWithProps || std::find(st.properties.begin(), st.properties.end(),
                                         "tile_compatible_compute") != st.properties.end();
    }
    CHECK(streamingStep == !mat);
    CHECK(matmulWithProps == mat); // the materialised nodes were annotated
  }
  CompileOptions cost;
  CompiledModel m = buildModel(*g, cost);
  REQUIRE(m.plan.attention.size() == 1);
  const AttentionDecision &d = m.plan.attention[0];
  CHECK(d.materialized == (d.materializedUs < d.streamingUs));
}
