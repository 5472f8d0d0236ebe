// Importer tests of how ops that only move values import: a Gather at evenly stepping
// constant indices as a slice (a layout op fusion folds into its readers).
#include "interp/interpreter.h"
#include "onnx_model_builder.h"

#include <doctest/doctest.h>

using namespace aicf;
using namespace aicf::onnx_model_builder;

TEST_CASE("importer: a Gather at evenly stepping constant indices is a slice, not a kernel") {
  // torch's x[:, 0] (a class token), every other channel, and indices that do not step evenly.
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {2, 5, 6});
  b.output("cls", TensorProto::FLOAT, {2, 6}).output("odd", TensorProto::FLOAT, {2, 5, 3});
  b.output("neg", TensorProto::FLOAT, {2, 1, 6}).output("mixed", TensorProto::FLOAT, {2, 5, 2});
  b.initI64("zero", {0}, {}).initI64("odds", {1, 3, 5}).initI64("last", {-1}, {1});
  b.initI64("swap", {4, 0});
  attr(b.node("Gather", {"x", "zero"}, {"cls"}), "axis", int64_t(1));
  attr(b.node("Gather", {"x", "odds"}, {"odd"}), "axis", int64_t(2));
  attr(b.node("Gather", {"x", "last"}, {"neg"}), "axis", int64_t(1));
  attr(b.node("Gather", {"x", "swap"}, {"mixed"}), "axis", int64_t(2));
  auto g = b.import("gather_slice.onnx");
  int slices = 0, gathers = 0;
  for (const Node *n : g->nodes()) {
    slices += n->op() == Op::Slice;
    gathers += n->op() == Op::Gather;
  }
  CHECK(slices == 3);
  CHECK(gathers == 1); // [4, 0] steps backwards: a gather
  std::vector<double> x(60);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = double(i);
  std::vector<Tensor> out =
      interpret(*g, {f32Tensor(std::vector<float>(x.begin(), x.end()), {2, 5, 6})});
  CHECK(out[0].toDoubles() ==
        std::vector<double>{0, 1, 2, 3, 4, 5, 30, 31, 32, 33, 34, 35}); // x[:, 0]
  CHECK(out[1].type().str() == "f32[2,5,3]");
  CHECK(out[1].getDouble(0) == 1);
  CHECK(out[1].getDouble(2) == 5);
  CHECK(out[1].getDouble(3) == 7);
  CHECK(out[2].type().str() == "f32[2,1,6]");
  CHECK(out[2].getDouble(0) == 24); // x[:, -1:]
  CHECK(out[3].getDouble(0) == 4);
  CHECK(out[3].getDouble(1) == 0);
}
