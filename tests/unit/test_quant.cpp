// Quantized models (issue 54): the int8 models under testdata/quant (scripts/gen_quant_models.py:
// ONNX Runtime's static quantizer in QDQ and QOperator formats, its dynamic quantizer, and a long
// MatMulInteger) import, and interpreted and compiled for the host they match ONNX Runtime, both
// its int8 kernels (outputs/) and each op alone (reference/), within the stated tolerance
// (tolerance.txt: one quantum of the output, 0 for the i32 product). Also: the integer products
// are exact past f32's exact integers, and the quantized values round half to even and saturate.
#include "backend/host/host_build.h"
#include "driver/compile.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "model_dirs.h"
#include "support/diagnostics.h"
#include "tests/unit/compile_checks.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

std::vector<fs::path> quantDirs() {
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "quant"))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

double tolerance(const fs::path &dir) {
  std::ifstream f(dir / "tolerance.txt");
  double t = -1;
  f >> t;
  REQUIRE_MESSAGE(t >= 0, (dir / "tolerance.txt").string(), " holds no tolerance");
  return t;
}

// Every element within `tol` (absolute) of `want`; the largest difference and the share of
// elements that differ at all are reported.
void checkWithin(const Tensor &got, const Tensor &want, double tol, const std::string &what) {
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  int64_t differ = 0, bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = std::fabs(got.getDouble(i) - want.getDouble(i));
    worst = std::max(worst, d);
    differ += d > 0;
    bad += d > tol * (1 + 1e-6) + 1e-6 * std::fabs(want.getDouble(i));
  }
  MESSAGE(what, ": max abs difference ", worst, " (tolerance ", tol, "), ", differ, " of ",
          want.numel(), " elements differ");
  CHECK_MESSAGE(bad == 0, bad, " elements of ", what, " outside the tolerance");
}

int64_t argmax(const Tensor &t) {
  int64_t best = 0;
  for (int64_t i = 1; i < t.numel(); ++i)
    if (t.getDouble(i) > t.getDouble(best))
      best = i;
  return best;
}

} // namespace

TEST_CASE("quant: int8 models match ONNX Runtime within a quantum, interpreted and compiled") {
  std::vector<fs::path> dirs = quantDirs();
  REQUIRE(dirs.size() >= 4);
  for (const fs::path &dir : dirs) {
    std::string name = dir.filename().string();
    CAPTURE(name);
    double tol = tolerance(dir);
    std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string(), {});
    std::vector<Tensor> inputs;
    for (const Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    std::vector<Tensor> interpreted = interpret(*g, inputs);
    std::unique_ptr<Graph> planned = testing::pipelineGraph(dir, "cpu");
    std::vector<Tensor> compiled =
        compile_checks::compileRun(*planned, CompileOptions{}, inputs, "aicf_quant_");
    REQUIRE(compiled.size() == g->outputs().size());
    for (size_t k = 0; k < compiled.size(); ++k) {
      const std::string &out = g->outputs()[k]->name();
      for (const char *ref : {"outputs", "reference"}) {
        Tensor want = readNpy((dir / ref / (out + ".npy")).string());
        checkWithin(interpreted[k], want, tol, cat(name, " interpreted vs ", ref));
        checkWithin(compiled[k], want, tol, cat(name, " compiled vs ", ref));
        if (name.rfind("cnn", 0) == 0) // a classifier's top-1 agrees
          CHECK(argmax(compiled[k]) == argmax(want));
      }
    }
  }
}

TEST_CASE("quant: the integer ops import as exact products and saturating half-even rounding") {
  fs::path dir = fs::path(AICF_TESTDATA) / "quant";
  // The long MatMulInteger sums past 2^24: it is cut into exact chunks added in i32.
  std::unique_ptr<Graph> g = importOnnx((dir / "matmulinteger_long" / "model.onnx").string(), {});
  int matmuls = 0;
  for (const Node *n : g->nodes())
    matmuls += n->op() == Op::MatMul;
  CHECK(matmuls == 2);
  CHECK(g->outputs()[0]->type().dtype == DType::I32);
  // QuantizeLinear: half to even, then the zero point, then saturation to uint8.
  std::unique_ptr<Graph> q = importOnnx((dir / "cnn_qdq" / "model.onnx").string(), {});
  bool round = false, clip = false;
  for (const Node *n : q->nodes()) {
    round = round || n->op() == Op::Round;
    clip = clip || (n->op() == Op::Clip && n->f("min") == 0 && n->f("max") == 255);
  }
  CHECK(round);
  CHECK(clip);
}

TEST_CASE("quant: a QDQ conv runs on the integers, on the int8 or bf16 micro-kernel where exact") {
  fs::path dir = fs::path(AICF_TESTDATA) / "quant" / "cnn_qdq";
  std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string(), {});
  int integerConvs = 0, offsets = 0;
  for (const Node *n : g->nodes()) {
    integerConvs += n->op() == Op::Conv && n->i("integer_operands") == 1;
    offsets += n->op() == Op::Conv && n->i("x_offset") >= 0;
  }
  CHECK(integerConvs == 4); // every conv of the network: both operands dequantized
  CHECK(offsets == 4);      // uint8 activations with constant zero points
  std::vector<Tensor> inputs = {readNpy((dir / "inputs" / "input.npy").string())};
  std::unique_ptr<Graph> planned = testing::pipelineGraph(dir, "cpu");
  // fp32 plans: with AVX512-VNNI the exact products go to int8; with AVX512-BF16 those whose x
  // offset is unknown (here: erased) to bf16; on a -march with neither (haswell) they stay f32.
  // Every sum is an integer below 2^24: the outputs are identical.
  auto steps = [](const CompiledModel &cm, Precision p) {
    int n = 0;
    for (const PlanStep &st : cm.plan.steps)
      n += st.precision == p;
    return n;
  };
  CompileOptions native, haswell;
  haswell.cpuArch = "haswell";
  CompiledModel cm;
  std::vector<Tensor> f32 =
      compile_checks::compileRun(*planned, haswell, inputs, "aicf_quant_", &cm);
  CHECK(steps(cm, Precision::I8) + steps(cm, Precision::BF16) == 0);
  auto same = [&](const std::vector<Tensor> &got) {
    REQUIRE(got.size() == f32.size());
    for (size_t k = 0; k < got.size(); ++k)
      CHECK(std::memcmp(got[k].raw(), f32[k].raw(), static_cast<size_t>(f32[k].type().bytes())) ==
            0);
  };
  // The packed-weight convs: c2 (16 -> 32, 3 x 3). The stem reads a plain input, the depthwise
  // conv has no such kernel, and the 16-channel 1 x 1's weight is narrower than a panel.
  if (compile_checks::cpuHas("avx512vnni")) {
    same(compile_checks::compileRun(*planned, native, inputs, "aicf_quant_", &cm));
    CHECK(steps(cm, Precision::I8) == 1);
    // Priced on vpdpbusd (the host description's int8 rate): faster than the same tiles in f32.
    for (const PlanStep &st : cm.plan.steps)
      if (st.precision == Precision::I8)
        CHECK(st.fp32Us > 2 * st.timeUs);
  } else {
    MESSAGE("skipped the int8 half: this CPU has no avx512vnni");
  }
  if (compile_checks::cpuHas("avx512bf16")) {
    std::unique_ptr<Graph> unknown = planned->clone();
    for (Node *n : unknown->nodes())
      if (n->op() == Op::Conv || n->op() == Op::BlockedConv)
        n->attrs["x_offset"] = int64_t(-1);
    same(compile_checks::compileRun(*unknown, native, inputs, "aicf_quant_", &cm));
    CHECK(steps(cm, Precision::BF16) == 1);
    CHECK(steps(cm, Precision::I8) == 0);
  } else {
    MESSAGE("skipped the bf16 half: this CPU has no avx512bf16");
  }
}

TEST_CASE("quant: a QDQ MatMul runs on the integers, on the int8 micro-kernel where exact") {
  // mlp_qdq: ORT's static QDQ quantizer on a two-layer MLP (uint8 activations, per-column int8
  // weights): each DequantizeLinear -> MatMul imports as one matmul of the integers, its scales
  // after; with AVX512-VNNI both run as int8 contractions (vpdpbusd, sums in i32).
  fs::path dir = fs::path(AICF_TESTDATA) / "quant" / "mlp_qdq";
  std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string(), {});
  int integerProducts = 0;
  for (const Node *n : g->nodes())
    integerProducts += n->op() == Op::MatMul && n->i("integer_operands") == 1 &&
                       n->i("x_offset") >= 0 && n->i("x_offset") <= 255;
  CHECK(integerProducts == 2);
  std::vector<Tensor> inputs = {readNpy((dir / "inputs" / "input.npy").string())};
  Tensor want = readNpy((dir / "outputs" / "output.npy").string());
  std::unique_ptr<Graph> planned = testing::pipelineGraph(dir, "cpu");
  CompileOptions native, haswell;
  haswell.cpuArch = "haswell";
  CompiledModel cm;
  std::vector<Tensor> f32 =
      compile_checks::compileRun(*planned, haswell, inputs, "aicf_quant_", &cm);
  checkWithin(f32.at(0), want, tolerance(dir), "mlp_qdq f32 plan vs ONNX Runtime's int8 kernels");
  if (!compile_checks::cpuHas("avx512vnni")) {
    MESSAGE("skipped the int8 half: this CPU has no avx512vnni");
    return;
  }
  std::vector<Tensor> got =
      compile_checks::compileRun(*planned, native, inputs, "aicf_quant_", &cm);
  int int8Steps = 0;
  for (const PlanStep &st : cm.plan.steps)
    int8Steps += st.precision == Precision::I8;
  CHECK(int8Steps == 2);
  // Every sum of the integers is below 2^24 here, so the f32 plan is exact too: identical.
  CHECK(std::memcmp(got.at(0).raw(), f32.at(0).raw(), static_cast<size_t>(f32[0].type().bytes())) ==
        0);
  checkWithin(got.at(0), want, tolerance(dir), "mlp_qdq int8 plan vs ONNX Runtime's int8 kernels");
}

TEST_CASE("quant: a QDQ pair onto the grid its input already lies on is dropped at import") {
  // shuffle_qdq: ORT's QDQ quantizer wraps each op of a ShuffleNet-style unit in a quantize /
  // dequantize pair, the ops that only move values too. Of its 14 QuantizeLinear nodes, 7 put a
  // computed value on a new grid (the input, four convs, the concat of two differently scaled
  // branches, the output); the other 7 follow max pool, reshape, transpose, reshape, slice,
  // nearest resize and zero padding of values already on that grid, with its scale and zero
  // point: identities, which import drops (frontend/onnx_quant_grid.cpp). One rounding per real
  // quantization remains; the outputs still match ORT within a quantum (the first test case).
  fs::path dir = fs::path(AICF_TESTDATA) / "quant" / "shuffle_qdq";
  std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string(), {});
  int rounds = 0, integerConvs = 0;
  for (const Node *n : g->nodes()) {
    rounds += n->op() == Op::Round;
    integerConvs += n->op() == Op::Conv && n->i("integer_operands") == 1;
  }
  CHECK(rounds == 7);
  // Every conv still reads integers, those after the moves too (c3 reads the shuffled slice,
  // the last conv the padded, resized map).
  CHECK(integerConvs == 5);
}
