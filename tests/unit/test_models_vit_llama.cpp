// The pre-LN ViT block and the LLaMA block (testdata/models/{vit,llama}_block_op17, exported by
// scripts/gen_models.py) end the default pipeline with their semantic operators recognised:
// ViT's two layer_norm, one attention fed by the fused qkv projection and an erf-GELU epilogue;
// LLaMA's two rms_norm (decomposed pow/mean/sqrt/div in the export), one attention with the
// additive causal mask and the repeat_kv'd grouped-query K and V, and the SiLU gate as a matmul
// epilogue. Every detector that matched applied (none rejected), and no piece of the decomposed
// forms is left over. Numbers are checked by test_models.cpp, test_pipeline.cpp and the
// kernels/artifacts tests, which glob every testdata model.
#include "driver/pipeline.h"
#include "model_dirs.h"
#include "passes/explain.h"
#include "passes/pass.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

int countOp(const Graph &g, Op op) {
  int n = 0;
  for (const Node *node : g.nodes())
    n += node->op() == op ? 1 : 0;
  return n;
}

// Matmuls whose fused epilogue holds `step` ("gelu", "silu").
int countEpilogue(const Graph &g, const std::string &step) {
  int n = 0;
  for (const Node *node : g.nodes())
    if (node->op() == Op::MatMul && node->hasAttr("epilogue"))
      for (const std::string &s : node->strs("epilogue"))
        n += s == step ? 1 : 0;
  return n;
}

struct Piped {
  std::unique_ptr<Graph> graph;
  ExplainLog log;
};

Piped pipe(const std::string &name) {
  fs::path dir = fs::path(AICF_TESTDATA) / "models" / name;
  Piped p;
  p.graph = importOnnx((dir / "model.onnx").string(), testing::modelImportOptions(dir));
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.explain = &p.log;
  pm.run(*p.graph, ctx);
  for (const RewriteRecord &r : p.log.records())
    CHECK_MESSAGE(r.applied, r.pass, ": ", r.pattern, ": ", r.note);
  return p;
}

const Node *only(const Graph &g, Op op) {
  const Node *found = nullptr;
  for (const Node *n : g.nodes())
    if (n->op() == op) {
      REQUIRE(found == nullptr);
      found = n;
    }
  REQUIRE(found != nullptr);
  return found;
}

} // namespace

TEST_CASE("models: the ViT block keeps one attention, two layer_norm and a GELU epilogue") {
  Piped p = pipe("vit_block_op17");
  const Graph &g = *p.graph;
  CHECK(countOp(g, Op::LayerNorm) == 2);
  CHECK(countEpilogue(g, "gelu") == 1);
  CHECK(countOp(g, Op::Erf) == 0);
  const Node *att = only(g, Op::Attention);
  CHECK(att->numOperands() == 3); // no mask
  CHECK(att->i("causal") == 0);
  CHECK(att->f("scale") == doctest::Approx(0.125));
  CHECK(att->props.has(MemProperty::WeightedStreamingReduction));
  // q, k and v all come from the one qkv matmul (through the layout ops of unbind).
  CHECK(countOp(g, Op::MatMul) == 4); // qkv, proj, fc1, fc2
}

TEST_CASE("models: the LLaMA block keeps RMSNorm, causal-masked GQA attention and a SiLU gate") {
  Piped p = pipe("llama_block_op17");
  const Graph &g = *p.graph;
  CHECK(countOp(g, Op::RmsNorm) == 2);
  for (const Node *n : g.nodes())
    if (n->op() == Op::RmsNorm) {
      CHECK(n->props.has(MemProperty::OnlineReducibleNorm));
      CHECK(n->numOperands() == 2); // the weight folded in
    }
  for (Op gone : {Op::Pow, Op::ReduceMean, Op::Sqrt, Op::Div, Op::Sigmoid})
    CHECK_MESSAGE(countOp(g, gone) == 0, opName(gone), " left over");
  CHECK(countEpilogue(g, "silu") == 1);
  const Node *att = only(g, Op::Attention);
  REQUIRE(att->numOperands() == 4); // the additive causal mask
  CHECK(att->operand(3)->isWeight());
  CHECK(att->f("scale") == doctest::Approx(0.125));
  // K and V repeated from 2 to 4 heads, as q.
  for (size_t k = 0; k < 3; ++k)
    CHECK(att->operand(k)->type().shape == std::vector<int64_t>{2, 4, 64, 64});
  CHECK(countOp(g, Op::MatMul) == 7); // q, k, v, o, gate, up, down
}
