// online_norm's host lane chains (lower/recipe_online_norm.cpp, knob lanes): each norm kernel,
// forced onto lane chains of several widths, matches the interpreter (kernel_checks.h).
#include "ir/parser.h"
#include "kernel_checks.h"
#include "lower/fusion.h"

#include <doctest/doctest.h>

using namespace aicf;
using namespace aicf::kernel_checks;

// Host lane chains (online_norm's knob lanes): a row's running states one per vector lane, merged
// by halves. Rows longer and shorter than the lanes, with a tail past the last full vector, a
// softmax whose rows hold -inf (log of a relu's zeros: lanes whose every element is -inf merge
// without NaN), log_softmax over 7 (fewer elements than lanes), a layer norm and an rms_norm,
// each with the finalize a vector at a time (guarded last step) and one element at a time.
TEST_CASE("kernels: host norm lane chains match the interpreter") {
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(
      R"(graph @lanes(%x: f32[3,49], %m: f32[3,49], %y: f32[10,7], %z: f32[4,64], %w: f32[5,40], %gz: f32[64], %bz: f32[64], %gw: f32[40]) -> (%s: f32[3,49], %ls: f32[10,7], %n: f32[4,64], %r: f32[5,40]) {
  %rm = relu(%m) : f32[3,49]
  %lm = log(%rm) : f32[3,49]
  %xm = add(%x, %lm) : f32[3,49]
  %s = softmax(%xm) {axis = -1} : f32[3,49]
  %ls = log_softmax(%y) {axis = -1} : f32[10,7]
  %n = layer_norm(%z, %gz, %bz) {axis = -1, epsilon = 1e-05} : f32[4,64]
  %r = rms_norm(%w, %gw) {axis = -1, epsilon = 1e-06} : f32[5,40]
  return %s, %ls, %n, %r
}
)",
      "lanes.mcir");
  Partition part = partitionGraph(*g);
  std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 77));
  for (auto [lanes, vec] : {std::pair<int64_t, int64_t>{16, 16}, {16, 1}, {8, 8}, {4, 1}}) {
    CAPTURE(lanes);
    CAPTURE(vec);
    Lowered low = checkHostKnobs(part, vals, {{"lanes", lanes}, {"vec", vec}, {"threads", 1}},
                                 scratch.path, cat("lanes", lanes, "_", vec));
    int chained = 0;
    for (const kir::Kernel &k : low.kernels)
      chained +=
          k.recipe == "online_norm" && k.knobs.count("lanes") && k.knobs.at("lanes") == lanes;
    CHECK(chained == 4);
  }
}
