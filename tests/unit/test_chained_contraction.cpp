// Chained contractions (issue 17; lower/fusion.h rule 8, lower/recipe_chained_contraction.cpp):
// a matmul / gemm read only as another's A is computed inside the reader's kernel one hidden
// tile at a time, its result never stored. Which pairs chain (and which do not), the group the
// chain makes, the cost function's say and the decision recorded with both prices; the chained
// kernel against the interpreter on the host plan and on the H100 plan (run through the host
// printer): |got - want| <= 1e-4 + 1e-4 |want| (each output's hidden sum is split by hidden
// tile: reassociated); and, with nvcc, the GPU plan's kernels.cu through ptxas with no spills.
// The bundled blocks' chained MLPs are checked against their references by test_artifacts.cpp.
#include "backend/cuda/cuda_build.h"
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "passes/pass.h"
#include "passes/split_chains.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <limits>
#include <string>

namespace fs = std::filesystem;
using namespace aicf;
using graph_checks::checkClose;
using graph_checks::fillWeights;
using graph_checks::names;

namespace {

// An MLP with odd sizes (12 rows per batch, K1 = 40, hidden 72: no 32-wide hidden tile divides
// it; N2 = 24: no 16-wide panel either) and a residual; a post-norm gemm pair (20 rows, the
// second B transposed) behind a layer_norm rule 7 folds; a pair whose hidden is also a graph
// output, which cannot chain.
const char *kNet =
    R"(graph @chains(%x: f32[2,12,40], %r: f32[2,12,24], %u: f32[20,48]) -> (%y: f32[2,12,24], %z: f32[20,32], %h3: f32[20,16], %q: f32[20,8]) {
  %w1 = weight f32[40,72]
  %b1 = weight f32[72]
  %w2 = weight f32[72,24]
  %b2 = weight f32[24]
  %g = weight f32[48]
  %be = weight f32[48]
  %w5 = weight f32[48,64]
  %c5 = weight f32[64]
  %w6 = weight f32[32,64]
  %w7 = weight f32[48,16]
  %w8 = weight f32[16,8]
  %h = matmul(%x, %w1, %b1) {epilogue = ["add", "gelu"]} : f32[2,12,72]
  %y = matmul(%h, %w2, %b2, %r) {epilogue = ["add", "add"]} : f32[2,12,24]
  %n = layer_norm(%u, %g, %be) {axis = -1, epsilon = 1e-05} : f32[20,48]
  %h2 = gemm(%n, %w5, %c5) {alpha = 1.0, beta = 1.0, transA = 0, transB = 0, epilogue = ["relu"]} : f32[20,64]
  %z = gemm(%h2, %w6) {alpha = 0.5, beta = 1.0, transA = 0, transB = 1} : f32[20,32]
  %h3 = matmul(%u, %w7) : f32[20,16]
  %q = matmul(%h3, %w8) : f32[20,8]
  return %y, %z, %h3, %q
}
)";

// The memory properties annotate-properties certifies (the recipes require them).
void annotate(Graph &g) {
  PassManager pm;
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  pm.run(g, ctx);
}

std::unique_ptr<Graph> annotated() {
  std::unique_ptr<Graph> g = parseGraph(kNet, "chains.mcir");
  annotate(*g);
  return g;
}

const KernelGroup &groupOf(const Partition &p, const std::string &anchorResult) {
  for (const KernelGroup &k : p.groups)
    if (k.anchor && k.anchor->result(0)->name() == anchorResult)
      return k;
  FAIL("no group anchored at %" << anchorResult);
  throw 0;
}

bool anchored(const Partition &p, const std::string &anchorResult) {
  for (const KernelGroup &k : p.groups)
    if (k.anchor && k.anchor->result(0)->name() == anchorResult)
      return true;
  return false;
}

CompiledModel compileRunCheck(const Graph &g, const CompileOptions &opts,
                              const std::vector<Tensor> &in) {
  return compile_checks::compileRunCheck(g, opts, in, "aicf_chains_");
}

int chainedKernels(const CompiledModel &cm) {
  int n = 0;
  for (const kir::Kernel &k : cm.kernels)
    n += k.recipe == "chained_contraction";
  return n;
}

} // namespace

TEST_CASE("chained contractions: which pairs chain, the group they make, priced and recorded") {
  std::unique_ptr<Graph> g = annotated();
  // No cost function: every contraction is a kernel of its own.
  Partition plain = partitionGraph(*g);
  CHECK(plain.remat.empty());
  CHECK(anchored(plain, "h"));

  FusionOptions fo;
  fo.rowNorms = RowNormPolicy::Store;
  fo.kernelCost = [](const KernelGroup &k) {
    // A chained kernel is priced 15 us, every other one 10.
    return !k.chained.empty() ? 15.0 : 10.0;
  };
  Partition p = partitionGraph(*g, fo);
  // Two chains priced (h -> y, h2 -> z); h3 is a graph output: not offered.
  REQUIRE(p.remat.size() == 2);
  for (const RematDecision &d : p.remat) {
    CHECK(d.kind == RematDecision::Kind::Chain);
    CHECK(d.recomputed);
    CHECK(d.storeUs == 20.0);
    CHECK(d.recomputeUs == 15.0);
    CHECK(d.consumers == 1);
  }
  CHECK(p.remat[0].values == std::vector<std::string>{"h"});
  CHECK(p.remat[0].what.rfind("matmul ", 0) == 0);
  CHECK(p.remat[0].what.find(" -> matmul ") != std::string::npos);
  const KernelGroup &y = groupOf(p, "y");
  REQUIRE(y.chained.size() == 1);
  CHECK(y.chained[0]->result(0)->name() == "h");
  CHECK(names(y.nodes) == "h,y");
  CHECK(names(y.inputs) == "x,w1,b1,w2,b2,r");
  CHECK(names(y.outputs) == "y");
  CHECK_FALSE(anchored(p, "h"));
  CHECK(names(groupOf(p, "z").nodes) == "h2,z");
  // The hidden is a graph output: two kernels.
  CHECK(groupOf(p, "q").chained.empty());
  CHECK(anchored(p, "h3"));

  // Priced higher: not chained, the partition is the plain one.
  fo.kernelCost = [](const KernelGroup &k) { return !k.chained.empty() ? 25.0 : 10.0; };
  Partition q = partitionGraph(*g, fo);
  REQUIRE(q.remat.size() == 2);
  CHECK_FALSE(q.remat[0].recomputed);
  CHECK(q.remat[0].recomputeUs == 25.0);
  CHECK(anchored(q, "h"));
  CHECK(groupOf(q, "y").chained.empty());
  CHECK(names(groupOf(q, "y").inputs) == "h,w2,b2,r");
  // No schedule fits (+inf): never chained, even when forced.
  fo.chains = FusePolicy::Fuse;
  fo.kernelCost = [](const KernelGroup &k) {
    return !k.chained.empty() ? std::numeric_limits<double>::infinity() : 10.0;
  };
  CHECK(anchored(partitionGraph(*g, fo), "h"));
  // The policy forces the chain, or keeps every contraction a kernel.
  fo.kernelCost = [](const KernelGroup &k) { return !k.chained.empty() ? 25.0 : 10.0; };
  CHECK(!groupOf(partitionGraph(*g, fo), "y").chained.empty());
  fo.chains = FusePolicy::Store;
  Partition s = partitionGraph(*g, fo);
  CHECK(s.remat.empty());
  CHECK(anchored(s, "h"));
  CHECK(anchored(s, "h2"));
}

TEST_CASE("chained contractions: host and GPU plans match the interpreter, tails and a folded "
          "norm included") {
  std::unique_ptr<Graph> g = annotated();
  fillWeights(*g, 21);
  std::vector<Tensor> in = randomInputs(*g, 22);
  for (const char *plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    opts.splitK = false;
    opts.chains = FusePolicy::Fuse;
    opts.rowNorms = RowNormPolicy::Fold;
    CompiledModel cm = compileRunCheck(*g, opts, in);
    CHECK(chainedKernels(cm) == 2);
    int chains = 0;
    for (const RematDecision &d : cm.plan.remat)
      chains += d.kind == RematDecision::Kind::Chain && d.recomputed;
    CHECK(chains == 2);
    // No step computes the hidden results on their own.
    for (const PlanStep &st : cm.plan.steps)
      for (const std::string &o : st.outputs)
        CHECK((o != "h" && o != "h2"));
    // Stored: the same numbers from four contraction kernels.
    opts.chains = FusePolicy::Store;
    CompiledModel two = compileRunCheck(*g, opts, in);
    CHECK(chainedKernels(two) == 0);
  }
}

TEST_CASE("chained contractions: the GPU plan's kernels build with nvcc, no spills") {
  if (nvccPath().empty()) {
    MESSAGE("skipped: nvcc not found (the CUDA target is disabled in this build)");
    return;
  }
  std::unique_ptr<Graph> g = annotated();
  fillWeights(*g, 21);
  for (const char *target : {"cuda:sm_80", "cuda:sm_90"}) {
    CAPTURE(target);
    CompileOptions opts;
    opts.target = Target::parse(target);
    opts.planFor = opts.target;
    opts.splitK = false;
    opts.chains = FusePolicy::Fuse;
    CompiledModel cm = buildModel(*g, opts);
    CHECK(chainedKernels(cm) == 2);
    fs::path out = test_files::scratchDir("aicf_chains_cuda_") / std::string(target).substr(5);
    fs::create_directories(out);
    std::string report;
    Plan plan = compileCudaModel(cm, out.string(), &report);
    CHECK_MESSAGE(report.find("warning") == std::string::npos, report);
    for (const PlanStep &st : plan.steps) {
      if (st.kindId.empty())
        continue;
      CAPTURE(st.kindId);
      CHECK(st.ptxas.present);
      CHECK(st.ptxas.spillBytes == 0);
    }
  }
}

TEST_CASE("split-chains: which chains split, the split form matches the interpreter chained") {
  std::unique_ptr<Graph> g = annotated();
  fillWeights(*g, 23);
  // y's chain splits (hidden 72: slices of at least 32 hidden columns, so 2 of 36); z's does
  // not (its gemm scales by alpha 0.5), nor q's (its hidden h3 is a graph output).
  auto node = [&](const std::string &result) {
    for (Node *n : g->nodes())
      if (n->result(0)->name() == result)
        return n;
    FAIL("no node computes %" << result);
    return static_cast<Node *>(nullptr);
  };
  CHECK(chainSplitCounts(*g, *node("y")) == std::vector<int>{2});
  CHECK(chainSplitCounts(*g, *node("z")).empty());
  CHECK(chainSplitCounts(*g, *node("q")).empty());
  CHECK(splittableChain(*g, *node("q")) == nullptr);
  CHECK(splittableChain(*g, *node("z")) == nullptr);
  CHECK(splittableChain(*g, *node("y")) == node("h"));

  std::vector<Tensor> in = randomInputs(*g, 24);
  for (const char *plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    opts.splitK = false;
    opts.chains = FusePolicy::Fuse;
    opts.chainSlices = 2;
    CompiledModel cm = compileRunCheck(*g, opts, in);
    REQUIRE(cm.plan.splitChains.size() == 1);
    for (const ChainSplitDecision &d : cm.plan.splitChains) {
      CHECK(d.chosen == 2);
      CHECK(d.unsplit.us > 0);
      REQUIRE(d.splits.size() == 1);
      CHECK(d.splits[0].slices == 2);
      CHECK(d.splits[0].price.us > 0);
    }
    // The split pair is one chained kernel over the slices, summed by a reduction (z's chain
    // one unsplit).
    REQUIRE(cm.graph != nullptr);
    int sums = 0;
    for (const Node *n : cm.graph->nodes())
      sums += n->op() == Op::ReduceSum;
    CHECK(sums == 1);
    CHECK(chainedKernels(cm) == 2);
  }
  // Priced by the cost model on the host: the decision is recorded either way.
  CompileOptions host;
  CompiledModel priced = buildModel(*g, host);
  REQUIRE(priced.plan.splitChains.size() == 1);
  CHECK(priced.plan.splitChains[0].unsplit.us > 0);
  // --no-split-chains and --chain-contractions store never price it.
  host.splitChains = false;
  CHECK(buildModel(*g, host).plan.splitChains.empty());
  host.splitChains = true;
  host.chains = FusePolicy::Store;
  CHECK(buildModel(*g, host).plan.splitChains.empty());
}

TEST_CASE("chained contractions: a gated pair (SwiGLU) chains with its sibling, host and GPU") {
  // gate and up over the same X, combined by silu and mul, read by the down projection: one
  // kernel computing both hidden tiles, combining them and multiplying into the output tile.
  // Odd sizes: 20 rows (no 16- or 32-row tile divides it), hidden 40 (no 32-wide tile).
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @swiglu(%x: f32[20,48], %r: f32[20,32]) -> (%y: f32[20,32]) {
  %wg = weight f32[48,40]
  %wu = weight f32[48,40]
  %wd = weight f32[40,32]
  %gate = matmul(%x, %wg) {epilogue = ["silu"]} : f32[20,40]
  %up = matmul(%x, %wu) : f32[20,40]
  %m = mul(%gate, %up) : f32[20,40]
  %y = matmul(%m, %wd, %r) {epilogue = ["add"]} : f32[20,32]
  return %y
}
)",
      "swiglu.mcir");
  annotate(*g);
  FusionOptions fo;
  fo.kernelCost = [](const KernelGroup &k) { return !k.chained.empty() ? 15.0 : 10.0; };
  Partition p = partitionGraph(*g, fo);
  REQUIRE(p.remat.size() == 1);
  const RematDecision &d = p.remat[0];
  CHECK(d.kind == RematDecision::Kind::Chain);
  CHECK(d.recomputed);
  CHECK(d.storeUs == 30.0); // three kernels
  CHECK(d.what.find(" and matmul ") != std::string::npos);
  CHECK(d.values == std::vector<std::string>{"m"});
  REQUIRE(p.groups.size() == 1);
  const KernelGroup &y = p.groups[0];
  REQUIRE(y.chained.size() == 2);
  // The mul joined the gate's group (its first operand's): the gate's contraction comes first,
  // its sibling after it.
  CHECK(y.chained[0]->result(0)->name() == "gate");
  CHECK(y.chained[1]->result(0)->name() == "up");
  CHECK(names(y.nodes) == "gate,up,m,y");
  CHECK(names(y.outputs) == "y");

  fillWeights(*g, 25);
  std::vector<Tensor> in = randomInputs(*g, 26);
  for (const char *plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    opts.chains = FusePolicy::Fuse;
    CompiledModel cm = compileRunCheck(*g, opts, in);
    CHECK(chainedKernels(cm) == 1);
    CHECK(cm.plan.steps.size() == 1);
  }
}

TEST_CASE("norm epilogues: a post-norm in its contraction's tiles, plain and chained, host only") {
  // BERT's post-LN shapes, odd sizes: 20 rows, N = 40 (no 16-column tile divides it); an MLP
  // whose down projection feeds a second layer_norm, and an rms_norm after a gemm.
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @post(%x: f32[2,10,48], %r: f32[2,10,40], %u: f32[12,40]) -> (%n1: f32[2,10,40], %n2: f32[2,10,40], %n3: f32[12,24]) {
  %w = weight f32[48,40]
  %b = weight f32[40]
  %g1 = weight f32[40]
  %be1 = weight f32[40]
  %w1 = weight f32[40,64]
  %w2 = weight f32[64,40]
  %g2 = weight f32[40]
  %be2 = weight f32[40]
  %w3 = weight f32[40,24]
  %g3 = weight f32[24]
  %p = matmul(%x, %w, %b, %r) {epilogue = ["add", "add"]} : f32[2,10,40]
  %n1 = layer_norm(%p, %g1, %be1) {axis = -1, epsilon = 1e-05} : f32[2,10,40]
  %h = matmul(%n1, %w1) {epilogue = ["relu"]} : f32[2,10,64]
  %o = matmul(%h, %w2, %n1) {epilogue = ["add"]} : f32[2,10,40]
  %n2 = layer_norm(%o, %g2, %be2) {axis = -1, epsilon = 1e-05} : f32[2,10,40]
  %q = gemm(%u, %w3) {alpha = 1.0, beta = 1.0, transA = 0, transB = 0} : f32[12,24]
  %n3 = rms_norm(%q, %g3) {axis = -1, epsilon = 1e-06} : f32[12,24]
  return %n1, %n2, %n3
}
)",
      "post.mcir");
  annotate(*g);
  // Priced lower: every norm joins its contraction's group; n1, read by two groups, stays an
  // output of the first.
  FusionOptions fo;
  fo.kernelCost = [](const KernelGroup &k) { return k.normEpilogue ? 12.0 : 10.0; };
  fo.chains = FusePolicy::Store;
  Partition p = partitionGraph(*g, fo);
  int applied = 0;
  for (const RematDecision &d : p.remat)
    if (d.kind == RematDecision::Kind::NormEpilogue) {
      CHECK(d.recomputed);
      CHECK(d.storeUs == 20.0);
      CHECK(d.recomputeUs == 12.0);
      ++applied;
    }
  CHECK(applied == 3);
  CHECK(names(groupOf(p, "p").nodes) == "p,n1");
  CHECK(names(groupOf(p, "p").outputs) == "n1");
  CHECK(groupOf(p, "p").normEpilogue->result(0)->name() == "n1");
  CHECK(names(groupOf(p, "q").nodes) == "q,n3");
  CHECK_FALSE(anchored(p, "n1"));
  // Priced higher: the norms stay kernels.
  fo.kernelCost = [](const KernelGroup &k) { return k.normEpilogue ? 30.0 : 10.0; };
  Partition q = partitionGraph(*g, fo);
  CHECK(anchored(q, "n1"));
  CHECK(anchored(q, "n2"));
  CHECK(groupOf(q, "p").normEpilogue == nullptr);

  fillWeights(*g, 27);
  std::vector<Tensor> in = randomInputs(*g, 28);
  for (FusePolicy chains : {FusePolicy::Store, FusePolicy::Fuse}) {
    CAPTURE(enumName(chains));
    CompileOptions opts;
    opts.normEpilogues = FusePolicy::Fuse;
    opts.chains = chains;
    CompiledModel cm = compileRunCheck(*g, opts, in);
    int epilogues = 0;
    for (const RematDecision &d : cm.plan.remat)
      epilogues += d.kind == RematDecision::Kind::NormEpilogue && d.recomputed;
    CHECK(epilogues == 3);
    for (const PlanStep &st : cm.plan.steps)
      CHECK((st.kind != "layer_norm" && st.kind != "rms_norm"));
    CHECK(chainedKernels(cm) == (chains == FusePolicy::Fuse ? 1 : 0));
  }
  // GPU plans: no tile holds whole rows in one thread; the norms stay kernels even when forced.
  CompileOptions gpu;
  gpu.planFor = Target::parseSpec("cuda:sm_90");
  gpu.normEpilogues = FusePolicy::Fuse;
  CompiledModel cm = compileRunCheck(*g, gpu, in);
  int norms = 0;
  for (const PlanStep &st : cm.plan.steps)
    norms += st.kind == "layer_norm" || st.kind == "rms_norm";
  CHECK(norms == 3);
}
