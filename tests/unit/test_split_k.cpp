// split-k (passes/split_k.h) and the kernels it relies on: on a GPU plan a deep contraction with
// few output tiles is computed as partial contractions over K slices (a grouped conv, a batched
// matmul) and a per-output sum that applies the bias and the epilogue. The plans are built for
// the GPU and run here through the host printer (the SIMT rule), against the interpreter:
// |got - want| <= 1e-4 + 1e-4 |want| (the slices' partial sums reassociate the k sum). Also:
// grouped convs of wide groups lower as tiled contractions on both plans, depthwise ones stay
// direct convs.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/precision.h"
#include "kir/kir.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

using namespace aicf;
using graph_checks::checkClose;
using graph_checks::fillWeights;

namespace {

// A 3 x 3 conv over 256 channels on a 4 x 4 map (K = 2304, 64 x 16 outputs: one 32 x 32 tile
// per 32 channels) with bias, residual and relu; a classifier gemm (K = 512, B stored
// transposed) with C and tanh; a matmul with a unit batch dim.
const char *kNet =
    R"(graph @deep(%x: f32[1,256,4,4], %r: f32[1,64,4,4], %a: f32[1,512], %m: f32[1,2,384]) -> (%y: f32[1,64,4,4], %z: f32[1,100], %p: f32[1,2,48]) {
  %w = weight f32[64,256,3,3]
  %b = weight f32[64]
  %v = weight f32[100,512]
  %c = weight f32[100]
  %u = weight f32[384,48]
  %y = conv(%x, %w, %b, %r) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 1, epilogue = ["add", "relu"]}
  %z = gemm(%a, %v, %c) {transB = 1, epilogue = ["tanh"]}
  %p = matmul(%m, %u)
  return %y, %z, %p
}
)";

CompiledModel compileRunCheck(const Graph &g, const CompileOptions &opts,
                              const std::vector<Tensor> &in) {
  return compile_checks::compileRunCheck(g, opts, in, "aicf_split_k_");
}

int countOps(const Graph &g, Op op) {
  int n = 0;
  for (const Node *x : g.nodes())
    n += x->op() == op;
  return n;
}

} // namespace

TEST_CASE("split-k: a GPU plan computes deep contractions in K slices, matching the interpreter") {
  std::unique_ptr<Graph> g = parseGraph(kNet, "deep.mcir");
  fillWeights(*g, 11);
  std::vector<Tensor> in = randomInputs(*g, 12);
  CompileOptions gpu;
  gpu.planFor = Target::parseSpec("cuda:sm_90");
  CompiledModel cm = compileRunCheck(*g, gpu, in);
  // Every contraction priced; the conv and the gemm are split (each fills a handful of the
  // H100's 132 SMs unsplit), and their sums are reductions of the GPU's thread form.
  REQUIRE(cm.plan.splitK.size() == 3);
  for (const SplitKDecision &d : cm.plan.splitK) {
    CAPTURE(d.node);
    CHECK(d.unsplit.us > 0);
    CHECK(!d.splits.empty());
  }
  CHECK(cm.plan.splitK[0].chosen > 1);
  CHECK(cm.plan.splitK[1].chosen > 1);
  REQUIRE(cm.graph != nullptr);
  CHECK(countOps(*cm.graph, Op::ReduceSum) >= 2);
  bool grouped = false;
  for (const Node *n : cm.graph->nodes())
    grouped = grouped || (n->op() == Op::Conv && n->i("group") == cm.plan.splitK[0].chosen);
  CHECK(grouped);
  int threadForm = 0;
  for (const kir::Kernel &k : cm.kernels)
    threadForm += k.recipe == "reduction" && k.grid.size() == 1 && k.threads > 1;
  CHECK(threadForm >= 2);

  // --no-split-k, and host plans, keep every contraction whole.
  CompileOptions off = gpu;
  off.splitK = false;
  CompiledModel whole = compileRunCheck(*g, off, in);
  CHECK(whole.plan.splitK.empty());
  CompiledModel host = buildModel(*g, CompileOptions{});
  CHECK(host.plan.splitK.empty());
}

TEST_CASE("split-k: tensor-core plans split too, their slices on the tensor cores") {
  // Under --precision bf16 the conv's and the gemm's weights are stored in bf16; the slices are
  // regrouped from those bytes and stay bf16 products (an H200 ran resnet18's bf16 plan 2.3x
  // slower than its fp32 one while split-k refused reduced-precision weights). The split plan
  // reads the same rounded operands as the unsplit one, so the two agree up to the order of
  // the k sum.
  std::unique_ptr<Graph> g = parseGraph(kNet, "deep.mcir");
  fillWeights(*g, 11);
  std::vector<Tensor> in = randomInputs(*g, 12);
  CompileOptions gpu;
  gpu.planFor = Target::parseSpec("cuda:sm_90");
  gpu.precision = Precision::BF16;
  CompiledModel cm;
  std::vector<Tensor> got = compile_checks::compileRun(*g, gpu, in, "aicf_split_k_", &cm);
  REQUIRE(cm.plan.splitK.size() == 3);
  CHECK(cm.plan.splitK[0].chosen > 1);
  REQUIRE(cm.graph != nullptr);
  int bf16Grouped = 0;
  for (const Node *n : cm.graph->nodes())
    bf16Grouped += n->op() == Op::Conv && n->i("group") == cm.plan.splitK[0].chosen &&
                   nodePrecision(*n) == Precision::BF16 &&
                   n->operand(1)->type().dtype == DType::BF16;
  CHECK(bf16Grouped == 1);
  int fragments = 0;
  for (const kir::Kernel &k : cm.kernels)
    fragments += kir::printKernel(k).find("frag = m16n8k16") != std::string::npos;
  CHECK(fragments >= 2);
  CompileOptions whole = gpu;
  whole.splitK = false;
  std::vector<Tensor> want = compile_checks::compileRun(*g, whole, in, "aicf_split_k_");
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    checkClose(got[i], want[i], 1e-4);
  }
}

TEST_CASE("split-k: grouped convs of wide groups are tiled contractions on host and GPU plans") {
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @groups(%x: f32[2,64,9,9]) -> (%y: f32[2,32,5,5], %d: f32[2,64,9,9]) {
  %w = weight f32[32,16,3,3]
  %b = weight f32[32]
  %wd = weight f32[64,1,3,3]
  %y = conv(%x, %w, %b) {pads = [1, 1, 1, 1], strides = [2, 2], dilations = [1, 1], group = 4, epilogue = ["relu"]}
  %d = conv(%x, %wd) {pads = [1, 1, 1, 1], strides = [1, 1], dilations = [1, 1], group = 64}
  return %y, %d
}
)",
                 "groups.mcir");
  fillWeights(*g, 13);
  std::vector<Tensor> in = randomInputs(*g, 14);
  for (const char *plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    opts.blockChannels = false; // the NCHW convs themselves
    CompiledModel cm = compileRunCheck(*g, opts, in);
    std::vector<std::string> recipes;
    for (const kir::Kernel &k : cm.kernels)
      recipes.push_back(k.recipe);
    CHECK(recipes == std::vector<std::string>{"tiled_contraction", "direct_conv"});
  }
}
