// The recipes of the ops that set a data dim (issue 51: non_zero, set_dim, non_max_suppression,
// choose) and of top_k with a run-time k or along a run-time length: small graphs in IR text,
// partitioned and lowered for the cpu and a GPU plan, checked as Kernel IR (verified; printed the
// same with every dim at its minimum 0 and at its bound, as the compile driver's shape-generic
// certificate relowers them), printed as CUDA and, with nvcc, compiled, and run on the host against
// the interpreter.
//
// The run is the runtime contract in miniature (runKernels): every buffer reserved at the
// planning type (the bound), the groups' kernels called in order with the dims after the
// params, each SETS_DIM step's count read after it, checked against the bound and set as the
// dim's value for the steps after it (the dims start at 0: a kernel reading its own dim would
// see a stale value). Results are compared packed at their actual length, exactly (indices,
// copies of values). Also: a count past its bound writes nothing past the reserve, and fusion
// rule 11 (lower/fusion.cpp) on the setters' groups.
#include "backend/cuda/cuda_build.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/pipeline.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "lower/recipe.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

struct Lowered {
  std::unique_ptr<Graph> g;
  Partition part;
  std::vector<kir::Kernel> kernels; // one per group
};

Lowered lower(const std::string &text, const std::string &planFor, const std::string &tag) {
  Lowered l;
  l.g = parseGraph(text, "data_dims.mcir");
  l.part = partitionGraph(*l.g);
  Knobs knobs;
  knobs.planFor = Target::parseSpec(planFor);
  for (size_t i = 0; i < l.part.groups.size(); ++i) {
    kir::Kernel k = lowerGroup(l.part.groups[i], cat("dd_", tag, "_", i), knobs);
    kir::runDefaultKernelPipeline(k);
    std::string errs = kir::verifyKernelText(k);
    REQUIRE_MESSAGE(errs.empty(), errs);
    l.kernels.push_back(std::move(k));
  }
  return l;
}

std::vector<std::string> recipes(const Lowered &l) {
  std::vector<std::string> r;
  for (const kir::Kernel &k : l.kernels)
    r.push_back(k.recipe);
  return r;
}

// As the compile driver's certifyShapeGeneric: every symbolic kernel lowered again with each
// dim at its minimum and at its maximum prints as at the planning point.
void checkShapeGeneric(Lowered &l, const std::string &planFor) {
  std::vector<std::pair<Value *, TensorType>> values;
  for (const KernelGroup &grp : l.part.groups)
    for (Node *n : grp.nodes)
      for (const auto *list : {&n->operands(), &n->results()})
        for (Value *v : *list)
          if (v->type().isSymbolic())
            values.emplace_back(v, v->type());
  for (bool atMax : {false, true}) {
    std::map<std::string, int64_t> point;
    for (const DimRange &d : l.g->dims())
      point[d.name] = atMax ? d.max : d.min;
    for (auto &[v, t] : values) {
      TensorType at = t;
      for (size_t i = 0; i < at.sym.size(); ++i)
        at.shape[i] = *at.sym[i].eval(point);
      v->setType(at);
    }
    Knobs knobs;
    knobs.planFor = Target::parseSpec(planFor);
    for (size_t i = 0; i < l.kernels.size(); ++i) {
      if (l.kernels[i].dims.empty())
        continue;
      knobs.values = l.kernels[i].knobs;
      kir::Kernel again = lowerGroup(l.part.groups[i], l.kernels[i].name, knobs);
      kir::runDefaultKernelPipeline(again);
      CAPTURE(atMax);
      CHECK(kir::printKernel(again) == kir::printKernel(l.kernels[i]));
    }
  }
  for (auto &[v, t] : values)
    v->setType(t);
}

fs::path scratch() {
  static fs::path dir = test_files::scratchDir("aicf_data_dims_");
  return dir;
}

// The graph's outputs computed by the kernels (see the file comment), at their actual shapes;
// `overflow` names a SETS_DIM step whose count went past its bound (the run stops there).
std::vector<Tensor> runKernels(const Lowered &l, const LoadedLibrary &lib,
                               const std::vector<Tensor> &inputs, std::string *overflow = nullptr) {
  std::map<const Value *, std::vector<uint8_t>> storage;
  // A view (reshape) aliases its operand's buffer.
  auto root = [](const Value *v) {
    while (v->def() && v->def()->info().has(VIEW))
      v = v->def()->operand(0);
    return v;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &t = inputs[i];
    storage[l.g->inputs()[i]].assign(t.raw(), t.raw() + t.type().bytes());
  }
  std::map<std::string, int64_t> dims;
  for (const DimRange &d : l.g->dims())
    dims[d.name] = 0;
  for (size_t gi = 0; gi < l.part.groups.size(); ++gi) {
    const KernelGroup &grp = l.part.groups[gi];
    const kir::Kernel &k = l.kernels[gi];
    std::vector<void *> args;
    for (const Value *v : grp.inputs) {
      if (v->isWeight())
        args.push_back(const_cast<uint8_t *>(v->data()->raw()));
      else
        args.push_back(storage.at(root(v)).data());
    }
    for (const Value *v : grp.outputs) {
      std::vector<uint8_t> &buf = storage[v];
      buf.assign(static_cast<size_t>(std::max<int64_t>(v->type().bytes(), 8)), 0xff);
      args.push_back(buf.data());
    }
    std::vector<int64_t> dimValues;
    for (const std::string &d : k.dims)
      dimValues.push_back(dims.at(d));
    if (!k.dims.empty())
      args.push_back(dimValues.data());
    lib.kernel(k.name)(args.data());
    if (grp.anchor && grp.anchor->info().has(SETS_DIM)) {
      int64_t count = 0;
      std::memcpy(&count, storage.at(grp.anchor->results().back()).data(), sizeof count);
      REQUIRE(count >= 0);
      if (count > grp.anchor->i("bound")) {
        if (overflow)
          *overflow = grp.anchor->s("dim");
        return {};
      }
      dims[grp.anchor->s("dim")] = count;
    }
  }
  std::vector<Tensor> out;
  for (const Value *v : l.g->outputs()) {
    TensorType t = v->type();
    for (size_t i = 0; i < t.sym.size(); ++i)
      t.shape[i] = *t.sym[i].eval(dims);
    t.sym.clear();
    const std::vector<uint8_t> &buf = storage.at(root(v));
    out.emplace_back(t, std::vector<uint8_t>(buf.begin(), buf.begin() + t.bytes()));
  }
  return out;
}

// Lowers `text` for the cpu and sm_90 plans, certifies it shape-generic, prints CUDA (compiled
// with nvcc when there is one), builds the host kernels of both plans and, for every input set
// `make` gives (seeds 0 .. runs - 1), compares the outputs with the interpreter's.
void check(const std::string &name, const std::string &text, const std::vector<std::string> &want,
           int runs, const std::function<std::vector<Tensor>(const Graph &, unsigned)> &make) {
  for (const char *planFor : {"cpu", "cuda:sm_90"}) {
    CAPTURE(planFor);
    std::string tag = cat(name, planFor[0] == 'c' && planFor[1] == 'p' ? "_cpu" : "_sm90");
    Lowered l = lower(text, planFor, tag);
    CHECK(recipes(l) == want);
    checkShapeGeneric(l, planFor);
    if (std::string(planFor) != "cpu") {
      std::string cu = printCudaSource(l.kernels, Target::parse(planFor));
      if (!nvccPath().empty()) {
        fs::path dir = scratch() / tag;
        fs::create_directories(dir);
        CudaBuildOptions opts;
        opts.arch = "sm_90";
        std::string report =
            compileCudaSource(cu, (dir / "k.cu").string(), (dir / "k.so").string(), opts);
        CHECK_MESSAGE(report.find("warning") == std::string::npos, report);
      }
    }
    fs::path so = scratch() / (tag + ".so");
    compileHostSource(printHostSource(l.kernels), (scratch() / (tag + ".cpp")).string(),
                      so.string());
    LoadedLibrary lib(so.string());
    for (int seed = 0; seed < runs; ++seed) {
      CAPTURE(seed);
      std::vector<Tensor> in = make(*l.g, static_cast<unsigned>(seed));
      std::vector<Tensor> ref = interpret(*l.g, in);
      std::vector<Tensor> got = runKernels(l, lib, in);
      REQUIRE(got.size() == ref.size());
      for (size_t o = 0; o < ref.size(); ++o) {
        CAPTURE(o);
        REQUIRE(got[o].type() == ref[o].type());
        CHECK(got[o].bytes() == ref[o].bytes()); // (no memcmp of an empty result's null data)
      }
    }
  }
}

// f32 in [lo, hi) for every f32 input; i64 inputs from `ints`.
std::vector<Tensor> uniform(const Graph &g, unsigned seed, float lo, float hi,
                            const std::vector<int64_t> &ints = {}) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<Tensor> in;
  for (const Value *v : g.inputs()) {
    Tensor t(v->type());
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (v->type().dtype == DType::I64)
        t.setInt(i, ints.at(static_cast<size_t>(i)));
      else
        t.setDouble(i, dist(rng));
    }
    in.push_back(std::move(t));
  }
  return in;
}

} // namespace

TEST_CASE("data dims: non_zero with a fused condition, its indices read by a later kernel") {
  // %m (x > 0.25) is non_zero's prologue; %s reads [2, len] with len set by then.
  const char *text =
      R"(graph @nz dims(len = [0, 12, 12])(%x: f32[3,4]) -> (%i: i64[2,len], %n: i64[], %s: i64[2,len]) {
  %h = weight f32[1] = [0.25]
  %m = greater(%x, %h) : bool[3,4]
  %i, %n = non_zero(%m) {dim = "len", bound = 12} : i64[2,len], i64[]
  %s = add(%i, %i) : i64[2,len]
  return %i, %n, %s
}
)";
  check("nz", text, {"non_zero", "pointwise"}, 6, [](const Graph &g, unsigned seed) {
    // Seed 0: nothing above 0.25 (an empty result); the others about half.
    return uniform(g, seed, seed == 0 ? -1.0f : -0.5f, seed == 0 ? 0.0f : 1.0f);
  });
}

TEST_CASE("data dims: non_zero of integers, rank 3 with a unit dim, and of bool") {
  const char *text =
      R"(graph @nzi dims(a = [0, 8, 8], b = [0, 5, 5])(%x: i64[2,1,4], %y: f32[5]) -> (%i: i64[3,a], %na: i64[], %j: i64[1,b], %nb: i64[]) {
  %i, %na = non_zero(%x) {dim = "a", bound = 8} : i64[3,a], i64[]
  %c = less(%y, %y) : bool[5]
  %z = not(%c) : bool[5]
  %j, %nb = non_zero(%z) {dim = "b", bound = 5} : i64[1,b], i64[]
  return %i, %na, %j, %nb
}
)";
  check("nzi", text, {"non_zero", "non_zero"}, 3, [](const Graph &g, unsigned seed) {
    std::vector<int64_t> ints = {0, 3, 0, -1, 7, 0, 0, 2};
    std::rotate(ints.begin(), ints.begin() + seed, ints.end());
    return uniform(g, seed, -1.0f, 1.0f, ints);
  });
}

TEST_CASE("data dims: top_k with a run-time k from set_dim") {
  const char *text =
      R"(graph @tk dims(k = [0, 5, 5])(%x: f32[3,5], %kv: i64[1]) -> (%v: f32[3,k], %i: i64[3,k], %kc: i64[]) {
  %kc = set_dim(%kv) {dim = "k", bound = 5} : i64[]
  %r = relu(%x) : f32[3,5]
  %v, %i = top_k(%r, %kc) {k = 5, axis = 1, sym_k = ["k"]} : f32[3,k], i64[3,k]
  return %v, %i, %kc
}
)";
  check("tk", text, {"set_dim", "top_k"}, 6, [](const Graph &g, unsigned seed) {
    return uniform(g, seed, -1.0f, 1.0f, {int64_t(seed % 6)}); // k = 0 .. 5
  });
}

TEST_CASE("data dims: top_k along a length known only at run time, its k from set_dim") {
  // The top min(3, count) of the positive elements: the line's length is non_zero's count (a),
  // the passes set_dim's (k), both read from the dims by the top_k kernel.
  const char *text =
      R"(graph @tks dims(a = [0, 8, 8], k = [0, 8, 8])(%x: f32[8], %kv: i64[1]) -> (%v: f32[k], %i: i64[k]) {
  %h = weight f32[1] = [0.0]
  %m = greater(%x, %h) : bool[8]
  %i0, %n = non_zero(%m) {dim = "a", bound = 8} : i64[1,a], i64[]
  %i1 = reshape(%i0) {shape = [8], sym_shape = ["a"]} : i64[a]
  %g = gather(%x, %i1) {axis = 0} : f32[a]
  %n1 = reshape(%n) {shape = [1]} : i64[1]
  %km = min(%n1, %kv) : i64[1]
  %kc = set_dim(%km) {dim = "k", bound = 8} : i64[]
  %v, %i = top_k(%g, %kc) {k = 8, axis = 0, sym_k = ["k"]} : f32[k], i64[k]
  return %v, %i
}
)";
  check("tks", text, {"non_zero", "data_movement", "set_dim", "top_k"}, 8,
        [](const Graph &g, unsigned seed) {
          return uniform(g, seed, seed == 0 ? -1.0f : -0.5f, seed == 0 ? 0.0f : 1.0f, {3});
        });
}

TEST_CASE("data dims: choose between an empty constant and rows of run-time length") {
  // An If chosen at run time: no rows (a constant f32[0, 2]) or the rows of %t whose %x is
  // positive (a gather by non_zero's indices, their length a).
  const char *text =
      R"(graph @ch dims(a = [0, 6, 6], len = [0, 6, 6])(%x: f32[6], %t: f32[6,2], %s: f32[1]) -> (%r: f32[len,2], %n: i64[]) {
  %h = weight f32[1] = [0.0]
  %m = greater(%x, %h) : bool[6]
  %i, %ni = non_zero(%m) {dim = "a", bound = 6} : i64[1,a], i64[]
  %i1 = reshape(%i) {shape = [6], sym_shape = ["a"]} : i64[a]
  %g = gather(%t, %i1) {axis = 0} : f32[a,2]
  %e = weight f32[0,2] = []
  %c = greater(%s, %h) : bool[1]
  %r, %n = choose(%c, %e, %g) {dim = "len", bound = 6} : f32[len,2], i64[]
  return %r, %n
}
)";
  check("ch", text, {"non_zero", "data_movement", "choose"}, 8,
        [](const Graph &g, unsigned seed) { return uniform(g, seed, -1.0f, 1.0f); });
}

namespace {

// Boxes on a coarse grid so that many overlap, some exactly at the thresholds (ties of IoU);
// scores from a few values in [0, 1) (ties of score). Exact in f16 too.
std::vector<Tensor> boxesAndScores(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> cell(0, 4), size(1, 4), level(0, 7);
  const Value *bv = g.inputs()[0], *sv = g.inputs()[1];
  Tensor boxes(bv->type()), scores(sv->type());
  for (int64_t i = 0; i < boxes.numel() / 4; ++i) {
    double y = 0.25 * cell(rng), x = 0.25 * cell(rng), h = 0.25 * size(rng), w = 0.25 * size(rng);
    // Corners in either order (y2 < y1 flips), as ONNX allows.
    bool flip = (i + seed) % 3 == 0;
    boxes.setDouble(4 * i + 0, flip ? y + h : y);
    boxes.setDouble(4 * i + 1, x);
    boxes.setDouble(4 * i + 2, flip ? y : y + h);
    boxes.setDouble(4 * i + 3, x + w);
  }
  for (int64_t i = 0; i < scores.numel(); ++i)
    scores.setDouble(i, 0.125 * level(rng));
  return {boxes, scores};
}

} // namespace

TEST_CASE("data dims: non_max_suppression, corners and centres, thresholds, ties") {
  // bound = batch x classes x min(max_per_class, boxes) = 2 x 3 x 5.
  const char *corners =
      R"(graph @nms dims(sel = [0, 30, 30])(%b: f32[2,7,4], %s: f32[2,3,7]) -> (%r: i64[sel,3], %n: i64[]) {
  %r, %n = non_max_suppression(%b, %s) {dim = "sel", bound = 30, max_per_class = 5, iou_threshold = 0.25, score_threshold = 0.2, has_score_threshold = 1} : i64[sel,3], i64[]
  return %r, %n
}
)";
  check("nms", corners, {"non_max_suppression"}, 16, boxesAndScores);
  // f16 boxes and scores, widened to f32 as the interpreter reads them.
  const char *half =
      R"(graph @nmh dims(sel = [0, 12, 12])(%b: f16[1,6,4], %s: f16[1,2,6]) -> (%r: i64[sel,3], %n: i64[]) {
  %r, %n = non_max_suppression(%b, %s) {dim = "sel", bound = 12, max_per_class = 6, iou_threshold = 0.2} : i64[sel,3], i64[]
  return %r, %n
}
)";
  check("nmh", half, {"non_max_suppression"}, 8, boxesAndScores);
  // f64: rounded to f32 as the interpreter reads them.
  const char *dbl =
      R"(graph @nmd dims(sel = [0, 12, 12])(%b: f64[1,6,4], %s: f64[1,2,6]) -> (%r: i64[sel,3], %n: i64[]) {
  %r, %n = non_max_suppression(%b, %s) {dim = "sel", bound = 12, max_per_class = 6, iou_threshold = 0.4, score_threshold = 0.3, has_score_threshold = 1} : i64[sel,3], i64[]
  return %r, %n
}
)";
  check("nmd", dbl, {"non_max_suppression"}, 8, boxesAndScores);
  // Centre boxes, no score threshold, every box may be kept (max_per_class above the count).
  const char *centres =
      R"(graph @nmc dims(sel = [0, 14, 14])(%b: f32[1,7,4], %s: f32[1,2,7]) -> (%r: i64[sel,3], %n: i64[]) {
  %r, %n = non_max_suppression(%b, %s) {dim = "sel", bound = 14, max_per_class = 9, iou_threshold = 0.5, center_point_box = 1} : i64[sel,3], i64[]
  return %r, %n
}
)";
  check("nmc", centres, {"non_max_suppression"}, 12, boxesAndScores);
}

// Small integers (duplicates) as f32, some NaN (NaN equals NaN here and sorts last); i64
// inputs the same integers.
std::vector<Tensor> fewValues(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 4);
  std::vector<Tensor> in;
  for (const Value *v : g.inputs()) {
    Tensor t(v->type());
    for (int64_t i = 0; i < t.numel(); ++i) {
      int k = pick(rng);
      if (isFloat(v->type().dtype))
        t.setDouble(i, k == 4 && seed % 2 ? std::nan("") : k - 1.5);
      else
        t.setInt(i, seed == 0 ? 3 : k - 2); // seed 0: one distinct value
    }
    in.push_back(std::move(t));
  }
  return in;
}

TEST_CASE("data dims: unique, sorted and by first occurrence, of values and of slices") {
  const char *text =
      R"(graph @uq dims(u = [0, 12, 12], w = [0, 12, 12], s = [0, 6, 6])(%x: f32[12], %z: i64[6,2,3]) -> (%y: f32[u], %i: i64[u], %v: i64[12], %c: i64[u], %y2: f32[w], %i2: i64[w], %v2: i64[12], %c2: i64[w], %ys: i64[s,2,3], %is: i64[s], %vs: i64[6], %cs: i64[s]) {
  %y, %i, %v, %c, %n = unique(%x) {dim = "u", bound = 12} : f32[u], i64[u], i64[12], i64[u], i64[]
  %y2, %i2, %v2, %c2, %n2 = unique(%x) {dim = "w", bound = 12, sorted = 0} : f32[w], i64[w], i64[12], i64[w], i64[]
  %ys, %is, %vs, %cs, %ns = unique(%z) {dim = "s", bound = 6} : i64[s,2,3], i64[s], i64[6], i64[s], i64[]
  return %y, %i, %v, %c, %y2, %i2, %v2, %c2, %ys, %is, %vs, %cs
}
)";
  check("uq", text, {"unique", "unique", "unique"}, 6, fewValues);
}

TEST_CASE("data dims: unique of what a non_zero selected, by first occurrence, fused prologue") {
  // The positive elements' distinct values (the line's length a data dim itself), their first
  // occurrences in that selection; unique reads x * 2 through its prologue.
  const char *text =
      R"(graph @uqs dims(a = [0, 10, 10], u = [0, 10, 10])(%x: f32[10]) -> (%y: f32[u], %i: i64[u], %v: i64[a], %c: i64[u]) {
  %h = weight f32[1] = [0.0]
  %m = greater(%x, %h) : bool[10]
  %i0, %n = non_zero(%m) {dim = "a", bound = 10} : i64[1,a], i64[]
  %i1 = reshape(%i0) {shape = [10], sym_shape = ["a"]} : i64[a]
  %g = gather(%x, %i1) {axis = 0} : f32[a]
  %t = weight f32[1] = [2.0]
  %d = mul(%g, %t) : f32[a]
  %y, %i, %v, %c, %k = unique(%d) {dim = "u", bound = 10, sorted = 0} : f32[u], i64[u], i64[a], i64[u], i64[]
  return %y, %i, %v, %c
}
)";
  Lowered l = lower(text, "cpu", "uqs_probe");
  std::vector<std::string> r = recipes(l);
  REQUIRE(!r.empty());
  CHECK(r == std::vector<std::string>{"non_zero", "data_movement", "unique"});
  check("uqs", text, r, 6, fewValues);
}

TEST_CASE("data dims: a count past the bound writes nothing past the reserve") {
  // non_zero and non_max_suppression with bounds below what the data gives (a --max bound):
  // the count says so (bound + 1 at least) and the run stops; the reserve's tail is untouched.
  const char *text =
      R"(graph @ov dims(len = [0, 3, 3], sel = [0, 2, 2])(%x: f32[6], %b: f32[1,4,4], %s: f32[1,1,4]) -> (%i: i64[1,len], %n: i64[], %r: i64[sel,3], %m: i64[]) {
  %i, %n = non_zero(%x) {dim = "len", bound = 3} : i64[1,len], i64[]
  %r, %m = non_max_suppression(%b, %s) {dim = "sel", bound = 2, max_per_class = 4, iou_threshold = 0.5} : i64[sel,3], i64[]
  return %i, %n, %r, %m
}
)";
  Lowered l = lower(text, "cpu", "ov");
  fs::path so = scratch() / "ov.so";
  compileHostSource(printHostSource(l.kernels), (scratch() / "ov.cpp").string(), so.string());
  LoadedLibrary lib(so.string());
  // Four non-zeros; four disjoint boxes, all kept.
  std::vector<Tensor> in = {Tensor(l.g->inputs()[0]->type()), Tensor(l.g->inputs()[1]->type()),
                            Tensor(l.g->inputs()[2]->type())};
  const float x[6] = {1, 0, 2, 3, 0, 4};
  std::memcpy(in[0].raw(), x, sizeof x);
  for (int i = 0; i < 4; ++i) {
    const float box[4] = {float(2 * i), 0, float(2 * i + 1), 1};
    std::memcpy(in[1].raw() + 16 * i, box, sizeof box);
    in[2].data<float>()[i] = 0.5f;
  }
  std::string overflow;
  CHECK(runKernels(l, lib, in, &overflow).empty());
  CHECK(overflow == "len");
  // The kernels one at a time: counts above the bounds, reserves intact past them.
  for (size_t gi = 0; gi < l.part.groups.size(); ++gi) {
    const KernelGroup &grp = l.part.groups[gi];
    const Value *data = grp.anchor->result(0), *count = grp.anchor->result(1);
    std::vector<int64_t> reserve(static_cast<size_t>(data->type().numel()) + 4, -7);
    int64_t n = -1;
    std::vector<void *> args;
    for (const Value *v : grp.inputs)
      args.push_back(
          in[static_cast<size_t>(std::find(l.g->inputs().begin(), l.g->inputs().end(), v) -
                                 l.g->inputs().begin())]
              .raw());
    args.push_back(reserve.data());
    args.push_back(&n);
    std::vector<int64_t> dims(l.kernels[gi].dims.size(), 0);
    args.push_back(dims.data());
    REQUIRE(grp.outputs ==
            std::vector<Value *>{const_cast<Value *>(data), const_cast<Value *>(count)});
    lib.kernel(l.kernels[gi].name)(args.data());
    CAPTURE(grp.anchor->name());
    CHECK(n > grp.anchor->i("bound"));
    for (size_t i = static_cast<size_t>(data->type().numel()); i < reserve.size(); ++i)
      CHECK(reserve[i] == -7);
    if (grp.anchor->op() == Op::NonZero) {
      CHECK(n == 4);
      CHECK(reserve[0] == -7); // no index written: the row stride would be the count
    } else {
      CHECK(n == 3);
      CHECK(std::vector<int64_t>(reserve.begin(), reserve.begin() + 6) ==
            std::vector<int64_t>{0, 0, 0, 0, 0, 1});
    }
  }
}

TEST_CASE("data dims: unique past its bound stops the run, sorted or not") {
  // Four distinct values against bounds of 2 (a --max below the data): the count says 4 and
  // the run stops there; nothing is written past the reserves (the ASan build checks it).
  const char *text =
      R"(graph @uqo dims(u = [0, 2, 2], w = [0, 2, 2])(%x: f32[6]) -> (%y: f32[u], %c: i64[u], %y2: f32[w], %c2: i64[w]) {
  %y, %i, %v, %c, %n = unique(%x) {dim = "u", bound = 2} : f32[u], i64[u], i64[6], i64[u], i64[]
  %y2, %i2, %v2, %c2, %n2 = unique(%x) {dim = "w", bound = 2, sorted = 0} : f32[w], i64[w], i64[6], i64[w], i64[]
  return %y, %c, %y2, %c2
}
)";
  for (int sorted = 1; sorted >= 0; --sorted) {
    std::string t = text;
    if (!sorted) // only the second unique: drop the first's outputs
      t = R"(graph @uqo dims(w = [0, 2, 2])(%x: f32[6]) -> (%y2: f32[w], %c2: i64[w]) {
  %y2, %i2, %v2, %c2, %n2 = unique(%x) {dim = "w", bound = 2, sorted = 0} : f32[w], i64[w], i64[6], i64[w], i64[]
  return %y2, %c2
}
)";
    Lowered l = lower(t, "cpu", cat("uqo", sorted));
    fs::path so = scratch() / cat("uqo", sorted, ".so");
    compileHostSource(printHostSource(l.kernels), (scratch() / cat("uqo", sorted, ".cpp")).string(),
                      so.string());
    LoadedLibrary lib(so.string());
    Tensor x(l.g->inputs()[0]->type());
    const float v[6] = {3, 1, 3, 2, 0, 1};
    std::memcpy(x.raw(), v, sizeof v);
    std::string overflow;
    CHECK(runKernels(l, lib, {x}, &overflow).empty());
    CHECK(overflow == (sorted ? "u" : "w"));
  }
}

TEST_CASE("data dims: fusion stores every result of a dim's setter, read or not") {
  // non_zero's count and non_max_suppression's rows are read by nothing: stored all the same
  // (the runtime reads the count; non_max_suppression reads its rows back). %c (count + 1) and
  // %t (a transpose of the indices) run in later kernels.
  const char *text =
      R"(graph @fu dims(len = [0, 6, 6], sel = [0, 4, 4])(%x: f32[2,3], %b: f32[1,4,4], %s: f32[1,1,4]) -> (%t: i64[len,2], %c: i64[]) {
  %i, %n = non_zero(%x) {dim = "len", bound = 6} : i64[2,len], i64[]
  %t = transpose(%i) {perm = [1, 0]} : i64[len,2]
  %r, %m = non_max_suppression(%b, %s) {dim = "sel", bound = 4, max_per_class = 4} : i64[sel,3], i64[]
  %one = weight i64[] = [1]
  %c = add(%m, %one) : i64[]
  return %t, %c
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "fu.mcir");
  Partition p = partitionGraph(*g);
  int setters = 0;
  for (const KernelGroup &grp : p.groups)
    if (grp.anchor && grp.anchor->info().has(SETS_DIM)) {
      CAPTURE(grp.anchor->name());
      ++setters;
      CHECK(grp.nodes.size() == 1);
      CHECK(grp.outputs == grp.anchor->results());
      CHECK(grp.storeThrough.empty());
    }
  CHECK(setters == 2);
}

TEST_CASE("data dims: a set_dim's count is its group's own output, stored where it is") {
  // %c would be set_dim's epilogue, and %j's concat would have set_dim store its count into
  // the concat's buffer (rule 0's producer side): neither, by rule 11.
  for (const char *text :
       {R"(graph @fe dims(k = [0, 4, 4])(%kv: i64[1]) -> (%c: i64[]) {
  %kc = set_dim(%kv) {dim = "k", bound = 4} : i64[]
  %one = weight i64[] = [1]
  %c = add(%kc, %one) : i64[]
  return %c
}
)",
        R"(graph @fc dims(k = [0, 4, 4])(%kv: i64[1], %o: i64[1]) -> (%j: i64[2]) {
  %kc = set_dim(%kv) {dim = "k", bound = 4} : i64[]
  %r = reshape(%kc) {shape = [1]} : i64[1]
  %o2 = add(%o, %o) : i64[1]
  %j = concat(%r, %o2) {axis = 0} : i64[2]
  return %j
}
)"}) {
    std::unique_ptr<Graph> g = parseGraph(text, "fc.mcir");
    Partition p = partitionGraph(*g);
    const KernelGroup *sd = nullptr;
    for (const KernelGroup &grp : p.groups)
      if (grp.anchor && grp.anchor->op() == Op::SetDim)
        sd = &grp;
    REQUIRE(sd);
    CHECK(sd->nodes.size() == 1);
    CHECK(sd->outputs == sd->anchor->results());
    CHECK(sd->storeThrough.empty());
  }
}

TEST_CASE(
    "data dims: producers of run-time lengths store no concat; the dim's setter comes first") {
  // %j: a concat of two gathers of a's length is not stored by them (rule 0's producer side):
  // its readers read it through the map, after every piece. %s: a slice to run-time length k
  // reads k's value, not set_dim's count; written before set_dim (the IR orders by data edges
  // only), its kernel still runs after set_dim's.
  const char *text =
      R"(graph @ord dims(a = [0, 6, 6], k = [0, 6, 6])(%x: f32[6], %y: f32[6], %kv: i64[1]) -> (%j: f32[2*a], %s: f32[k]) {
  %h = weight f32[1] = [0.0]
  %m = greater(%x, %h) : bool[6]
  %i, %n = non_zero(%m) {dim = "a", bound = 6} : i64[1,a], i64[]
  %i1 = reshape(%i) {shape = [6], sym_shape = ["a"]} : i64[a]
  %g = gather(%x, %i1) {axis = 0} : f32[a]
  %g2 = gather(%y, %i1) {axis = 0} : f32[a]
  %j = concat(%g, %g2) {axis = 0} : f32[2*a]
  %s = slice(%y) {starts = [0], ends = [6], axes = [0], steps = [1], sym_ends = ["k"]} : f32[k]
  %kc = set_dim(%kv) {dim = "k", bound = 6} : i64[]
  return %j, %s
}
)";
  std::unique_ptr<Graph> g = parseGraph(text, "ord.mcir");
  Partition p = partitionGraph(*g);
  int setK = -1, slice = -1;
  for (const KernelGroup &grp : p.groups) {
    CHECK(grp.storeThrough.empty());
    for (const Node *n : grp.nodes) {
      if (n->op() == Op::SetDim)
        setK = grp.id;
      if (n->op() == Op::Slice)
        slice = grp.id;
    }
  }
  REQUIRE(setK >= 0);
  REQUIRE(slice >= 0);
  CHECK(setK < slice);
}
