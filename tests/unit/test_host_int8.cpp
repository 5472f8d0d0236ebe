// int8 on the host (issue 54): a quantized model's integer-domain conv (integer_operands with a
// known x_offset, its weight in [-128, 127]) is marked precision int8 by assign-precision where
// the -march has AVX512-VNNI, its weight stored as int8 in k quads (passes/pack_weights.cpp),
// and the micro-kernel (backend/host/host_mma_prelude.cpp) reads A + shift as uint8 quads,
// multiplies them with vpdpbusd into i32 sums started from -shift x B's column sums.
//  * the micro-kernel's emulation (a -march without AVX512-VNNI) equals the exact integer product,
//    for a ragged K (37: a partial last quad), ragged rows and a tile that starts inside a panel;
//    vpdpbusd and AMX-INT8's tdpbusd give the same bits (each skipped with a message on a CPU
//    without avx512vnni / amx-int8);
//  * the quad panels are the weight again: the interpreter gives the same bits before and after
//    pack-weights.
// The compiled models' int8 steps: tests/unit/test_quant.cpp.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/precision.h"
#include "lower/recipes.h"
#include "passes/pass.h"
#include "support/diagnostics.h"
#include "target/hardware.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::test_files;

namespace {

constexpr int64_t kM = 9, kN = 48, kK = 37, kNR = 32, kP = 2, kKq = (kK + 3) / 4, kShift = 37;

// The micro-kernel over a [kM, kK] A (integers in [-kShift, 255 - kShift]) and a [kK, kN] B in
// quad panels of kNR: C1 = A B whole, C2 its columns 16.. as a tile starting inside panel 0.
// lda 0: A dense; else its k in blocks of 7 (a plain input's kernel-row taps, a conv stem):
// element k of row i at i * lda + k / 7 * s0 + k % 7, the quads straddling blocks
// (aicf_pack_groups). Apart (lda 100, s0 10) each row is converted as it lies; overlapping
// (lda 2, s0 20: a stride-2 conv's windows over its band) the floats the rows read are
// converted once. tiles: on AMX tiles where the -march has amx-int8 (mma_tile's `tiles`: the
// template's TILES), else on the vector kernel.
std::string kernelCall(int64_t lda, int64_t s0, bool tiles) {
  const std::string kb = lda == 0 ? "aicf_kblocks{0, 0, 0, 0, 0, 0, 16}"
                                  : cat("aicf_kblocks{0, ", s0, ", 0, 0, 1, 1, 7}");
  const std::string args = tiles ? "<2, false, 37, true>" : "<2, false, 37>";
  const int64_t ld = lda == 0 ? kK : lda;
  return cat(R"(
extern "C" void aicf_test_int8(void *const *args, int64_t, int64_t) {
  const float *a = static_cast<const float *>(args[2]);
  const int8_t *b = static_cast<const int8_t *>(args[3]);
  aicf_mma_f32_panels)",
             args, "(static_cast<float *>(args[0]), 48, a, ", ld, ", b, 4 * 10 * 32, 9, 48, 37, ",
             kb, R"();
  aicf_mma_f32_panels)",
             args, "(static_cast<float *>(args[1]) + 16, 48, a, ", ld,
             ", b, 4 * 10 * 32, 9, 32, 37, ", kb, R"(, 16);
}
)");
}

// Deterministic integers in [lo, hi].
std::vector<int> pseudoRandomInts(size_t n, uint32_t seed, int lo, int hi) {
  std::vector<int> v(n);
  for (int &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = lo + static_cast<int>((seed >> 8) % static_cast<uint32_t>(hi - lo + 1));
  }
  return v;
}

// `t` filled with pseudoRandomInts(numel, seed, lo, hi).
void fillInts(Tensor &t, uint32_t seed, int lo, int hi) {
  std::vector<int> v = pseudoRandomInts(static_cast<size_t>(t.numel()), seed, lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, v[static_cast<size_t>(i)]);
}

// g's one weight filled with int8 integers (seed) and an input of integers in [-7, 248] (the
// tests' x_offset 7; seed + 1): the weight's data and the input.
std::pair<std::shared_ptr<Tensor>, Tensor> intWeightAndInput(Graph &g, uint32_t seed) {
  Value *w = g.weights()[0];
  auto data = std::make_shared<Tensor>(w->type());
  fillInts(*data, seed, -128, 127);
  w->setData(data);
  Tensor x(g.inputs()[0]->type());
  fillInts(x, seed + 1, -7, 248);
  return {data, x};
}

std::pair<std::vector<float>, std::vector<float>> runMicroKernel(const std::string &flags,
                                                                 const std::vector<float> &a,
                                                                 const std::vector<int8_t> &b,
                                                                 const std::string &call) {
  static int built = 0;
  fs::path dir = scratchDir("aicf_host_int8_kernel_");
  std::string stem = (dir / cat("k", built++)).string();
  HostBuildOptions opts;
  opts.extraFlags = "-Wall -Wextra -Werror " + flags;
  compileHostSource(printHostSource({}) + call, stem + ".cpp", stem + ".so", opts);
  LoadedLibrary lib(stem + ".so");
  std::vector<float> c1(kM * kN, 0.0f), c2(kM * kN, 0.0f);
  void *args[] = {c1.data(), c2.data(), const_cast<float *>(a.data()),
                  const_cast<int8_t *>(b.data())};
  lib.kernel("aicf_test_int8")(args);
  return {c1, c2};
}

} // namespace

TEST_CASE("host int8: the micro-kernel's emulation and vpdpbusd agree with the exact product") {
  std::vector<int> wi = pseudoRandomInts(kK * kN, 2, -128, 127);
  // B in quad panels: panel p, quad row q, column j, k % 4 (pack-weights' layout).
  std::vector<int8_t> b(kP * kKq * kNR * 4, 0);
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t col = 0; col < kN; ++col)
      b[((col / kNR * kKq + k / 4) * kNR + col % kNR) * 4 + k % 4] =
          static_cast<int8_t>(wi[k * kN + col]);
  // A's storage (dense, or a band as tapCall reads it: NaN where no row reads) and the exact
  // product of the [kM, kK] integers its rows hold.
  struct Case {
    int64_t lda, s0;
    std::vector<float> stored, want;
  };
  auto make = [&](int64_t lda, int64_t s0, uint32_t seed) {
    Case c{lda, s0, {}, {}};
    const bool dense = lda == 0;
    const int64_t size = dense ? kM * kK : (kM - 1) * lda + (kK - 1) / 7 * s0 + 7;
    std::vector<int> v = pseudoRandomInts(size_t(size), seed, -kShift, 255 - kShift);
    c.stored.assign(size_t(size), std::nanf(""));
    std::vector<int> ai(kM * kK);
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t k = 0; k < kK; ++k) {
        const int64_t at = dense ? i * kK + k : i * lda + k / 7 * s0 + k % 7;
        c.stored[at] = float(v[at]);
        ai[i * kK + k] = v[at];
      }
    c.want.resize(kM * kN);
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < kK; ++k)
          acc += int64_t(ai[i * kK + k]) * wi[k * kN + j];
        c.want[i * kN + j] = static_cast<float>(acc); // |acc| < 2^24: exact
      }
    return c;
  };
  // Dense A; A in blocks of 7 taps apart; overlapping (a stride-2 conv's windows).
  const std::vector<Case> cases = {make(0, 0, 1), make(100, 10, 3), make(2, 20, 4)};
  // Each kernel asked for the tiles (mma_tile's `tiles`): the emulation and vpdpbusd where the
  // -march lacks them, AMX-INT8's tdpbusd where it has them.
  const bool vnni = compile_checks::cpuHas("avx512vnni"), amx = compile_checks::cpuHas("amx-int8");
  if (!vnni)
    MESSAGE("skipped the vpdpbusd part: this CPU has no avx512vnni");
  if (!amx)
    MESSAGE("skipped the AMX tiles part: this CPU has no amx-int8");
  struct Kernel {
    std::string what, flags;
    bool runs;
  };
  const std::vector<Kernel> kernels = {
      {"emulated", "-mno-avx512vnni -mno-amx-tile -mno-amx-int8 -mno-amx-bf16", true},
      {"vpdpbusd", "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16", vnni},
      {"AMX tiles", "", amx}};
  for (const Kernel &kernel : kernels) {
    if (!kernel.runs)
      continue;
    const std::string &what = kernel.what;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case &c = cases[ci];
      std::pair<std::vector<float>, std::vector<float>> got =
          runMicroKernel(kernel.flags, c.stored, b, kernelCall(c.lda, c.s0, true));
      int64_t off = 0;
      for (int64_t i = 0; i < kM; ++i)
        for (int64_t j = 0; j < kN; ++j) {
          off += got.first[i * kN + j] != c.want[i * kN + j];
          off += got.second[i * kN + j] != (j < 16 ? 0.0f : c.want[i * kN + j]);
        }
      CHECK_MESSAGE(off == 0, off, " of ", 2 * kM * kN, " ", what, " results differ (A layout ", ci,
                    ")");
    }
  }
}

TEST_CASE("host int8: assign-precision's int8 weight and its quad panels are the weight again") {
  // A blocked conv on the integers: K = 144 rows over 80 columns (a ragged third panel), x
  // integers in [-7, 248] (x_offset 7), the weight's in [-128, 127].
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g(%x: f32[1,1,3,3,16]) -> (%y: f32[1,5,3,3,16]) {
  %w = weight f32[144,80]
  %y = blocked_conv(%x, %w) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1, integer_operands = 1, x_offset = 7}
  return %y
}
)",
                                        "quads.mcir");
  auto [data, x] = intWeightAndInput(*g, 3);
  Tensor f32 = interpret(*g, {x})[0];
  std::unique_ptr<Graph> wide = g->clone(); // one weight of 200: not int8
  auto wideData = std::make_shared<Tensor>(*data);
  wideData->setDouble(0, 200);
  wide->weights()[0]->setData(wideData);
  PassContext ctx;
  PassManager assign;
  assign.add(createPass("assign-precision"));
  CHECK_FALSE(assign.run(*g, ctx)); // (fp32 on a -march with neither extension: nothing)
  ctx.hostVnni = true;
  REQUIRE(assign.run(*g, ctx));
  REQUIRE(g->weights()[0]->type().dtype == DType::I8);
  CHECK(g->nodes().back()->s("precision") == "int8");
  Tensor before = interpret(*g, {x})[0];
  CHECK(std::memcmp(before.raw(), f32.raw(), f32.byteSize()) == 0);
  PassManager pack;
  pack.add(createPass("pack-weights"));
  REQUIRE(pack.run(*g, ctx));
  REQUIRE(g->weights().size() == 1);
  CHECK(g->weights()[0]->type().shape == std::vector<int64_t>{3, 36, 32, 4});
  Tensor after = interpret(*g, {x})[0];
  CHECK(std::memcmp(after.raw(), before.raw(), before.byteSize()) == 0);
  // A weight outside [-128, 127] is not int8 (nor bf16 here: ctx.hostBf16 is false).
  CHECK_FALSE(assign.run(*wide, ctx));
}

TEST_CASE("host int8: an integer conv whose channels are no multiple of 16 runs on blocks where "
          "VNNI is") {
  // ShuffleNet's QDQ model: 1 x 1 convs over 24 (58, 116) channels. On NCHW they are f32
  // products (the int8 micro-kernel takes the packed weight as B: the blocked orientation); with
  // AVX512-VNNI block-channels pays the pad kernel into the layout for them (its reason in
  // passes/block_channels.cpp), without it they stay NCHW as for f32 convs.
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g(%x: f32[1,24,6,6]) -> (%y: f32[1,24,6,6]) {
  %w = weight f32[24,24,1,1]
  %y = conv(%x, %w) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], group = 1, integer_operands = 1, x_offset = 7}
  return %y
}
)",
                                        "narrow.mcir");
  Tensor x = intWeightAndInput(*g, 5).second;
  Tensor want = interpret(*g, {x})[0];
  auto convs = [](const Graph &gr, Op op) {
    int n = 0;
    for (const Node *m : gr.nodes())
      n += m->op() == op;
    return n;
  };
  PassManager blocks;
  blocks.add(createPass("block-channels"));
  PassContext ctx;
  std::unique_ptr<Graph> plain = g->clone();
  blocks.run(*plain, ctx);
  CHECK(convs(*plain, Op::Conv) == 1); // no VNNI: NCHW, as an f32 conv of 24 channels
  CHECK(convs(*plain, Op::BlockedConv) == 0);
  ctx.hostVnni = true;
  REQUIRE(blocks.run(*g, ctx));
  CHECK(convs(*g, Op::Conv) == 0);
  CHECK(convs(*g, Op::BlockedConv) == 1);
  Tensor got = interpret(*g, {x})[0];
  // Sums of integers below 2^24: exact in any order, so the blocked conv gives the same bits.
  CHECK(std::memcmp(got.raw(), want.raw(), want.byteSize()) == 0);
}

TEST_CASE("host int8: an integer conv on a plain input (a stem) runs on the dot-product kernels, "
          "exactly") {
  // resnet's 7 x 7 / 2 stem on 3 channels (K = 147): its A is read in blocks of a kernel row's 7
  // taps, packed in quads (or pairs) across blocks (aicf_pack_groups). Under fp32 on a -march
  // with VNNI it is an int8 product, else with AVX512-BF16 a bf16 one; integers below 2^24 sum
  // exactly in any order, so every form gives the interpreter's bits. A 3 x 3 stem (K = 27)
  // stays f32 (assign-precision: the packing outweighs the dot product's rate there).
  for (int64_t k : {7, 3}) {
    CAPTURE(k);
    const int64_t p = k / 2;
    std::unique_ptr<Graph> g = parseGraph(
        cat("graph @g(%x: f32[1,3,20,20]) -> (%y: f32[1,64,10,10]) {\n  %w = weight f32[64,3,", k,
            ",", k, "]\n  %y = conv(%x, %w) {strides = [2, 2], pads = [", p, ", ", p, ", ", p, ", ",
            p,
            "], dilations = [1, 1], group = 1, integer_operands = 1, x_offset = 7}\n  return "
            "%y\n}\n"),
        "stem.mcir");
    Tensor x = intWeightAndInput(*g, 7).second;
    Tensor want = interpret(*g, {x})[0];
    CompileOptions o;
    CompiledModel cm;
    std::vector<Tensor> got = compile_checks::compileRun(*g, o, {x}, "aicf_host_int8_stem_", &cm);
    REQUIRE(got.size() == 1);
    CHECK(std::memcmp(got[0].raw(), want.raw(), want.byteSize()) == 0);
    int reduced = 0;
    for (const PlanStep &st : cm.plan.steps)
      reduced += st.precision != Precision::F32;
    const bool dot = compile_checks::cpuHas("avx512vnni") || compile_checks::cpuHas("avx512bf16");
    if (k == 3)
      CHECK(reduced == 0);
    else if (dot)
      CHECK(reduced == 1);
    else
      MESSAGE("the 7 x 7 stem's int8 / bf16 form skipped: this CPU has neither avx512vnni nor "
              "avx512bf16");
  }
}

// The cost model puts an int8 product on AMX-INT8 tiles (tiled_contraction's `tiles` knob,
// tdpbusd) where the CPU planned for and the -march have them and the product is long enough to
// pay for staging its C: a 3 x 3 conv over 64 channels (K = 576) runs on tiles in k steps of
// whole 64-k tiles; a 1 x 1 conv over 16 channels (K = 16) stays on vpdpbusd; a -march without
// amx-int8 gets no tiles. Compiled for this CPU the convs give the interpreter's bits, on tiles
// or not (integer sums below 2^24).
TEST_CASE("host int8: the cost model chooses AMX tiles for long products, exactly") {
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @g(%x1: f32[1,16,14,14], %x2: f32[1,64,14,14]) -> (%y1: f32[1,64,14,14], %y2: f32[1,64,14,14]) {
  %w1 = weight f32[64,16,1,1]
  %w2 = weight f32[64,64,3,3]
  %y1 = conv(%x1, %w1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], group = 1, integer_operands = 1, x_offset = 7}
  %y2 = conv(%x2, %w2) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], group = 1, integer_operands = 1, x_offset = 7}
  return %y1, %y2
}
)",
      "amx_int8_choice.mcir");
  std::vector<Tensor> xs;
  for (size_t i = 0; i < 2; ++i) {
    auto w = std::make_shared<Tensor>(g->weights()[i]->type());
    fillInts(*w, uint32_t(11 + i), -128, 127);
    g->weights()[i]->setData(w);
    xs.emplace_back(g->inputs()[i]->type());
    fillInts(xs.back(), uint32_t(21 + i), -7, 248);
  }
  CompileOptions o;
  o.cpuArch = "sapphirerapids";
  o.planFor = Target().loaded();
  o.planFor.hw = loadHardwareFile((fs::path(AICF_TESTDATA) / "targets" / "ci-host.yaml").string());
  o.planFor.hw.amxInt8Products = 32;
  // The int8 contractions' `tiles` knob by K (1 x 1: 16, 3 x 3: 576); -1 where a kernel has none.
  auto tiles = [&](const CompileOptions &opts) {
    std::map<int64_t, int64_t> byK;
    for (const kir::Kernel &k : buildModel(*g, opts).kernels)
      if (const auto *p = dynamic_cast<const ContractionProblem *>(k.problem.get()))
        if (p->hostProducts == Precision::I8)
          byK[p->K] = k.knobs.count("tiles") ? k.knobs.at("tiles") : -1;
    return byK;
  };
  CHECK(tiles(o) == std::map<int64_t, int64_t>{{16, -1}, {576, 1}}); // (16: the defaults)
  o.cpuArch = "icelake-server";                                      // avx512vnni, no AMX
  CHECK(tiles(o) == std::map<int64_t, int64_t>{{16, -1}, {576, -1}});

  const std::vector<Tensor> want = interpret(*g, xs);
  CompiledModel cm;
  std::vector<Tensor> got =
      compile_checks::compileRun(*g, CompileOptions(), xs, "aicf_host_int8_amx_", &cm);
  REQUIRE(got.size() == 2);
  for (size_t i = 0; i < 2; ++i)
    CHECK_MESSAGE(std::memcmp(got[i].raw(), want[i].raw(), want[i].byteSize()) == 0, "output ", i);
  if (!compile_checks::cpuHas("amx-int8"))
    MESSAGE("the tiles' run skipped: this CPU has no amx-int8 (the vector kernel ran)");
}
