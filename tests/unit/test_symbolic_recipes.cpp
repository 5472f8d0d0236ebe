// Symbolic dims (issue 21) through the pointwise, online_norm, reduction and data_movement
// recipes: small graphs in IR text, each compiled once for a range of a dim into a folder (the
// compile includes the shape-generic certificate: every kernel lowered again at the range's
// ends must print the same Kernel IR), then run through the runtime C API at several values of
// the dim, the range's ends included, against the interpreter on a static twin of the graph (the
// same text with the dim bound to that value, the same seeded weights and inputs).
//
// Tolerance: |got - want| <= 1e-4 + 1e-4 |want| (graph_checks::checkClose), as for every
// compiled-versus-interpreter check: the kernels compute in f32 what the interpreter computes
// in double and rounds once, and the reductions reassociate.
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "target/target.h"
#include "tests/unit/conv_family_net.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace aicf;

namespace {

using Point = std::map<std::string, int64_t>; // a value for each dim

// The graph text for one point: `tmpl` with
//   $D       the dims clause (symbolic) or nothing (static),
//   $(e)     the dim expression e (symbolic) or its value (static), for types,
//   $[e]     e's value at the planning point (symbolic) or at the point (static), for
//            attributes,
//   <<...>>  kept in the symbolic text only (a reshape's sym_shape).
// `point` empty: the symbolic text.
std::string instantiate(const std::string &tmpl, const std::vector<DimRange> &dims,
                        const std::optional<Point> &point) {
  Point at;
  std::string clause;
  for (const DimRange &d : dims) {
    at[d.name] = d.opt;
    clause += cat(clause.empty() ? "" : ", ", d.name, " = [", d.min, ", ", d.max, ", ", d.opt, "]");
  }
  if (point)
    at = *point;
  auto eval = [&](const std::string &text) {
    std::optional<SymExpr> e = SymExpr::parse(text);
    REQUIRE_MESSAGE(e, text);
    std::optional<int64_t> v = e->eval(at);
    REQUIRE(v);
    return std::to_string(*v);
  };
  std::string out;
  for (size_t i = 0; i < tmpl.size();) {
    if (tmpl.compare(i, 2, "$D") == 0) {
      if (!point)
        out += cat(" dims(", clause, ")");
      i += 2;
    } else if (tmpl.compare(i, 2, "$(") == 0 || tmpl.compare(i, 2, "$[") == 0) {
      bool type = tmpl[i + 1] == '(';
      size_t end = tmpl.find(type ? ')' : ']', i + 2);
      REQUIRE(end != std::string::npos);
      std::string e = tmpl.substr(i + 2, end - i - 2);
      out += type && !point ? e : eval(e);
      i = end + 1;
    } else if (tmpl.compare(i, 2, "<<") == 0) {
      size_t end = tmpl.find(">>", i);
      REQUIRE(end != std::string::npos);
      if (!point)
        out += tmpl.substr(i + 2, end - i - 2);
      i = end + 2;
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

// Seeded inputs: f32 in [-2, 2); i64 (gather indices) -1 or 0, in range of any axis, -1
// wrapping to its last element.
std::vector<Tensor> seededInputs(const Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<Tensor> in;
  for (const Value *v : g.inputs()) {
    Tensor t(v->type());
    if (v->type().dtype == DType::I64) {
      int64_t *d = t.data<int64_t>();
      for (int64_t i = 0; i < t.numel(); ++i)
        d[i] = dist(rng) < 0 ? -1 : 0;
    } else {
      REQUIRE(v->type().dtype == DType::F32);
      float *d = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i)
        d[i] = dist(rng);
    }
    in.push_back(std::move(t));
  }
  return in;
}

// What one symbolic compile made: the kernels' recipes in step order, how many of them read the
// dims, and the source.
struct Compiled {
  std::vector<std::string> recipes;
  int symbolic = 0;
  std::string layout; // the layout ops' decisions in graph order: "transpose:fold,..."
  std::string source;
};

int64_t count(const std::vector<std::string> &v, const std::string &x) {
  return std::count(v.begin(), v.end(), x);
}

// Compiles `tmpl`'s symbolic text once (cpu target, `opts`), then for every value runs the folder
// with inputs of that shape and compares each output with the interpreter's on the static twin.
Compiled runAcross(const std::string &tmpl, const std::vector<DimRange> &dims,
                   const std::vector<Point> &points, CompileOptions opts = {}) {
  std::unique_ptr<Graph> g = parseGraph(instantiate(tmpl, dims, std::nullopt), "sym.mcir");
  graph_checks::fillWeights(*g, 7);
  CompiledModel cm = buildModel(*g, opts);
  static int built = 0;
  std::string out =
      (test_files::scratchDir("aicf_symbolic_recipes_") / cat("net", built++)).string();
  writeArtifacts(*g, cm, opts, out);
  Compiled c;
  for (const kir::Kernel &k : cm.kernels) {
    c.recipes.push_back(k.recipe);
    c.symbolic += k.dims.empty() ? 0 : 1;
  }
  c.source = cm.source;
  for (const LayoutFoldRecord &r : cm.plan.layoutFolds)
    c.layout += cat(c.layout.empty() ? "" : ",", r.op, ":", r.decision());
  aicf_model *m = aicf_open(out.c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  for (const Point &p : points) {
    std::string where;
    unsigned seed = 100;
    for (const auto &[name, value] : p) {
      where += cat(where.empty() ? "" : ", ", name, "=", value);
      seed = seed * 31 + static_cast<unsigned>(value);
    }
    CAPTURE(where);
    std::unique_ptr<Graph> gs = parseGraph(instantiate(tmpl, dims, p), "static.mcir");
    graph_checks::fillWeights(*gs, 7);
    std::vector<Tensor> in = seededInputs(*gs, seed);
    std::vector<Tensor> want = interpret(*gs, in);
    REQUIRE(static_cast<int>(in.size()) == aicf_num_inputs(m));
    REQUIRE(static_cast<int>(want.size()) == aicf_num_outputs(m));
    std::vector<const void *> ip;
    for (size_t i = 0; i < in.size(); ++i) {
      const std::vector<int64_t> &s = in[i].shape();
      REQUIRE_MESSAGE(
          aicf_set_input_shape(m, static_cast<int>(i), static_cast<int>(s.size()), s.data()) == 0,
          aicf_last_error());
      ip.push_back(in[i].raw());
    }
    std::vector<Tensor> got;
    std::vector<void *> op;
    for (size_t i = 0; i < want.size(); ++i) {
      aicf_tensor_info info;
      REQUIRE_MESSAGE(aicf_output_info(m, static_cast<int>(i), &info) == 0, aicf_last_error());
      std::vector<int64_t> shape(info.shape, info.shape + info.rank);
      CHECK(shape == want[i].shape());
      got.emplace_back(want[i].type());
    }
    for (Tensor &t : got)
      op.push_back(t.raw());
    REQUIRE_MESSAGE(aicf_run(m, ip.data(), op.data()) == 0, aicf_last_error());
    for (size_t i = 0; i < want.size(); ++i) {
      CAPTURE(i);
      graph_checks::checkClose(got[i], want[i]);
    }
  }
  aicf_close(m);
  return c;
}

// One dim: its values.
Compiled runAcross(const std::string &tmpl, const DimRange &dim, const std::vector<int64_t> &values,
                   CompileOptions opts = {}) {
  std::vector<Point> points;
  for (int64_t v : values)
    points.push_back({{dim.name, v}});
  return runAcross(tmpl, std::vector<DimRange>{dim}, points, std::move(opts));
}

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += (s.empty() ? "" : ",") + x;
  return s;
}

const DimRange kN{"n", 1, 40, 16};

// [n, 128] with a [n, 1] column, a [128] row and a scalar: the collapsed loop, its grid and its
// guard from n; the column broadcast along the row.
const char *kElementwise =
    R"(graph @g$D(%x: f32[$(n),128], %c: f32[$(n),1]) -> (%y: f32[$(n),128]) {
  %w = weight f32[128]
  %h = weight f32[]
  %a = mul(%x, %c) : f32[$(n),128]
  %b = add(%a, %w) : f32[$(n),128]
  %d = sub(%b, %h) : f32[$(n),128]
  %y = gelu(%d) {approximate = "none"} : f32[$(n),128]
  return %y
}
)";

// Rows from n (the grid), the normalised length static; the residual add before the norm is a
// prologue read through the symbolic strides.
const char *kRowNorms =
    R"(graph @g$D(%x: f32[$(n),96], %r: f32[$(n),96]) -> (%y: f32[$(n),96], %z: f32[$(n),96]) {
  %w = weight f32[96]
  %b = weight f32[96]
  %s = add(%x, %r) : f32[$(n),96]
  %y = layer_norm(%s, %w, %b) {axis = 1, epsilon = 1e-5} : f32[$(n),96]
  %z = rms_norm(%x, %w) {axis = 1, epsilon = 1e-6} : f32[$(n),96]
  return %y, %z
}
)";

// %p: rows of 24 over 3n rows; %q: softmax over n itself (a strided row of symbolic length, its
// walk's steps and guard from n); %r: rms_norm over a symbolic row length (its divisor read
// from n), between two transposes.
const char *kSoftmax =
    R"(graph @g$D(%x: f32[3,$(n),24]) -> (%p: f32[3,$(n),24], %q: f32[3,$(n),24], %r: f32[3,$(n),24]) {
  %p = softmax(%x) {axis = -1} : f32[3,$(n),24]
  %q = softmax(%x) {axis = 1} : f32[3,$(n),24]
  %t = transpose(%x) {perm = [0, 2, 1]} : f32[3,24,$(n)]
  %u = rms_norm(%t) {axis = 2, epsilon = 1e-6} : f32[3,24,$(n)]
  %r = transpose(%u) {perm = [0, 2, 1]} : f32[3,$(n),24]
  return %p, %q, %r
}
)";

// %m: reduce_mean over n itself (the fold's count and the mean's divisor from n), then broadcast
// back against [3, n, 24]; %s: reduce_sum over the static row, n rows (the grid); %c over n with
// a kept innermost dim of 32: the host's 16-output column form, its count n.
const char *kReductions =
    R"(graph @g$D(%x: f32[3,$(n),24], %y: f32[$(n),32]) -> (%d: f32[3,$(n),24], %s: f32[3,$(n),1], %c: f32[1,32]) {
  %m = reduce_mean(%x) {axes = [1], keepdims = 1} : f32[3,1,24]
  %d = sub(%x, %m) : f32[3,$(n),24]
  %s = reduce_sum(%x) {axes = [2], keepdims = 1} : f32[3,$(n),1]
  %c = reduce_max(%y) {axes = [0], keepdims = 1} : f32[1,32]
  return %d, %s, %c
}
)";

// %t: a transpose moving n inward; %c: a concat along n of two computed operands, read by a
// softmax; %e: a concat along a static axis; %q, %k, %v: a split along a static axis, its
// pieces read by one elementwise kernel; %r: a reshape of [n, 4, 8] to [n, 32], a view read by a
// layer_norm.
const char *kLayout =
    R"(graph @g$D(%x: f32[$(n),4,8], %y: f32[$(n),4,8], %z: f32[$(n),48]) -> (%t: f32[4,$(n),8], %c: f32[$(n*2),4,8], %e: f32[$(n),4,16], %o: f32[$(n),16], %l: f32[$(n),32]) {
  %w = weight f32[32]
  %t = transpose(%x) {perm = [1, 0, 2]} : f32[4,$(n),8]
  %a = relu(%x) : f32[$(n),4,8]
  %b = tanh(%y) : f32[$(n),4,8]
  %j = concat(%a, %b) {axis = 0} : f32[$(n*2),4,8]
  %c = softmax(%j) {axis = 0} : f32[$(n*2),4,8]
  %e = concat(%x, %y) {axis = 2} : f32[$(n),4,16]
  %q, %k, %v = split(%z) {axis = 1, sizes = [16, 16, 16]} : f32[$(n),16], f32[$(n),16], f32[$(n),16]
  %qk = add(%q, %k) : f32[$(n),16]
  %o = mul(%qk, %v) : f32[$(n),16]
  %r = reshape(%x) {shape = [$[n], 32]<<, sym_shape = ["n", "32"]>>} : f32[$(n),32]
  %l = layer_norm(%r, %w) {axis = 1, epsilon = 1e-5} : f32[$(n),32]
  return %t, %c, %e, %o, %l
}
)";

// %s: the last two rows (a slice whose start n - 2 is read from the dims); %h: rows 1 .. n (a
// symbolic end: n - 1 rows); %e: an expand of a [n, 1] column to [n, 8]; %t: a tile doubling the
// rows; %g: an embedding lookup of n ids; %f: a gather of rows -1 / 0 of %x, -1 wrapping to row
// n - 1; %a / %b: arg_max over n and along the rows. (n from 2: %h is empty at n = 1.)
const char *kGathers =
    R"(graph @g$D(%x: f32[$(n),8], %c: f32[$(n),1], %ids: i64[$(n)], %r: i64[3]) -> (%s: f32[2,8], %h: f32[$(n-1),8], %e: f32[$(n),8], %t: f32[$(n*2),8], %g: f32[$(n),8], %f: f32[3,8], %a: i64[1,8], %b: i64[$(n)]) {
  %table = weight f32[10,8]
  %s = slice(%x) {starts = [$[n-2]], ends = [$[n]], axes = [0], steps = [1]<<, sym_starts = ["n-2"], sym_ends = ["n"]>>} : f32[2,8]
  %h = slice(%x) {starts = [1], ends = [$[n]], axes = [0], steps = [1]<<, sym_ends = ["n"]>>} : f32[$(n-1),8]
  %e = expand(%c) {shape = [$[n], 8]<<, sym_shape = ["n", "8"]>>} : f32[$(n),8]
  %t = tile(%x) {repeats = [2, 1]} : f32[$(n*2),8]
  %g = gather(%table, %ids) {axis = 0} : f32[$(n),8]
  %f = gather(%x, %r) {axis = 0} : f32[3,8]
  %a = arg_max(%x) {axis = 0, keepdims = 1} : i64[1,8]
  %b = arg_max(%x) {axis = 1, keepdims = 0} : i64[$(n)]
  return %s, %h, %e, %t, %g, %f, %a, %b
}
)";
const DimRange kFrom2{"n", 2, 40, 16};

// Layout ops over n folded into their readers, read op by op from the dims' expressions: %e an
// expand of a [n, 1] column (index 0 on its constant-1 dim), %h a slice with a symbolic end
// read by a reduction, %j a concat along n of two inputs read by a softmax over n (a select on
// the bound n), %t a transpose read through a reshape that only splits the static 8 into
// 2 x 4. %u is read through a reshape regrouping n itself ([8, n] to [8 n]): a division by n
// per element, so the transpose under it is a kernel.
const char *kFolds =
    R"(graph @g$D(%x: f32[$(n),8], %c: f32[$(n),1], %y: f32[$(n),8]) -> (%o: f32[$(n),8], %s: f32[1,8], %p: f32[$(n*2),8], %q: f32[2,4,$(n)], %z: f32[$(n*8)]) {
  %e = expand(%c) {shape = [$[n], 8]<<, sym_shape = ["n", "8"]>>} : f32[$(n),8]
  %o = mul(%e, %x) : f32[$(n),8]
  %h = slice(%x) {starts = [1], ends = [$[n]], axes = [0], steps = [1]<<, sym_ends = ["n"]>>} : f32[$(n-1),8]
  %s = reduce_sum(%h) {axes = [0], keepdims = 1} : f32[1,8]
  %j = concat(%x, %y) {axis = 0} : f32[$(n*2),8]
  %p = softmax(%j) {axis = 0} : f32[$(n*2),8]
  %t = transpose(%x) {perm = [1, 0]} : f32[8,$(n)]
  %t2 = reshape(%t) {shape = [2, 4, $[n]]<<, sym_shape = ["2", "4", "n"]>>} : f32[2,4,$(n)]
  %q = sigmoid(%t2) : f32[2,4,$(n)]
  %u = transpose(%y) {perm = [1, 0]} : f32[8,$(n)]
  %r = reshape(%u) {shape = [$[n*8]]<<, sym_shape = ["8*n"]>>} : f32[$(n*8)]
  %z = relu(%r) : f32[$(n*8)]
  return %o, %s, %p, %q, %z
}
)";

} // namespace

TEST_CASE("symbolic recipes: elementwise chain with broadcast operands") {
  Compiled c = runAcross(kElementwise, kN, {1, 3, 16, 17, 40});
  CHECK(joined(c.recipes) == "pointwise");
  CHECK(c.symbolic == 1);
  // One flat loop of 128 n elements, 16 at a time: 8 n blocks, no guard.
  CHECK(c.source.find("const int64_t aicf_g0 = 8L * sym_n;") != std::string::npos);
}

TEST_CASE("symbolic recipes: a static layout op folded into a symbolic elementwise kernel") {
  // The transpose of a [8, 4] weight is static: it folds into the add as before (its map holds
  // for every n), the kernel reading the weight through it at the full multi-index.
  const char *tmpl = R"(graph @g$D(%x: f32[$(n),4,8]) -> (%y: f32[$(n),4,8]) {
  %w = weight f32[8,4]
  %wt = transpose(%w) {perm = [1, 0]} : f32[4,8]
  %y = add(%x, %wt) : f32[$(n),4,8]
  return %y
}
)";
  Compiled c = runAcross(tmpl, kN, {1, 5, 40});
  CHECK(joined(c.recipes) == "pointwise");
}

TEST_CASE("symbolic recipes: layer_norm and rms_norm over symbolic rows") {
  Compiled c = runAcross(kRowNorms, kN, {1, 2, 16, 33, 40});
  CHECK(joined(c.recipes) == "online_norm,online_norm");
  CHECK(c.symbolic == 2);
}

TEST_CASE("symbolic recipes: softmax along rows and along the symbolic axis") {
  Compiled c = runAcross(kSoftmax, kN, {1, 5, 16, 40});
  CHECK(joined(c.recipes) == "online_norm,online_norm,online_norm");
  // The first transpose folds into the rms_norm's reads, the second is its store order.
  CHECK(c.layout == "transpose:fold,transpose:store");
}

TEST_CASE("symbolic recipes: norms over a symbolic row length, more threads than elements") {
  // Planned for rows of 512, the host layer_norm splits a row over 32 Welford chains (threads):
  // rows of 1 or 3 leave most of them empty, which the merge must ignore; the softmax and
  // rms_norm states likewise.
  const char *tmpl =
      R"(graph @g$D(%x: f32[4,$(n)]) -> (%l: f32[4,$(n)], %r: f32[4,$(n)], %s: f32[4,$(n)]) {
  %l = layer_norm(%x) {axis = 1, epsilon = 1e-5} : f32[4,$(n)]
  %r = rms_norm(%x) {axis = 1, epsilon = 1e-6} : f32[4,$(n)]
  %s = log_softmax(%x) {axis = 1} : f32[4,$(n)]
  return %l, %r, %s
}
)";
  Compiled c = runAcross(tmpl, DimRange{"n", 1, 512, 512}, {1, 3, 100, 512});
  CHECK(joined(c.recipes) == "online_norm,online_norm,online_norm");
}

TEST_CASE("symbolic recipes: reductions over kept and reduced symbolic dims") {
  Compiled c = runAcross(kReductions, kN, {1, 7, 16, 40});
  CHECK(count(c.recipes, "reduction") == 3);
}

TEST_CASE("symbolic recipes: transpose, concat and split over symbolic dims") {
  Compiled c = runAcross(kLayout, kN, {1, 2, 16, 31, 40});
  // Graph outputs are kernels (data_movement); the concat along n is stored by its producers
  // (each writes its rows at an offset from n); the split folds into the elementwise reader.
  CHECK(c.layout == "transpose:materialize,concat:store,concat:materialize,split:fold");
  CHECK(joined(c.recipes) ==
        "data_movement,pointwise,pointwise,online_norm,data_movement,pointwise,online_norm");
}

TEST_CASE("symbolic recipes: slice, expand, tile, gather and arg_max over symbolic dims") {
  Compiled c = runAcross(kGathers, kFrom2, {2, 3, 16, 29, 40});
  CHECK(c.layout == "slice:materialize,slice:materialize,expand:materialize"); // graph outputs
  CHECK(count(c.recipes, "data_movement") == 6);
  CHECK(count(c.recipes, "reduction") == 2);
}

TEST_CASE("symbolic recipes: layout ops over symbolic dims folded into their readers") {
  Compiled c = runAcross(kFolds, kFrom2, {2, 3, 16, 33, 40});
  CHECK(c.layout == "expand:fold,slice:fold,concat:fold,transpose:fold,transpose:materialize");
  CHECK(joined(c.recipes) == "pointwise,reduction,online_norm,pointwise,data_movement,pointwise");
  CHECK(c.symbolic == 6);
}

TEST_CASE("symbolic recipes: two symbolic dims") {
  // b and s both symbolic: a [b, s, 64] chain with a per-batch [b, 1, 64] operand, a softmax
  // over s (b * 64 strided rows of length s), a layer_norm over 64 (b * s rows), a mean over s,
  // and the heads transpose [b, s, 2, 32] -> [b, 2, s, 32] (a graph output: a kernel).
  const char *tmpl =
      R"(graph @g$D(%x: f32[$(b),$(s),64], %p: f32[$(b),1,64]) -> (%y: f32[$(b),$(s),64], %q: f32[$(b),$(s),64], %l: f32[$(b),$(s),64], %m: f32[$(b),1,64], %h: f32[$(b),2,$(s),32]) {
  %w = weight f32[64]
  %a = add(%x, %p) : f32[$(b),$(s),64]
  %y = tanh(%a) : f32[$(b),$(s),64]
  %q = softmax(%x) {axis = 1} : f32[$(b),$(s),64]
  %l = layer_norm(%a, %w) {axis = 2, epsilon = 1e-5} : f32[$(b),$(s),64]
  %m = reduce_mean(%x) {axes = [1], keepdims = 1} : f32[$(b),1,64]
  %r = reshape(%x) {shape = [$[b], $[s], 2, 32]<<, sym_shape = ["b", "s", "2", "32"]>>} : f32[$(b),$(s),2,32]
  %h = transpose(%r) {perm = [0, 2, 1, 3]} : f32[$(b),2,$(s),32]
  return %y, %q, %l, %m, %h
}
)";
  std::vector<DimRange> dims = {{"b", 1, 4, 2}, {"s", 1, 48, 16}};
  Compiled c = runAcross(
      tmpl, dims,
      {{{"b", 1}, {"s", 1}}, {{"b", 4}, {"s", 48}}, {{"b", 3}, {"s", 7}}, {{"b", 1}, {"s", 48}}});
  CHECK(c.symbolic == static_cast<int>(c.recipes.size()));
  CHECK(c.layout == "transpose:materialize"); // a graph output
}

// A small CNN over a symbolic batch: dense, depthwise and 1x1 convs with epilogues, pooling,
// a squeeze-and-excitation gate, a residual, a channel concat, an instance norm, a resize and a
// pad (tests/unit/conv_family_net.h, plus the last three). Their recipes plan one shape; each
// kernel is lowered for one image and run once per image (lower/per_image.h).
const std::string kConvFamily =
    std::string(
        "graph @g$D(%x: f32[$(n),3,20,20]) -> (%y: f32[$(n),64], %u: f32[$(n),40,22,22]) {\n"
        "  %sc = weight f32[40]\n"
        "  %sh = weight f32[40]\n") +
    test_nets::kConvFamilyBody +
    "  %y = reduce_mean(%cat) {axes = [2, 3], keepdims = 0} : f32[$(n),64]\n"
    "  %in = instance_norm(%res, %sc, %sh) {epsilon = 1e-5}\n"
    "  %up = resize(%in) {sizes = [$[n], 40, 20, 20], scales = [1.0, 1.0, 4.0, 4.0], mode = "
    "\"nearest\"}\n"
    "  %u = pad(%up) {pads = [0, 0, 1, 1, 0, 0, 1, 1]} : f32[$(n),40,22,22]\n"
    "  return %y, %u\n}\n";
TEST_CASE("symbolic recipes: the conv family over a symbolic batch, one image at a time") {
  Compiled c = runAcross(kConvFamily, DimRange{"n", 1, 8, 4}, {1, 3, 4, 8});
  CHECK(c.symbolic == static_cast<int>(c.recipes.size()));
  CHECK(count(c.recipes, "tiled_contraction") >= 3); // the dense convs, channel-blocked
  CHECK(count(c.recipes, "pooling") >= 1);
  CHECK(c.source.find("one image of the batch n per step of grid axis img") != std::string::npos);
  // A pad of the batch dim moves data across images: refused, naming the dim to bind.
  const char *across = R"(graph @g dims(n = [1, 8, 4])(%x: f32[n,3,4,4]) -> (%y: f32[n+1,3,4,4]) {
  %y = pad(%x) {pads = [1, 0, 0, 0, 0, 0, 0, 0]}
  return %y
}
)";
  CHECK_THROWS_WITH(parseGraph(across, "across.mcir"),
                    doctest::Contains("pad of f32[n,3,4,4] reads across dim 0 (n): it cannot be "
                                      "symbolic here; bind it with --dim NAME=N"));
}

TEST_CASE("symbolic recipes: GPU plans emulated on the host") {
  // --plan-for cuda:sm_90 on the cpu target: the GPU schedules (a block of threads per row with
  // block_reduce merges, 128-thread flat loops, 4-wide vectors) over the same symbolic dims.
  CompileOptions opts;
  opts.planFor = Target::parseSpec("cuda:sm_90");
  for (const char *tmpl : {kElementwise, kRowNorms, kSoftmax, kReductions, kLayout}) {
    CAPTURE(tmpl);
    runAcross(tmpl, kN, {1, 13, 40}, opts);
  }
  runAcross(kGathers, kFrom2, {2, 40}, opts);
  runAcross(kFolds, kFrom2, {2, 40}, opts);
  runAcross(kConvFamily, DimRange{"n", 1, 8, 4}, {1, 5}, opts);
}
