// merge-siblings (passes/merge_siblings.h): sibling contractions of one A computed as one over
// their concatenated weights, read through a split. The merged graph interprets bit for bit to
// the original's outputs (every element is the same sum in the same order); compiled for the host
// and for the H100 (run through the host printer), it matches the interpreter within
// |got - want| <= 1e-4 + 1e-4 |want|, with the split folded into its readers (no kernel), and
// the row norm before the projections recomputed in the merged contraction's A reads.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "passes/merge_siblings.h"
#include "passes/pass.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"

#include <doctest/doctest.h>

using namespace aicf;

namespace {

// q, k and v projections (odd widths 24, 8, 24; biases along N) of an rms-normalised input;
// their readers take each piece differently: k transposed as a batched matmul's A, v as its B,
// q and v elementwise. Two gemms with transposed B over a second input, multiplied together.
const char *kNet =
    R"(graph @siblings(%x: f32[2,12,40], %u: f32[20,48]) -> (%y: f32[2,12,24], %s: f32[2,8,24], %z: f32[20,16]) {
  %g = weight f32[40]
  %wq = weight f32[40,24]
  %bq = weight f32[24]
  %wk = weight f32[40,8]
  %bk = weight f32[8]
  %wv = weight f32[40,24]
  %bv = weight f32[24]
  %w1 = weight f32[16,48]
  %c1 = weight f32[16]
  %w2 = weight f32[16,48]
  %c2 = weight f32[16]
  %n = rms_norm(%x, %g) {axis = -1, epsilon = 1e-05} : f32[2,12,40]
  %q = matmul(%n, %wq, %bq) {epilogue = ["add"]} : f32[2,12,24]
  %k = matmul(%n, %wk, %bk) {epilogue = ["add"]} : f32[2,12,8]
  %v = matmul(%n, %wv, %bv) {epilogue = ["add"]} : f32[2,12,24]
  %y = add(%q, %v) : f32[2,12,24]
  %kt = transpose(%k) {perm = [0, 2, 1]} : f32[2,8,12]
  %s = matmul(%kt, %v) : f32[2,8,24]
  %a = gemm(%u, %w1, %c1) {transB = 1} : f32[20,16]
  %b = gemm(%u, %w2, %c2) {transB = 1, epilogue = ["relu"]} : f32[20,16]
  %b2 = gemm(%u, %w2, %c2) {transB = 1} : f32[20,16]
  %ab = mul(%a, %b2) : f32[20,16]
  %z = add(%ab, %b) : f32[20,16]
  return %y, %s, %z
}
)";

std::unique_ptr<Graph> annotated(Graph &g) {
  std::unique_ptr<Graph> copy = g.clone();
  PassManager pm;
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  pm.run(*copy, ctx);
  return copy;
}

} // namespace

TEST_CASE("merge-siblings: the sets it finds, and the merged graph interprets bit for bit") {
  std::unique_ptr<Graph> g = parseGraph(kNet, "siblings.mcir");
  graph_checks::fillWeights(*g, 31);
  // q, k, v over %n; %a and %b2 over %u (%b's relu keeps it apart).
  std::vector<std::vector<const Node *>> sets = siblingSets(*g);
  REQUIRE(sets.size() == 2);
  CHECK(sets[0].size() == 3);
  CHECK(sets[1].size() == 2);
  CHECK(sets[1][0]->result()->name() == "a");
  CHECK(sets[1][1]->result()->name() == "b2");

  std::unique_ptr<Graph> merged = g->clone();
  PassManager pm;
  pm.add(createPass("merge-siblings"));
  pm.add(createPass("dce"));
  PassContext ctx;
  CHECK(pm.run(*merged, ctx));
  int splits = 0, contractions = 0;
  for (const Node *n : merged->nodes()) {
    splits += n->op() == Op::Split;
    contractions += n->op() == Op::MatMul || n->op() == Op::Gemm;
  }
  CHECK(splits == 2);
  CHECK(contractions == 4); // the two merged, %s and %b
  std::vector<Tensor> in = randomInputs(*g, 32);
  std::vector<Tensor> want = interpret(*g, in), got = interpret(*merged, in);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    REQUIRE(got[i].numel() == want[i].numel());
    int64_t differ = 0;
    for (int64_t j = 0; j < want[i].numel(); ++j)
      differ += got[i].getDouble(j) != want[i].getDouble(j);
    CHECK(differ == 0);
  }
}

TEST_CASE("merge-siblings: compiled merged for host and GPU plans, matching the interpreter") {
  std::unique_ptr<Graph> parsed = parseGraph(kNet, "siblings.mcir");
  graph_checks::fillWeights(*parsed, 33);
  std::unique_ptr<Graph> g = annotated(*parsed);
  // Every set merged (the pass without a cost callback), for the plans below to compile as is.
  std::unique_ptr<Graph> merged = parsed->clone();
  PassManager pm;
  pm.add(createPass("merge-siblings"));
  pm.add(createPass("dce"));
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  pm.run(*merged, ctx);
  std::vector<Tensor> in = randomInputs(*g, 34);
  for (std::string plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    opts.rowNorms = RowNormPolicy::Fold;
    // As the driver decides: both sets priced and recorded with both prices.
    CompiledModel cm = compile_checks::compileRunCheck(*g, opts, in, "aicf_siblings_");
    REQUIRE(cm.plan.mergeSiblings.size() == 2);
    for (const SiblingMergeDecision &d : cm.plan.mergeSiblings) {
      CHECK(d.separate.us > 0);
      CHECK(d.together.us > 0);
      CHECK(d.together.bytes < d.separate.bytes); // A read once
    }
    CHECK(cm.plan.mergeSiblings[0].nodes.size() == 3);
    // Merged: no split kernel, no norm kernel (the norm recomputed in the merged A reads).
    opts.mergeSiblings = false;
    CompiledModel cmMerged = compile_checks::compileRunCheck(*merged, opts, in, "aicf_siblings_");
    CHECK(cmMerged.plan.mergeSiblings.empty()); // (--no-merge-siblings prices nothing)
    for (const PlanStep &st : cmMerged.plan.steps) {
      CHECK(st.kind != "split");
      CHECK(st.kind != "rms_norm");
    }
  }
}
