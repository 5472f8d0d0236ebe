// block-channels (passes/block_channels.cpp): a conv chain on the channel-blocked layout computes
// what the NCHW graph computes. One small network covers every rewrite: the image's 3-channel
// first conv (a dense blocked_conv on a plain input), pointwise convs with bias and relu6,
// a depthwise conv at stride 2 with padding, a dense 3x3 conv on a blocked input (the band
// form), channel counts
// that are not multiples of 16 (24, 40: padded lanes), squeeze-and-excitation (global pool,
// 1x1 convs, hard_sigmoid, a broadcast mul), a residual add, a channel concat of 32 + 32 and a
// reduce_mean over the spatial axes (keepdims 0) read back through from_blocked; a max pool and an
// average pool (count_include_pad) on blocks; grouped convs (groups of whole blocks, and
// groups of 8 and 4 channels block-diagonal) in a network of their own. Checked (1) in the
// interpreter, rewritten graph against original, and (2) compiled for the host and run through the
// runtime against the interpreter: |got - want| <= 1e-4 + 1e-4 |want|.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "lower/recipes.h"
#include "passes/pass.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/conv_family_net.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cmath>

using namespace aicf;
using graph_checks::checkClose;
using graph_checks::fillWeights;

namespace {

const std::string kNet = std::string("graph @blocks(%x: f32[1,3,20,20]) -> (%y: f32[1,64]) {\n") +
                         test_nets::kConvFamilyBody +
                         "  %y = reduce_mean(%cat) {axes = [2, 3], keepdims = 0}\n"
                         "  return %y\n}\n";

std::unique_ptr<Graph> network() {
  std::unique_ptr<Graph> g = parseGraph(kNet, "blocks.mcir");
  fillWeights(*g, 5);
  return g;
}

// Runs the pass on `g` under a pass manager (which verifies the result); whether it changed it.
bool blockChannels(Graph &g) {
  PassManager pm;
  pm.add(createPass("block-channels"));
  PassContext ctx;
  return pm.run(g, ctx);
}

} // namespace

TEST_CASE("block-channels: the blocked graph interprets to the original's outputs") {
  std::unique_ptr<Graph> g = network();
  std::vector<Tensor> in = randomInputs(*g, 3);
  Tensor want = interpret(*g, in).at(0);
  REQUIRE(blockChannels(*g));
  int blocked = 0, convs = 0, pools = 0;
  for (const Node *n : g->nodes()) {
    blocked += n->op() == Op::BlockedConv;
    convs += n->op() == Op::Conv;
    pools += (n->op() == Op::MaxPool || n->op() == Op::AvgPool) && n->i("blocked") == 1;
  }
  CHECK(pools == 2);
  CHECK(blocked == 8); // every conv, the SE's 1 x 1 convs included
  CHECK(convs == 0);
  checkClose(interpret(*g, in).at(0), want);
}

// Compiles `g` (one input, one output) with `opts` into a scratch folder, runs it through the
// runtime on `in` and checks the output against `want`.
void compileRunCheck(Graph &g, const CompileOptions &opts, const Tensor &in, const Tensor &want) {
  CompiledModel cm = buildModel(g, opts);
  // A folder per call: a library still loaded from an earlier call's path (dlclose need not
  // unload it) would be reused by dlopen under the same name.
  static int calls = 0;
  std::string out = (test_files::scratchDir("aicf_block_channels_") / cat("net", calls++)).string();
  writeArtifacts(g, cm, opts, out);
  aicf_model *m = aicf_open(out.c_str());
  REQUIRE_MESSAGE(m != nullptr, std::string(aicf_last_error()));
  Tensor got(want.type());
  const void *ip = in.raw();
  void *op = got.raw();
  REQUIRE_MESSAGE(aicf_run(m, &ip, &op) == 0, aicf_last_error());
  aicf_close(m);
  checkClose(got, want);
}

TEST_CASE("block-channels: compiled for the host, the blocked network matches the interpreter") {
  std::unique_ptr<Graph> g = network();
  std::vector<Tensor> in = randomInputs(*g, 4);
  Tensor want = interpret(*g, in).at(0);
  CompileOptions opts;
  CompiledModel cm = buildModel(*g, opts);
  int blocked = 0;
  for (const Node *n : cm.graph->nodes())
    blocked += n->op() == Op::BlockedConv;
  CHECK(blocked == 8);
  compileRunCheck(*g, opts, in.at(0), want);
}

// Blocked ops reach the lowering from IR text too (aicf-opt, hand-written MCIR), on any plan:
// the rewritten network planned for a GPU (its kernels run here through the host printer), and
// a dense blocked_conv on a plain input with more taps than the unrolled form takes (3 x 7 x 7:
// the staged implicit GEMM), on both plans.
TEST_CASE("block-channels: blocked ops written as IR lower on host and GPU plans") {
  std::unique_ptr<Graph> g = network();
  std::vector<Tensor> in = randomInputs(*g, 6);
  Tensor want = interpret(*g, in).at(0);
  REQUIRE(blockChannels(*g));
  CompileOptions gpu;
  gpu.planFor = Target::parseSpec("cuda:sm_80");
  compileRunCheck(*g, gpu, in.at(0), want);

  std::unique_ptr<Graph> big =
      parseGraph(R"(graph @big(%x: f32[1,3,12,12]) -> (%y: f32[1,2,6,6,16]) {
  %w = weight f32[147,32]
  %b = weight f32[32]
  %y = blocked_conv(%x, %w, %b) {kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3], dilations = [1, 1], blocked_input = 0, epilogue = ["relu"]}
  return %y
}
)",
                 "big.mcir");
  fillWeights(*big, 9);
  std::vector<Tensor> bin = randomInputs(*big, 7);
  Tensor bwant = interpret(*big, bin).at(0);
  for (const char *plan : {"cpu", "cuda:sm_80"}) {
    CAPTURE(plan);
    CompileOptions opts;
    opts.planFor = Target::parseSpec(plan);
    compileRunCheck(*big, opts, bin.at(0), bwant);
  }
}

// Squeeze-and-excitation on a 12 x 12 map: the scale before the projection folds into the
// projection's weight rows (fold-channel-scale, a compile stage after block-channels): no mul
// of the activation remains, the projection reads a weight computed at run time, and the
// compiled network matches the interpreter.
TEST_CASE("block-channels: a squeeze-and-excitation scale folds into the projection's weight") {
  std::unique_ptr<Graph> g = parseGraph(R"(graph @se(%x: f32[1,32,12,12]) -> (%y: f32[1,16,12,12]) {
  %wd = weight f32[32,1,3,3]
  %ws1 = weight f32[8,32,1,1]
  %bs1 = weight f32[8]
  %ws2 = weight f32[32,8,1,1]
  %bs2 = weight f32[32]
  %w2 = weight f32[16,32,1,1]
  %b2 = weight f32[16]
  %d = conv(%x, %wd) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 32, epilogue = ["silu"]}
  %p = global_avg_pool(%d)
  %s1 = conv(%p, %ws1, %bs1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %s2 = conv(%s1, %ws2, %bs2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %g = sigmoid(%s2)
  %se = mul(%d, %g)
  %y = conv(%se, %w2, %b2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  return %y
}
)",
                                        "se.mcir");
  fillWeights(*g, 13);
  std::vector<Tensor> in = randomInputs(*g, 14);
  Tensor want = interpret(*g, in).at(0);
  CompileOptions opts;
  CompiledModel cm = buildModel(*g, opts);
  int bigMuls = 0, scaledWeights = 0; // muls of the activation; muls making a conv's weight
  for (const Node *n : cm.graph->nodes()) {
    if (n->op() != Op::Mul)
      continue;
    bigMuls += n->result()->type().numel() > 32 * 16;
    for (const Node *u : cm.graph->users(n->result()))
      scaledWeights += u->op() == Op::BlockedConv && u->operand(1) == n->result();
  }
  CHECK(bigMuls == 0);
  CHECK(scaledWeights == 1);
  compileRunCheck(*g, opts, in.at(0), want);
}

// A weight wider than half of L2 is streamed a panel slice ahead (mma_tile prefetch,
// lower/contraction_views.cpp streamsWeight): planned for a host whose L2 is 64 KiB, the
// network's convs over packed panels prefetch, and the results are the same; planned for the
// detected host (L2 of a MiB or more), none of these small weights does.
// A blocked pool whose epilogue is a per-channel affine and an activation (a batch_norm no conv
// absorbed -> relu, DenseNet's transition): the pool's host form stores once per range of
// taps, each range binding the epilogue's scalars in its own scope (the second range once
// read the first range's scalars: an invalid kernel).
TEST_CASE(
    "block-channels: a blocked pool with a per-channel affine epilogue compiles and matches") {
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @pool_affine(%x: f32[1,3,20,20]) -> (%y: f32[1,32,10,10]) {
  %w1 = weight f32[32,3,3,3]
  %s = weight f32[1,32,1,1]
  %t = weight f32[1,32,1,1]
  %w2 = weight f32[32,32,1,1]
  %a = conv(%x, %w1) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %p = max_pool(%a) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %m = mul(%p, %s)
  %b = add(%m, %t)
  %r = relu(%b)
  %y = conv(%r, %w2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  return %y
}
)",
                 "pool_affine.mcir");
  fillWeights(*g, 21);
  std::vector<Tensor> in = randomInputs(*g, 22);
  Tensor want = interpret(*g, in).at(0);
  compileRunCheck(*g, CompileOptions{}, in.at(0), want);
}

TEST_CASE("block-channels: weights wider than L2 are prefetched a slice ahead, same results") {
  std::unique_ptr<Graph> g = network();
  std::vector<Tensor> in = randomInputs(*g, 6);
  Tensor want = interpret(*g, in).at(0);
  auto prefetching = [](const CompiledModel &cm) {
    int n = 0;
    for (const kir::Kernel &k : cm.kernels)
      kir::forEachStmt(k.body, [&](const kir::Stmt &s) {
        n += s.kind == kir::Stmt::Kind::MmaTile && s.bPrefetch;
      });
    return n;
  };
  CompileOptions host;
  CHECK(prefetching(buildModel(*g, host)) == 0);
  CompileOptions small;
  small.planFor = Target().loaded();
  small.planFor.hw.l2Bytes = 64 * 1024;
  CompiledModel cm = buildModel(*g, small);
  CHECK(prefetching(cm) >= 1);
  CHECK(cm.source.find(", true>(") != std::string::npos);
  compileRunCheck(*g, small, in.at(0), want);
}

// A 3 x 3 conv over a channel-blocked input steps K one input channel block at a time (its 9
// taps x 16 lanes, K step 144) when that slice of the 64-wide weight panel fits in L1 beside
// the row block's A (lower/contraction_views.cpp l1Slice): resnet18's 3 x 3 convs ran
// 8-10% faster than over longer K steps read from L2. Planned for one core with a 48 KiB L1 (a
// 36 KiB slice), the cost model takes K steps of 144; with a 32 KiB L1 no such step fits, and it
// takes another. Both plans compute the conv.
TEST_CASE("block-channels: a 3 x 3 conv steps K by the input channel blocks that fit in L1") {
  const char *text = R"(graph @c33(%x: f32[1,16,28,28]) -> (%y: f32[1,64,28,28]) {
  %w0 = weight f32[64,16,1,1]
  %w1 = weight f32[64,64,3,3]
  %a = conv(%x, %w0) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %y = conv(%a, %w1) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  return %y
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "c33.mcir");
  fillWeights(*g, 7);
  std::vector<Tensor> in = randomInputs(*g, 8);
  Tensor want = interpret(*g, in).at(0);
  for (int64_t l1 : {48 * 1024, 32 * 1024}) {
    CAPTURE(l1);
    CompileOptions opts;
    opts.planFor = Target().loaded();
    opts.planFor.hw.cores = 1;
    opts.planFor.hw.l1dBytes = l1;
    opts.planFor.hw.l2Bytes = 2 << 20;
    CompiledModel cm = buildModel(*g, opts);
    std::vector<int64_t> bks; // the K steps of the kernels with K = 576 (the 3 x 3 conv)
    for (const kir::Kernel &k : cm.kernels)
      if (const auto *p = dynamic_cast<const ContractionProblem *>(k.problem.get());
          p && p->K == 576)
        bks.push_back(k.knobs.at("BK"));
    REQUIRE(bks.size() == 1);
    if (l1 == 48 * 1024)
      CHECK(bks[0] == 144);
    else
      CHECK(bks[0] != 144);
    compileRunCheck(*g, opts, in.at(0), want);
  }
}

// An upsampling decoder (issue 53): nearest x2 and linear (half_pixel, align_corners) resizes
// between blocked convs resize the blocks (scales [1, 1, sh, sw, 1]), a channel concat of the
// upsampled and the skip branch stays blocked, and the last resize, read back on the plain
// layout (a graph output), stays plain: its reads convert the smaller input.
TEST_CASE("block-channels: a decoder's resizes run on blocks; an output resize stays plain") {
  std::unique_ptr<Graph> g = parseGraph(R"(graph @dec(%x: f32[1,16,6,6]) -> (%y: f32[1,20,24,18]) {
  %w0 = weight f32[32,16,3,3]
  %w1 = weight f32[16,16,1,1]
  %w2 = weight f32[48,48,3,3]
  %w3 = weight f32[20,48,1,1]
  %c0 = conv(%x, %w0) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  %u0 = resize(%c0) {sizes = [1, 32, 6, 6], scales = [1.0, 1.0, 2.0, 2.0], mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}
  %s = conv(%x, %w1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %cat = concat(%u0, %s) {axis = 1}
  %c2 = conv(%cat, %w2) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  %u1 = resize(%c2) {sizes = [1, 48, 12, 9], scales = [1.0, 1.0, 2.0, 1.5], mode = "linear", coordinate_transformation_mode = "align_corners"}
  %c3 = conv(%u1, %w3) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %y = resize(%c3) {sizes = [1, 20, 24, 18], scales = [1.0, 1.0, 2.0, 2.0], mode = "linear", coordinate_transformation_mode = "half_pixel"}
  return %y
}
)",
                                        "decoder.mcir");
  fillWeights(*g, 6);
  std::vector<Tensor> in = randomInputs(*g, 7);
  Tensor want = interpret(*g, in).at(0);
  std::unique_ptr<Graph> orig = g->clone();
  REQUIRE(blockChannels(*g));
  int blockedResizes = 0, plainResizes = 0, blockedConcats = 0;
  for (const Node *n : g->nodes()) {
    if (n->op() == Op::Resize)
      (n->operand(0)->type().rank() == 5 ? blockedResizes : plainResizes) += 1;
    blockedConcats += n->op() == Op::Concat && n->operand(0)->type().rank() == 5;
  }
  CHECK(blockedResizes == 2);
  CHECK(plainResizes == 1);
  CHECK(blockedConcats == 1);
  checkClose(interpret(*g, in).at(0), want);
  compileRunCheck(*orig, CompileOptions{}, in.at(0), want);
}

// A pixel shuffle in DCR order (the phase before the channel, 16 channels a phase) and the
// crop after it, as conv-transpose-as-conv writes them after its phase convs, run on blocks:
// the 7-D transpose moves whole 16-lane blocks, the slice takes the same window of the blocks,
// and the relu and the next conv read them blocked (no conversion back in between). In CRD
// order (the phase after the channel) the shuffle would move phases into the lanes: it stays
// plain, its conv read back through from_blocked.
TEST_CASE("block-channels: a DCR pixel shuffle and its crop run on blocks; CRD stays plain") {
  auto count = [](const Graph &g, Op op, int64_t rank) {
    int k = 0;
    for (const Node *n : g.nodes())
      k += n->op() == op && n->operand(0)->type().rank() == rank;
    return k;
  };
  std::unique_ptr<Graph> g =
      parseGraph(R"(graph @shuffle(%x: f32[1,16,5,5]) -> (%y: f32[1,32,8,8]) {
  %w0 = weight f32[64,16,3,3]
  %w1 = weight f32[32,16,3,3]
  %c0 = conv(%x, %w0) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %r = reshape(%c0) {shape = [1, 2, 2, 16, 5, 5]}
  %t = transpose(%r) {perm = [0, 3, 4, 1, 5, 2]}
  %p = reshape(%t) {shape = [1, 16, 10, 10]}
  %s = slice(%p) {starts = [1, 1], ends = [9, 9], axes = [2, 3], steps = [1, 1]}
  %a = relu(%s)
  %y = conv(%a, %w1) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  return %y
}
)",
                 "shuffle.mcir");
  fillWeights(*g, 8);
  std::vector<Tensor> in = randomInputs(*g, 9);
  Tensor want = interpret(*g, in).at(0);
  std::unique_ptr<Graph> orig = g->clone();
  REQUIRE(blockChannels(*g));
  CHECK(count(*g, Op::Transpose, 7) == 1); // the shuffle, on blocks
  CHECK(count(*g, Op::Transpose, 6) == 0);
  CHECK(count(*g, Op::Slice, 5) == 1); // the crop, on blocks
  CHECK(count(*g, Op::Slice, 4) == 0);
  int back = 0; // from_blocked's transposes: the output's only
  for (const Node *n : g->nodes())
    back += n->op() == Op::Transpose && n->ints("perm") == std::vector<int64_t>{0, 1, 4, 2, 3};
  CHECK(back == 1);
  checkClose(interpret(*g, in).at(0), want);
  compileRunCheck(*orig, CompileOptions{}, in.at(0), want);

  std::unique_ptr<Graph> crd =
      parseGraph(R"(graph @crd(%x: f32[1,16,5,5]) -> (%y: f32[1,32,10,10]) {
  %w0 = weight f32[64,16,3,3]
  %w1 = weight f32[32,16,3,3]
  %c0 = conv(%x, %w0) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  %r = reshape(%c0) {shape = [1, 16, 2, 2, 5, 5]}
  %t = transpose(%r) {perm = [0, 1, 4, 2, 5, 3]}
  %p = reshape(%t) {shape = [1, 16, 10, 10]}
  %y = conv(%p, %w1) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1]}
  return %y
}
)",
                 "crd.mcir");
  fillWeights(*crd, 10);
  in = randomInputs(*crd, 11);
  want = interpret(*crd, in).at(0);
  REQUIRE(blockChannels(*crd));
  CHECK(count(*crd, Op::Transpose, 6) == 1); // the shuffle, plain
  CHECK(count(*crd, Op::Transpose, 7) == 0);
  checkClose(interpret(*crd, in).at(0), want);
}

// Grouped convs (1 < group < C) on the blocked layout: groups of whole blocks (width 16, 32,
// and 32 in / 64 out) as blocked_conv groups, groups of 8 and 4 channels as one group per block
// with block-diagonal weights, 40 channels in groups of 8 (the third block half padding), at
// 16 x 16, 8 x 8 and 4 x 4 (the band's row groups and padded grid), 3 x 3 and pointwise; a
// conv in groups of 2 (8x the work block-diagonal) stays NCHW. Checked in the interpreter and
// compiled for the host and for a GPU plan against the original graph.
const char *kGroupedNet = R"(graph @grouped(%x: f32[1,32,16,16]) -> (%y: f32[1,40,4,4]) {
  %wa = weight f32[64,32,1,1]
  %wb = weight f32[64,16,3,3]
  %bb = weight f32[64]
  %wc = weight f32[64,32,3,3]
  %bc = weight f32[64]
  %wd = weight f32[64,8,3,3]
  %we = weight f32[64,4,1,1]
  %wf = weight f32[128,32,1,1]
  %wh = weight f32[128,16,3,3]
  %wi = weight f32[128,32,3,3]
  %bi = weight f32[128]
  %wj = weight f32[40,128,1,1]
  %wk = weight f32[40,8,3,3]
  %bk = weight f32[40]
  %wl = weight f32[40,2,3,3]
  %a = conv(%x, %wa) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %b = conv(%a, %wb, %bb) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 4, epilogue = ["relu"]}
  %c = conv(%b, %wc, %bc) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], group = 2}
  %d = conv(%c, %wd) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 8, epilogue = ["relu"]}
  %e = conv(%d, %we) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], group = 16}
  %r = add(%e, %c)
  %f = conv(%r, %wf) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], group = 2}
  %h = conv(%f, %wh) {strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], group = 8, epilogue = ["relu"]}
  %i = conv(%h, %wi, %bi) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 4}
  %j = conv(%i, %wj) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %k = conv(%j, %wk, %bk) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 5, epilogue = ["relu"]}
  %y = conv(%k, %wl) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 20}
  return %y
}
)";

TEST_CASE("block-channels: grouped convs run blocked, as groups of blocks or block-diagonal") {
  std::unique_ptr<Graph> g = parseGraph(kGroupedNet, "grouped.mcir");
  fillWeights(*g, 31);
  // Twelve layers deep: weights scaled by 2 / sqrt(fan-in) keep the activations near 1, where
  // the float accumulation's rounding stays inside checkClose's tolerance.
  for (Value *w : g->weights()) {
    const TensorType &t = w->type();
    float scale = t.rank() == 4 ? 2.0f / std::sqrt(float(t.numel() / t.shape[0])) : 1.0f;
    auto scaled = std::make_shared<Tensor>(t);
    const float *src = w->data()->data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      scaled->data<float>()[i] = src[i] * scale;
    w->setData(scaled);
  }
  std::vector<Tensor> in = randomInputs(*g, 32);
  Tensor want = interpret(*g, in).at(0);

  std::unique_ptr<Graph> b = g->clone();
  REQUIRE(blockChannels(*b));
  std::vector<int64_t> groups; // each blocked_conv's group, in graph order
  int convs = 0;
  for (const Node *n : b->nodes()) {
    if (n->op() == Op::BlockedConv)
      groups.push_back(n->i("group"));
    if (n->op() == Op::Conv) {
      ++convs;
      CHECK(n->i("group") == 20); // groups of 2 channels stay NCHW
    }
  }
  // a; b (4 x 16); c (2 x 32); d (8 x 8: one group per block); e (16 x 4); f (32 -> 64 in 2);
  // h (8 x 16); i (4 x 32); j; k (5 x 8 over 40 channels: 3 blocks).
  CHECK(groups == std::vector<int64_t>{1, 4, 2, 4, 4, 2, 8, 4, 1, 3});
  CHECK(convs == 1);
  checkClose(interpret(*b, in).at(0), want);

  // The host plan's driver rewrites the graph itself; a GPU plan lowers the rewritten one.
  CompileOptions host;
  int compiled = 0;
  CompiledModel cm = buildModel(*g, host);
  for (const Node *n : cm.graph->nodes())
    compiled += n->op() == Op::BlockedConv && n->i("group") > 1;
  CHECK(compiled == 8);
  compileRunCheck(*g, host, in.at(0), want);
  CompileOptions gpu;
  gpu.planFor = Target::parseSpec("cuda:sm_80");
  compileRunCheck(*b, gpu, in.at(0), want);
}

// A ConvNeXt block: depthwise 7 x 7 conv, permute to channels-last, LayerNorm, two Linear layers,
// permute back, a per-channel layer scale and the residual add, twice. The scale and the add read
// the permuted-back Linear output, a channels-last value: they run on blocks (its 16 contiguous
// channels a vector), so the next depthwise conv reads blocks and no conversion back to NCHW is
// left between the blocks.
const char *kChannelsLastNet = R"(graph @cnblock(%x: f32[1,32,9,9]) -> (%y: f32[1,32,9,9]) {
  %ws = weight f32[32,32,1,1]
  %wd1 = weight f32[32,1,7,7]
  %bd1 = weight f32[32]
  %g1 = weight f32[32]
  %be1 = weight f32[32]
  %wa1 = weight f32[32,64]
  %wb1 = weight f32[64,32]
  %ls1 = weight f32[32,1,1]
  %wd2 = weight f32[32,1,7,7]
  %bd2 = weight f32[32]
  %g2 = weight f32[32]
  %be2 = weight f32[32]
  %wa2 = weight f32[32,64]
  %wb2 = weight f32[64,32]
  %ls2 = weight f32[32,1,1]
  %s = conv(%x, %ws) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %d1 = conv(%s, %wd1, %bd1) {strides = [1, 1], pads = [3, 3, 3, 3], dilations = [1, 1], group = 32}
  %t1 = transpose(%d1) {perm = [0, 2, 3, 1]}
  %n1 = layer_norm(%t1, %g1, %be1) {axis = -1, epsilon = 1e-6}
  %a1 = matmul(%n1, %wa1)
  %h1 = gelu(%a1)
  %m1 = matmul(%h1, %wb1)
  %p1 = transpose(%m1) {perm = [0, 3, 1, 2]}
  %q1 = mul(%ls1, %p1)
  %r1 = add(%q1, %s)
  %d2 = conv(%r1, %wd2, %bd2) {strides = [1, 1], pads = [3, 3, 3, 3], dilations = [1, 1], group = 32}
  %t2 = transpose(%d2) {perm = [0, 2, 3, 1]}
  %n2 = layer_norm(%t2, %g2, %be2) {axis = -1, epsilon = 1e-6}
  %a2 = matmul(%n2, %wa2)
  %h2 = gelu(%a2)
  %m2 = matmul(%h2, %wb2)
  %p2 = transpose(%m2) {perm = [0, 3, 1, 2]}
  %q2 = mul(%ls2, %p2)
  %y = add(%q2, %r1)
  return %y
}
)";

TEST_CASE("block-channels: a channels-last value's elementwise readers run on blocks") {
  std::unique_ptr<Graph> g = parseGraph(kChannelsLastNet, "cnblock.mcir");
  fillWeights(*g, 41);
  std::vector<Tensor> in = randomInputs(*g, 42);
  Tensor want = interpret(*g, in).at(0);

  std::unique_ptr<Graph> b = g->clone();
  REQUIRE(blockChannels(*b));
  // Both scale-and-add pairs run on blocks: every 5-D mul / add result; the only plain 4-D
  // elementwise results left would be a conversion's readers.
  int blockedEw = 0, plainEw = 0;
  for (const Node *n : b->nodes())
    if (n->op() == Op::Mul || n->op() == Op::Add)
      (n->result()->type().rank() == 5 ? blockedEw : plainEw) += 1;
  CHECK(blockedEw == 4);
  CHECK(plainEw == 0);
  checkClose(interpret(*b, in).at(0), want);

  CompileOptions host;
  compileRunCheck(*g, host, in.at(0), want);
}

// A head whose channel count is no multiple of 16 (5 classes) computes them in a padded block;
// the conversion back to NCHW, the slice dropping the padded lanes and a channels-last transpose
// are no kernels: the conv stores each kept lane at its final place (a channels-last output, its
// 5 lanes contiguous), or only the kept lanes into an NCHW output. NCHW outputs are stored a
// lane at a time, the pixels of a plane innermost and vectorised (%z, %v).
TEST_CASE("block-channels: a padded head stores its kept lanes past the slice and transpose") {
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @head(%x: f32[1,8,12,12]) -> (%y: f32[1,12,12,5], %z: f32[1,5,12,12], %v: f32[1,32,12,12]) {
  %w0 = weight f32[32,8,3,3]
  %b0 = weight f32[32]
  %w1 = weight f32[5,32,1,1]
  %b1 = weight f32[5]
  %w2 = weight f32[5,32,1,1]
  %c0 = conv(%x, %w0, %b0) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  %c1 = conv(%c0, %w1, %b1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %y = transpose(%c1) {perm = [0, 2, 3, 1]}
  %z = conv(%c0, %w2) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1]}
  %w3 = weight f32[32,32,1,1]
  %v = conv(%c0, %w3) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  return %y, %z, %v
}
)",
      "head.mcir");
  fillWeights(*g, 8);
  std::vector<Tensor> in = randomInputs(*g, 9);
  CompiledModel cm = compile_checks::compileRunCheck(*g, CompileOptions{}, in, "aicf_padded_head_");
  // Four kernels, the four convs; the heads' stores are bounded to the 5 kept lanes.
  REQUIRE(cm.kernels.size() == 4);
  int bounded = 0;
  for (const kir::Kernel &k : cm.kernels) {
    CHECK(k.recipe == "tiled_contraction");
    std::string text = kir::printKernel(k);
    bounded += text.find("if jl < 5 {") != std::string::npos;
    // Channels-last: lane jl is the innermost coordinate; NCHW: the plane.
    if (k.params.back()->shape == std::vector<int64_t>{1, 12, 12, 5})
      CHECK(text.find(" % 12, jl] = acc") != std::string::npos);
    // %v is stored through the conversion's transpose ([1, 2, 16, 12, 12], %v a view of it).
    const std::vector<int64_t> &out = k.params.back()->shape;
    bool nchw =
        out == std::vector<int64_t>{1, 5, 12, 12} || out == std::vector<int64_t>{1, 2, 16, 12, 12};
    if (out == std::vector<int64_t>{1, 5, 12, 12})
      CHECK(text.find("[0, jl, (") != std::string::npos); // the lane is the plane
    CHECK((text.find("for i in 0 .. 72 vectorize {") != std::string::npos) == nchw);
  }
  CHECK(bounded == 2);
}
