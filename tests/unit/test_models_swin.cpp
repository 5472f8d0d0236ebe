// The shifted-window transformer (testdata/models/swin_tiny_op17, exported by
// scripts/gen_models.py: torchvision's SwinTransformer, the swin_t architecture scaled down to two
// stages of two blocks, embed dim 24, 7 x 7 windows, on a 1 x 3 x 56 x 56 image). The shifted
// block's attention mask is built by slice assignment, which the exporter writes as ScatterND
// nodes on constant inputs: they fold at import, so the imported graph holds no scatter.
// Compiled with aicfc for the host and run with aicf-run on the stored image, its logits (of
// magnitude ~0.5) match PyTorch's within 1e-5 + 1e-4 |want| per element (measured: 4e-7; without
// the mask, the ScatterND results replaced by their zero data, they are off by 0.06). The
// interpreter's match and every kernel group's are checked by test_models.cpp and
// test_kernels.cpp, which glob every testdata model.
#include "model_dirs.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using namespace aicf;
using aicf::test_files::readAll;
using aicf::test_files::sh;

namespace {

const fs::path kSwin = fs::path(AICF_TESTDATA) / "models" / "swin_tiny_op17";

} // namespace

TEST_CASE("models: the Swin model's ScatterND attention masks fold at import") {
  CHECK(readAll(kSwin / "model.onnx").find("ScatterND") != std::string::npos);
  std::unique_ptr<Graph> g =
      importOnnx((kSwin / "model.onnx").string(), testing::modelImportOptions(kSwin));
  for (const Node *n : g->nodes()) {
    CAPTURE(n->name());
    CHECK(n->op() != Op::ScatterND);
    CHECK(n->op() != Op::ScatterElements);
  }
}

TEST_CASE("models: the Swin model compiled with aicfc for the host matches PyTorch") {
  aicf::test_files::Tools tools = aicf::test_files::builtTools();
  if (!tools)
    return;
  fs::path scratch = aicf::test_files::scratchDir("aicf_swin_");
  fs::path out = scratch / "swin";
  fs::remove_all(out);
  std::string log;
  REQUIRE_MESSAGE(
      sh(cat(tools.aicfc, " '", (kSwin / "model.onnx").string(), "' -o '", out.string(), "'"),
         &log) == 0,
      log);
  int rc = sh(cat(tools.run, " '", out.string(), "' --input image='",
                  (kSwin / "inputs" / "image.npy").string(), "' --reference '",
                  (kSwin / "outputs").string(), "' --atol 1e-5 --rtol 1e-4"),
              &log);
  MESSAGE(log);
  CHECK_MESSAGE(rc == 0, log);
  fs::remove_all(scratch);
}
