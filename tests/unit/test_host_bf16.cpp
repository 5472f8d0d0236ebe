// bf16 on the host (aicfc --target cpu --precision bf16; issue 54): assign-precision marks the
// products whose weight pack-weights packs, the weight is stored in bf16 in k pairs
// (passes/pack_weights.cpp) and the micro-kernel multiplies pairs with vdpbf16ps
// (backend/host/host_mma_prelude.cpp), A rounded to bf16 as it is read, f32 accumulation.
//  * the pair panels are the weight again: the interpreter gives the same bits before and after
//    pack-weights;
//  * the micro-kernel's emulation (a -march without AVX512-BF16) and the instruction agree
//    bit-for-bit on small products (ragged K, rows and panels), and both equal a scalar model of
//    the instruction (operands rounded to nearest even, the high products first);
//  * on a CPU with AMX-BF16 the tile kernel (tdpbf16ps) agrees with the emulation bit-for-bit
//    where every partial sum is exact, and within a bound elsewhere (it sums a tile's products
//    in an order of its own);
//  * every bundled model compiled for the host in bf16 matches its fp32 reference within
//    |got - want| <= 8u + 8u |want|, u = 2^-8 (the error model of test_precision.cpp's emulated
//    GPU plans, which round the same operands);
//  * a -march without the extension, and fp16 / tf32 on the host, are refused with exact messages.
// The parts that run bf16 code skip with a message on a CPU without avx512bf16.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/precision.h"
#include "lower/recipes.h"
#include "model_dirs.h"
#include "passes/pass.h"
#include "support/diagnostics.h"
#include "target/hardware.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::test_files;

namespace {

bool cpuHasBf16() {
  return compile_checks::cpuHas("avx512bf16");
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t toBf16(float f) { // nearest even (the test values are normal)
  uint32_t u = bits(f);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float widen(uint16_t h) {
  return fromBits(uint32_t(h) << 16);
}

// Deterministic values in [-1, 1).
std::vector<float> pseudoRandom(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1u << 23) - 1.0f;
  }
  return v;
}

constexpr int64_t kM = 9, kN = 48, kK = 37, kNR = 32, kP = 2, kKh = (kK + 1) / 2;

// The micro-kernel over a [kM, kK] A and a [kK, kN] B in pair panels of kNR, C = A B.
const char *const kCall = R"(
extern "C" void aicf_test_bf16(void *const *args, int64_t, int64_t) {
  aicf_mma_f32_panels<2>(static_cast<float *>(args[0]), 48, static_cast<const float *>(args[1]),
                         37, static_cast<const uint16_t *>(args[2]), 2 * 19 * 32, 9, 48, 37);
}
)";

// The same product on AMX tiles where the -march has them (mma_tile's `tiles`: the template's
// TILES), else as kCall.
const char *const kTilesCall = R"(
extern "C" void aicf_test_bf16(void *const *args, int64_t, int64_t) {
  aicf_mma_f32_panels<2, false, 0, true>(static_cast<float *>(args[0]), 48,
                                         static_cast<const float *>(args[1]), 37,
                                         static_cast<const uint16_t *>(args[2]), 2 * 19 * 32, 9,
                                         48, 37);
}
)";

// The same product with A's k in blocks of 7 (a plain input's kernel-row taps, a conv stem):
// element k of row i at i * lda + k / 7 * s0 + k % 7, so the pairs straddle blocks
// (backend/host/host_mma_prelude.cpp aicf_pack_groups). Apart (lda 100, s0 10: the floats
// between blocks never read) each row is converted as it lies; overlapping (lda 2, s0 20: a
// stride-2 conv's windows over a band) the floats the rows read are converted once.
struct TapLayout {
  int64_t lda, s0;
};
std::string tapCall(TapLayout t) {
  return cat(R"(
extern "C" void aicf_test_bf16(void *const *args, int64_t, int64_t) {
  aicf_mma_f32_panels<2>(static_cast<float *>(args[0]), 48, static_cast<const float *>(args[1]),
                         )",
             t.lda, R"(, static_cast<const uint16_t *>(args[2]), 2 * 19 * 32, 9, 48, 37,
                         aicf_kblocks{0, )",
             t.s0, R"(, 0, 0, 1, 1, 7});
}
)");
}

// A band for layout t whose rows, read through t, are a [kM, kK] matrix (written to dense);
// what no row reads is NaN.
std::vector<float> tapBand(TapLayout t, uint32_t seed, std::vector<float> &dense) {
  const int64_t size = (kM - 1) * t.lda + (kK - 1) / 7 * t.s0 + 7;
  std::vector<float> band(size, std::nanf("")), v = pseudoRandom(size, seed);
  dense.assign(kM * kK, 0.0f);
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t k = 0; k < kK; ++k) {
      const int64_t at = i * t.lda + k / 7 * t.s0 + k % 7;
      band[at] = v[at];
      dense[i * kK + k] = v[at];
    }
  return band;
}

std::vector<float> runMicroKernel(const std::string &flags, const std::vector<float> &a,
                                  const std::vector<uint16_t> &b, const std::string &call = kCall) {
  static int built = 0;
  fs::path dir = scratchDir("aicf_host_bf16_kernel_");
  std::string stem = (dir / cat("k", built++)).string();
  HostBuildOptions opts;
  opts.extraFlags = "-Wall -Wextra -Werror " + flags;
  compileHostSource(printHostSource({}) + call, stem + ".cpp", stem + ".so", opts);
  LoadedLibrary lib(stem + ".so");
  std::vector<float> c(kM * kN, 0.0f);
  void *args[] = {c.data(), const_cast<float *>(a.data()), const_cast<uint16_t *>(b.data())};
  lib.kernel("aicf_test_bf16")(args);
  return c;
}

// B in pair panels: panel p, pair row q, column j, parity k % 2 (pack-weights' layout).
std::vector<uint16_t> pairPanels(const std::vector<float> &w) {
  std::vector<uint16_t> b(kP * kKh * kNR * 2, 0);
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t col = 0; col < kN; ++col)
      b[((col / kNR * kKh + k / 2) * kNR + col % kNR) * 2 + k % 2] = toBf16(w[k * kN + col]);
  return b;
}

} // namespace

TEST_CASE("host bf16: the micro-kernel's emulation and vdpbf16ps agree bit-for-bit") {
  std::vector<float> a = pseudoRandom(kM * kK, 1), w = pseudoRandom(kK * kN, 2);
  // B in pair panels: panel p, pair row q, column j, parity k % 2 (pack-weights' layout).
  std::vector<uint16_t> b(kP * kKh * kNR * 2, 0);
  for (int64_t k = 0; k < kK; ++k)
    for (int64_t col = 0; col < kN; ++col)
      b[((col / kNR * kKh + k / 2) * kNR + col % kNR) * 2 + k % 2] = toBf16(w[k * kN + col]);
  // The instruction's model: per pair, the high product then the low one added in f32.
  std::vector<float> want(kM * kN);
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < kK; k += 2) {
        if (k + 1 < kK)
          acc += widen(toBf16(a[i * kK + k + 1])) * widen(toBf16(w[(k + 1) * kN + j]));
        acc += widen(toBf16(a[i * kK + k])) * widen(toBf16(w[k * kN + j]));
      }
      want[i * kN + j] = acc;
    }
  std::vector<float> emulated =
      runMicroKernel("-mno-avx512bf16 -mno-amx-tile -mno-amx-bf16 -mno-amx-int8", a, b);
  int64_t off = 0;
  for (size_t i = 0; i < want.size(); ++i)
    off += bits(emulated[i]) != bits(want[i]);
  CHECK_MESSAGE(off == 0, off, " of ", want.size(), " emulated results differ from the model");
  if (!cpuHasBf16()) {
    MESSAGE("skipped the vdpbf16ps half: this CPU has no avx512bf16");
    return;
  }
  // (Without AMX: on a CPU with amx-bf16, -march=native's kernel runs on tiles, below.)
  std::vector<float> real = runMicroKernel("-mno-amx-tile -mno-amx-bf16 -mno-amx-int8", a, b);
  off = 0;
  for (size_t i = 0; i < want.size(); ++i)
    off += bits(real[i]) != bits(emulated[i]);
  CHECK_MESSAGE(off == 0, off, " of ", want.size(), " vdpbf16ps results differ from the emulation");
}

TEST_CASE("host bf16: A in blocks of a kernel row's taps packs pairs across blocks") {
  std::vector<float> w = pseudoRandom(kK * kN, 4);
  std::vector<uint16_t> b = pairPanels(w);
  const std::string noBf16 = "-mno-avx512bf16 -mno-amx-tile -mno-amx-bf16 -mno-amx-int8";
  const bool real = cpuHasBf16();
  if (!real)
    MESSAGE("skipped the vdpbf16ps half: this CPU has no avx512bf16");
  for (TapLayout t : {TapLayout{100, 10}, TapLayout{2, 20}}) {
    CAPTURE(t.lda);
    std::vector<float> dense, band = tapBand(t, uint32_t(3 + t.lda), dense);
    // A dense, as the first test reads it, is the model: the same pairs, the same bits.
    std::vector<float> want = runMicroKernel(noBf16, dense, b);
    auto differ = [&](const std::vector<float> &got) {
      int64_t off = 0;
      for (size_t i = 0; i < want.size(); ++i)
        off += bits(got[i]) != bits(want[i]);
      return off;
    };
    int64_t off = differ(runMicroKernel(noBf16, band, b, tapCall(t)));
    CHECK_MESSAGE(off == 0, off, " of ", want.size(), " emulated results differ from dense A's");
    if (!real)
      continue;
    off = differ(runMicroKernel("-mno-amx-tile -mno-amx-bf16 -mno-amx-int8", band, b, tapCall(t)));
    CHECK_MESSAGE(off == 0, off, " of ", want.size(), " vdpbf16ps results differ from dense A's");
  }
}

TEST_CASE("host bf16: AMX tiles and the emulation agree") {
  if (!compile_checks::cpuHas("amx-bf16")) {
    MESSAGE("skipped: this CPU has no amx-bf16");
    return;
  }
  const std::string noAmx = "-mno-avx512bf16 -mno-amx-tile -mno-amx-bf16 -mno-amx-int8";
  // Quarters in [-1, 1]: every product and partial sum is exact in f32, whatever the order.
  auto quarters = [](std::vector<float> v) {
    for (float &x : v)
      x = std::round(x * 4.0f) / 4.0f;
    return v;
  };
  std::vector<float> a = quarters(pseudoRandom(kM * kK, 5)), w = quarters(pseudoRandom(kK * kN, 6));
  std::vector<uint16_t> b = pairPanels(w);
  std::vector<float> tiles = runMicroKernel("", a, b, kTilesCall),
                     emulated = runMicroKernel(noAmx, a, b, kTilesCall);
  int64_t off = 0;
  for (size_t i = 0; i < tiles.size(); ++i)
    off += bits(tiles[i]) != bits(emulated[i]);
  CHECK_MESSAGE(off == 0, off, " of ", tiles.size(), " tile results differ from the emulation");
  // Any operands: within 4 ulp of f32 per product's size (sum |a| |b| u32, u32 = 2^-24).
  a = pseudoRandom(kM * kK, 7);
  w = pseudoRandom(kK * kN, 8);
  b = pairPanels(w);
  tiles = runMicroKernel("", a, b, kTilesCall);
  emulated = runMicroKernel(noAmx, a, b, kTilesCall);
  double worst = 0;
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      double mag = 0;
      for (int64_t k = 0; k < kK; ++k)
        mag += std::fabs(double(widen(toBf16(a[i * kK + k]))) * widen(toBf16(w[k * kN + j])));
      double d = std::fabs(double(tiles[i * kN + j]) - emulated[i * kN + j]);
      worst = std::max(worst, d / (mag * std::ldexp(1.0, -24)));
    }
  CHECK_MESSAGE(worst <= 4.0, "tile results differ from the emulation by ", worst,
                " ulp of the products' size");
}

TEST_CASE("host bf16: pack-weights' pair panels are the weight again") {
  // K = 37 (a last pair padded with a zero row) and N = 40 (a second panel 8 columns wide).
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g(%x: f32[5,37]) -> (%y: f32[5,40]) {
  %w = weight f32[37,40]
  %y = matmul(%x, %w)
  return %y
}
)",
                                        "pairs.mcir");
  graph_checks::fillWeights(*g, 3);
  Tensor x = Tensor::fromF32(pseudoRandom(5 * 37, 4), {5, 37});
  PassContext ctx;
  ctx.precision = Precision::BF16;
  PassManager assign;
  assign.add(createPass("assign-precision"));
  REQUIRE(assign.run(*g, ctx));
  REQUIRE(g->weights()[0]->type().dtype == DType::BF16);
  Tensor before = interpret(*g, {x})[0];
  PassManager pack;
  pack.add(createPass("pack-weights"));
  REQUIRE(pack.run(*g, ctx));
  REQUIRE(g->weights().size() == 1);
  CHECK(g->weights()[0]->type().shape == std::vector<int64_t>{2, 19, 32, 2});
  Tensor after = interpret(*g, {x})[0];
  REQUIRE(after.numel() == before.numel());
  CHECK(std::memcmp(after.raw(), before.raw(), before.byteSize()) == 0);
}

TEST_CASE("host bf16: compiled models match their fp32 references within 8u") {
  if (!cpuHasBf16()) {
    MESSAGE("skipped: this CPU has no avx512bf16");
    return;
  }
  const double tol = 8.0 * unitRoundoff(Precision::BF16);
  for (const fs::path &dir : testing::modelDirs()) {
    std::string name = dir.filename().string();
    CAPTURE(name);
    std::unique_ptr<Graph> g = testing::pipelineGraph(dir, "cpu");
    std::vector<Tensor> inputs;
    for (const Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    CompileOptions o;
    o.precision = Precision::BF16;
    CompiledModel cm;
    std::vector<Tensor> got = compile_checks::compileRun(*g, o, inputs, "aicf_host_bf16_", &cm);
    int bf16Steps = 0;
    for (const PlanStep &st : cm.plan.steps)
      bf16Steps += st.precision == Precision::BF16;
    // dtypes_op17: its only products have no weight; cnn_dyn_op17: no weight 32 columns wide is
    // read on a channel-blocked input (its gemm has 10 columns, its wide convs read plain inputs),
    // so nothing is packed for the bf16 micro-kernel.
    if (name != "dtypes_op17" && name != "cnn_dyn_op17")
      CHECK(bf16Steps > 0);
    for (size_t k = 0; k < got.size(); ++k) {
      const std::string &out = g->outputs()[k]->name();
      Tensor want = readNpy((dir / "outputs" / (out + ".npy")).string());
      REQUIRE(got[k].shape() == want.shape());
      graph_checks::checkClose(got[k], want, tol, cat(name, " (", bf16Steps, " bf16 steps) ", out));
    }
  }
}

// The cost model puts a bf16 product on AMX tiles (tiled_contraction's `tiles` knob) where
// the CPU planned for and the -march have them and the product is long enough to pay for
// staging its C through the tiles: a 3 x 3 conv over 64 channels (K = 576) runs on tiles in k
// steps of whole 32-k tiles; a 1 x 1 conv over 16 channels (K = 16) stays on vdpbf16ps. A
// -march without amx-bf16 gets no tiles whatever the CPU planned for.
TEST_CASE("host bf16: the cost model chooses AMX tiles for long products") {
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g(%x: f32[1,16,28,28]) -> (%y: f32[1,64,28,28]) {
  %w1 = weight f32[64,16,1,1]
  %b1 = weight f32[64]
  %w2 = weight f32[64,64,3,3]
  %b2 = weight f32[64]
  %a = conv(%x, %w1, %b1) {strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], epilogue = ["relu"]}
  %y = conv(%a, %w2, %b2) {strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], epilogue = ["relu"]}
  return %y
}
)",
                                        "amx_choice.mcir");
  graph_checks::fillWeights(*g, 11);
  CompileOptions o;
  o.precision = Precision::BF16;
  o.cpuArch = "sapphirerapids";
  o.planFor = Target().loaded();
  o.planFor.hw = loadHardwareFile((fs::path(AICF_TESTDATA) / "targets" / "ci-host.yaml").string());
  o.planFor.hw.amxBf16Products = 16;
  // The contractions' `tiles` knob by K (1 x 1: 16, 3 x 3: 576); -1 where a kernel has none.
  auto tiles = [&](const CompileOptions &opts) {
    std::map<int64_t, int64_t> byK;
    for (const kir::Kernel &k : buildModel(*g, opts).kernels)
      if (const auto *p = dynamic_cast<const ContractionProblem *>(k.problem.get()))
        byK[p->K] = k.knobs.count("tiles") ? k.knobs.at("tiles") : -1;
    return byK;
  };
  std::map<int64_t, int64_t> got = tiles(o);
  CHECK(got == std::map<int64_t, int64_t>{{16, -1}, {576, 1}}); // (16: the defaults, vdpbf16ps)
  o.cpuArch = "cooperlake";                                     // avx512bf16, no AMX
  got = tiles(o);
  CHECK(got == std::map<int64_t, int64_t>{{16, -1}, {576, -1}});
}

TEST_CASE("host bf16: a -march without avx512bf16 and fp16 on the host are refused") {
  std::unique_ptr<Graph> g = parseGraph(R"(graph @g(%x: f32[4,32]) -> (%y: f32[4,32]) {
  %w = weight f32[32,32]
  %y = matmul(%x, %w)
  return %y
}
)",
                                        "refused.mcir");
  graph_checks::fillWeights(*g, 5);
  CompileOptions o;
  o.precision = Precision::BF16;
  o.cpuArch = "x86-64-v3";
  CHECK_THROWS_WITH(buildModel(*g, o),
                    "--precision bf16 on a host plan needs the avx512bf16 extension, which "
                    "--cpu-arch x86-64-v3 does not have (give a -march that has it, e.g. "
                    "--cpu-arch sapphirerapids or znver4, to compile for such a CPU)");
  o.cpuArch = "native";
  o.precision = Precision::F16;
  CHECK_THROWS_WITH(buildModel(*g, o),
                    "--precision fp16 needs a GPU plan (--target cuda:ARCH, or --target cpu "
                    "--plan-for cuda:ARCH to run that plan here); host plans compute in fp32 or "
                    "bf16");
}
