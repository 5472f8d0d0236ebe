// Kernel-level differential tests: graphs are partitioned into groups (lower/fusion.h), every
// group is lowered by its recipe (lower/lower.h), verified (kir::verifyKernel must be empty),
// printed with the host printer, compiled, loaded and run on the interpreter's values for the
// group's inputs; each group output must match the interpreter's value for it.
//   * Models: every testdata model after the default pipeline, each group checked alone, then
//     all kernels run in group order on buffers (views alias their source) and the graph
//     outputs compared with the stored PyTorch outputs.
//   * Per-op cases: small graphs exercising the pointwise, reduction, pooling and data-movement
//     recipes (broadcasting, every elementwise op, integer semantics, f16/bf16, NaN handling,
//     negative steps and indices, reflect pads, ceil_mode pools, resize modes, arg ties).
// Both with the host plan ("cpu") and the GPU plan emulated on the host ("cuda:sm_90": the
// same Kernel IR with GPU knobs, run by the host printer).
//
// Tolerances (per element, |got - want| <= abs + rel * |want|): against the interpreter f32
// 1e-5 + 1e-4 rel (f16 1e-3 + 1e-2, bf16 1e-2 + 2e-2), integers and bools exact, NaN must match
// NaN; end to end against PyTorch f32 1e-4 + 1e-3 rel (kernels accumulate in f32, the
// interpreter in double).
//
// A group whose recipe is listed in kPendingRecipes (a recipe another engineer has not landed)
// is reported as skipped with a MESSAGE naming it; every other group must be checked, and the
// test asserts that checked + skipped covers every group.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "group_buffers.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "kernel_checks.h"
#include "kir/fuse_mma_tile_epilogue.h"
#include "kir/fuse_reduction_epilogue.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipes.h"
#include "model_dirs.h"
#include "passes/pass.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::kernel_checks;

namespace {

// A hand-written graph with seeded weights, its constant GEMM weights packed (pack-weights) and
// partitioned, and every value interpreted on seeded inputs: the set-up of the packed-weight
// kernel tests. The graph owns what the partition and the values point into.
struct PackedCase {
  std::unique_ptr<Graph> g;
  Partition part;
  std::map<const Value *, Tensor> vals;
};
PackedCase packedCase(const char *text, const char *file, unsigned weightSeed, unsigned inputSeed) {
  PackedCase c;
  c.g = parseGraph(text, file);
  randomWeights(*c.g, weightSeed);
  std::vector<Tensor> in = randomInputs(*c.g, inputSeed);
  PassManager pm;
  pm.add(createPass("pack-weights"));
  PassContext ctx;
  REQUIRE(pm.run(*c.g, ctx));
  c.part = partitionGraph(*c.g);
  c.vals = interpretAll(*c.g, in);
  return c;
}

// ---- models
// --------------------------------------------------------------------------------------

std::vector<fs::path> modelDirs() {
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / "models"))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

struct Model {
  std::string name;
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> inputs;
  std::map<const Value *, Tensor> vals;
  Partition part;
};

Model loadModel(const fs::path &dir, const std::string &target) {
  Model m;
  m.name = dir.filename().string();
  m.graph = importOnnx((dir / "model.onnx").string(), testing::modelImportOptions(dir));
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.target = Target::parseSpec(target);
  pm.run(*m.graph, ctx);
  for (Value *in : m.graph->inputs())
    m.inputs.push_back(readNpy((dir / "inputs" / (in->name() + ".npy")).string()));
  m.vals = interpretAll(*m.graph, m.inputs);
  m.part = partitionGraph(*m.graph);
  return m;
}

// Runs the whole model on buffers, kernels in group order; returns the graph outputs.
std::vector<Tensor> runModel(const Model &m, const Lowered &low, const LoadedLibrary &lib) {
  std::map<const Value *, Tensor> buf; // storage values only
  for (size_t i = 0; i < m.graph->inputs().size(); ++i)
    buf[m.graph->inputs()[i]] = m.inputs[i];
  for (const Value *w : m.graph->weights())
    buf[w] = *w->data();
  for (const KernelGroup &g : m.part.groups) {
    const kir::Kernel &k = low.kernels.at(static_cast<size_t>(low.kernelOf[g.id]));
    std::vector<const Tensor *> ins;
    for (const Value *v : g.inputs)
      ins.push_back(&buf.at(storageOf(v)));
    std::vector<TensorType> outTypes;
    for (const Value *v : g.outputs)
      outTypes.push_back(testing::outputBufferType(g, v));
    std::vector<Tensor> outs = runKernel(lib.kernel(k.name), ins, outTypes);
    for (size_t o = 0; o < g.outputs.size(); ++o)
      testing::keepOutput(g, g.outputs[o], std::move(outs[o]), buf);
  }
  std::vector<Tensor> result;
  for (const Value *o : m.graph->outputs()) {
    const Tensor &t = buf.at(storageOf(o));
    result.push_back(Tensor(o->type(), t.bytes()));
  }
  return result;
}

} // namespace

TEST_CASE("kernels: every group of every model matches the interpreter and PyTorch") {
  std::vector<fs::path> dirs = modelDirs();
  REQUIRE(dirs.size() >= 8);
  ScratchDir scratch;
  for (const std::string plan : kPlans) {
    int total = 0, checked = 0, skipped = 0;
    for (const fs::path &dir : dirs) {
      Model m = loadModel(dir, plan);
      CAPTURE(m.name);
      CAPTURE(plan);
      Knobs knobs;
      knobs.planFor = Target::parseSpec(plan);
      Lowered low = lowerAll(m.part, knobs, "m_");
      std::unique_ptr<LoadedLibrary> lib =
          buildLibrary(low.kernels, scratch.path, cat(m.name, "_", planTag(plan)));
      int ok = checkGroups(m.part, low, *lib, m.vals);
      total += static_cast<int>(m.part.groups.size());
      checked += ok;
      skipped += low.skipped;
      std::string recipes;
      for (const kir::Kernel &k : low.kernels)
        recipes += " " + k.recipe;
      MESSAGE(plan, " ", m.name, ": ", ok, "/", m.part.groups.size(),
              " groups match the interpreter, ", low.skipped, " skipped; recipes:", recipes);
      if (low.skipped)
        continue; // end to end needs every kernel
      std::vector<Tensor> outs = runModel(m, low, *lib);
      for (size_t o = 0; o < outs.size(); ++o) {
        const Value *out = m.graph->outputs()[o];
        Tensor want = readNpy((dir / "outputs" / (out->name() + ".npy")).string());
        Diff d = compareTensors(outs[o], want, {1e-4, 1e-3});
        MESSAGE(plan, " ", m.name, " output ", out->name(), " vs PyTorch: max abs err ", d.maxAbs);
        CHECK_MESSAGE(d.bad == 0, plan, " ", m.name, " output ", out->name(), ": ", d.bad,
                      " elements off PyTorch; ", d.first);
      }
    }
    MESSAGE(plan, ": ", checked, " groups checked, ", skipped, " skipped, of ", total);
    CHECK(checked + skipped == total);
    CHECK(checked > 0);
  }
}

// ---- per-op cases
// ---------------------------------------------------------------------------------

namespace {

struct OpCase {
  const char *name;
  const char *text;
  std::vector<std::string> recipes; // recipes the case must exercise
};

const OpCase kOpCases[] = {
    {"ew_float_broadcast",
     R"(graph @ew(%x: f32[2,3,8], %y: f32[3,1], %z: f32[8], %p: f32[2,3,8]) -> (%o1: f32[2,3,8], %o2: f32[2,3,8], %o3: f32[2,3,8], %o4: f32[2,3,8], %o5: f32[2,3,8], %o6: f32[2,3,8], %o7: f32[2,3,8], %o8: f32[2,3,8], %o9: f32[2,3,8], %o10: f32[2,3,8], %o11: f32[2,3,8], %o12: f32[2,3,8], %o13: f32[2,3,8], %o14: f32[2,3,8], %o15: f32[2,3,8], %o16: f32[2,3,8], %o17: f32[2,3,8], %o18: f32[2,3,8], %o19: f32[2,3,8], %o20: f32[2,3,8], %o21: f32[2,3,8], %o22: f32[2,3,8], %o23: f32[2,3,8], %o24: f32[2,3,8], %o25: f32[2,3,8], %o26: f32[2,3,8], %o27: f32[2,3,8], %o28: f32[2,3,8], %o29: f32[2,3,8], %o30: f32[2,3,8], %o31: f32[2,3,8], %o32: f32[2,3,8], %o33: f32[2,3,8], %o34: f32[2,3,8]) {
  %three = weight f32[] = [3.0]
  %two = weight f32[] = [2.0]
  %cube = weight f32[] = [3.0]
  %a = mul(%x, %three) : f32[2,3,8]
  %b = add(%a, %y) : f32[2,3,8]
  %c = mul(%b, %z) : f32[2,3,8]
  %o1 = neg(%c) : f32[2,3,8]
  %o2 = abs(%c) : f32[2,3,8]
  %o3 = sqrt(%o2) : f32[2,3,8]
  %o4 = reciprocal(%c) : f32[2,3,8]
  %o5 = exp(%c) : f32[2,3,8]
  %o6 = log(%o2) : f32[2,3,8]
  %o7 = erf(%c) : f32[2,3,8]
  %o8 = tanh(%c) : f32[2,3,8]
  %o9 = sigmoid(%c) : f32[2,3,8]
  %o10 = relu(%c) : f32[2,3,8]
  %o11 = softplus(%c) : f32[2,3,8]
  %o12 = floor(%c) : f32[2,3,8]
  %o13 = ceil(%c) : f32[2,3,8]
  %o14 = sign(%c) : f32[2,3,8]
  %o15 = sin(%c) : f32[2,3,8]
  %o16 = cos(%c) : f32[2,3,8]
  %o17 = leaky_relu(%c) {alpha = 0.2} : f32[2,3,8]
  %o18 = elu(%c) {alpha = 1.5} : f32[2,3,8]
  %o19 = hard_sigmoid(%c) {alpha = 0.3, beta = 0.4} : f32[2,3,8]
  %o20 = hard_swish(%c) : f32[2,3,8]
  %o21 = clip(%c) {max = 0.7, min = -0.5} : f32[2,3,8]
  %o22 = clip(%c) {max = 1.0} : f32[2,3,8]
  %o23 = gelu(%c) : f32[2,3,8]
  %o24 = gelu(%c) {approximate = "tanh"} : f32[2,3,8]
  %o25 = silu(%c) : f32[2,3,8]
  %o26 = pow(%c, %two) : f32[2,3,8]
  %o27 = pow(%c, %cube) : f32[2,3,8]
  %o28 = pow(%o2, %p) : f32[2,3,8]
  %o29 = min(%c, %b, %a) : f32[2,3,8]
  %o30 = max(%c, %z) : f32[2,3,8]
  %o31 = div(%c, %b) : f32[2,3,8]
  %o32 = sub(%z, %c) : f32[2,3,8]
  %o33 = identity(%c) : f32[2,3,8]
  %o34 = round(%c) : f32[2,3,8]
  return %o1, %o2, %o3, %o4, %o5, %o6, %o7, %o8, %o9, %o10, %o11, %o12, %o13, %o14, %o15, %o16, %o17, %o18, %o19, %o20, %o21, %o22, %o23, %o24, %o25, %o26, %o27, %o28, %o29, %o30, %o31, %o32, %o33, %o34
}
)",
     {"pointwise"}},
    {"ew_special_values",
     R"(graph @sv(%x: f32[12]) -> (%r: f32[12], %s: f32[12], %mx: f32[12], %mn: f32[12], %cl: f32[12], %sp: f32[12], %el: f32[12]) {
  %v = weight f32[12] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, nan, inf, -inf, -0.0]
  %r = round(%v) : f32[12]
  %s = sign(%v) : f32[12]
  %mx = max(%v, %x) : f32[12]
  %mn = min(%x, %v) : f32[12]
  %cl = clip(%v) {max = 2.0, min = -1.0} : f32[12]
  %w = mul(%v, %x) : f32[12]
  %sp = softplus(%w) : f32[12]
  %el = elu(%w) : f32[12]
  return %r, %s, %mx, %mn, %cl, %sp, %el
}
)",
     {"pointwise"}},
    {"ew_compare_logic",
     R"(graph @cl(%x: f32[4,6], %y: f32[6]) -> (%lt: bool[4,6], %le: bool[4,6], %gt: bool[4,6], %ge: bool[4,6], %eq: bool[4,6], %n: bool[4,6], %an: bool[4,6], %or: bool[4,6], %xo: bool[4,6], %w: f32[4,6]) {
  %lt = less(%x, %y) : bool[4,6]
  %le = less_equal(%x, %y) : bool[4,6]
  %gt = greater(%x, %y) : bool[4,6]
  %ge = greater_equal(%x, %y) : bool[4,6]
  %eq = equal(%x, %x) : bool[4,6]
  %n = not(%lt) : bool[4,6]
  %an = and(%lt, %ge) : bool[4,6]
  %or = or(%lt, %gt) : bool[4,6]
  %xo = xor(%lt, %le) : bool[4,6]
  %w = where(%or, %x, %y) : f32[4,6]
  return %lt, %le, %gt, %ge, %eq, %n, %an, %or, %xo, %w
}
)",
     {"pointwise"}},
    {"ew_integer",
     R"(graph @int(%x: f32[8]) -> (%q: i64[8], %s: i64[8], %m: i64[8], %mn: i64[8], %mx: i64[8], %ab: i64[8], %ng: i64[8], %sg: i64[8], %rl: i64[8], %cl: i64[8], %pw: i64[8], %c32: i32[8], %c8: i8[8], %cf: f32[8], %xi: i32[8], %xb: bool[8], %bi: i64[8], %lt: bool[8], %a32: i32[8], %d32: i32[8]) {
  %bb = weight i32[8] = [2, 2, -2, -2, 3, -1, 4, 7]
  %a = weight i64[8] = [7, -7, 7, -7, 0, 5, -9, 300]
  %b = weight i64[8] = [2, 2, -2, -2, 3, -1, 4, 7]
  %two = weight i64[] = [2]
  %five = weight f32[] = [5.0]
  %q = div(%a, %b) : i64[8]
  %s = sub(%a, %b) : i64[8]
  %m = mul(%a, %b) : i64[8]
  %mn = min(%a, %b) : i64[8]
  %mx = max(%a, %b, %q) : i64[8]
  %ab = abs(%a) : i64[8]
  %ng = neg(%a) : i64[8]
  %sg = sign(%a) : i64[8]
  %rl = relu(%a) : i64[8]
  %cl = clip(%a) {max = 4.5, min = -3.5} : i64[8]
  %pw = pow(%a, %two) : i64[8]
  %c32 = cast(%a) {to = "i32"} : i32[8]
  %c8 = cast(%a) {to = "i8"} : i8[8]
  %cf = cast(%a) {to = "f32"} : f32[8]
  %x5 = mul(%x, %five) : f32[8]
  %xi = cast(%x5) {to = "i32"} : i32[8]
  %xb = cast(%x5) {to = "bool"} : bool[8]
  %bi = cast(%xb) {to = "i64"} : i64[8]
  %lt = less(%a, %b) : bool[8]
  %a32 = add(%c32, %xi) : i32[8]
  %d32 = div(%c32, %bb) : i32[8]
  return %q, %s, %m, %mn, %mx, %ab, %ng, %sg, %rl, %cl, %pw, %c32, %c8, %cf, %xi, %xb, %bi, %lt, %a32, %d32
}
)",
     {"pointwise"}},
    {"ew_half",
     R"(graph @half(%x: f32[40], %y: f32[40]) -> (%h3: f16[40], %back: f32[40], %b3: bf16[40]) {
  %h = cast(%x) {to = "f16"} : f16[40]
  %hy = cast(%y) {to = "f16"} : f16[40]
  %h2 = mul(%h, %hy) : f16[40]
  %h3 = add(%h2, %h) : f16[40]
  %back = cast(%h3) {to = "f32"} : f32[40]
  %b = cast(%x) {to = "bf16"} : bf16[40]
  %b2 = exp(%b) : bf16[40]
  %b3 = mul(%b2, %b) : bf16[40]
  return %h3, %back, %b3
}
)",
     {"pointwise"}},
    {"reductions_float",
     R"(graph @red(%x: f32[3,4,5], %bias: f32[5]) -> (%o: f32[3,5], %o2: f32[3,5], %mean: f32[1,4,1], %mx: f32[], %mn: f32[3,4], %pr: f32[3,4,1], %l1: f32[3,5], %l2: f32[4,5], %ss: f32[3,4], %lse: f32[3], %am: i64[3,1,5], %an: i64[3,4]) {
  %e = exp(%x) : f32[3,4,5]
  %s = reduce_sum(%e) {axes = [1], keepdims = 0} : f32[3,5]
  %o = sqrt(%s) : f32[3,5]
  %o2 = add(%o, %bias) : f32[3,5]
  %mean = reduce_mean(%x) {axes = [0, 2], keepdims = 1} : f32[1,4,1]
  %mx = reduce_max(%x) {axes = [], keepdims = 0} : f32[]
  %mn = reduce_min(%x) {axes = [2], keepdims = 0} : f32[3,4]
  %pr = reduce_prod(%x) {axes = [2], keepdims = 1} : f32[3,4,1]
  %l1 = reduce_l1(%x) {axes = [1], keepdims = 0} : f32[3,5]
  %l2 = reduce_l2(%x) {axes = [0], keepdims = 0} : f32[4,5]
  %ss = reduce_sum_square(%x) {axes = [2], keepdims = 0} : f32[3,4]
  %lse = reduce_log_sum_exp(%x) {axes = [1, 2], keepdims = 0} : f32[3]
  %am = arg_max(%x) {axis = 1, keepdims = 1} : i64[3,1,5]
  %an = arg_min(%x) {axis = -1, keepdims = 0} : i64[3,4]
  return %o, %o2, %mean, %mx, %mn, %pr, %l1, %l2, %ss, %lse, %am, %an
}
)",
     {"reduction"}},
    {"reductions_special",
     R"(graph @rs(%x: f32[2,4]) -> (%xs: f32[4], %aml: i64[2], %amf: i64[2], %anl: i64[2], %anf: i64[2], %mx: f32[2], %lse: f32[3], %si: i64[2], %mi: i64[2], %xi: i64[2], %li: i64[3]) {
  %t = weight f32[2,4] = [1.0, 3.0, 3.0, 0.0, nan, 2.0, nan, 1.0]
  %u = weight f32[3,2] = [-inf, -inf, inf, 1.0, 0.5, -inf]
  %n = weight i64[2,3] = [-7, 4, 2, 9, -1, -5]
  %xs = reduce_sum(%x) {axes = [0], keepdims = 0} : f32[4]
  %aml = arg_max(%t) {axis = 1, keepdims = 0, select_last_index = 1} : i64[2]
  %amf = arg_max(%t) {axis = 1, keepdims = 0} : i64[2]
  %anl = arg_min(%t) {axis = 1, keepdims = 0, select_last_index = 1} : i64[2]
  %anf = arg_min(%t) {axis = 1, keepdims = 0} : i64[2]
  %mx = reduce_max(%t) {axes = [1], keepdims = 0} : f32[2]
  %lse = reduce_log_sum_exp(%u) {axes = [1], keepdims = 0} : f32[3]
  %si = reduce_sum(%n) {axes = [1], keepdims = 0} : i64[2]
  %mi = reduce_mean(%n) {axes = [1], keepdims = 0} : i64[2]
  %xi = reduce_max(%n) {axes = [1], keepdims = 0} : i64[2]
  %li = arg_max(%n) {axis = 0, keepdims = 0} : i64[3]
  return %xs, %aml, %amf, %anl, %anf, %mx, %lse, %si, %mi, %xi, %li
}
)",
     {"reduction"}},
    {"top_k",
     R"(graph @tk(%x: f32[3,7,5]) -> (%v: f32[3,3,5], %i: i64[3,3,5], %sv: f32[3,7,2], %ri: i64[3,7,1], %tv: f32[2,5], %ti: i64[2,5], %lv: f32[2,6], %li: i64[2,6], %nv: i32[3,2], %ni: i64[3,2]) {
  %t = weight f32[2,6] = [1.0, nan, 3.0, 3.0, -inf, nan, 2.0, 2.0, 2.0, inf, -1.0, 2.0]
  %n = weight i32[3,3] = [5, -2, 5, 7, 7, 7, -9, 0, 4]
  %v, %i = top_k(%x) {k = 3, axis = 1} : f32[3,3,5], i64[3,3,5]
  %sv, %si = top_k(%x) {k = 2, axis = -1, largest = 0} : f32[3,7,2], i64[3,7,2]
  %r = relu(%x) : f32[3,7,5]
  %rv, %ri = top_k(%r) {k = 1, axis = 2} : f32[3,7,1], i64[3,7,1]
  %tv, %ti = top_k(%t) {k = 5, axis = 1} : f32[2,5], i64[2,5]
  %lv, %li = top_k(%t) {k = 6, axis = 1, largest = 0} : f32[2,6], i64[2,6]
  %nv, %ni = top_k(%n) {k = 2, axis = 1} : i32[3,2], i64[3,2]
  return %v, %i, %sv, %ri, %tv, %ti, %lv, %li, %nv, %ni
}
)",
     {"top_k"}},
    {"global_pools_instance_norm",
     R"(graph @gp(%x: f32[2,3,4,5], %s: f32[3], %b: f32[3]) -> (%ga: f32[2,3,1,1], %gm: f32[2,3,1,1], %inr: f32[2,3,4,5]) {
  %ga = global_avg_pool(%x) : f32[2,3,1,1]
  %gm = global_max_pool(%x) : f32[2,3,1,1]
  %in = instance_norm(%x, %s, %b) {epsilon = 0.001} : f32[2,3,4,5]
  %inr = relu(%in) : f32[2,3,4,5]
  return %ga, %gm, %inr
}
)",
     {"reduction"}},
    {"pools",
     R"(graph @pool(%x: f32[1,2,7,7], %z: f32[2,3,9]) -> (%mp: f32[1,2,4,4], %ap: f32[1,2,4,4], %ad: f32[1,2,3,3], %m1: f32[2,3,3], %mr: f32[1,2,4,4]) {
  %mp = max_pool(%x) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,2,4,4]
  %ap = avg_pool(%x) {ceil_mode = 1, count_include_pad = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 0, 0], strides = [2, 2]} : f32[1,2,4,4]
  %ad = avg_pool(%x) {ceil_mode = 0, count_include_pad = 0, dilations = [2, 2], kernel_shape = [2, 2], pads = [1, 1, 1, 1], strides = [3, 3]} : f32[1,2,3,3]
  %m1 = max_pool(%z) {ceil_mode = 1, dilations = [1], kernel_shape = [2], pads = [0, 0], strides = [3]} : f32[2,3,3]
  %xe = exp(%x) : f32[1,2,7,7]
  %mx = max_pool(%xe) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,2,4,4]
  %mr = neg(%mx) : f32[1,2,4,4]
  return %mp, %ap, %ad, %m1, %mr
}
)",
     {"pooling"}},
    {"data_movement",
     R"(graph @dm(%x: f32[2,3,4], %a: f32[2,3], %b: f32[2,1], %c: f32[2,4], %s: f32[2,9], %m: f32[5,6], %g: f32[5,3], %p: f32[3,4], %e: f32[3,1]) -> (%tr: f32[4,2,3], %cc: f32[2,8], %c0: f32[4,3], %s1: f32[2,2], %s2: f32[2,3], %s3: f32[2,4], %sl: f32[3,2], %ga: f32[2,2,3], %g1: f32[5,2], %pr: f32[6,8], %pe: f32[6,8], %pc: f32[4,5], %ex: f32[2,3,4], %ti: f32[4,9]) {
  %idx = weight i64[2,2] = [-1, 0, 2, -5]
  %idx1 = weight i32[2] = [-1, 1]
  %t = transpose(%x) {perm = [2, 0, 1]} : f32[4,2,3]
  %tr = relu(%t) : f32[4,2,3]
  %cc = concat(%a, %b, %c) {axis = 1} : f32[2,8]
  %c0 = concat(%a, %a) {axis = -2} : f32[4,3]
  %se = exp(%s) : f32[2,9]
  %s1, %s2, %s3 = split(%se) {axis = 1, sizes = [2, 3, 4]} : f32[2,2], f32[2,3], f32[2,4]
  %sl = slice(%m) {axes = [0, 1], ends = [-1, 5], starts = [4, 1], steps = [-2, 2]} : f32[3,2]
  %ga = gather(%g, %idx) {axis = 0} : f32[2,2,3]
  %g1 = gather(%g, %idx1) {axis = 1} : f32[5,2]
  %pr = pad(%p) {mode = "reflect", pads = [2, 1, 1, 3]} : f32[6,8]
  %pe = pad(%p) {mode = "edge", pads = [2, 1, 1, 3]} : f32[6,8]
  %pc = pad(%p) {mode = "constant", pads = [1, -1, 0, 2], value = 1.5} : f32[4,5]
  %ex = expand(%e) {shape = [2, 3, 4]} : f32[2,3,4]
  %ti = tile(%a) {repeats = [2, 3]} : f32[4,9]
  return %tr, %cc, %c0, %s1, %s2, %s3, %sl, %ga, %g1, %pr, %pe, %pc, %ex, %ti
}
)",
     {"data_movement"}},
    // Indices from graph inputs (0 or 1: duplicates everywhere, so the order of the updates
    // shows) and from weights (negative ones), gather_elements / gather_nd (batch_dims 1) as
    // index maps, scatter_elements / scatter_nd with every reduction, a fused prologue on the
    // data, a consumer of the scatter as its own kernel, i64 data, updates inside a smaller
    // extent of the indices (the lines outside get none).
    {"gather_scatter",
     R"(graph @gs(%x: f32[4,5], %j: i32[2,3], %y: f32[2,3,4], %w: f32[4,5], %i: i64[3,5], %u: f32[3,5], %i2: i64[2,3], %u2: f32[2,3], %t: i64[2,2], %v: f32[2,4], %v3: f32[3], %v1: f32[2,3,4], %yi: i64[2,3], %ii: i64[2,2], %ui: i64[2,2]) -> (%ge: f32[2,3], %g1: f32[2,3], %gn: f32[2,4], %gb: f32[2,4], %sa: f32[4,5], %sn: f32[4,5], %sm: f32[4,5], %nd: f32[2,3,4], %n3: f32[2,3,4], %n1: f32[2,3,4], %si: i64[2,3], %r: f32[4,5]) {
  %ie = weight i64[2,3] = [-1, 0, 3, 2, -4, 1]
  %in = weight i64[2,2] = [1, -1, 0, 2]
  %ib = weight i64[2,1] = [-1, 2]
  %t3 = weight i64[3,3] = [1, -1, 3, 0, 0, 0, 1, 2, -4]
  %t1 = weight i64[2,1] = [-1, -1]
  %ge = gather_elements(%x, %ie) {axis = 0} : f32[2,3]
  %g1 = gather_elements(%x, %j) {axis = -1} : f32[2,3]
  %gn = gather_nd(%y, %in) : f32[2,4]
  %gb = gather_nd(%y, %ib) {batch_dims = 1} : f32[2,4]
  %we = exp(%w) : f32[4,5]
  %sa = scatter_elements(%we, %i, %u) {reduction = "add"} : f32[4,5]
  %sn = scatter_elements(%w, %i, %u) : f32[4,5]
  %sm = scatter_elements(%w, %i2, %u2) {axis = 1, reduction = "max"} : f32[4,5]
  %nd = scatter_nd(%y, %t, %v) {reduction = "mul"} : f32[2,3,4]
  %n3 = scatter_nd(%y, %t3, %v3) {reduction = "min"} : f32[2,3,4]
  %n1 = scatter_nd(%y, %t1, %v1) : f32[2,3,4]
  %si = scatter_elements(%yi, %ii, %ui) {axis = 1, reduction = "add"} : i64[2,3]
  %r = relu(%sn) : f32[4,5]
  return %ge, %g1, %gn, %gb, %sa, %sn, %sm, %nd, %n3, %n1, %si, %r
}
)",
     {"data_movement", "scatter"}},
    {"resize",
     R"(graph @rs(%x: f32[1,1,4,6]) -> (%n1: f32[1,1,8,9], %n2: f32[1,1,8,9], %n3: f32[1,1,3,4], %n4: f32[1,1,7,5], %l1: f32[1,1,8,9], %l2: f32[1,1,8,9], %l3: f32[1,1,3,4], %l4: f32[1,1,7,5]) {
  %n1 = resize(%x) {coordinate_transformation_mode = "half_pixel", mode = "nearest", nearest_mode = "round_prefer_floor", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 1, 8, 9]} : f32[1,1,8,9]
  %n2 = resize(%x) {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 1, 8, 9]} : f32[1,1,8,9]
  %n3 = resize(%x) {coordinate_transformation_mode = "align_corners", mode = "nearest", nearest_mode = "round_prefer_ceil", scales = [1.0, 1.0, 0.75, 0.6667], sizes = [1, 1, 3, 4]} : f32[1,1,3,4]
  %n4 = resize(%x) {coordinate_transformation_mode = "pytorch_half_pixel", mode = "nearest", nearest_mode = "ceil", scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 1, 7, 5]} : f32[1,1,7,5]
  %l1 = resize(%x) {coordinate_transformation_mode = "half_pixel", mode = "linear", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 1, 8, 9]} : f32[1,1,8,9]
  %l2 = resize(%x) {coordinate_transformation_mode = "align_corners", mode = "linear", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 1, 8, 9]} : f32[1,1,8,9]
  %l3 = resize(%x) {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear", scales = [1.0, 1.0, 0.75, 0.6667], sizes = [1, 1, 3, 4]} : f32[1,1,3,4]
  %l4 = resize(%x) {coordinate_transformation_mode = "asymmetric", mode = "linear", scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 1, 7, 5]} : f32[1,1,7,5]
  return %n1, %n2, %n3, %n4, %l1, %l2, %l3, %l4
}
)",
     {"data_movement"}},
    // Cubic resize: up and down, A = -0.75 and -0.5, exclude_outside, both half-pixel forms and
    // align_corners; one axis and two (16 taps); u8 data rounded like the interpreter.
    {"resize_cubic",
     R"(graph @rc(%x: f32[1,1,4,6], %u: u8[1,1,4,4]) -> (%c1: f32[1,1,8,9], %c2: f32[1,1,3,4], %c3: f32[1,1,7,5], %c4: f32[1,1,4,10], %c5: u8[1,1,8,8]) {
  %c1 = resize(%x) {coordinate_transformation_mode = "half_pixel", mode = "cubic", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 1, 8, 9]} : f32[1,1,8,9]
  %c2 = resize(%x) {coordinate_transformation_mode = "align_corners", cubic_coeff_a = -0.5, mode = "cubic", scales = [1.0, 1.0, 0.75, 0.6667], sizes = [1, 1, 3, 4]} : f32[1,1,3,4]
  %c3 = resize(%x) {coordinate_transformation_mode = "pytorch_half_pixel", exclude_outside = 1, mode = "cubic", scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 1, 7, 5]} : f32[1,1,7,5]
  %c4 = resize(%x) {coordinate_transformation_mode = "asymmetric", exclude_outside = 1, mode = "cubic", scales = [1.0, 1.0, 1.0, 1.6667], sizes = [1, 1, 4, 10]} : f32[1,1,4,10]
  %c5 = resize(%u) {coordinate_transformation_mode = "half_pixel", mode = "cubic", scales = [1.0, 1.0, 2.0, 2.0], sizes = [1, 1, 8, 8]} : u8[1,1,8,8]
  return %c1, %c2, %c3, %c4, %c5
}
)",
     {"data_movement"}},
    // max_pool_indices (the flat form on both plans): row and column major, padding, dilation,
    // ceil_mode windows that reach past the input, 1-D; a fused cast of the indices; u8 data
    // with ties (the first maximum wins).
    {"max_pool_indices",
     R"(graph @mpi(%x: f32[2,3,7,6], %z: f32[2,3,9], %u: u8[1,2,5,5]) -> (%i1: i64[2,3,4,4], %i2: i64[2,3,4,4], %i3: i64[2,3,3,3], %i4: i64[2,3,3], %i5: f32[2,3,4,4], %i6: i64[1,2,2,2]) {
  %i1 = max_pool_indices(%x) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : i64[2,3,4,4]
  %i2 = max_pool_indices(%x) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], storage_order = 1, strides = [2, 2]} : i64[2,3,4,4]
  %i3 = max_pool_indices(%x) {dilations = [2, 2], kernel_shape = [2, 2], pads = [0, 1, 1, 0], storage_order = 1, strides = [2, 2]} : i64[2,3,3,3]
  %i4 = max_pool_indices(%z) {ceil_mode = 1, dilations = [1], kernel_shape = [3], pads = [0, 0], strides = [3]} : i64[2,3,3]
  %i5 = cast(%i1) {to = "f32"} : f32[2,3,4,4]
  %i6 = max_pool_indices(%u) {dilations = [1, 1], kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [2, 2]} : i64[1,2,2,2]
  return %i1, %i2, %i3, %i4, %i5, %i6
}
)",
     {"pooling"}},
    // Resize's shifted and cropping coordinate modes: tf_half_pixel_for_nn, half_pixel_symmetric,
    // and tf_crop_and_resize (nearest, linear and cubic; boxes reaching past the input on both
    // sides, extrapolation_value there; one axis cropped at its own length; a u8 crop).
    {"resize_crop",
     R"(graph @rcr(%x: f32[1,2,4,6], %u: u8[1,1,4,4]) -> (%t1: f32[1,2,3,4], %t2: f32[1,2,8,9], %h1: f32[1,2,8,9], %h2: f32[1,2,3,4], %c1: f32[1,2,3,5], %c2: f32[1,2,5,4], %c3: f32[1,2,4,7], %c4: f32[1,2,4,6], %c5: u8[1,1,3,3]) {
  %t1 = resize(%x) {coordinate_transformation_mode = "tf_half_pixel_for_nn", mode = "nearest", scales = [1.0, 1.0, 0.75, 0.6667], sizes = [1, 2, 3, 4]} : f32[1,2,3,4]
  %t2 = resize(%x) {coordinate_transformation_mode = "tf_half_pixel_for_nn", mode = "nearest", nearest_mode = "ceil", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 2, 8, 9]} : f32[1,2,8,9]
  %h1 = resize(%x) {coordinate_transformation_mode = "half_pixel_symmetric", mode = "linear", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 2, 8, 9]} : f32[1,2,8,9]
  %h2 = resize(%x) {coordinate_transformation_mode = "half_pixel_symmetric", mode = "nearest", scales = [1.0, 1.0, 0.8, 0.7], sizes = [1, 2, 3, 4]} : f32[1,2,3,4]
  %c1 = resize(%x) {coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 10.0, mode = "linear", roi = [0.0, 0.0, 0.4, -0.3, 1.0, 1.0, 1.2, 0.9], scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 2, 3, 5]} : f32[1,2,3,5]
  %c2 = resize(%x) {coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = -2.5, mode = "nearest", roi = [0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 1.3, 0.8], scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 2, 5, 4]} : f32[1,2,5,4]
  %c3 = resize(%x) {coordinate_transformation_mode = "tf_crop_and_resize", mode = "cubic", roi = [0.0, 0.0, 0.1, -0.1, 1.0, 1.0, 0.9, 1.1], scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 2, 4, 7]} : f32[1,2,4,7]
  %c4 = resize(%x) {coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 1.0, mode = "linear", roi = [0.0, 0.0, 0.25, 0.0, 1.0, 1.0, 0.75, 1.0], scales = [1.0, 1.0, 1.0, 1.0], sizes = [1, 2, 4, 6]} : f32[1,2,4,6]
  %c5 = resize(%u) {coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 7.0, mode = "linear", roi = [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 1.5, 1.5], scales = [0.0, 0.0, 0.0, 0.0], sizes = [1, 1, 3, 3]} : u8[1,1,3,3]
  return %t1, %t2, %h1, %h2, %c1, %c2, %c3, %c4, %c5
}
)",
     {"data_movement"}},
    // Layout ops folded into their readers (lower/fusion.h, rule 0; issue 17): each reader
    // reads the source through the composed index map, no layout kernel runs.
    {"fold_chain_contraction",
     R"(graph @fc(%x: f32[2,6,12], %w: f32[5,4]) -> (%y: f32[2,3,6,5]) {
  %r = reshape(%x) {shape = [2, 6, 3, 4]} : f32[2,6,3,4]
  %t = transpose(%r) {perm = [0, 2, 1, 3]} : f32[2,3,6,4]
  %wt = transpose(%w) {perm = [1, 0]} : f32[4,5]
  %m = matmul(%t, %wt) : f32[2,3,6,5]
  %y = relu(%m) : f32[2,3,6,5]
  return %y
}
)",
     {"tiled_contraction"}},
    {"fold_split_attention",
     R"(graph @fa(%qkv: f32[16,48], %x: f32[2,8,16]) -> (%y: f32[2,8,16]) {
  %a = reshape(%qkv) {shape = [2, 8, 48]} : f32[2,8,48]
  %q0, %k0, %v0 = split(%a) {axis = 2, sizes = [16, 16, 16]} : f32[2,8,16], f32[2,8,16], f32[2,8,16]
  %q1 = reshape(%q0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %k1 = reshape(%k0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %v1 = reshape(%v0) {shape = [2, 8, 2, 8]} : f32[2,8,2,8]
  %q = transpose(%q1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %k = transpose(%k1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %v = transpose(%v1) {perm = [0, 2, 1, 3]} : f32[2,2,8,8]
  %o = attention(%q, %k, %v) {causal = 1, scale = 0.35} : f32[2,2,8,8]
  %ot = transpose(%o) {perm = [0, 2, 1, 3]} : f32[2,8,2,8]
  %or = reshape(%ot) {shape = [2, 8, 16]} : f32[2,8,16]
  %y = add(%or, %x) : f32[2,8,16]
  return %y
}
)",
     {"streaming_attention", "pointwise"}},
    {"fold_rotary_pointwise",
     R"(graph @fr(%x: f32[2,2,8,8], %c: f32[8,8], %s: f32[8,8]) -> (%y: f32[2,2,8,8]) {
  %a = slice(%x) {axes = [3], ends = [4], starts = [0], steps = [1]} : f32[2,2,8,4]
  %b = slice(%x) {axes = [3], ends = [8], starts = [4], steps = [1]} : f32[2,2,8,4]
  %nb = neg(%b) : f32[2,2,8,4]
  %r = concat(%nb, %a) {axis = -1} : f32[2,2,8,8]
  %xc = mul(%x, %c) : f32[2,2,8,8]
  %rs = mul(%r, %s) : f32[2,2,8,8]
  %y = add(%xc, %rs) : f32[2,2,8,8]
  return %y
}
)",
     {"pointwise"}},
    {"fold_expand_slice_softmax",
     R"(graph @fe(%x: f32[3,1,5]) -> (%y: f32[2,3,4,3]) {
  %e = expand(%x) {shape = [2, 3, 4, 5]} : f32[2,3,4,5]
  %sl = slice(%e) {axes = [3], ends = [-1], starts = [4], steps = [-2]} : f32[2,3,4,3]
  %y = softmax(%sl) {axis = -1} : f32[2,3,4,3]
  return %y
}
)",
     {}},
    {"fold_concat_two_producers_norm",
     R"(graph @fn(%a: f32[4,6], %b: f32[4,8], %w: f32[8,10], %g: f32[16], %be: f32[16]) -> (%y: f32[4,16]) {
  %ea = exp(%a) : f32[4,6]
  %mb = matmul(%b, %w) : f32[4,10]
  %cat = concat(%ea, %mb) {axis = 1} : f32[4,16]
  %y = layer_norm(%cat, %g, %be) {axis = -1, epsilon = 1e-05} : f32[4,16]
  return %y
}
)",
     {"online_norm"}},
    {"fold_transpose_reduction",
     R"(graph @fd(%x: f32[4,6,8]) -> (%y: f32[8,4]) {
  %t = transpose(%x) {perm = [2, 0, 1]} : f32[8,4,6]
  %y = reduce_sum(%t) {axes = [2], keepdims = 0} : f32[8,4]
  return %y
}
)",
     {"reduction"}},
    // A shared [K, N] weight and 2 rows per batch (torch's in-projection reads x as [S, B, E]):
    // the batches are rows of one product (contraction_specs.cpp matmulSpec), read
    // through the folded transpose, with a bias epilogue.
    {"matmul_few_rows_per_batch",
     R"(graph @mf(%x: f32[2,7,8], %w: f32[8,12], %b: f32[12]) -> (%y: f32[7,2,12]) {
  %t = transpose(%x) {perm = [1, 0, 2]} : f32[7,2,8]
  %m = matmul(%t, %w) : f32[7,2,12]
  %y = add(%m, %b) : f32[7,2,12]
  return %y
}
)",
     {"tiled_contraction"}},
    // A weight packed in column panels (passes/pack_weights.cpp makes this form on host plans),
    // read by the host tiles where it lies (mma_tile views, A in place too), with a last row
    // tile, a last K step and a last column tile (N = 520 in 17 panels of 32, tiles of 192)
    // that the views cut to their valid extents.
    {"matmul_packed_panels",
     R"(graph @mp(%x: f32[136,136], %wp: f32[17,136,32]) -> (%y: f32[136,520]) {
  %t = transpose(%wp) {perm = [1, 0, 2]} : f32[136,17,32]
  %r = reshape(%t) {shape = [136, 544]} : f32[136,544]
  %s = slice(%r) {starts = [0], ends = [520], axes = [1], steps = [1]} : f32[136,520]
  %y = matmul(%x, %s) : f32[136,520]
  return %y
}
)",
     {"tiled_contraction"}},
    // Layout ops stored by their producers (the producer side of rule 0): each producer's
    // kernel writes its region of the layout op's result through the scatter map; the check
    // reads each region back through the map.
    {"store_concat_producers",
     R"(graph @sc(%a: f32[4,6], %b: f32[4,8], %w: f32[8,10], %c: f32[4,5], %g: f32[26], %be: f32[26]) -> (%y: f32[4,26]) {
  %ea = exp(%a) : f32[4,6]
  %mb = matmul(%b, %w) : f32[4,10]
  %tc = tanh(%c) : f32[4,5]
  %nc = neg(%tc) : f32[4,5]
  %sc = sigmoid(%tc) : f32[4,5]
  %cat = concat(%ea, %mb, %nc, %sc) {axis = 1} : f32[4,26]
  %y = layer_norm(%cat, %g, %be) {axis = -1, epsilon = 1e-05} : f32[4,26]
  return %y
}
)",
     {"pointwise", "tiled_contraction", "online_norm"}},
    {"store_conv_concat_channels",
     R"(graph @cc(%x: f32[1,3,8,8], %w1: f32[4,3,3,3], %w2: f32[5,3,1,1]) -> (%y: f32[1,9,6,6]) {
  %c1 = conv(%x, %w1) {dilations = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,4,6,6]
  %r1 = relu(%c1) : f32[1,4,6,6]
  %c2 = conv(%x, %w2) {dilations = [1, 1], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,5,8,8]
  %p2 = max_pool(%c2) {ceil_mode = 0, dilations = [1, 1], kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [1, 1]} : f32[1,5,6,6]
  %y = concat(%r1, %p2) {axis = 1} : f32[1,9,6,6]
  return %y
}
)",
     {"tiled_contraction", "pooling"}},
    {"store_transpose_strided",
     R"(graph @st(%x: f32[6,8], %w: f32[8,12], %v: f32[3,4,6]) -> (%y: f32[12,6], %z: f32[3,6,4]) {
  %m = matmul(%x, %w) : f32[6,12]
  %r = relu(%m) : f32[6,12]
  %y = transpose(%r) {perm = [1, 0]} : f32[12,6]
  %s = softmax(%v) {axis = -1} : f32[3,4,6]
  %z = transpose(%s) {perm = [0, 2, 1]} : f32[3,6,4]
  return %y, %z
}
)",
     {"tiled_contraction"}},
    {"batch_norm",
     R"(graph @bn(%x: f32[2,3,4,5], %s: f32[3], %b: f32[3], %mu: f32[3]) -> (%y: f32[2,3,4,5]) {
  %var = weight f32[3] = [0.5, 1.0, 2.0]
  %n = batch_norm(%x, %s, %b, %mu, %var) {epsilon = 0.001} : f32[2,3,4,5]
  %y = relu(%n) : f32[2,3,4,5]
  return %y
}
)",
     {"pointwise"}},
};

} // namespace

TEST_CASE("kernels: per-op cases match the interpreter") {
  ScratchDir scratch;
  for (const std::string plan : kPlans) {
    CAPTURE(plan);
    Knobs knobs;
    knobs.planFor = Target::parseSpec(plan);
    std::vector<std::unique_ptr<Graph>> graphs;
    std::vector<Partition> parts;
    std::vector<Lowered> lows;
    std::vector<kir::Kernel> all;
    for (size_t c = 0; c < std::size(kOpCases); ++c) {
      const OpCase &oc = kOpCases[c];
      std::string caseName = oc.name;
      CAPTURE(caseName);
      graphs.push_back(parseGraph(oc.text, cat(oc.name, ".mcir")));
      parts.push_back(partitionGraph(*graphs.back()));
      lows.push_back(lowerAll(parts.back(), knobs, cat("c", c, "_")));
      REQUIRE(lows.back().skipped == 0);
      std::set<std::string> used;
      for (const kir::Kernel &k : lows.back().kernels) {
        used.insert(k.recipe);
        all.push_back(k);
      }
      for (const std::string &r : oc.recipes)
        CHECK_MESSAGE(used.count(r), oc.name, " does not exercise recipe ", r);
    }
    std::unique_ptr<LoadedLibrary> lib =
        buildLibrary(all, scratch.path, cat("ops_", planTag(plan)));
    for (size_t c = 0; c < std::size(kOpCases); ++c) {
      std::string caseName = kOpCases[c].name;
      CAPTURE(caseName);
      std::map<const Value *, Tensor> vals =
          interpretAll(*graphs[c], randomInputs(*graphs[c], 1234 + c));
      int ok = checkGroups(parts[c], lows[c], *lib, vals);
      CHECK(ok == static_cast<int>(parts[c].groups.size()));
    }
  }
}

// Out-of-range indices computed at run time (the interpreter refuses them, naming the node):
// the compiled gathers read the clamped position and the scatters skip the update, so nothing
// is read or written out of bounds. Both plans.
TEST_CASE("kernels: gathers clamp and scatters skip out-of-range indices") {
  const char *text =
      R"(graph @oob(%x: f32[3,4], %i: i64[2,4], %u: f32[2,4], %t: i64[2,2], %v: f32[2]) -> (%g: f32[2,4], %s: f32[3,4], %n: f32[3,4], %gn: f32[2]) {
  %g = gather_elements(%x, %i) {axis = 0} : f32[2,4]
  %s = scatter_elements(%x, %i, %u) {axis = 0} : f32[3,4]
  %n = scatter_nd(%x, %t, %v) : f32[3,4]
  %gn = gather_nd(%x, %t) : f32[2]
  return %g, %s, %n, %gn
}
)";
  std::vector<float> x(12), u = {100, 101, 102, 103, 104, 105, 106, 107};
  for (int k = 0; k < 12; ++k)
    x[k] = float(k);
  std::map<std::string, Tensor> in = {{"x", Tensor::fromF32(x, {3, 4})},
                                      {"i", Tensor::fromI64({5, -1, 2, -7, 0, 3, 1, 100}, {2, 4})},
                                      {"u", Tensor::fromF32(u, {2, 4})},
                                      {"t", Tensor::fromI64({3, 0, 1, -2}, {2, 2})},
                                      {"v", Tensor::fromF32({50, 60}, {2})}};
  std::vector<float> scattered = x, nd = x;
  scattered[2 * 4 + 1] = 101; // -1 -> 2
  scattered[2 * 4 + 2] = 102;
  scattered[0 * 4 + 0] = 104;
  scattered[1 * 4 + 2] = 106;
  nd[1 * 4 + 2] = 60; // (1, -2) -> (1, 2); (3, 0) skipped
  std::map<std::string, std::vector<float>> want = {
      {"g", {8, 9, 10, 3, 0, 9, 6, 11}}, {"s", scattered}, {"n", nd}, {"gn", {8, 6}}};
  ScratchDir scratch;
  for (const std::string plan : kPlans) {
    CAPTURE(plan);
    std::unique_ptr<Graph> g = parseGraph(text, "oob.mcir");
    Partition part = partitionGraph(*g);
    Knobs knobs;
    knobs.planFor = Target::parseSpec(plan);
    Lowered low = lowerAll(part, knobs, "oob_");
    REQUIRE(low.skipped == 0);
    std::unique_ptr<LoadedLibrary> lib =
        buildLibrary(low.kernels, scratch.path, cat("oob_", planTag(plan)));
    int checked = 0;
    for (const KernelGroup &grp : part.groups) {
      const kir::Kernel &k = low.kernels.at(static_cast<size_t>(low.kernelOf[grp.id]));
      std::vector<const Tensor *> ins;
      for (const Value *v : grp.inputs)
        ins.push_back(&in.at(v->name()));
      REQUIRE(grp.outputs.size() == 1);
      const Value *o = grp.outputs[0];
      std::vector<Tensor> outs =
          runKernel(lib->kernel(k.name), ins, {testing::outputBufferType(grp, o)});
      CAPTURE(o->name());
      CHECK(outs[0].toDoubles() ==
            std::vector<double>(want.at(o->name()).begin(), want.at(o->name()).end()));
      ++checked;
    }
    CHECK(checked == 4);
  }
}

// The host's direct conv and pooling forms, each forced by its knobs, against the interpreter:
// depthwise, grouped, strided, dilated, asymmetrically padded and 1-D convs with fused bias and
// activation (the row form with 1 and 4 rows per block, the last block partial; the padded-plane
// form where it applies, the row form where it does not: 1-D, unequal strides), and pooling
// windows of every kind in both forms (max_pool's phase planes: padding, dilation, ceil_mode).
TEST_CASE("kernels: host direct conv and pooling forms match the interpreter") {
  const char *text =
      R"(graph @dc(%x: f32[1,4,9,11], %z: f32[1,4,13], %wd: f32[4,1,3,3], %w5: f32[4,1,5,5], %wg: f32[6,2,3,3], %w1: f32[4,1,3], %b: f32[4]) -> (%y1: f32[1,4,9,11], %y2: f32[1,4,5,6], %y3: f32[1,6,9,11], %y4: f32[1,4,9,11], %y5: f32[1,4,4,5], %y6: f32[1,4,13], %y7: f32[1,4,5,11], %p1: f32[1,4,5,6], %p2: f32[1,4,5,6], %p3: f32[1,4,5,5], %p4: f32[1,4,6,6]) {
  %c1 = conv(%x, %wd, %b) {dilations = [1, 1], group = 4, pads = [1, 1, 1, 1], strides = [1, 1]} : f32[1,4,9,11]
  %y1 = relu(%c1) : f32[1,4,9,11]
  %y2 = conv(%x, %w5) {dilations = [1, 1], group = 4, pads = [2, 2, 2, 2], strides = [2, 2]} : f32[1,4,5,6]
  %c3 = conv(%x, %wg) {dilations = [1, 1], group = 2, pads = [0, 1, 2, 1], strides = [1, 1]} : f32[1,6,9,11]
  %y3 = sigmoid(%c3) : f32[1,6,9,11]
  %y4 = conv(%x, %wd) {dilations = [2, 2], group = 4, pads = [2, 2, 2, 2], strides = [1, 1]} : f32[1,4,9,11]
  %y5 = conv(%x, %wd, %b) {dilations = [2, 2], group = 4, pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,4,4,5]
  %y6 = conv(%z, %w1) {dilations = [1], group = 4, pads = [1, 1], strides = [1]} : f32[1,4,13]
  %y7 = conv(%x, %wd) {dilations = [1, 1], group = 4, pads = [1, 1, 1, 1], strides = [2, 1]} : f32[1,4,5,11]
  %p1 = max_pool(%x) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,4,5,6]
  %p2 = avg_pool(%x) {ceil_mode = 0, count_include_pad = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,4,5,6]
  %x10 = slice(%x) {starts = [0, 0], ends = [9, 10], axes = [2, 3], steps = [1, 1]} : f32[1,4,9,10]
  %xp = pad(%x10) {mode = "constant", pads = [0, 0, 0, 0, 0, 0, 1, 0]} : f32[1,4,10,10]
  %p3 = max_pool(%xp) {ceil_mode = 1, dilations = [1, 1], kernel_shape = [3, 3], pads = [0, 0, 0, 0], strides = [2, 2]} : f32[1,4,5,5]
  %p4 = max_pool(%xp) {ceil_mode = 1, dilations = [2, 2], kernel_shape = [2, 2], pads = [1, 1, 1, 1], strides = [2, 2]} : f32[1,4,6,6]
  return %y1, %y2, %y3, %y4, %y5, %y6, %y7, %p1, %p2, %p3, %p4
}
)";
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(text, "direct_forms.mcir");
  Partition part = partitionGraph(*g);
  std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 77));
  const std::map<std::string, int64_t> forms[] = {{{"rows", 1}}, {{"rows", 4}}, {{"plane", 1}}};
  for (size_t f = 0; f < std::size(forms); ++f) {
    CAPTURE(f);
    Lowered low = checkHostKnobs(part, vals, forms[f], scratch.path, cat("forms", f));
    int planes = 0;
    for (const kir::Kernel &k : low.kernels)
      planes += k.knobs.count("plane") ? 1 : 0;
    // The plane form builds for the five 2-D convs with equal strides (not the 1-D one or the
    // one with strides [2, 1]) and the three max_pools (ceil_mode windows past the input's end
    // included), not the avg_pool.
    CHECK(planes == (f == 2 ? 8 : 0));
  }
}

// The host band forms of a k x k blocked_conv (lower/contraction_conv_specs.cpp), each row tile
// forced by BM = R x OW, against the interpreter: blocked inputs at stride 1 (bias and relu
// fused), stride 2 and dilation 2, and a plain 3-channel input read in kernel rows (7 x 7 / 2),
// all with 9-pixel output rows; R = 1, 2, 3 (the last tile of 7 rows partial) and 7. Every conv
// must take the row-group form (mma_tile groups = [9, ...]).
TEST_CASE("kernels: host blocked conv band tiles of several output rows match the interpreter") {
  const char *text =
      R"(graph @band(%x: f32[1,2,7,9,16], %x2: f32[1,2,11,17,16], %z: f32[1,3,14,18], %w: f32[288,32], %wz: f32[147,32], %b: f32[32]) -> (%y1: f32[1,2,7,9,16], %y2: f32[1,2,6,9,16], %y3: f32[1,2,7,9,16], %y4: f32[1,2,7,9,16]) {
  %y1 = blocked_conv(%x, %w, %b) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]} : f32[1,2,7,9,16]
  %y2 = blocked_conv(%x2, %w) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1} : f32[1,2,6,9,16]
  %y3 = blocked_conv(%x, %w) {kernel_shape = [3, 3], strides = [1, 1], pads = [2, 2, 2, 2], dilations = [2, 2], blocked_input = 1} : f32[1,2,7,9,16]
  %y4 = blocked_conv(%z, %wz, %b) {kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3], dilations = [1, 1], blocked_input = 0} : f32[1,2,7,9,16]
  return %y1, %y2, %y3, %y4
}
)";
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(text, "band_forms.mcir");
  Partition part = partitionGraph(*g);
  std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 91));
  for (int64_t rows : {1, 2, 3, 7}) {
    CAPTURE(rows);
    Lowered low =
        checkHostKnobs(part, vals, {{"BM", 9 * rows}, {"BN", 32}}, scratch.path, cat("band", rows));
    CHECK(kernelsPrinting(low, "groups = [9, ") == 4);
  }
}

// A band skips the blocks that read only padding (mma_tile taps, kir.h; the micro-kernel leaves
// them out of its table): per output row the kernel rows that read outside the input, and per
// row block of a row's pixels (at most 8 for 32 columns: 9 pixels as 5 + 4) the kernel columns
// that do for all of its pixels. A 3 x 3 conv at dilation 3 on 7 x 9 (kernel row 0 reads output
// row oh's input row oh - 3, row 2 oh + 3), one at stride 2 and a plain 7 x 7 / 2 stem (its
// block a kernel row's taps: rows only), for row tiles of R = 1, 2, 3 and 7 rows, against the
// interpreter. The share of the products the cost model prices (ContractionProblem::liveShare)
// is the brute-force count over (output row, row block, kh, kw) of those some pixel reads the
// input through, by the block's pixels. A weight with a NaN keeps every block (NaN * 0 is NaN).
TEST_CASE("kernels: a band skips the blocks whose taps read only padding") {
  const char *text =
      R"(graph @taps(%x: f32[1,2,7,9,16], %x2: f32[1,2,11,17,16], %z: f32[1,3,14,18]) -> (%y1: f32[1,2,7,9,16], %y2: f32[1,2,6,9,16], %y3: f32[1,2,7,9,16]) {
  %w = weight f32[288,32]
  %wz = weight f32[147,32]
  %b = weight f32[32]
  %y1 = blocked_conv(%x, %w, %b) {kernel_shape = [3, 3], strides = [1, 1], pads = [3, 3, 3, 3], dilations = [3, 3], blocked_input = 1, epilogue = ["relu"]}
  %y2 = blocked_conv(%x2, %w) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1}
  %y3 = blocked_conv(%z, %wz, %b) {kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3], dilations = [1, 1], blocked_input = 0}
  return %y1, %y2, %y3
}
)";
  struct Geom {
    int64_t H, OH, KH, s, d, pad, W, OW, KW, sw, dw, padw; // KW 0: a plain input's kernel rows
  };
  // By (K, output pixels): the dilated conv, the stride-2 one (11 x 17 input, its last row's
  // kernel row 2 reads row 11: padding) and the stem.
  const std::map<std::pair<int64_t, int64_t>, Geom> byShape = {
      {{288, 63}, {7, 7, 3, 1, 3, 3, 9, 9, 3, 1, 3, 3}},
      {{288, 54}, {11, 6, 3, 2, 1, 1, 17, 9, 3, 2, 1, 1}},
      {{147, 63}, {14, 7, 7, 2, 1, 3, 18, 9, 0, 2, 1, 3}}};
  auto share = [](const Geom &g) {
    const std::vector<std::pair<int64_t, int64_t>> blocks = {{0, 5}, {5, 9}};
    double live = 0;
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (auto [b0, b1] : blocks)
        for (int64_t kh = 0; kh < g.KH; ++kh)
          for (int64_t kw = 0; kw < std::max<int64_t>(g.KW, 1); ++kw) {
            bool reads = false;
            for (int64_t ow = b0; ow < b1; ++ow) {
              int64_t ih = oh * g.s - g.pad + kh * g.d, iw = ow * g.sw - g.padw + kw * g.dw;
              reads = reads || (ih >= 0 && ih < g.H && (g.KW == 0 || (iw >= 0 && iw < g.W)));
            }
            live += reads ? double(b1 - b0) : 0.0;
          }
    return live / double(g.OH * g.OW * g.KH * std::max<int64_t>(g.KW, 1));
  };
  ScratchDir scratch;
  PackedCase c = packedCase(text, "band_taps.mcir", 31, 32);
  for (int64_t rows : {1, 2, 3, 7}) {
    CAPTURE(rows);
    Lowered low = checkHostKnobs(c.part, c.vals, {{"BM", 9 * rows}, {"BN", 32}}, scratch.path,
                                 cat("taps", rows));
    CHECK(kernelsPrinting(low, ", taps = [") == 3);
    for (const kir::Kernel &k : low.kernels) {
      const auto *p = dynamic_cast<const ContractionProblem *>(k.problem.get());
      REQUIRE(p);
      auto g = byShape.find({p->K, p->M});
      REQUIRE(g != byShape.end());
      CHECK(p->liveShare == doctest::Approx(share(g->second)));
    }
  }
  // The dilated conv's weight with a NaN (in the packed panels its operand reads through layout
  // ops): that blocked_conv keeps every block.
  const Value *w = c.g->findValue("y1")->def()->operand(1);
  while (!w->isWeight())
    w = w->def()->operand(0);
  Tensor t = *w->data();
  t.setDouble(0, std::nan(""));
  const_cast<Value *>(w)->setData(std::make_shared<Tensor>(std::move(t)));
  Knobs knobs;
  knobs.planFor = Target::parseSpec("cpu");
  knobs.values = {{"BM", 9}, {"BN", 32}};
  CHECK(kernelsPrinting(lowerAll(c.part, knobs, "nan_"), ", taps = [") == 1);
}

// Blocked convs whose N is a multiple of 64 run 7 x 64 micro-kernel blocks (four vectors, 28
// accumulators) over 64-column panels: a 3 x 3 conv on the band form (one panel, bias, relu and
// a residual add on the registers; 14-pixel rows in blocks of 7), a pointwise conv of N = 128
// (two panels, A read in place, 70 pixels in blocks of 7) and a 7 x 7 / 2 stem on a plain
// 3-channel input whose [147, 64] weight is packed as its one panel. Against the
// interpreter with the cost model's knobs and with row tiles of 28 pixels (ragged for the
// pointwise conv: 28 + 28 + 14).
TEST_CASE("kernels: blocked convs on 64-column panels (7 x 64 blocks) match the interpreter") {
  const char *text =
      R"(graph @wide(%x: f32[1,2,5,14,16], %r: f32[1,4,5,14,16], %z: f32[1,3,10,28]) -> (%y1: f32[1,4,5,14,16], %y2: f32[1,8,5,14,16], %y3: f32[1,4,5,14,16]) {
  %w = weight f32[288,64]
  %w2 = weight f32[32,128]
  %wz = weight f32[147,64]
  %b = weight f32[64]
  %y1 = blocked_conv(%x, %w, %b, %r) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1, epilogue = ["relu", "add"]}
  %y2 = blocked_conv(%x, %w2) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  %y3 = blocked_conv(%z, %wz, %b) {kernel_shape = [7, 7], strides = [2, 2], pads = [3, 3, 3, 3], dilations = [1, 1], blocked_input = 0, epilogue = ["relu"]}
  return %y1, %y2, %y3
}
)";
  ScratchDir scratch;
  PackedCase c = packedCase(text, "wide_panels.mcir", 21, 22);
  const std::vector<std::map<std::string, int64_t>> forms = {{}, {{"BM", 28}}};
  for (size_t f = 0; f < forms.size(); ++f) {
    CAPTURE(f);
    Lowered low = checkHostKnobs(c.part, c.vals, forms[f], scratch.path, cat("wide", f));
    CHECK(kernelsPrinting(low, "panels = 64") == 3);
    CHECK(kernelsPrinting(low, "FuseMmaTileEpilogue(C): applied") == 3);
  }
}

// Blocked convs whose N is a multiple of 48 and not of 64 run 8 x 48 blocks (three vectors, 24
// accumulators) over 48-column panels: a 3 x 3 / 2 stem on a plain 3-channel input (its weight
// packed too, [2, 27, 48]: A in blocks of a kernel row's 3 taps) and a pointwise conv of N = 96
// on its blocked output (A read in place, 4 x 7 pixels), the 7 x 4 micro-kernel beside them on a
// 64-wide panel (N = 64). Against the interpreter with the cost model's knobs, with column tiles
// of 48 and with row tiles of 14 pixels (two output rows).
TEST_CASE("kernels: blocked convs on 48-column panels (8 x 48 blocks) and a packed stem match "
          "the interpreter") {
  const char *text =
      R"(graph @mid(%z: f32[1,3,8,14]) -> (%y2: f32[1,6,4,7,16], %y3: f32[1,4,4,7,16]) {
  %ws = weight f32[27,96]
  %w2 = weight f32[96,96]
  %w3 = weight f32[96,64]
  %b = weight f32[96]
  %y1 = blocked_conv(%z, %ws, %b) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 0, epilogue = ["relu"]}
  %y2 = blocked_conv(%y1, %w2) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  %y3 = blocked_conv(%y1, %w3) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1}
  return %y2, %y3
}
)";
  ScratchDir scratch;
  PackedCase c = packedCase(text, "mid_panels.mcir", 31, 32);
  std::vector<std::vector<int64_t>> shapes;
  for (const Value *w : c.g->weights())
    shapes.push_back(w->type().shape);
  CHECK(std::count(shapes.begin(), shapes.end(), std::vector<int64_t>{2, 27, 48}) == 1);
  CHECK(std::count(shapes.begin(), shapes.end(), std::vector<int64_t>{2, 96, 48}) == 1);
  CHECK(std::count(shapes.begin(), shapes.end(), std::vector<int64_t>{1, 96, 64}) == 1);
  const std::vector<std::map<std::string, int64_t>> forms = {{}, {{"BN", 48}}, {{"BM", 14}}};
  for (size_t f = 0; f < forms.size(); ++f) {
    CAPTURE(f);
    Lowered low = checkHostKnobs(c.part, c.vals, forms[f], scratch.path, cat("mid", f));
    CHECK(kernelsPrinting(low, "panels = 48") == 2);
    CHECK(kernelsPrinting(low, "panels = 64") == 1);
  }
}

// The f32 micro-kernel's register block follows the vector unit the kernels are built for
// (support/host_micro_kernel.h): AVX-512's 7 x 64 / 8 x 48 / 8 x 32 blocks, AVX2's 6 x 16 / 7 x 16
// (a 64-wide panel in four column groups; a 64-byte vector type there had no register and ran
// 20-70x slower), SSE's 3 x 16. The rule's values, then the 48 / 64-panel convs and a dense
// GEMM with a fused epilogue built for -march=haswell (AVX2) and -march=x86-64-v2 (SSE 4.2),
// each printed for its unit, against the interpreter.
TEST_CASE("kernels: the micro-kernel's register block follows the vector unit (AVX2, SSE)") {
  CHECK(hostRegisterBlock(4, {512, 32}).groups == 4);
  CHECK(hostRegisterBlock(4, {512, 32}).rows == 7);
  CHECK(hostRegisterBlock(3, {512, 32}).rows == 8);
  CHECK(hostRegisterBlock(2, {512, 32}).rows == 8);
  CHECK(hostRegisterBlock(4, {256, 16}).groups == 1);
  CHECK(hostRegisterBlock(4, {256, 16}).rows == 7);
  CHECK(hostRegisterBlock(4, {256, 16}).registerRows == 6); // both B vectors held
  CHECK(hostRegisterBlock(4, {512, 32}).registerRows == 7); // (a memory operand is free)
  // Rows of a run in blocks: AVX2's 6-row form where it takes at most a quarter more blocks.
  CHECK(hostRowBlocks(56, 7, 6).count == 10); // 6 x 6 + 4 x 5
  CHECK(hostRowBlocks(56, 7, 6).taller == 6);
  CHECK(hostRowBlocks(56, 7, 6).base == 5);
  CHECK(hostRowBlocks(14, 7, 6).count == 2); // 7 + 7, not 5 + 5 + 4
  CHECK(hostRowBlocks(49, 7, 6).count == 7);
  CHECK(hostRowBlocks(49, 7, 7).base == 7);
  CHECK(hostRowBlocks(50, 7, 7).taller == 2); // 7 + 7 + 6 x 6, not 7 x 7 + 1
  CHECK(hostRowBlocks(50, 7, 7).base == 6);
  CHECK(hostRegisterBlock(3, {256, 16}).groups == 1);
  CHECK(hostRegisterBlock(2, {128, 16}).rows == 3);
  CHECK(hostRegisterBlock(4, {128, 32}).rows == 7);
  const char *text =
      R"(graph @units(%z: f32[1,3,8,14], %a: f32[19,40]) -> (%y2: f32[1,6,4,7,16], %y3: f32[1,4,4,7,16], %c: f32[19,48]) {
  %ws = weight f32[27,96]
  %w2 = weight f32[96,96]
  %w3 = weight f32[96,64]
  %b = weight f32[96]
  %wg = weight f32[40,48]
  %y1 = blocked_conv(%z, %ws, %b) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 0, epilogue = ["relu"]}
  %y2 = blocked_conv(%y1, %w2) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  %y3 = blocked_conv(%y1, %w3) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1}
  %m = matmul(%a, %wg)
  %c = relu(%m)
  return %y2, %y3, %c
}
)";
  ScratchDir scratch;
  PackedCase c = packedCase(text, "units.mcir", 41, 42);
  struct Unit {
    const char *arch, *tag;
    HostVectorUnit unit;
  };
  for (const Unit &u : {Unit{"haswell", "avx2", {256, 16}}, Unit{"x86-64-v2", "sse", {128, 16}}}) {
    CAPTURE(u.arch);
    HostBuildOptions opts;
    opts.cpuArch = u.arch;
    for (const auto &knobs : std::vector<std::map<std::string, int64_t>>{{}, {{"BM", 14}}}) {
      Lowered low = checkHostKnobs(c.part, c.vals, knobs, scratch.path,
                                   cat("units_", u.tag, knobs.size()), u.unit, opts);
      CHECK(kernelsPrinting(low, "panels = 48") == 2);
    }
  }
}

// Weights packed in 32-column panels (pack-weights) read by column tiles of any multiple of 16
// (kir.h mma_tile: a tile may start or end inside a panel), for a pointwise blocked_conv (A read
// in place) and a 3 x 3 one (the band form), N = 80: tiles of 16 (every other one starting
// mid-panel), 48 (the second starting at column 16 of panel 1 and ending in the padding) and 80
// (one tile ending mid-panel), against the interpreter.
TEST_CASE(
    "kernels: packed-weight column tiles starting or ending inside a panel match the interpreter") {
  const char *text =
      R"(graph @cols(%x: f32[1,2,5,6,16]) -> (%y1: f32[1,5,5,6,16], %y2: f32[1,5,5,6,16]) {
  %w = weight f32[32,80]
  %w3 = weight f32[288,80]
  %b = weight f32[80]
  %y1 = blocked_conv(%x, %w, %b) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  %y2 = blocked_conv(%x, %w3) {kernel_shape = [3, 3], strides = [1, 1], pads = [1, 1, 1, 1], dilations = [1, 1], blocked_input = 1}
  return %y1, %y2
}
)";
  ScratchDir scratch;
  PackedCase c = packedCase(text, "panel_columns.mcir", 3, 5);
  for (int64_t bn : {16, 48, 80}) {
    CAPTURE(bn);
    Lowered low = checkHostKnobs(c.part, c.vals, {{"BN", bn}}, scratch.path, cat("cols", bn));
    CHECK(kernelsPrinting(low, "panels = 32") == 2);
  }
}

// FuseMmaTileEpilogue (kir/fuse_mma_tile_epilogue.h) on pointwise blocked_convs of K = 48 (bias
// and relu then a residual add; a hard_swish without bias) and of K = 16 (relu; A one block,
// read without block offsets), each with the init and the epilogue on the micro-kernel's
// registers, against the interpreter: one K step of 48 or three of 16 (the init on the first
// step only, the epilogue on the last), over whole row tiles (BM = 30 of 30 pixels) and ragged
// ones (16 + 14: the guarded epilogue on the valid rows only), columns in tiles of the whole N
// or of 16 (starting mid-panel), B in packed panels (one of N = 32, two for N = 48) and read
// as rows (N = 16, too narrow to pack).
TEST_CASE("kernels: fused mma_tile init and epilogue match the interpreter") {
  const char *text =
      R"(graph @fused(%x: f32[1,3,5,6,16], %r: f32[1,2,5,6,16], %x1: f32[1,1,5,6,16]) -> (%y1: f32[1,2,5,6,16], %y2: f32[1,2,5,6,16], %y3: f32[1,3,5,6,16], %y4: f32[1,1,5,6,16]) {
  %w = weight f32[48,32]
  %w2 = weight f32[48,32]
  %w3 = weight f32[16,48]
  %w4 = weight f32[48,16]
  %b = weight f32[32]
  %y1 = blocked_conv(%x, %w, %b, %r) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu", "add"]}
  %y2 = blocked_conv(%x, %w2) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["hard_swish"]}
  %y3 = blocked_conv(%x1, %w3) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  %y4 = blocked_conv(%x, %w4) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  return %y1, %y2, %y3, %y4
}
)";
  ScratchDir scratch;
  PackedCase c = packedCase(text, "fused_tile.mcir", 11, 12);
  // (BN = 16 starts tiles of %y3's 48-column weight panels mid-panel.)
  const std::vector<std::map<std::string, int64_t>> forms = {{{"BM", 30}, {"BK", 48}},
                                                             {{"BM", 16}, {"BK", 48}, {"BN", 16}},
                                                             {{"BM", 30}, {"BK", 16}},
                                                             {{"BM", 16}, {"BK", 16}, {"BN", 16}}};
  for (size_t f = 0; f < forms.size(); ++f) {
    CAPTURE(f);
    Lowered low = checkHostKnobs(c.part, c.vals, forms[f], scratch.path, cat("fused", f));
    CHECK(kernelsPrinting(low, "FuseMmaTileEpilogue(C): applied") == 4);
    CHECK(kernelsPrinting(
              low, cat("fused first = k0 == 0, last = k0 + ", forms[f].at("BK"), " >= 48 {")) == 3);
    // All but %y4, whose B is read as rows: %y3's N = 48 in one 48-wide panel.
    CHECK(kernelsPrinting(low, "panels = 32") == 2);
    CHECK(kernelsPrinting(low, "panels = 48") == 1);
    // The ragged tiles' row guard holds on every row the micro-kernel runs, so the host source
    // drops it (inlined, the guarded lanes went out one float at a time): no lambda tests it.
    std::string src = printHostSource(low.kernels);
    CHECK(src.find("aicf_epi = [&]") != std::string::npos);
    if (forms[f].at("BM") == 16)
      CHECK(kernelsPrinting(low, "if mt * 16 + t * 16 + i < 30 {") > 0);
    CHECK(src.find("mt * 16L + t * 16L + i < 30L") == std::string::npos);
  }
}

// FuseMmaTileEpilogue's rejections, each on a lowered pointwise blocked_conv changed to break
// one condition (the kernel is otherwise left as it was, its reason noted).
TEST_CASE("kernels: FuseMmaTileEpilogue rejects what it cannot fuse, with the reason") {
  const char *text = R"(graph @rej(%x: f32[1,1,5,6,16]) -> (%y: f32[1,2,5,6,16]) {
  %w = weight f32[16,32]
  %b = weight f32[32]
  %y = blocked_conv(%x, %w, %b) {kernel_shape = [1, 1], strides = [1, 1], pads = [0, 0, 0, 0], dilations = [1, 1], blocked_input = 1, epilogue = ["relu"]}
  return %y
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "fuse_rejects.mcir");
  Partition part = partitionGraph(*g);
  REQUIRE(part.groups.size() == 1);
  Knobs knobs;
  knobs.planFor = Target::parseSpec("cpu");
  knobs.values = {{"BM", 16}};
  auto lowered = [&] {
    kir::Kernel k = lowerGroup(part.groups[0], "k0", knobs);
    REQUIRE(fuseReductionEpilogue(k, false).applied());
    return k;
  };
  auto outcome = [](kir::Kernel &k) {
    std::vector<MmaTileEpilogueOutcome> o = fuseMmaTileEpilogue(k);
    REQUIRE(o.size() == 1);
    CHECK(kir::verifyKernel(k).empty());
    return o[0];
  };
  auto finalRegion = [](kir::Kernel &k) -> kir::StmtP & {
    for (size_t i = k.body.size(); i-- > 0;)
      if (k.body[i]->kind == kir::Stmt::Kind::Region)
        return k.body[i];
    FAIL("no region");
    return k.body[0];
  };
  {
    kir::Kernel k = lowered();
    MmaTileEpilogueOutcome o = outcome(k);
    CHECK(o.applied);
    CHECK(o.text() ==
          "FuseMmaTileEpilogue(C): applied: the init and the epilogue run on the micro-kernel's "
          "registers");
  }
  { // the verifier holds a fused mma_tile to its element and its conditions
    kir::Kernel k = lowered();
    REQUIRE(outcome(k).applied);
    kir::Stmt *mma = nullptr;
    for (kir::StmtP &s : k.body)
      if (s->kind == kir::Stmt::Kind::Reduce)
        mma = s->update[0].get();
    REQUIRE(mma);
    REQUIRE(mma->fused);
    std::vector<kir::StmtP> epi = mma->body;
    mma->body.push_back(
        kir::store(mma->c, {kir::var("t"), kir::var("i"), kir::E(int64_t(0))}, kir::fconst(1.0)));
    CHECK(joined(kir::verifyKernel(k)) ==
          "kernel k0: mma_tile: the fused epilogue accesses C other than at its element [t, i, j]");
    mma->body = epi;
    mma->last = kir::E();
    CHECK(joined(kir::verifyKernel(k)) ==
          "kernel k0: mma_tile: fused without its first and last conditions");
  }
  { // C read again after the epilogue, past a comment
    kir::Kernel k = lowered();
    kir::StmtP again = std::make_shared<kir::Stmt>(*finalRegion(k));
    k.body.push_back(kir::comment("again"));
    k.body.push_back(again);
    MmaTileEpilogueOutcome o = outcome(k);
    CHECK_FALSE(o.applied);
    CHECK(o.reason == "C is used outside the reduction and its epilogue");
  }
  { // the ragged tile's (30 = 16 + 14 rows) epilogue with its guard taken off
    kir::Kernel k = lowered();
    kir::StmtP &fin = finalRegion(k);
    std::vector<kir::StmtP> &elem = fin->body[0]->body[0]->body[0]->body;
    REQUIRE(elem.back()->kind == kir::Stmt::Kind::If);
    std::vector<kir::StmtP> then = elem.back()->body;
    elem.pop_back();
    elem.insert(elem.end(), then.begin(), then.end());
    MmaTileEpilogueOutcome o = outcome(k);
    CHECK_FALSE(o.applied);
    CHECK(o.reason == "a ragged tile's epilogue stores without a guard");
  }
  { // an init that does not walk the tile 16 lanes at a time
    kir::Kernel k = lowered();
    for (kir::StmtP &s : k.body)
      if (s->kind == kir::Stmt::Kind::Reduce)
        s->init[0]->body[0]->body[0]->body[0]->loop = kir::Stmt::LoopKind::Serial;
    MmaTileEpilogueOutcome o = outcome(k);
    CHECK_FALSE(o.applied);
    CHECK(o.reason == "the init does not walk the tile 16 lanes at a time");
    CHECK(kir::printKernel(k).find("# FuseMmaTileEpilogue(C): rejected: the init does not walk") !=
          std::string::npos);
  }
}

// The blocked max pool's fold (lower/recipe_pooling.cpp: a plain maximum plus the first NaN
// seen) against the interpreter's NaN-propagating max, on an input with NaN, +inf and -inf at
// scattered positions, including windows where a NaN comes after larger values and where every
// tap is -inf.
TEST_CASE("kernels: host blocked max pool propagates NaN and infinities like the interpreter") {
  const char *text = R"(graph @mp(%x: f32[1,2,6,7,16]) -> (%y: f32[1,2,3,4,16]) {
  %y = max_pool(%x) {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], dilations = [1, 1], blocked = 1} : f32[1,2,3,4,16]
  return %y
}
)";
  ScratchDir scratch;
  std::unique_ptr<Graph> g = parseGraph(text, "blocked_max_pool.mcir");
  Partition part = partitionGraph(*g);
  std::vector<Tensor> in = randomInputs(*g, 13);
  float *x = in.at(0).data<float>();
  int64_t n = in.at(0).numel();
  for (int64_t i = 0; i < n; i += 37)
    x[i] = std::nanf("");
  for (int64_t i = 5; i < n; i += 53)
    x[i] = INFINITY;
  for (int64_t i = 11; i < n; i += 41)
    x[i] = -INFINITY;
  for (int64_t i = 0; i < 7 * 16; i += 16) // lane 0 of block 0's first row: all -inf
    x[i] = -INFINITY;
  std::map<const Value *, Tensor> vals = interpretAll(*g, in);
  const Tensor &want = vals.at(g->outputs().at(0));
  int nans = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    nans += std::isnan(want.getDouble(i)) ? 1 : 0;
  CHECK(nans > 0);
  checkHostKnobs(part, vals, {}, scratch.path, "blocked_max_pool");
}

// The host reduction's lane forms, each forced by its vec knob, on the reduction cases: one lane
// (the strided per-thread fold and block_reduce), 5 lanes (a partial last chunk everywhere), 16
// and 64 (more lanes than some rows have elements: clamped).
TEST_CASE("kernels: host reduction lane counts match the interpreter") {
  ScratchDir scratch;
  for (const OpCase &oc : kOpCases) {
    std::string caseName = oc.name;
    if (caseName.rfind("reductions", 0) != 0 && caseName != "global_pools_instance_norm" &&
        caseName != "fold_transpose_reduction")
      continue;
    CAPTURE(caseName);
    std::unique_ptr<Graph> g = parseGraph(oc.text, caseName + ".mcir");
    Partition part = partitionGraph(*g);
    std::map<const Value *, Tensor> vals = interpretAll(*g, randomInputs(*g, 99));
    for (int64_t vec : {1, 5, 16, 64}) {
      CAPTURE(vec);
      checkHostKnobs(part, vals, {{"vec", vec}}, scratch.path, cat(caseName, "_v", vec));
    }
  }
}

// The integer family and f64 (issue 20) through both plans: u8 / i16 / u16 / u32 arithmetic
// wrapping at their width, u64 compared, divided and min'd unsigned (values from 2^63 up),
// f64 computed in double (0.1 + 0.2 is not 0.3 there, and exp keeps its 16 digits), casts
// between them, an f64 reduction and a u8 max pool. Inputs are chosen to hit the edges; the
// interpreter's values are checked against hand-computed ones first, then every kernel
// against the interpreter (integers exactly, f64 within a few ulps).
TEST_CASE("kernels: integer and f64 dtypes wrap, compare and compute like the interpreter") {
  const char *text =
      R"(graph @dt(%a8: u8[6], %b8: u8[6], %a16: i16[6], %b16: i16[6], %au: u16[6], %bu: u16[6], %a32: u32[6], %b32: u32[6], %a64: u64[6], %b64: u64[6], %x: f64[2,6], %y: f64[2,6], %im: u8[1,1,4,4]) -> (%s8: u8[6], %d8: u8[6], %m16: i16[6], %q16: i16[6], %mx: u16[6], %q32: u32[6], %lt64: bool[6], %mn64: u64[6], %q64: u64[6], %c64: f64[6], %fx: f64[2,6], %ex: f64[2,6], %sg: f64[2,6], %rs: f64[2], %cf: u8[2,6], %mp: u8[1,1,2,2], %c32: f32[2,6]) {
  %s8 = add(%a8, %b8) : u8[6]
  %d8 = sub(%a8, %b8) : u8[6]
  %m16 = mul(%a16, %b16) : i16[6]
  %q16 = div(%a16, %b16) : i16[6]
  %mx = max(%au, %bu) : u16[6]
  %q32 = div(%a32, %b32) : u32[6]
  %lt64 = less(%a64, %b64) : bool[6]
  %mn64 = min(%a64, %b64) : u64[6]
  %q64 = div(%a64, %b64) : u64[6]
  %c64 = cast(%a64) {to = "f64"} : f64[6]
  %fx = add(%x, %y) : f64[2,6]
  %ex = exp(%x) : f64[2,6]
  %sg = sigmoid(%x) : f64[2,6]
  %rs = reduce_sum(%x) {axes = [1], keepdims = 0} : f64[2]
  %cf = cast(%x) {to = "u8"} : u8[2,6]
  %mp = max_pool(%im) {ceil_mode = 0, dilations = [1, 1], kernel_shape = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]} : u8[1,1,2,2]
  %c32 = cast(%fx) {to = "f32"} : f32[2,6]
  return %s8, %d8, %m16, %q16, %mx, %q32, %lt64, %mn64, %q64, %c64, %fx, %ex, %sg, %rs, %cf, %mp, %c32
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "dtypes.mcir");
  auto ints = [](DType t, std::vector<int64_t> v, std::vector<int64_t> shape) {
    Tensor x(TensorType(t, std::move(shape)));
    for (size_t i = 0; i < v.size(); ++i)
      x.setInt(static_cast<int64_t>(i), v[i]);
    return x;
  };
  auto reals = [](std::vector<double> v, std::vector<int64_t> shape) {
    Tensor x(TensorType(DType::F64, std::move(shape)));
    for (size_t i = 0; i < v.size(); ++i)
      x.setDouble(static_cast<int64_t>(i), v[i]);
    return x;
  };
  const int64_t big = INT64_MIN + 5; // u64 2^63 + 5
  std::vector<Tensor> in = {
      ints(DType::U8, {250, 3, 0, 255, 128, 7}, {6}),
      ints(DType::U8, {10, 5, 1, 255, 128, 0}, {6}),
      ints(DType::I16, {300, -300, 32767, -32768, 7, -7}, {6}),
      ints(DType::I16, {300, 200, 2, -1, -2, 2}, {6}),
      ints(DType::U16, {65535, 0, 40000, 1, 2, 3}, {6}),
      ints(DType::U16, {1, 65535, 30000, 2, 2, 0}, {6}),
      ints(DType::U32, {4294967295, 10, 7, 0, 3000000000, 1}, {6}),
      ints(DType::U32, {2, 3, 7, 5, 7, 4294967295}, {6}),
      ints(DType::U64, {big, 3, -1, 0, 10, big}, {6}),
      ints(DType::U64, {3, big, 2, 1, 10, big}, {6}),
      reals({0.1, -1.5, 250.75, 3.0, -0.0, 1e-300, 2.5, 0.5, -700.0, 20.0, 1.0, 255.9}, {2, 6}),
      reals({0.2, 1.5, 4.25, -3.0, 0.0, 1e-300, 1.0, 0.25, 700.0, -20.0, 2.0, 0.1}, {2, 6}),
      ints(DType::U8, {1, 200, 3, 4, 250, 6, 7, 8, 9, 10, 255, 12, 13, 14, 15, 16}, {1, 1, 4, 4})};
  std::map<const Value *, Tensor> vals = interpretAll(*g, in);
  auto out = [&](const char *name) -> const Tensor & {
    for (const Value *v : g->outputs())
      if (v->name() == name)
        return vals.at(v);
    FAIL("no output ", name);
    throw 0;
  };
  CHECK(out("s8").toInts() == std::vector<int64_t>{4, 8, 1, 254, 0, 7});
  CHECK(out("d8").toInts() == std::vector<int64_t>{240, 254, 255, 0, 0, 7});
  CHECK(out("m16").toInts() == std::vector<int64_t>{24464, 5536, -2, -32768, -14, -14});
  CHECK(out("q16").toInts() == std::vector<int64_t>{1, -1, 16383, -32768, -3, -3});
  CHECK(out("mx").toInts() == std::vector<int64_t>{65535, 65535, 40000, 2, 2, 3});
  CHECK(out("q32").toInts() == std::vector<int64_t>{2147483647, 3, 1, 0, 428571428, 0});
  CHECK(out("lt64").toInts() == std::vector<int64_t>{0, 1, 0, 1, 0, 0});
  CHECK(out("mn64").toInts() == std::vector<int64_t>{3, 3, 2, 0, 10, big});
  CHECK(out("q64").toInts() == std::vector<int64_t>{3074457345618258604, 0, INT64_MAX, 0, 1, 1});
  CHECK(out("c64").getDouble(0) == 9223372036854775813.0);
  CHECK(out("c64").getDouble(2) == 18446744073709551615.0);
  CHECK(out("fx").getDouble(0) == 0.1 + 0.2); // double, not f32, arithmetic
  CHECK(out("fx").getDouble(0) != 0.3);
  CHECK(out("ex").getDouble(0) == std::exp(0.1));
  CHECK(out("cf").toInts() == std::vector<int64_t>{0, 255, 250, 3, 0, 0, 2, 0, 68, 20, 1, 255});
  CHECK(out("mp").toInts() == std::vector<int64_t>{250, 8, 14, 255});
  CHECK(out("c32").getDouble(0) == static_cast<double>(static_cast<float>(0.1 + 0.2)));

  ScratchDir scratch;
  for (const std::string plan : kPlans) {
    CAPTURE(plan);
    Knobs knobs;
    knobs.planFor = Target::parseSpec(plan);
    Partition part = partitionGraph(*g);
    Lowered low = lowerAll(part, knobs, "dt_");
    REQUIRE(low.skipped == 0);
    std::unique_ptr<LoadedLibrary> lib =
        buildLibrary(low.kernels, scratch.path, cat("dtypes_", planTag(plan)));
    CHECK(checkGroups(part, low, *lib, vals) == static_cast<int>(part.groups.size()));
  }
}
