// Lengths known only at run time (issue 51, item 3): NonZero, Compress, NonMaxSuppression and
// TopK with a run-time k make a "data dim" (ir/ops.def, "lengths known only at run time"): a
// symbolic dim whose value a step computes, the buffers reserved at its bound, the runtime
// reading the count after the step and sizing what follows. Checked on the models of
// testdata/data_dims (scripts/gen_data_dim_models.py, references from ONNX Runtime), each with
// cases of different lengths, an empty one among them: the reference interpreter and the
// compiled folder must give ONNX Runtime's shapes and values, run after run on one model object
// (a long result after a short one and back); a length above its bound fails the run with a
// message naming it and the flag that raises it, and leaves the model usable.
#include "driver/compile.h"
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "passes/pass.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::test_files;

namespace {

const fs::path kDir = fs::path(AICF_TESTDATA) / "data_dims";

std::unique_ptr<Graph> import(const std::string &model, const ImportOptions &io = {}) {
  return importOnnx((kDir / model / "model.onnx").string(), io);
}

// The model compiled for the host (aicfc's default pipeline), written to a scratch folder.
fs::path compile(const std::string &model, const ImportOptions &io = {},
                 const std::string &tag = "") {
  fs::path out = scratchDir("aicf_data_dims_") / (model + tag);
  std::unique_ptr<Graph> g = import(model, io);
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.target = Target::parseSpec("cpu");
  pm.run(*g, ctx);
  CompileOptions opts;
  writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  return out;
}

struct Case {
  std::vector<Tensor> inputs;  // in the graph's input order
  std::vector<Tensor> outputs; // in the graph's output order
};

// Case k of `model`: the inputs and ONNX Runtime's outputs, by the graph's names.
Case loadCase(const std::string &model, const Graph &g, int k) {
  fs::path d = kDir / model / cat("case", k);
  Case c;
  for (const Value *in : g.inputs())
    c.inputs.push_back(readNpy((d / (in->name() + ".npy")).string()));
  for (const Value *out : g.outputs())
    c.outputs.push_back(readNpy((d / (out->name() + ".npy")).string()));
  return c;
}

int numCases(const std::string &model) {
  int k = 0;
  while (fs::exists(kDir / model / cat("case", k)))
    ++k;
  return k;
}

// Same shape and dtype, and equal values (integers exactly; floats within 1e-6 relative: the
// kept values are copied, the arithmetic on them a multiply or a multiply-add per iteration,
// which a compiled kernel may fuse).
void checkSame(const Tensor &got, const Tensor &want, const std::string &what) {
  CAPTURE(what);
  REQUIRE(got.type().str() == want.type().str());
  for (int64_t i = 0; i < got.numel(); ++i) {
    CAPTURE(i);
    if (isFloat(want.dtype()))
      REQUIRE(std::fabs(got.getDouble(i) - want.getDouble(i)) <=
              1e-6 * std::max(1.0, std::fabs(want.getDouble(i))));
    else
      REQUIRE(got.getInt(i) == want.getInt(i));
  }
}

struct Model {
  aicf_model *m = nullptr;
  std::string error; // the last failed run's message
  explicit Model(const fs::path &dir) : m(aicf_open(dir.string().c_str())) {
    REQUIRE_MESSAGE(m, aicf_last_error());
  }
  ~Model() { aicf_close(m); }

  // One run: the outputs allocated at their capacity, read back at the shapes the run gave.
  // Returns 0 or the failed run's status (its message in `error`).
  int run(const std::vector<Tensor> &inputs, std::vector<Tensor> *outputs) {
    std::vector<const void *> in;
    for (const Tensor &t : inputs)
      in.push_back(t.raw());
    int n = aicf_num_outputs(m);
    std::vector<std::vector<char>> mem(static_cast<size_t>(n));
    std::vector<void *> out;
    for (int i = 0; i < n; ++i) {
      size_t cap = 0;
      REQUIRE(aicf_output_capacity(m, i, &cap) == 0);
      mem[i].assign(cap + 64, '\x5a'); // past the capacity: a canary
      out.push_back(mem[i].data());
    }
    int rc = aicf_run(m, in.data(), out.data());
    error = rc ? aicf_last_error() : ""; // (the calls below succeed and clear it)
    for (int i = 0; i < n; ++i) {
      size_t cap = 0;
      REQUIRE(aicf_output_capacity(m, i, &cap) == 0);
      for (size_t b = cap; b < cap + 64; ++b)
        REQUIRE(mem[i][b] == '\x5a');
    }
    if (rc != 0)
      return rc;
    outputs->clear();
    for (int i = 0; i < n; ++i) {
      aicf_tensor_info info;
      REQUIRE(aicf_output_info(m, i, &info) == 0);
      Tensor t(TensorType(*parseDType(info.dtype),
                          std::vector<int64_t>(info.shape, info.shape + info.rank)));
      if (info.bytes > 0) // (an empty tensor's data pointer is null)
        std::memcpy(t.raw(), mem[i].data(), info.bytes);
      outputs->push_back(std::move(t));
    }
    return 0;
  }
};

const char *const kModels[] = {"nonzero_mask", "compress_rows", "topk_runtime_k",
                               "nms_gather",   "unique_labels", "loop_scan"};

} // namespace

TEST_CASE("data dims: the interpreter gives ONNX Runtime's lengths and values") {
  for (const char *model : kModels) {
    CAPTURE(model);
    std::unique_ptr<Graph> g = import(model);
    REQUIRE(numCases(model) >= 3);
    for (int k = 0; k < numCases(model); ++k) {
      CAPTURE(k);
      Case c = loadCase(model, *g, k);
      std::vector<Tensor> got = interpret(*g, c.inputs);
      for (size_t i = 0; i < got.size(); ++i)
        checkSame(got[i], c.outputs[i], g->outputs()[i]->name());
    }
  }
}

TEST_CASE("data dims: compiled folders give ONNX Runtime's lengths and values, run after run") {
  for (const char *model : kModels) {
    CAPTURE(model);
    std::unique_ptr<Graph> g = import(model);
    fs::path dir = compile(model);
    std::string plan = readAll(dir / "plan.yaml");
    CHECK(plan.find("set_by: ") != std::string::npos);
    Model m(dir);
    // Every case, then again in reverse order: lengths grow and shrink between runs.
    std::vector<int> order;
    for (int k = 0; k < numCases(model); ++k)
      order.push_back(k);
    for (int k = numCases(model) - 1; k >= 0; --k)
      order.push_back(k);
    for (int k : order) {
      CAPTURE(k);
      Case c = loadCase(model, *g, k);
      std::vector<Tensor> got;
      REQUIRE_MESSAGE(m.run(c.inputs, &got) == 0, m.error);
      for (size_t i = 0; i < got.size(); ++i)
        checkSame(got[i], c.outputs[i], g->outputs()[i]->name());
    }
  }
}

TEST_CASE("data dims: a length above its bound fails the run, naming it and --max") {
  ImportOptions io;
  io.dataDimMax["idx"] = 4;
  std::unique_ptr<Graph> g = import("nonzero_mask", io);
  fs::path dir = compile("nonzero_mask", io, "_max4");
  Model m(dir);
  Case many = loadCase("nonzero_mask", *g, 0), none = loadCase("nonzero_mask", *g, 2);
  std::vector<Tensor> got;
  REQUIRE(m.run(many.inputs, &got) != 0);
  const std::string &err = m.error;
  CHECK(err.find("length idx is 12, above its bound 4") != std::string::npos);
  CHECK(err.find("aicfc --max idx=N") != std::string::npos);
  // The model stays usable: a result within the bound runs and matches.
  REQUIRE_MESSAGE(m.run(none.inputs, &got) == 0, m.error);
  checkSame(got[0], none.outputs[0], "idx");
}

TEST_CASE("data dims: TopK's run-time k outside [0, axis length] fails the run") {
  std::unique_ptr<Graph> g = import("topk_runtime_k");
  Model m(compile("topk_runtime_k"));
  Case c = loadCase("topk_runtime_k", *g, 0);
  std::vector<Tensor> got;
  c.inputs[1].setInt(0, 21);
  REQUIRE(m.run(c.inputs, &got) != 0);
  CHECK(m.error.find("length values is 21, above its bound 20") != std::string::npos);
  c.inputs[1].setInt(0, -1);
  REQUIRE(m.run(c.inputs, &got) != 0);
  CHECK(m.error.find("length values is -1, negative") != std::string::npos);
  c.inputs[1].setInt(0, 5);
  REQUIRE_MESSAGE(m.run(c.inputs, &got) == 0, m.error);
  CHECK(got[0].type().str() == "f32[2,5]");
}

TEST_CASE("data dims: --max names a length the model has") {
  ImportOptions io;
  io.dataDimMax["nope"] = 3;
  CHECK_THROWS_WITH(import("nms_gather", io),
                    doctest::Contains("--max nope=3: the model has no length known only at run "
                                      "time of that name (the model's are: selected)"));
  // By the ONNX output's name too, and a bound below the model's shrinks the reservation.
  io.dataDimMax.clear();
  io.dataDimMax["selected"] = 5;
  std::unique_ptr<Graph> g = import("nms_gather", io);
  REQUIRE(g->findDim("selected"));
  CHECK(g->findDim("selected")->max == 5);
}

TEST_CASE("data dims: GPU plans refuse them, naming the node") {
  std::unique_ptr<Graph> g = import("nonzero_mask");
  CompileOptions opts;
  opts.target = Target::parseSpec("cuda:sm_90");
  opts.planFor = opts.target;
  CHECK_THROWS_WITH(buildModel(*g, opts),
                    doctest::Contains("(data dim idx) is known only at run time: supported on "
                                      "host plans (--target cpu) only"));
}

// A torchvision detector with its post-processing (scripts/gen_detector_model.py: SSDlite,
// MobileNetV3 at width 0.5, 3 classes, random seeded weights with calibrated BN statistics):
// per class NonZero (scores above the threshold), GatherND, TopK with k = min(100, kept) computed
// from the NonZero's length, then batched NMS behind an If on "no boxes at all" (a choose of an
// empty and NMS's result) and the first 100 kept (a run-time min). Interpreted and compiled
// (host plan), against ONNX Runtime's boxes, scores and labels: the same count and labels; boxes
// within 1e-2 (coordinates up to 320: 3e-5 relative; the interpreter saw 2.5e-3, torch and ORT
// differ by 1.8e-4) and scores within 1e-4.
TEST_CASE("data dims: a torchvision detector's post-processing matches ONNX Runtime") {
  const std::string model = "ssdlite_mnv3_160";
  std::unique_ptr<Graph> g = import(model);
  // The interpreter and the compiled folder (host plan: every data dim set at run time, the
  // choose of the empty and NMS's result included) on every case.
  Model compiled(compile(model));
  for (int k = 0; k < numCases(model); ++k) {
    CAPTURE(k);
    Case c = loadCase(model, *g, k);
    std::vector<Tensor> interpreted = interpret(*g, c.inputs), ran;
    REQUIRE_MESSAGE(compiled.run(c.inputs, &ran) == 0, compiled.error);
    for (const std::vector<Tensor> *got : {&interpreted, &ran}) {
      CAPTURE(got == &ran);
      REQUIRE(got->size() == 3);
      for (size_t i = 0; i < 3; ++i)
        REQUIRE((*got)[i].type().str() == c.outputs[i].type().str());
      // Each reference detection has one of ours with its label, its box within 1e-2 and its
      // score within 1e-4 (detections whose scores differ by less than the rounding may come in
      // either order).
      const int64_t n = (*got)[2].numel();
      std::vector<bool> used(static_cast<size_t>(n), false);
      for (int64_t r = 0; r < n; ++r) {
        CAPTURE(r);
        bool found = false;
        for (int64_t o = 0; o < n && !found; ++o) {
          if (used[static_cast<size_t>(o)] || (*got)[2].getInt(o) != c.outputs[2].getInt(r) ||
              std::fabs((*got)[1].getDouble(o) - c.outputs[1].getDouble(r)) > 1e-4)
            continue;
          bool box = true;
          for (int64_t j = 0; j < 4; ++j)
            box = box && std::fabs((*got)[0].getDouble(o * 4 + j) -
                                   c.outputs[0].getDouble(r * 4 + j)) <= 1e-2;
          found = box;
          if (found)
            used[static_cast<size_t>(o)] = true;
        }
        REQUIRE(found);
      }
    }
  }
}
