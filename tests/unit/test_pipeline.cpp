// The default pipeline on every testdata model, under --verify-passes: no pass may move an
// output beyond tolerance, the final graph still matches PyTorch's references, and the
// transformer blocks end as the design says (one attention, two layer_norm, one gelu each).
// Also: a deliberately broken rewrite is caught by the pass verifier, which names it.
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "model_dirs.h"
#include "passes/explain.h"
#include "passes/pass.h"
#include "passes/verify_passes.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

int countOp(const Graph &g, Op op) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->op() == op ? 1 : 0;
  return n;
}

// gelu nodes plus gelu steps fused into contraction epilogues.
int countGelu(const Graph &g) {
  int n = countOp(g, Op::Gelu);
  for (const Node *node : g.nodes())
    if (node->info().has(CONTRACT))
      for (const std::string &s : node->strs("epilogue"))
        n += (s == "gelu" || s == "gelu_tanh") ? 1 : 0;
  return n;
}

} // namespace

TEST_CASE("pipeline: every testdata model under --verify-passes, then against references") {
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "models"))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() >= 8);
  for (const fs::path &dir : dirs) {
    std::string name = dir.filename().string();
    CAPTURE(name);
    std::unique_ptr<Graph> g =
        importOnnx((dir / "model.onnx").string(), testing::modelImportOptions(dir));
    PassManagerOptions opts;
    std::shared_ptr<PassVerifier> verifier = installPassVerifier(*g, opts);
    PassManager pm(opts);
    buildDefaultPipeline(pm);
    PassContext ctx;
    ExplainLog log;
    ctx.explain = &log;
    REQUIRE_NOTHROW(pm.run(*g, ctx));

    // The rewritten graph still computes what PyTorch computed.
    std::vector<Tensor> inputs;
    for (Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    std::vector<Tensor> outs = interpret(*g, inputs);
    for (size_t k = 0; k < outs.size(); ++k) {
      Tensor want = readNpy((dir / "outputs" / (g->outputs()[k]->name() + ".npy")).string());
      REQUIRE(outs[k].shape() == want.shape());
      int64_t bad = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        double a = outs[k].getDouble(i), b = want.getDouble(i);
        bad += std::fabs(a - b) <= 1e-5 + 1e-4 * std::fabs(b) ? 0 : 1;
      }
      CHECK_MESSAGE(bad == 0, bad, " elements outside tolerance after the pipeline");
    }

    // Every certificate attached to a node holds (failed checks leave no property).
    for (const Node *n : g->nodes())
      for (const Certificate &c : n->certificates)
        if (n->props.has(c.property))
          CHECK(c.holds());

    if (name.rfind("gpt2_block", 0) == 0 || name.rfind("bert_layer", 0) == 0) {
      CHECK(countOp(*g, Op::Attention) == 1);
      CHECK(countOp(*g, Op::LayerNorm) == 2);
      CHECK(countGelu(*g) == 1);
      for (const Node *n : g->nodes()) {
        if (n->op() == Op::Attention) {
          CHECK(n->props.has(MemProperty::WeightedStreamingReduction));
          CHECK(n->props.has(MemProperty::TileCompatibleCompute));
          CHECK(n->props.has(MemProperty::RematerializableIntermediate));
        }
        if (n->op() == Op::LayerNorm)
          CHECK(n->props.has(MemProperty::OnlineReducibleNorm));
      }
      for (const RewriteRecord &r : log.records())
        if (r.pass != "annotate-properties")
          CHECK_MESSAGE(r.applied, r.pattern, ": ", r.note);
    }
    if (name.rfind("cnn", 0) == 0)
      CHECK(countOp(*g, Op::BatchNorm) == 0); // folded into the convs
  }
}

namespace {

// A wrong rewrite: turns the first add into a sub and claims a change.
class BreakAdd : public Pass {
public:
  const char *name() const override { return "break-add"; }
  const char *summary() const override { return "test only: a wrong rewrite"; }
  bool run(Graph &g, PassContext &) override {
    for (Node *n : g.nodes())
      if (n->op() == Op::Add) {
        Node *sub = g.createNode(Op::Sub, n->operands(), {}, n->loc, n);
        g.replaceAllUsesWith(n->result(), sub->result());
        g.eraseNode(n);
        return true;
      }
    return false;
  }
};

} // namespace

TEST_CASE("pipeline: --verify-passes names the pass that broke the graph") {
  std::unique_ptr<Graph> g = parseGraph(R"(graph @t(%x: f32[4], %y: f32[4]) -> (%z: f32[4]) {
  %0 = add(%x, %y)
  %z = relu(%0)
  return %z
})",
                                        "t.mcir");
  PassManagerOptions opts;
  std::shared_ptr<PassVerifier> verifier = installPassVerifier(*g, opts);
  PassManager pm(opts);
  pm.add(createPass("dce"));
  pm.add(std::make_unique<BreakAdd>());
  PassContext ctx;
  try {
    pm.run(*g, ctx);
    FAIL("the broken rewrite was not caught");
  } catch (const UserError &e) {
    std::string msg = e.what();
    CHECK(msg.find("pass 'break-add' changed output 'z'") != std::string::npos);
    CHECK(msg.find("max error") != std::string::npos);
  }
}
