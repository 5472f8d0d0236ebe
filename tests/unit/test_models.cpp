// Model tests: every exported model under testdata/models imports and, interpreted on its stored
// inputs, matches PyTorch's stored outputs. Tolerance (fp32): |got - want| <= 1e-5 + 1e-4*|want|
// per element; the worst error is printed for every model so drift is visible.
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "model_dirs.h"
#include "support/cli_util.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

std::vector<fs::path> modelDirs() {
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "models"))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

} // namespace

TEST_CASE("models: interpreter matches PyTorch references") {
  std::vector<fs::path> dirs = modelDirs();
  REQUIRE(dirs.size() >= 8);
  for (const fs::path &dir : dirs) {
    CAPTURE(dir.filename().string());
    std::unique_ptr<Graph> g =
        importOnnx((dir / "model.onnx").string(), testing::modelImportOptions(dir));
    std::vector<Tensor> inputs;
    for (Value *in : g->inputs())
      inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
    std::vector<Tensor> outputs = interpret(*g, inputs);
    REQUIRE(outputs.size() == g->outputs().size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      Value *out = g->outputs()[k];
      const std::string &name = out->name(); // graph outputs keep their ONNX names
      Tensor want = readNpy((dir / "outputs" / (name + ".npy")).string());
      REQUIRE(outputs[k].shape() == want.shape());
      double maxAbs = 0, maxRel = 0;
      int64_t bad = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        double a = outputs[k].getDouble(i), b = want.getDouble(i);
        double err = std::fabs(a - b);
        maxAbs = std::max(maxAbs, err);
        maxRel = std::max(maxRel, err / std::max(std::fabs(b), 1e-3));
        if (!(err <= 1e-5 + 1e-4 * std::fabs(b)))
          ++bad;
      }
      MESSAGE(dir.filename().string(), " output ", name, ": max abs err ", maxAbs, ", max rel err ",
              maxRel);
      CHECK_MESSAGE(bad == 0, bad, " elements of ", name, " outside tolerance");
    }
  }
}
