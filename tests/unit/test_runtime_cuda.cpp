// The runtime's CUDA backend (runtime/runtime.cpp, runtime/cudart.h): a folder compiled with
// --target cuda:sm_90 is validated like a cpu one (a missing aicf_launch_* launcher is refused
// before any device is touched), and then either runs on the device (outputs match the model's
// references through aicf_run with the CUDA Graph captured, replayed and disabled, and through
// aicf_run_device) or, on a machine without a GPU or driver, aicf_open fails with
// "no CUDA device available (cudaErrorX)" and never crashes. aicf_run_device on a cpu plan is a
// documented error. Skipped with a MESSAGE where nvcc is absent (no cuda folder can be built).
#include "backend/cuda/cuda_build.h"
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "ir/npy.h"
#include "passes/pass.h"
#include "runtime/aicf_runtime.h"
#include "runtime/cudart.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf::test_files;
using namespace aicf;

namespace {

fs::path scratch() {
  return scratchDir("aicf_runtime_cuda_");
}

const fs::path kModel = fs::path(AICF_TESTDATA) / "models" / "mlp_op13";

// Compiles the mlp model for target into scratch()/name.
fs::path compileTo(const std::string &target, const std::string &name) {
  std::unique_ptr<Graph> g = importOnnx((kModel / "model.onnx").string(), ImportOptions{});
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.target = Target::parse(target);
  pm.run(*g, ctx);
  CompileOptions opts;
  opts.target = ctx.target;
  opts.planFor = ctx.target;
  fs::path out = scratch() / name;
  writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  return out;
}

// The model's reference inputs and output buffers shaped like its reference outputs.
struct Io {
  std::vector<Tensor> ins, outs, want;
  std::vector<const void *> inPtrs;
  std::vector<void *> outPtrs;
};

Io referenceIo(aicf_model *m) {
  Io io;
  for (int i = 0; i < aicf_num_inputs(m); ++i) {
    aicf_tensor_info info;
    REQUIRE(aicf_input_info(m, i, &info) == 0);
    io.ins.push_back(readNpy((kModel / "inputs" / (std::string(info.name) + ".npy")).string()));
    io.inPtrs.push_back(io.ins.back().raw());
  }
  for (int i = 0; i < aicf_num_outputs(m); ++i) {
    aicf_tensor_info info;
    REQUIRE(aicf_output_info(m, i, &info) == 0);
    io.want.push_back(readNpy((kModel / "outputs" / (std::string(info.name) + ".npy")).string()));
    io.outs.emplace_back(io.want.back().type());
  }
  for (Tensor &t : io.outs)
    io.outPtrs.push_back(t.raw());
  return io;
}

void checkOutputs(const Io &io, const char *how) {
  for (size_t k = 0; k < io.outs.size(); ++k) {
    int64_t bad = 0;
    for (int64_t i = 0; i < io.want[k].numel(); ++i) {
      double want = io.want[k].getDouble(i);
      bad += std::fabs(io.outs[k].getDouble(i) - want) <= 1e-4 + 1e-4 * std::fabs(want) ? 0 : 1;
    }
    CHECK_MESSAGE(bad == 0, std::string(how), ": ", bad, " elements of output ", k,
                  " outside tolerance");
  }
}

// With a device: aicf_run (graph captured, replayed, then disabled) and aicf_run_device.
void runOnDevice(aicf_model *m) {
  Io io = referenceIo(m);
  REQUIRE_MESSAGE(aicf_run(m, io.inPtrs.data(), io.outPtrs.data()) == 0,
                  std::string(aicf_last_error()));
  checkOutputs(io, "aicf_run, graph captured");
  REQUIRE_MESSAGE(aicf_run(m, io.inPtrs.data(), io.outPtrs.data()) == 0,
                  std::string(aicf_last_error()));
  checkOutputs(io, "aicf_run, graph replayed");
  REQUIRE(aicf_set_cuda_graph(m, 0) == 0);
  REQUIRE_MESSAGE(aicf_run(m, io.inPtrs.data(), io.outPtrs.data()) == 0,
                  std::string(aicf_last_error()));
  checkOutputs(io, "aicf_run, no graph");
  REQUIRE(aicf_set_cuda_graph(m, 1) == 0);

  std::string why;
  const rt::Cudart *cu = rt::loadCudart(&why);
  REQUIRE_MESSAGE(cu != nullptr, why);
  std::vector<void *> dIn, dOut;
  for (const Tensor &t : io.ins) {
    void *p = nullptr;
    REQUIRE(cu->malloc(&p, static_cast<size_t>(t.byteSize())) == 0);
    REQUIRE(cu->memcpyAsync(p, t.raw(), static_cast<size_t>(t.byteSize()), rt::kMemcpyHostToDevice,
                            nullptr) == 0);
    dIn.push_back(p);
  }
  for (const Tensor &t : io.outs) {
    void *p = nullptr;
    REQUIRE(cu->malloc(&p, static_cast<size_t>(t.byteSize())) == 0);
    dOut.push_back(p);
  }
  std::vector<const void *> dInC(dIn.begin(), dIn.end());
  rt::CudaStream s = nullptr;
  REQUIRE(cu->streamCreate(&s) == 0);
  REQUIRE(cu->streamSynchronize(nullptr) == 0);
  for (int rep = 0; rep < 2; ++rep) // captured, then replayed
    REQUIRE_MESSAGE(aicf_run_device(m, dInC.data(), dOut.data(), s) == 0,
                    std::string(aicf_last_error()));
  for (size_t k = 0; k < io.outs.size(); ++k)
    REQUIRE(cu->memcpyAsync(io.outPtrs[k], dOut[k], static_cast<size_t>(io.outs[k].byteSize()),
                            rt::kMemcpyDeviceToHost, s) == 0);
  REQUIRE(cu->streamSynchronize(s) == 0);
  checkOutputs(io, "aicf_run_device");
  cu->streamDestroy(s);
  for (void *p : dIn)
    cu->free(p);
  for (void *p : dOut)
    cu->free(p);
}

} // namespace

TEST_CASE("runtime cuda: a cuda:sm_90 folder runs on a device, or aicf_open says why it cannot") {
  if (nvccPath().empty()) {
    MESSAGE("skipped: nvcc not found (no cuda folder can be built here)");
    return;
  }
  fs::path out = compileTo("cuda:sm_90", "cuda_mlp");
  aicf_model *m = aicf_open(out.string().c_str());
  if (!m) {
    std::string err = aicf_last_error();
    MESSAGE("no device here: ", err);
    bool noDevice = err.rfind("no CUDA device available (", 0) == 0 && err.back() == ')';
    CHECK_MESSAGE((noDevice || err == "no CUDA runtime library (libcudart.so) found"), err);
  } else {
    CHECK(aicf_num_inputs(m) == 1);
    CHECK(aicf_set_num_threads(m, 2) == 0); // no effect on a cuda plan
    runOnDevice(m);
    aicf_close(m);
  }
  fs::remove_all(out);
}

TEST_CASE("runtime cuda: a cuda plan is validated (aicf_launch_* launchers) before the device") {
  if (nvccPath().empty()) {
    MESSAGE("skipped: nvcc not found (no cuda folder can be built here)");
    return;
  }
  fs::path out = compileTo("cuda:sm_90", "cuda_tampered");
  std::string plan = readAll(out / "plan.yaml");
  size_t at = plan.find("kind_id: ");
  REQUIRE(at != std::string::npos);
  at += std::string("kind_id: ").size();
  plan.replace(at, plan.find('\n', at) - at, "no_such_kernel");
  {
    std::ofstream f(out / "plan.yaml", std::ios::binary | std::ios::trunc);
    f << plan;
  }
  aicf_model *m = aicf_open(out.string().c_str());
  CHECK(m == nullptr);
  aicf_close(m);
  std::string err = aicf_last_error();
  // Without libcudart the library cannot be loaded at all; otherwise the launcher is missing.
  if (err != "no CUDA runtime library (libcudart.so) found")
    CHECK_MESSAGE(
        err.find("launcher aicf_launch_no_such_kernel is missing from") != std::string::npos, err);
  fs::remove_all(out);
}

// A cuda folder compiled for a range of batch sizes (its launchers read the dims and size their
// grids from them): on a device, one process runs it at the range's ends, the planned value and
// others, in an order that swaps between captured CUDA Graphs (one per shape), each against the
// interpreter on the same input. Without a device, aicf_open fails only for want of one: the
// plan and its library were accepted first (they once disagreed on every step's dims argument,
// so no ranged cuda folder opened).
TEST_CASE("runtime cuda: a cuda folder with symbolic dims runs at every shape of its range") {
  test_files::Tools tools = test_files::builtTools();
  if (nvccPath().empty() || !tools) {
    MESSAGE("skipped: nvcc or the built aicfc / aicf-run not found");
    return;
  }
  fs::path model = fs::path(AICF_TESTDATA) / "models" / "cnn_dyn_op17" / "model.onnx";
  fs::path dir = scratch() / "cuda_ranged";
  std::string log;
  REQUIRE_MESSAGE(sh(cat(tools.aicfc, " '", model.string(),
                         "' --dim batch=1..16@4 --target cuda:sm_90 -o '", dir.string(), "'"),
                     &log) == 0,
                  log);
  // The inputs and the interpreter's outputs first (on every machine), then the device runs.
  const std::vector<int64_t> batches = {4, 7, 1, 4, 16, 7};
  std::vector<Tensor> inputs;
  for (int64_t batch : batches) {
    Tensor x(TensorType(DType::F32, {batch, 3, 32, 32}));
    for (int64_t i = 0; i < x.numel(); ++i)
      x.setDouble(i, std::sin(0.37 * static_cast<double>(i) + static_cast<double>(batch)));
    fs::path in = dir / cat("image_", batch, ".npy");
    writeNpy(in.string(), x);
    REQUIRE_MESSAGE(sh(cat(tools.run, " '", model.string(), "' --shape image=", batch,
                           "x3x32x32 --input image='", in.string(), "' --output-dir '",
                           (dir / cat("ref_", batch)).string(), "'"),
                       &log) == 0,
                    log);
    inputs.push_back(std::move(x));
  }
  aicf_model *m = aicf_open(dir.string().c_str());
  if (!m) {
    std::string err = aicf_last_error();
    MESSAGE("no device here: ", err);
    bool noDevice = err.rfind("no CUDA device available (", 0) == 0 && err.back() == ')';
    CHECK_MESSAGE((noDevice || err == "no CUDA runtime library (libcudart.so) found"), err);
    fs::remove_all(dir);
    return;
  }
  REQUIRE(aicf_num_dims(m) == 1);
  for (size_t r = 0; r < batches.size(); ++r) {
    int64_t batch = batches[r];
    CAPTURE(batch);
    int64_t shape[4] = {batch, 3, 32, 32};
    REQUIRE(aicf_set_input_shape(m, 0, 4, shape) == 0);
    std::vector<Tensor> want, got;
    std::vector<void *> outs;
    for (int k = 0; k < aicf_num_outputs(m); ++k) {
      aicf_tensor_info info;
      REQUIRE(aicf_output_info(m, k, &info) == 0);
      want.push_back(
          readNpy((dir / cat("ref_", batch) / (std::string(info.name) + ".npy")).string()));
      REQUIRE(static_cast<int64_t>(want.back().byteSize()) == info.bytes);
      got.emplace_back(want.back().type());
      std::fill(got.back().raw(), got.back().raw() + got.back().byteSize(), uint8_t{0xff});
    }
    for (Tensor &t : got)
      outs.push_back(t.raw());
    const void *ins[] = {inputs[r].raw()};
    REQUIRE_MESSAGE(aicf_run(m, ins, outs.data()) == 0, std::string(aicf_last_error()));
    for (size_t k = 0; k < got.size(); ++k) {
      int64_t bad = 0;
      for (int64_t i = 0; i < want[k].numel(); ++i) {
        double w = want[k].getDouble(i);
        bad += std::fabs(got[k].getDouble(i) - w) <= 1e-4 + 1e-4 * std::fabs(w) ? 0 : 1;
      }
      CHECK_MESSAGE(bad == 0, bad, " elements of output ", k, " outside tolerance");
    }
  }
  aicf_close(m);
  fs::remove_all(dir);
}

TEST_CASE("runtime cuda: aicf_run_device on a cpu plan is the documented error") {
  fs::path out = compileTo("cpu", "cpu_mlp");
  aicf_model *m = aicf_open(out.string().c_str());
  REQUIRE_MESSAGE(m != nullptr, std::string(aicf_last_error()));
  Io io = referenceIo(m);
  CHECK(aicf_run_device(m, io.inPtrs.data(), io.outPtrs.data(), nullptr) != 0);
  CHECK(std::string(aicf_last_error()).rfind("aicf_run_device needs a cuda plan", 0) == 0);
  CHECK(aicf_set_cuda_graph(m, 0) == 0); // no effect on a cpu plan
  REQUIRE_MESSAGE(aicf_run(m, io.inPtrs.data(), io.outPtrs.data()) == 0,
                  std::string(aicf_last_error()));
  checkOutputs(io, "cpu aicf_run");
  aicf_close(m);
  CHECK(aicf_run_device(nullptr, nullptr, nullptr, nullptr) != 0);
  fs::remove_all(out);
}
