// Reduced precision (aicfc --precision; ir/precision.h, passes/assign_precision.cpp, the
// tensor-core mma_tile fragments of kir.h): GPU plans run matmul, gemm, conv and attention on
// tensor cores with operands rounded to tf32 / fp16 / bf16 and f32 accumulation. The host
// printer emulates those plans (--target cpu --plan-for cuda:ARCH) rounding exactly where the GPU
// rounds, so:
//  * small products are bit-exact against a scalar emulation written here (operands rounded, f32
//    accumulation in k order from the accumulator's initial value);
//  * every bundled model's emulated bf16 plan (fp16 and tf32 on two of them) matches its fp32
//    reference within |got - want| <= 8u + 8u |want|, u the precision's unit roundoff (2^-8
//    bf16, 2^-11 fp16 / tf32). Why 8u: each product's operands carry a relative error of at
//    most u each (2u per product, the f32 sums adding ~K 2^-24, negligible); these blocks chain
//    at most two rounded products between normalisations (q k^T then p v; an MLP's two GEMMs)
//    whose outputs are O(1), so 4u of operand error with a factor 2 for cancellation in the dot
//    products. Measured: bf16 worst 0.0032 on BERT (8u = 0.031), fp16 0.00048 (8u = 0.0039);
//  * with nvcc, every bundled model builds for sm_80 and sm_90 in fp16 and bf16 with no spills,
//    and, where cuobjdump is found (scripts/cuda_tools.sh installs it), every tensor-core step's
//    kernel holds HMMA instructions, and every contraction and attention step is one.
#include "backend/cuda/cuda_build.h"
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/precision.h"
#include "ir/verifier.h"
#include "kir/kir.h"
#include "model_dirs.h"
#include "passes/pass.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "tests/unit/compile_checks.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::test_files;

namespace {

// Compiles g for the host emulating `planFor` in precision p, runs it on `in`.
std::vector<Tensor> runEmulated(const Graph &g, Precision p, const std::vector<Tensor> &in,
                                const std::string &planFor = "cuda:sm_90",
                                CompiledModel *model = nullptr) {
  CompileOptions o;
  o.planFor = Target::parseSpec(planFor);
  o.precision = p;
  return compile_checks::compileRun(g, o, in, "aicf_precision_", model);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

const Tensor &weightOf(const Graph &g, const std::string &name) {
  for (const Value *v : g.weights())
    if (v->name() == name)
      return *v->data();
  FAIL("no weight ", name);
  throw InternalError("unreachable");
}

} // namespace

TEST_CASE("precision: operands round as the tensor cores read them") {
  // bf16 / fp16: to nearest, ties to even; tf32: to nearest, ties away from zero (cvt.rna).
  CHECK(roundToPrecision(1.0f + 0x1p-8f, Precision::BF16) == 1.0f); // tie, to even
  CHECK(roundToPrecision(1.0f + 3 * 0x1p-8f, Precision::BF16) == 1.0f + 0x1p-6f);
  CHECK(roundToPrecision(1.0f + 0x1p-11f, Precision::F16) == 1.0f);
  CHECK(roundToPrecision(1.0f + 0x1p-11f, Precision::TF32) == 1.0f + 0x1p-10f); // tie, away
  CHECK(roundToPrecision(-(1.0f + 0x1p-11f), Precision::TF32) == -(1.0f + 0x1p-10f));
  CHECK(roundToPrecision(1.0f + 0x1p-12f, Precision::TF32) == 1.0f);
  CHECK(roundToPrecision(70000.0f, Precision::F16) == INFINITY); // past fp16's range
  CHECK(std::isnan(roundToPrecision(NAN, Precision::TF32)));
  CHECK(roundToPrecision(0.1f, Precision::F32) == 0.1f);
  CHECK(parsePrecision("bf16") == Precision::BF16);
  CHECK(!parsePrecision("fp8").has_value());
  CHECK(unitRoundoff(Precision::BF16) == 0x1p-8);
}

TEST_CASE("precision: assign-precision marks the products and stores their weights converted") {
  const char *text = R"(graph @m(%x: f32[8,32]) -> (%y: f32[8,16], %z: f32[8,16]) {
  %w = weight f32[32,16]
  %b = weight f32[16]
  %y = gemm(%x, %w, %b) {transB = 0, epilogue = ["relu"]}
  %z = matmul(%x, %w)
  return %y, %z
}
)";
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32}) {
    CAPTURE(std::string(precisionName(p)));
    std::unique_ptr<Graph> g = parseGraph(text, "m.mcir");
    graph_checks::fillWeights(*g, 3);
    PassManager pm;
    pm.add(createPass("assign-precision"));
    PassContext ctx;
    ctx.target = Target::parseSpec("cuda:sm_90");
    ctx.precision = p;
    CHECK(pm.run(*g, ctx));
    std::set<std::string> weights;
    for (const Value *v : g->weights())
      weights.insert(cat(v->name(), ":", dtypeName(v->type().dtype)));
    if (p == Precision::TF32) // tf32 rounds as fragments load: weights stay f32
      CHECK(weights == std::set<std::string>{"w:f32", "b:f32"});
    else // one converted copy shared by both products; the bias stays f32
      CHECK(weights ==
            std::set<std::string>{cat("w.", precisionName(p), ":", dtypeName(precisionStorage(p))),
                                  "b:f32"});
    for (const Node *n : g->nodes())
      CHECK(n->s("precision") == precisionName(p));
    CHECK(verifyGraphDiagnostics(*g).empty());
  }
  // Host plans compute in fp32 or bf16 (test_host_bf16.cpp): fp16 is an error naming the way to
  // a GPU plan.
  std::unique_ptr<Graph> g = parseGraph(text, "m.mcir");
  graph_checks::fillWeights(*g, 3);
  CompileOptions o;
  o.precision = Precision::F16;
  try {
    buildModel(*g, o);
    FAIL("a host plan accepted --precision fp16");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()) ==
          "--precision fp16 needs a GPU plan (--target cuda:ARCH, or --target cpu --plan-for "
          "cuda:ARCH to run that plan here); host plans compute in fp32 or bf16");
  }
}

TEST_CASE("precision: emulated tensor-core products are bit-exact against a scalar emulation") {
  // Ragged in every dimension against the tiles (M 40, K 48, N 24); a plain matmul (the
  // accumulator starts at 0) and a gemm whose bias FuseReductionEpilogue moved into the
  // accumulator's initial value, then relu.
  const char *text = R"(graph @mm(%x: f32[40,48]) -> (%y: f32[40,24], %z: f32[40,24]) {
  %w = weight f32[48,24]
  %v = weight f32[48,24]
  %c = weight f32[24]
  %y = matmul(%x, %w)
  %z = gemm(%x, %v, %c) {epilogue = ["relu"]}
  return %y, %z
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "mm.mcir");
  graph_checks::fillWeights(*g, 7);
  std::vector<Tensor> in = randomInputs(*g, 8);
  const Tensor &x = in[0], &w = weightOf(*g, "w"), &v = weightOf(*g, "v"), &c = weightOf(*g, "c");
  for (Precision p : {Precision::BF16, Precision::F16, Precision::TF32}) {
    CAPTURE(std::string(precisionName(p)));
    CompiledModel cm;
    std::vector<Tensor> got = runEmulated(*g, p, in, "cuda:sm_90", &cm);
    // Both steps ran on fragments.
    for (const PlanStep &st : cm.plan.steps)
      CHECK(st.precision == p);
    int64_t mismatches = 0;
    for (int64_t m = 0; m < 40; ++m)
      for (int64_t n = 0; n < 24; ++n) {
        float y = 0.0f, z = c.data<float>()[n];
        for (int64_t k = 0; k < 48; ++k) {
          float a = roundToPrecision(x.data<float>()[m * 48 + k], p);
          y += a * roundToPrecision(w.data<float>()[k * 24 + n], p);
          z += a * roundToPrecision(v.data<float>()[k * 24 + n], p);
        }
        z = z > 0.0f ? z : 0.0f;
        mismatches += bits(got[0].data<float>()[m * 24 + n]) != bits(y);
        mismatches += bits(got[1].data<float>()[m * 24 + n]) != bits(z);
      }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("precision: an attention whose head size no fragment tiles plans its SIMT form") {
  // Head size 24 (a small Swin's): not a multiple of fp16 / bf16's k of 16, so the attention
  // runs SIMT in f32 whatever the planner's knobs (its candidates name BR, BC and threads);
  // tf32's k of 8 tiles it.
  const char *text =
      R"(graph @att(%q: f32[4,1,49,24], %k: f32[4,1,49,24], %v: f32[4,1,49,24]) -> (%y: f32[4,1,49,24]) {
  %y = attention(%q, %k, %v) {scale = 0.2}
  return %y
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "att24.mcir");
  std::vector<Tensor> in = randomInputs(*g, 5);
  std::vector<Tensor> want = interpret(*g, in);
  for (Precision p : {Precision::F16, Precision::BF16, Precision::TF32}) {
    CAPTURE(std::string(precisionName(p)));
    CompileOptions o;
    o.planFor = Target::parseSpec("cuda:sm_90");
    o.precision = p;
    o.attention = AttentionPolicy::Streaming; // the streaming kernel, planned over its candidates
    CompiledModel cm;
    std::vector<Tensor> got = compile_checks::compileRun(*g, o, in, "aicf_precision_", &cm);
    REQUIRE(cm.plan.steps.size() == 1);
    CHECK(cm.plan.steps[0].kind == "attention");
    CHECK(cm.plan.steps[0].precision == (p == Precision::TF32 ? Precision::TF32 : Precision::F32));
    double worst = 0;
    for (int64_t i = 0; i < want[0].numel(); ++i)
      worst = std::max(worst, std::fabs(got[0].getDouble(i) - want[0].getDouble(i)));
    CHECK(worst < (p == Precision::TF32 ? 1e-2 : 1e-5));
  }
}

TEST_CASE("precision: emulated reduced-precision plans match the fp32 references") {
  std::vector<fs::path> dirs = testing::modelDirs();
  REQUIRE(dirs.size() >= 8);
  for (const fs::path &dir : dirs) {
    std::vector<Precision> precisions = {Precision::BF16};
    std::string name = dir.filename().string();
    if (name == "gpt2_block_op17" || name == "bert_layer_op17")
      precisions = {Precision::BF16, Precision::F16, Precision::TF32};
    std::unique_ptr<Graph> g = testing::pipelineGraph(dir, "cpu");
    std::vector<Tensor> inputs;
    for (const Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    for (Precision p : precisions) {
      CAPTURE(name);
      CAPTURE(std::string(precisionName(p)));
      CompiledModel cm;
      std::vector<Tensor> got = runEmulated(*g, p, inputs, "cuda:sm_90", &cm);
      int tensorSteps = 0;
      for (const PlanStep &st : cm.plan.steps)
        tensorSteps += st.precision == p;
      CHECK(tensorSteps > 0);
      const double tol = 8.0 * unitRoundoff(p);
      for (size_t k = 0; k < got.size(); ++k) {
        const std::string &out = g->outputs()[k]->name();
        Tensor want = readNpy((dir / "outputs" / (out + ".npy")).string());
        REQUIRE(got[k].shape() == want.shape());
        graph_checks::checkClose(got[k], want, tol,
                                 cat(name, " ", precisionName(p), " output ", out));
      }
    }
  }
}

namespace {

// cuobjdump (and its nvdisasm): next to nvcc, or where scripts/cuda_tools.sh installed them.
std::string cuobjdump() {
  std::string nvcc = nvccPath();
  if (!nvcc.empty()) {
    fs::path near = fs::path(nvcc).parent_path() / "cuobjdump";
    if (fs::exists(near))
      return near.string();
  }
  fs::path tools = fs::path(AICF_TESTDATA).parent_path() / ".tools" / "cuda" / "bin";
  if (fs::exists(tools / "cuobjdump") && fs::exists(tools / "nvdisasm"))
    return "NVDISASM_PATH=" + tools.string() + " " + (tools / "cuobjdump").string();
  return "";
}

// HMMA instructions per kernel function of `so`.
std::map<std::string, int> hmmaPerFunction(const std::string &tool, const fs::path &so) {
  std::string sass;
  REQUIRE(sh(tool + " -sass " + so.string(), &sass) == 0);
  std::map<std::string, int> out;
  std::istringstream in(sass);
  std::string line, fn;
  while (std::getline(in, line)) {
    if (size_t at = line.find("Function : "); at != std::string::npos)
      fn = line.substr(at + 11);
    else if (line.find("HMMA.") != std::string::npos)
      ++out[fn];
  }
  return out;
}

} // namespace

TEST_CASE("precision: every model builds for sm_80 and sm_90 in fp16 and bf16, HMMA, no spills") {
  if (nvccPath().empty()) {
    MESSAGE("skipped: nvcc not found (the CUDA target is disabled in this build)");
    return;
  }
  const std::string tool = cuobjdump();
  if (tool.empty())
    MESSAGE("cuobjdump not found (scripts/cuda_tools.sh installs it): SASS checks skipped");
  bool all = std::getenv("AICF_CUDA_ONE_ARCH") == nullptr;
  std::set<std::string> built;
  std::vector<fs::path> dirs = testing::modelDirs();
  for (size_t i = 0; i < dirs.size(); ++i) {
    std::vector<std::string> archs = {i % 2 ? "cuda:sm_80" : "cuda:sm_90"};
    if (all)
      archs = {"cuda:sm_80", "cuda:sm_90"};
    for (const std::string &target : archs) {
      std::unique_ptr<Graph> g = testing::pipelineGraph(dirs[i], target);
      for (Precision p : {Precision::F16, Precision::BF16}) {
        CAPTURE(dirs[i].filename().string());
        CAPTURE(target);
        CAPTURE(std::string(precisionName(p)));
        CompileOptions o;
        o.target = o.planFor = Target::parse(target);
        o.precision = p;
        CompiledModel m = buildModel(*g, o);
        if (!built.insert(target + "\n" + m.source).second)
          continue;
        fs::path out =
            scratchDir("aicf_precision_cuda_") /
            cat(dirs[i].filename().string(), "_", target.substr(5), "_", precisionName(p));
        fs::create_directories(out);
        std::string report;
        Plan plan = compileCudaModel(m, out.string(), &report);
        CHECK_MESSAGE(report.find("warning") == std::string::npos, report);
        std::map<std::string, int> hmma;
        if (!tool.empty())
          hmma = hmmaPerFunction(tool, out / "libmodel.so");
        for (const PlanStep &st : plan.steps) {
          if (st.kindId.empty())
            continue;
          CAPTURE(st.kindId);
          CHECK(st.ptxas.present);
          CHECK(st.ptxas.spillBytes == 0);
          CHECK(st.ptxas.registers <= 255);
          // Every contraction and attention kernel is a tensor-core kernel here.
          if (st.recipe == "tiled_contraction" || st.recipe == "streaming_attention")
            CHECK(st.precision == p);
          if (!tool.empty())
            CHECK((st.precision != Precision::F32) == (hmma[st.kindId] > 0));
        }
      }
    }
  }
  fs::remove_all(scratchDir("aicf_precision_cuda_"));
}

TEST_CASE("precision: a model already in half precision imports, compiles and runs") {
  // testdata/half/mlp_f16.onnx (make_mlp_f16.py): fp16 inputs, weights, activations, outputs.
  fs::path dir = fs::path(AICF_TESTDATA) / "half";
  std::unique_ptr<Graph> g = importOnnx((dir / "mlp_f16.onnx").string(), ImportOptions{});
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  pm.run(*g, ctx);
  std::vector<Tensor> in = {readNpy((dir / "x.npy").string())};
  REQUIRE(in[0].type().dtype == DType::F16);
  Tensor want = interpret(*g, in)[0];
  REQUIRE(want.type().dtype == DType::F16);
  auto worst = [&](const Tensor &got, double atol, double rtol) {
    int64_t bad = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double a = got.getDouble(i), b = want.getDouble(i);
      bad += !(std::fabs(a - b) <= atol + rtol * std::fabs(b));
    }
    return bad;
  };
  // The host plan computes in f32 between f16 loads and stores, as the interpreter does: the two
  // may round a result to neighbouring f16 values (2 ulps: 2^-9 relative).
  {
    Tensor got = compile_checks::compileRun(*g, CompileOptions{}, in, "aicf_precision_")[0];
    CHECK(worst(got, 1e-6, 0x1p-9) == 0);
  }
  // The GPU plan in fp16 on tensor cores, emulated: the weights are used as they are (no
  // converted copies), both products run on fragments, within the 8u bound.
  CompiledModel cm;
  std::vector<Tensor> got = runEmulated(*g, Precision::F16, in, "cuda:sm_80", &cm);
  int tensorSteps = 0;
  for (const PlanStep &st : cm.plan.steps)
    tensorSteps += st.precision == Precision::F16;
  CHECK(tensorSteps == 2);
  for (const PlanBuffer &b : cm.plan.buffers)
    if (b.kind == BufferKind::Weight) {
      CAPTURE(b.value);
      CHECK(b.dtype == DType::F16);
      CHECK(b.value.find(".fp16") == std::string::npos);
    }
  const double tol = 8.0 * unitRoundoff(Precision::F16);
  CHECK(worst(got[0], tol, tol) == 0);
}

TEST_CASE("precision: --io-precision exchanges the inputs and outputs in another type") {
  // The mlp model with fp16 inputs and outputs: its plan reads an f16 x and writes an f16
  // logits (the casts fused into the first and last kernels: no step of their own), and
  // computes as the f32 model up to the rounding of x and of the result to fp16 (2^-11
  // relative each, its layers' gain on x's rounding kept below 2^-7 relative here).
  fs::path dir = fs::path(AICF_TESTDATA) / "models" / "mlp_op17";
  std::unique_ptr<Graph> g = testing::pipelineGraph(dir, "cpu");
  Tensor x = readNpy((dir / "inputs" / "x.npy").string());
  Tensor want = interpret(*g, {x})[0];
  Tensor xh(TensorType(DType::F16, x.shape()));
  for (int64_t i = 0; i < x.numel(); ++i)
    xh.setDouble(i, x.getDouble(i));
  CompileOptions o;
  o.ioPrecision = Precision::F16;
  CompiledModel cm;
  Tensor got = compile_checks::compileRun(*g, o, {xh}, "aicf_precision_", &cm)[0];
  REQUIRE(got.type().dtype == DType::F16);
  int kernels = 0;
  for (const PlanStep &st : cm.plan.steps)
    kernels += !st.kindId.empty();
  int plainKernels = 0;
  for (const PlanStep &st : buildModel(*g, CompileOptions{}).plan.steps)
    plainKernels += !st.kindId.empty();
  CHECK(kernels == plainKernels);
  for (const PlanBuffer &b : cm.plan.buffers)
    if (b.kind == BufferKind::Input || b.kind == BufferKind::Output) {
      CAPTURE(b.value);
      CHECK(b.dtype == DType::F16);
    }
  REQUIRE(cm.graph != nullptr);
  CHECK(cm.graph->outputs()[0]->name() == "logits");
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.getDouble(i), b = want.getDouble(i);
    bad += !(std::fabs(a - b) <= 0x1p-7 * (1.0 + std::fabs(b)));
  }
  CHECK(bad == 0);
}
