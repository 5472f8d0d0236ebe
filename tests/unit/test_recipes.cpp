// Differential tests of the anchor recipes (lower/recipe_online_norm.cpp,
// recipe_streaming_attention.cpp, recipe_tiled_contraction.cpp) and of FuseReductionEpilogue
// (kir/fuse_reduction_epilogue.cpp).
//
// Each case is a small Graph IR text. The whole graph becomes one kernel group (anchor + fused
// prologue / epilogue elementwise nodes), lowered through lowerGroup for the host's own plan
// ("cpu") and for the GPU plan ("cuda:sm_90", i.e. the CUDA kernel's logic run by the host
// printer), plus extra knob settings where a code path needs them (several rows per thread,
// ragged tiles). Every kernel must verify clean; all kernels are printed into one host source,
// compiled once per plan, run on seeded inputs (with hand-made edge cases: -inf rows, large
// values, fully masked attention rows) and compared with the reference interpreter:
// |got - ref| <= atol + rtol |ref|, NaN exactly where the interpreter has NaN. Output buffers
// start as NaN so an element a kernel forgets to write fails.
//
// FuseReductionEpilogue: hand-built kernels for the applied cases (bias with remapped loop
// variables, operands swapped, the accumulator replaced by the output) and the rejections
// (ReLU epilogue, accumulator read twice); the printed Kernel IR before / after and the outcome
// are compared with goldens under testdata/kir/fuse_reduction_epilogue (AICF_UPDATE_GOLDENS=1
// rewrites them), and applied rewrites are run before and after to show they keep results.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/pipeline.h"
#include "group_buffers.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "kir/fuse_reduction_epilogue.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <unistd.h>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

const float kNegInf = -std::numeric_limits<float>::infinity();

// ---- the cases ----------------------------------------------------------------------------------

struct PlanVariant {
  std::string planFor;
  std::map<std::string, int64_t> knobs;
  std::string tag; // kernel-name suffix
};

using Tweak = std::function<void(const Graph &, std::vector<Tensor> &)>;

struct Case {
  std::string family; // "norm", "attention", "contraction"
  std::string name;
  std::string ir;
  double rtol = 2e-4, atol = 2e-5;
  Tweak tweak;                    // edits the seeded inputs
  std::vector<PlanVariant> extra; // plans beyond the two defaults

  Case(std::string f, std::string n, std::string text, double r = 2e-4, double a = 2e-5,
       Tweak t = nullptr, std::vector<PlanVariant> e = {})
      : family(std::move(f)), name(std::move(n)), ir(std::move(text)), rtol(r), atol(a),
        tweak(std::move(t)), extra(std::move(e)) {}
};

Tensor &inputNamed(const Graph &g, std::vector<Tensor> &in, const std::string &name) {
  for (size_t i = 0; i < g.inputs().size(); ++i)
    if (g.inputs()[i]->name() == name)
      return in[i];
  throw InternalError(cat("no graph input ", name));
}

void setRow(Tensor &t, int64_t row, int64_t len, const std::function<double(int64_t)> &v) {
  for (int64_t j = 0; j < len; ++j)
    t.setDouble(row * len + j, v(j));
}

std::vector<Case> allCases() {
  std::vector<Case> cs;
  // ---- online_norm ----
  cs.push_back({"norm",
                "layer_norm_affine",
                R"(graph @t(%x: f32[4,6,40], %g: f32[40], %b: f32[40]) -> (%y: f32[4,6,40]) {
  %y = layer_norm(%x, %g, %b) {axis = -1, epsilon = 1e-05} : f32[4,6,40]
  return %y
})",
                2e-4,
                2e-5,
                [](const Graph &g, std::vector<Tensor> &in) {
                  // A row far from zero (Welford keeps the variance exact) and a constant row.
                  Tensor &x = inputNamed(g, in, "x");
                  setRow(x, 1, 40, [&](int64_t j) { return 1000.0 + x.getDouble(40 + j); });
                  setRow(x, 2, 40, [](int64_t) { return 3.0; });
                },
                {{"cuda:sm_90", {{"threads", 8}, {"vec", 2}}, "t8v2"}}});
  cs.push_back({"norm", "layer_norm_two_axes_prologue",
                R"(graph @t(%x: f32[3,5,8], %z: f32[5,8], %g: f32[8]) -> (%y: f32[3,5,8]) {
  %h = add(%x, %z) : f32[3,5,8]
  %y = layer_norm(%h, %g) {axis = -2, epsilon = 0.001} : f32[3,5,8]
  return %y
})"});
  cs.push_back({"norm",
                "rms_norm_silu_epilogue",
                R"(graph @t(%x: f32[8,64], %w: f32[64]) -> (%y: f32[8,64]) {
  %0 = rms_norm(%x, %w) {axis = -1, epsilon = 1e-06} : f32[8,64]
  %y = silu(%0) : f32[8,64]
  return %y
})",
                2e-4,
                2e-5,
                nullptr,
                {{"cuda:sm_90", {{"threads", 32}, {"vec", 1}, {"cache_row", 0}}, "t32"}}});
  cs.push_back({"norm",
                "softmax_edges",
                R"(graph @t(%x: f32[6,33]) -> (%y: f32[6,33]) {
  %y = softmax(%x) {axis = -1} : f32[6,33]
  return %y
})",
                2e-4,
                1e-6,
                [](const Graph &g, std::vector<Tensor> &in) {
                  Tensor &x = inputNamed(g, in, "x");
                  setRow(x, 0, 33, [&](int64_t j) { return 1000.0 * x.getDouble(j); }); // large
                  setRow(x, 2, 33, [](int64_t) { return kNegInf; });                    // all -inf
                  setRow(x, 3, 33, [&](int64_t j) {                                     // half -inf
                    return j % 2 ? double(kNegInf) : x.getDouble(3 * 33 + j);
                  });
                  setRow(x, 4, 33, [&](int64_t j) { return 80.0 + x.getDouble(4 * 33 + j); });
                },
                {{"cuda:sm_90", {{"threads", 4}, {"vec", 4}}, "t4v4"}}});
  cs.push_back({"norm", "log_softmax_middle_axis",
                R"(graph @t(%x: f32[4,7,3]) -> (%y: f32[4,7,3]) {
  %y = log_softmax(%x) {axis = 1} : f32[4,7,3]
  return %y
})",
                2e-4, 2e-5, [](const Graph &g, std::vector<Tensor> &in) {
                  Tensor &x = inputNamed(g, in, "x");
                  for (int64_t j = 0; j < 7; ++j) // lane (0, 1): large values
                    x.setDouble(j * 3 + 1, 5000.0 + x.getDouble(j * 3 + 1));
                }});
  cs.push_back({"norm", "softmax_f16_prologue",
                R"(graph @t(%x: f16[3,50], %z: f16[3,50]) -> (%y: f16[3,50]) {
  %h = add(%x, %z) : f16[3,50]
  %y = softmax(%h) {axis = -1} : f16[3,50]
  return %y
})",
                1e-2, 2e-3});
  // ---- streaming_attention ----
  cs.push_back(
      {"attention",
       "causal_self",
       R"(graph @t(%q: f32[2,3,37,16], %k: f32[2,3,37,16], %v: f32[2,3,37,16]) -> (%y: f32[2,3,37,16]) {
  %y = attention(%q, %k, %v) {causal = 1, scale = 0.25} : f32[2,3,37,16]
  return %y
})",
       2e-4,
       2e-5,
       nullptr,
       {{"cuda:sm_90", {{"BR", 16}, {"BC", 8}, {"threads", 8}}, "br16"}}});
  cs.push_back(
      {"attention", "additive_mask",
       R"(graph @t(%q: f32[1,2,20,8], %k: f32[1,2,45,8], %v: f32[1,2,45,12], %m: f32[20,45]) -> (%y: f32[1,2,20,12]) {
  %y = attention(%q, %k, %v, %m) {scale = 0.35355339} : f32[1,2,20,12]
  return %y
})",
       2e-4, 2e-5, [](const Graph &g, std::vector<Tensor> &in) {
         Tensor &m = inputNamed(g, in, "m");
         for (int64_t i = 0; i < 20 * 45; i += 7)
           m.setDouble(i, kNegInf);
         setRow(m, 3, 45, [](int64_t) { return kNegInf; }); // fully masked row
         setRow(m, 5, 45, [&](int64_t j) { return j == 44 ? 0.0 : double(kNegInf); });
       }});
  cs.push_back(
      {"attention", "bool_mask",
       R"(graph @t(%q: f32[2,2,9,8], %k: f32[2,2,45,8], %v: f32[2,2,45,8], %m: bool[2,1,1,45]) -> (%y: f32[2,2,9,8]) {
  %y = attention(%q, %k, %v, %m) {scale = 0.35355339} : f32[2,2,9,8]
  return %y
})",
       2e-4, 2e-5, [](const Graph &g, std::vector<Tensor> &in) {
         Tensor &m = inputNamed(g, in, "m");
         for (int64_t j = 0; j < 45; ++j) {
           m.setInt(j, j % 3 != 1); // batch 0: a padding-like pattern
           m.setInt(45 + j, 0);     // batch 1: every key masked -> zeros
         }
       }});
  cs.push_back(
      {"attention", "causal_short_query",
       R"(graph @t(%q: f32[1,1,10,8], %k: f32[1,1,25,8], %v: f32[1,1,25,8]) -> (%y: f32[1,1,10,8]) {
  %y = attention(%q, %k, %v) {causal = 1, scale = 0.5} : f32[1,1,10,8]
  return %y
})"});
  cs.push_back(
      {"attention",
       "causal_long_query",
       R"(graph @t(%q: f32[2,30,8], %k: f32[2,12,8], %v: f32[2,12,8]) -> (%y: f32[2,30,8]) {
  %y = attention(%q, %k, %v) {causal = 1, scale = 0.5} : f32[2,30,8]
  return %y
})",
       2e-4,
       2e-5,
       nullptr,
       {{"cuda:sm_90", {{"BR", 8}, {"BC", 4}, {"threads", 4}}, "br8"}}});
  cs.push_back(
      {"attention", "f16_causal",
       R"(graph @t(%q: f16[2,12,8], %k: f16[2,12,8], %v: f16[2,12,8]) -> (%y: f16[2,12,8]) {
  %y = attention(%q, %k, %v) {causal = 1, scale = 0.35355339} : f16[2,12,8]
  return %y
})",
       5e-3, 2e-3});
  cs.push_back({"attention", "unbatched_epilogue",
                R"(graph @t(%q: f32[19,8], %k: f32[23,8], %v: f32[23,5]) -> (%y: f32[19,5]) {
  %0 = attention(%q, %k, %v) {scale = 0.5} : f32[19,5]
  %y = tanh(%0) : f32[19,5]
  return %y
})"});
  // ---- tiled_contraction / direct_conv ----
  cs.push_back(
      {"contraction",
       "matmul_batch_broadcast",
       R"(graph @t(%a: f32[2,1,37,29], %b: f32[3,29,41]) -> (%y: f32[2,3,37,41]) {
  %y = matmul(%a, %b) : f32[2,3,37,41]
  return %y
})",
       2e-4,
       2e-5,
       nullptr,
       {{"cpu", {{"BM", 16}, {"BN", 32}, {"BK", 8}}, "small"},
        {"cuda:sm_90", {{"BM", 32}, {"BN", 32}, {"BK", 8}, {"TM", 4}, {"TN", 2}}, "t4x2"}}});
  cs.push_back({"contraction", "matmul_f16_bias",
                R"(graph @t(%a: f16[9,33], %b: f16[33,20], %c: f16[20]) -> (%y: f16[9,20]) {
  %y = matmul(%a, %b, %c) {epilogue = ["add"]} : f16[9,20]
  return %y
})",
                4e-3, 4e-3});
  cs.push_back({"contraction", "matmul_vector_left",
                R"(graph @t(%a: f32[29], %b: f32[2,29,17]) -> (%y: f32[2,17]) {
  %y = matmul(%a, %b) : f32[2,17]
  return %y
})"});
  cs.push_back({"contraction", "matmul_dot",
                R"(graph @t(%a: f32[29], %b: f32[29]) -> (%y: f32[]) {
  %y = matmul(%a, %b) : f32[]
  return %y
})"});
  cs.push_back({"contraction", "matmul_vector_right",
                R"(graph @t(%a: f32[5,29], %b: f32[29]) -> (%y: f32[5]) {
  %y = matmul(%a, %b) : f32[5]
  return %y
})"});
  cs.push_back({"contraction", "matmul_bias_relu",
                R"(graph @t(%a: f32[37,29], %b: f32[29,41], %c: f32[41]) -> (%y: f32[37,41]) {
  %y = matmul(%a, %b, %c) {epilogue = ["add", "relu"]} : f32[37,41]
  return %y
})"});
  cs.push_back({"contraction", "gemm_trans_alpha_beta",
                R"(graph @t(%a: f32[29,37], %b: f32[41,29], %c: f32[1,41]) -> (%y: f32[37,41]) {
  %y = gemm(%a, %b, %c) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1} : f32[37,41]
  return %y
})"});
  cs.push_back({"contraction", "gemm_beta_gelu",
                R"(graph @t(%a: f32[37,29], %b: f32[41,29], %c: f32[37,41]) -> (%y: f32[37,41]) {
  %y = gemm(%a, %b, %c) {beta = 0.5, transB = 1, epilogue = ["gelu"]} : f32[37,41]
  return %y
})"});
  cs.push_back({"contraction", "gemm_exact_tiles",
                R"(graph @t(%a: f32[64,32], %b: f32[32,128]) -> (%y: f32[64,128]) {
  %y = gemm(%a, %b) : f32[64,128]
  return %y
})"});
  cs.push_back(
      {"contraction", "conv2d_bias_relu",
       R"(graph @t(%x: f32[2,3,17,15], %w: f32[8,3,3,3], %b: f32[8]) -> (%y: f32[2,8,9,13]) {
  %0 = conv(%x, %w, %b) {dilations = [1, 2], pads = [1, 0, 1, 2], strides = [2, 1]} : f32[2,8,9,13]
  %y = relu(%0) : f32[2,8,9,13]
  return %y
})"});
  cs.push_back({"contraction", "conv2d_tiles_split_rows",
                R"(graph @t(%x: f32[1,5,20,30], %w: f32[7,5,3,3]) -> (%y: f32[1,7,20,30]) {
  %y = conv(%x, %w) {dilations = [1, 1], pads = [1, 1, 1, 1], strides = [1, 1]} : f32[1,7,20,30]
  return %y
})"});
  cs.push_back(
      {"contraction", "conv3d_bias",
       R"(graph @t(%x: f32[1,2,5,6,7], %w: f32[3,2,2,3,2], %b: f32[3]) -> (%y: f32[1,3,4,3,7]) {
  %y = conv(%x, %w, %b) {dilations = [1, 1, 1], pads = [0, 1, 1, 0, 1, 0], strides = [1, 2, 1]} : f32[1,3,4,3,7]
  return %y
})"});
  cs.push_back({"contraction", "conv1d_epilogue_attr",
                R"(graph @t(%x: f32[2,4,20], %w: f32[6,4,5]) -> (%y: f32[2,6,7]) {
  %y = conv(%x, %w) {dilations = [1], pads = [2, 1], strides = [3], epilogue = ["relu"]} : f32[2,6,7]
  return %y
})"});
  cs.push_back({"contraction", "depthwise_conv",
                R"(graph @t(%x: f32[1,6,9,9], %w: f32[6,1,3,3], %b: f32[6]) -> (%y: f32[1,6,9,9]) {
  %y = conv(%x, %w, %b) {dilations = [1, 1], group = 6, pads = [1, 1, 1, 1], strides = [1, 1]} : f32[1,6,9,9]
  return %y
})"});
  cs.push_back({"contraction", "grouped_conv_relu",
                R"(graph @t(%x: f32[2,4,8,8], %w: f32[6,2,3,3]) -> (%y: f32[2,6,3,3]) {
  %y = conv(%x, %w) {dilations = [1, 1], group = 2, pads = [0, 0, 0, 0], strides = [2, 2], epilogue = ["relu"]} : f32[2,6,3,3]
  return %y
})"});
  cs.push_back(
      {"contraction", "conv_transpose_bias",
       R"(graph @t(%x: f32[1,4,5,6], %w: f32[4,3,3,3], %b: f32[3]) -> (%y: f32[1,3,10,12]) {
  %y = conv_transpose(%x, %w, %b) {dilations = [1, 1], output_padding = [1, 0], pads = [1, 0, 1, 1], strides = [2, 2]} : f32[1,3,10,12]
  return %y
})"});
  cs.push_back({"contraction", "conv_transpose_grouped_dilated",
                R"(graph @t(%x: f32[2,4,4,4], %w: f32[4,1,2,2]) -> (%y: f32[2,2,6,8]) {
  %y = conv_transpose(%x, %w) {dilations = [2, 1], group = 2, pads = [0, 0, 0, 0], strides = [1, 2]} : f32[2,2,6,8]
  return %y
})"});
  return cs;
}

// The whole graph as one kernel group: the non-elementwise node is the anchor, the elementwise
// nodes its fused prologue / epilogue.
KernelGroup wholeGraph(const Graph &g) {
  KernelGroup kg;
  kg.nodes = g.nodes();
  for (Node *n : kg.nodes)
    if (!n->info().has(EW))
      kg.anchor = n;
  kg.kind = kg.anchor ? kg.anchor->name() : "fused_elementwise";
  auto inGroup = [&](const Value *v) {
    return v->def() && std::find(kg.nodes.begin(), kg.nodes.end(), v->def()) != kg.nodes.end();
  };
  for (Node *n : kg.nodes)
    for (Value *v : n->operands())
      if (!inGroup(v) && std::find(kg.inputs.begin(), kg.inputs.end(), v) == kg.inputs.end())
        kg.inputs.push_back(v);
  kg.outputs = g.outputs();
  return kg;
}

// ---- building and running -----------------------------------------------------------------------

struct Built {
  std::string kernelName;
  const Case *c = nullptr;
  std::unique_ptr<Graph> graph;
  std::vector<KernelGroup> groups; // one, or a partition's groups
  std::vector<kir::Kernel> kernels;
  std::string planFor, tag;
  std::string error; // lowering / verification failure
};

std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += (s.empty() ? "" : "\n") + x;
  return s;
}

// A per-process scratch directory for generated sources and libraries, removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / cat("aicf_test_recipes_", getpid());
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

fs::path scratchDir() {
  static Scratch s;
  return s.dir;
}

// Everything built once: the cases lowered for every plan, one library per plan family.
struct Suite {
  std::vector<Case> cases = allCases();
  std::vector<Built> built;
  std::map<std::string, std::unique_ptr<LoadedLibrary>> libs; // by plan family
  std::map<std::string, std::string> buildErrors;

  static std::string family(const std::string &planFor) { return planFor == "cpu" ? "cpu" : "gpu"; }

  Suite() {
    for (const Case &c : cases) {
      std::vector<PlanVariant> plans = {{"cpu", {}, "cpu"}, {"cuda:sm_90", {}, "sm90"}};
      plans.insert(plans.end(), c.extra.begin(), c.extra.end());
      for (const PlanVariant &p : plans) {
        Built &b = built.emplace_back();
        b.c = &c;
        b.planFor = p.planFor;
        b.tag = p.tag;
        b.kernelName = cat("rec_", c.name, "_", p.tag);
        try {
          b.graph = parseGraph(c.ir, c.name);
          b.groups.push_back(wholeGraph(*b.graph));
          Knobs knobs;
          knobs.planFor = Target::parseSpec(p.planFor);
          knobs.values = p.knobs;
          b.kernels.push_back(lowerGroup(b.groups[0], b.kernelName, knobs));
          kir::runDefaultKernelPipeline(b.kernels[0]); // as the driver does (kir/kir_pass.h)
          std::vector<std::string> errs = kir::verifyKernel(b.kernels[0]);
          if (!errs.empty())
            b.error = "verifyKernel:\n" + joined(errs);
        } catch (const std::exception &e) {
          b.error = e.what();
        }
      }
    }
    // One end-to-end graph through partitionGraph: every group's kernel is run on the
    // interpreter's values of its inputs.
    for (const char *planFor : {"cpu", "cuda:sm_90"}) {
      Built &b = built.emplace_back();
      b.planFor = planFor;
      b.tag = family(planFor);
      b.kernelName = cat("rec_partition_", b.tag);
      try {
        b.graph = parseGraph(
            R"(graph @t(%x: f32[16,32], %g: f32[32], %bb: f32[32], %w: f32[32,24], %c: f32[24]) -> (%y: f32[16,24]) {
  %0 = layer_norm(%x, %g, %bb) {axis = -1, epsilon = 1e-05} : f32[16,32]
  %1 = matmul(%0, %w, %c) {epilogue = ["add"]} : f32[16,24]
  %y = gelu(%1) : f32[16,24]
  return %y
})",
            "partition");
        Partition part = partitionGraph(*b.graph);
        b.groups = part.groups;
        Knobs knobs;
        knobs.planFor = Target::parseSpec(planFor);
        for (size_t i = 0; i < b.groups.size(); ++i) {
          b.kernels.push_back(lowerGroup(b.groups[i], cat(b.kernelName, "_", i), knobs));
          kir::runDefaultKernelPipeline(b.kernels.back());
          std::vector<std::string> errs = kir::verifyKernel(b.kernels.back());
          if (!errs.empty())
            b.error = "verifyKernel:\n" + joined(errs);
        }
      } catch (const std::exception &e) {
        b.error = e.what();
      }
    }

    // Print and compile one source per plan family, both compiles at once.
    std::map<std::string, std::vector<kir::Kernel>> byFamily;
    for (const Built &b : built)
      if (b.error.empty())
        for (const kir::Kernel &k : b.kernels)
          byFamily[family(b.planFor)].push_back(k);
    fs::path dir = scratchDir();
    std::map<std::string, std::future<std::string>> jobs;
    for (auto &[fam, ks] : byFamily) {
      std::string src;
      try {
        src = printHostSource(ks);
      } catch (const std::exception &e) {
        buildErrors[fam] = e.what();
        continue;
      }
      std::string cpp = (dir / (fam + ".cpp")).string(), so = (dir / (fam + ".so")).string();
      jobs[fam] = std::async(std::launch::async, [src, cpp, so] {
        try {
          compileHostSource(src, cpp, so);
          return std::string();
        } catch (const std::exception &e) {
          return std::string(e.what());
        }
      });
    }
    for (auto &[fam, job] : jobs) {
      std::string err = job.get();
      if (!err.empty()) {
        buildErrors[fam] = err;
        continue;
      }
      libs[fam] = std::make_unique<LoadedLibrary>((dir / (fam + ".so")).string());
    }
  }
};

Suite &suite() {
  static Suite s;
  return s;
}

// Runs `k` on the given values (inputs of its group, then outputs allocated as NaN) and returns
// the outputs.
std::vector<Tensor> runKernel(const LoadedLibrary &lib, const kir::Kernel &k, const KernelGroup &g,
                              const std::map<const Value *, Tensor> &values) {
  std::vector<Tensor> outs;
  for (const Value *v : g.outputs) {
    TensorType t = testing::outputBufferType(g, v);
    outs.emplace_back(t, std::vector<uint8_t>(static_cast<size_t>(t.bytes()), 0xff));
  }
  std::vector<void *> args;
  for (const Value *v : g.inputs)
    args.push_back(const_cast<uint8_t *>(values.at(v).raw()));
  for (Tensor &t : outs)
    args.push_back(t.raw());
  lib.kernel(k.name)(args.data());
  for (size_t o = 0; o < outs.size(); ++o)
    outs[o] = testing::outputValue(g, g.outputs[o], outs[o]);
  return outs;
}

// "" when every element matches, else a description of the first mismatches.
std::string compare(const Tensor &got, const Tensor &ref, double rtol, double atol) {
  std::ostringstream os;
  int bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double g = got.getDouble(i), r = ref.getDouble(i);
    bool ok = std::isnan(r)
                  ? std::isnan(g)
                  : (std::isinf(r) ? g == r : std::abs(g - r) <= atol + rtol * std::abs(r));
    if (!std::isnan(r) && !std::isinf(r) && !std::isnan(g))
      worst = std::max(worst, std::abs(g - r));
    if (!ok && bad++ < 5)
      os << "  [" << i << "] got " << g << ", expected " << r << "\n";
  }
  if (!bad)
    return "";
  return cat(bad, " of ", ref.numel(), " elements differ (max abs err ", worst, "):\n", os.str());
}

void runFamily(const std::string &family) {
  Suite &s = suite();
  int ran = 0;
  for (Built &b : s.built) {
    if (b.c ? b.c->family != family : family != "partition")
      continue;
    CAPTURE(b.kernelName);
    REQUIRE_MESSAGE(b.error.empty(), b.error);
    std::string fam = Suite::family(b.planFor);
    REQUIRE_MESSAGE(s.libs.count(fam), s.buildErrors[fam]);
    std::vector<Tensor> in = randomInputs(*b.graph, 7);
    if (b.c && b.c->tweak)
      b.c->tweak(*b.graph, in);
    std::map<const Value *, Tensor> ref = interpretAll(*b.graph, in);
    double rtol = b.c ? b.c->rtol : 2e-4, atol = b.c ? b.c->atol : 2e-5;
    for (size_t gi = 0; gi < b.groups.size(); ++gi) {
      std::vector<Tensor> got = runKernel(*s.libs[fam], b.kernels[gi], b.groups[gi], ref);
      for (size_t o = 0; o < got.size(); ++o) {
        std::string diff = compare(got[o], ref.at(b.groups[gi].outputs[o]), rtol, atol);
        CHECK_MESSAGE(diff.empty(), b.kernels[gi].name, " output ", o, ": ", diff);
      }
    }
    ++ran;
  }
  CHECK(ran > 0);
}

// ---- structural checks --------------------------------------------------------------------------

using kir::forEachStmt;

const Built &builtNamed(const std::string &caseName, const std::string &tag) {
  for (const Built &b : suite().built)
    if (b.c && b.c->name == caseName && b.tag == tag) {
      REQUIRE_MESSAGE(b.error.empty(), b.error);
      return b;
    }
  throw InternalError(cat("no built case ", caseName, "/", tag));
}

} // namespace

TEST_CASE("online_norm recipe: layer_norm, rms_norm, softmax, log_softmax vs the interpreter") {
  runFamily("norm");
}

TEST_CASE("online_norm recipe: one pass, per-thread state merged by one block_reduce") {
  for (const char *tag : {"cpu", "sm90"}) {
    const kir::Kernel &k = builtNamed("layer_norm_affine", tag).kernels[0];
    CAPTURE(k.name);
    int reduces = 0, regions = 0;
    forEachStmt(k.body, [&](const kir::Stmt &s) {
      reduces += s.kind == kir::Stmt::Kind::BlockReduce;
      regions += s.kind == kir::Stmt::Kind::Region;
      if (s.kind == kir::Stmt::Kind::BlockReduce) {
        CHECK(s.combiner.name == "welford");
        CHECK(s.combiner.fields.size() == 3);
        for (const kir::BufferP &b : s.src)
          CHECK(b->scope == kir::Scope::Local);
      }
    });
    CHECK(reduces == 1);
    CHECK(regions == 2);
    CHECK(k.grid == std::vector<std::pair<std::string, int64_t>>{{"row", 24}});
  }
  CHECK(builtNamed("layer_norm_affine", "sm90").kernels[0].threads > 1);
}

TEST_CASE("streaming_attention recipe: causal, masks, fully masked rows, Sq != Sk") {
  runFamily("attention");
}

TEST_CASE("streaming_attention recipe: scores never reach global memory; causal tiles skipped") {
  for (const char *tag : {"cpu", "sm90"}) {
    const kir::Kernel &k = builtNamed("causal_self", tag).kernels[0];
    CAPTURE(k.name);
    forEachStmt(k.body, [&](const kir::Stmt &s) {
      if (s.kind == kir::Stmt::Kind::Store && s.buf->scope == kir::Scope::Global)
        CHECK(s.buf->role == kir::Role::Out);
    });
    // The key-tile loop's bound depends on the query tile (tiles above the diagonal skipped).
    bool boundUsesQt = false;
    for (const kir::StmtP &s : k.body)
      if (s->kind == kir::Stmt::Kind::For && s->var == "kt")
        boundUsesQt = kir::printKernel(k).find("min(") != std::string::npos;
    CHECK(boundUsesQt);
    size_t onChip = 0;
    for (const kir::BufferP &b : k.allocs)
      onChip += b->scope != kir::Scope::Global;
    CHECK(onChip == k.allocs.size());
  }
}

TEST_CASE("tiled_contraction / direct_conv recipes: matmul, gemm, conv vs the interpreter") {
  runFamily("contraction");
}

TEST_CASE("tiled_contraction recipe: the bias moves into the accumulator's init") {
  for (const char *tag : {"cpu", "sm90"}) {
    std::string fused = kir::printKernel(builtNamed("matmul_bias_relu", tag).kernels[0]);
    CHECK(fused.find("FuseReductionEpilogue(C): applied") != std::string::npos);
    std::string conv = kir::printKernel(builtNamed("conv2d_bias_relu", tag).kernels[0]);
    CHECK(conv.find("FuseReductionEpilogue(C): applied") != std::string::npos);
    std::string gemm = kir::printKernel(builtNamed("gemm_beta_gelu", tag).kernels[0]);
    CHECK(gemm.find("FuseReductionEpilogue(C): applied") != std::string::npos);
    // alpha * acc + beta * C is not additive in the accumulator: the update region stays.
    std::string alpha = kir::printKernel(builtNamed("gemm_trans_alpha_beta", tag).kernels[0]);
    CHECK(alpha.find("FuseReductionEpilogue(C): rejected: epilogue is not additive") !=
          std::string::npos);
  }
  const kir::Kernel &cpu = builtNamed("gemm_exact_tiles", "cpu").kernels[0];
  CHECK(cpu.threads == 1);
  CHECK(cpu.knobs.at("TM") == cpu.knobs.at("BM"));
  CHECK(cpu.knobs.at("TN") % 16 == 0);
  const kir::Kernel &gpu = builtNamed("gemm_exact_tiles", "sm90").kernels[0];
  CHECK(gpu.threads == 256);
  CHECK(builtNamed("depthwise_conv", "cpu").kernels[0].recipe == "direct_conv");
  CHECK(builtNamed("conv_transpose_bias", "cpu").kernels[0].recipe == "direct_conv");
  CHECK(builtNamed("conv2d_bias_relu", "cpu").kernels[0].recipe == "tiled_contraction");
}

TEST_CASE("recipes through partitionGraph: layer_norm -> matmul + bias -> gelu") {
  runFamily("partition");
}

// ---- FuseReductionEpilogue ----------------------------------------------------------------------

namespace {

using namespace aicf::kir;

BufferP buf(const std::string &name, std::vector<int64_t> shape, Scope scope,
            Role role = Role::Temp) {
  return std::make_shared<Buffer>(Buffer{name, DType::F32, std::move(shape), scope, role, {}});
}

// A per-row matmul: reduce k { init acc[t, r] = 0; update acc[t, r] += A[r, k] B[k, t] } in a
// region over the rows r, followed by an epilogue region over rows q built by `epilogue`.
struct MatmulFixture {
  BufferP A = buf("A", {4, 6}, Scope::Global, Role::In);
  BufferP B = buf("B", {6, 8}, Scope::Global, Role::In);
  BufferP Cb = buf("Cb", {4, 8}, Scope::Global, Role::In);
  BufferP D = buf("D", {4, 8}, Scope::Global, Role::Out);
  BufferP D2 = buf("D2", {4, 8}, Scope::Global, Role::Out);
  BufferP acc = buf("acc", {8, 4}, Scope::Local);

  Kernel kernel(const std::string &name,
                const std::function<std::vector<StmtP>(E acc, E q)> &epilogue) {
    E t = var("t"), r = var("r"), q = var("q"), kk = var("k");
    Kernel k;
    k.name = name;
    k.threads = 8;
    k.params = {A, B, Cb, D, D2};
    k.allocs = {acc};
    StmtP red =
        reduce("k", E(int64_t(0)), E(int64_t(6)), {store(acc, {t, r}, fconst(0.0))},
               {store(acc, {t, r}, load(acc, {t, r}) + load(A, {r, kk}) * load(B, {kk, t}))});
    k.body = {
        region("t", {forLoop("r", E(int64_t(0)), E(int64_t(4)), {red})}),
        region("t", {forLoop("q", E(int64_t(0)), E(int64_t(4)), epilogue(load(acc, {t, q}), q))})};
    return k;
  }
};

struct GoldenCase {
  std::string name;
  std::function<Kernel()> build;
  bool applied;
  std::string reasonStart;
};

std::vector<GoldenCase> goldenCases() {
  auto f = std::make_shared<MatmulFixture>();
  E t = var("t");
  std::vector<GoldenCase> cs;
  cs.push_back({"bias",
                [f, t] {
                  return f->kernel("bias", [&](E acc, E q) {
                    return std::vector<StmtP>{store(f->D, {q, t}, acc + load(f->Cb, {q, t})),
                                              store(f->D2, {q, t}, fconst(0.0))};
                  });
                },
                true, "init acc[t, r] = Cb[r, t]"});
  cs.push_back({"bias_swapped",
                [f, t] {
                  return f->kernel("bias_swapped", [&](E acc, E q) {
                    return std::vector<StmtP>{store(f->D, {q, t}, load(f->Cb, {q, t}) + acc),
                                              store(f->D2, {q, t}, fconst(0.0))};
                  });
                },
                true, "init acc[t, r] = Cb[r, t]"});
  cs.push_back({"relu_rejected",
                [f, t] {
                  return f->kernel("relu_rejected", [&](E acc, E q) {
                    return std::vector<StmtP>{
                        store(f->D, {q, t}, max(acc + load(f->Cb, {q, t}), fconst(0.0))),
                        store(f->D2, {q, t}, fconst(0.0))};
                  });
                },
                false, "epilogue is not additive: max(acc[t, q] + Cb[q, t], 0.0)"});
  cs.push_back({"read_twice_rejected",
                [f, t] {
                  return f->kernel("read_twice_rejected", [&](E acc, E q) {
                    return std::vector<StmtP>{store(f->D, {q, t}, acc + load(f->Cb, {q, t})),
                                              store(f->D2, {q, t}, acc * fconst(2.0))};
                  });
                },
                false, "accumulator read twice"});
  // The seed's own form: the temporary is a shared [4, 8] buffer indexed like D, so the
  // reduction can accumulate into D itself.
  cs.push_back(
      {"accumulate_into_output",
       [f] {
         BufferP tmp = buf("tmp", {4, 8}, Scope::Shared);
         E t = var("t"), r = var("r"), q = var("q"), kk = var("k");
         Kernel k;
         k.name = "accumulate_into_output";
         k.threads = 8;
         k.params = {f->A, f->B, f->Cb, f->D, f->D2};
         k.allocs = {tmp};
         StmtP red = reduce(
             "k", E(int64_t(0)), E(int64_t(6)), {store(tmp, {r, t}, fconst(0.0))},
             {store(tmp, {r, t}, load(tmp, {r, t}) + load(f->A, {r, kk}) * load(f->B, {kk, t}))});
         k.body = {
             region("t", {forLoop("r", E(int64_t(0)), E(int64_t(4)), {red})}),
             region("t", {forLoop("q", E(int64_t(0)), E(int64_t(4)),
                                  {store(f->D, {q, t}, load(tmp, {q, t}) + load(f->Cb, {q, t})),
                                   store(f->D2, {q, t}, fconst(0.0))})})};
         return k;
       },
       true, "init tmp[r, t] = Cb[r, t]; the reduction accumulates into D"});
  return cs;
}

std::string readFile(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("FuseReductionEpilogue: goldens, reasons, and results unchanged") {
  fs::path dir = fs::path(AICF_TESTDATA) / "kir" / "fuse_reduction_epilogue";
  bool update = std::getenv("AICF_UPDATE_GOLDENS") != nullptr;
  std::vector<kir::Kernel> toRun;
  std::vector<std::pair<std::string, std::string>> pairs; // before, after kernel names
  for (const GoldenCase &gc : goldenCases()) {
    CAPTURE(gc.name);
    kir::Kernel k = gc.build();
    REQUIRE(kir::verifyKernel(k).empty());
    std::string before = kir::printKernel(k);
    FuseReductionEpilogueResult res = fuseReductionEpilogue(k);
    REQUIRE(res.outcomes.size() == 1);
    const ReductionEpilogueOutcome &o = res.outcomes[0];
    CHECK(o.accumulator == (gc.name == "accumulate_into_output" ? "tmp" : "acc"));
    CHECK(o.applied == gc.applied);
    CHECK_MESSAGE(o.reason.rfind(gc.reasonStart, 0) == 0, o.reason);
    std::vector<std::string> errs = kir::verifyKernel(k);
    CHECK_MESSAGE(errs.empty(), joined(errs));
    std::string after = kir::printKernel(k);
    CHECK(after.find(o.text()) != std::string::npos); // recorded in the kernel
    if (!gc.applied) {                                // a rejection only adds the comment
      std::string stripped;
      std::istringstream lines(after);
      for (std::string l; std::getline(lines, l);)
        if (l.find("# FuseReductionEpilogue") == std::string::npos)
          stripped += l + "\n";
      CHECK(stripped == before);
    }
    std::string text = cat("// FuseReductionEpilogue golden: ", gc.name, "\n// ", o.text(),
                           "\n// ---- before\n", before, "// ---- after\n", after);
    fs::path file = dir / (gc.name + ".kir");
    if (update) {
      fs::create_directories(dir);
      std::ofstream(file, std::ios::binary) << text;
    } else {
      CHECK_MESSAGE(readFile(file) == text, "golden ", file.string(),
                    " differs (AICF_UPDATE_GOLDENS=1 rewrites it); got:\n", text);
    }
    if (gc.applied) {
      kir::Kernel orig = gc.build();
      orig.name += "_before";
      k.name += "_after";
      pairs.emplace_back(orig.name, k.name);
      toRun.push_back(std::move(orig));
      toRun.push_back(std::move(k));
    }
  }
  // The applied rewrites keep the results (up to reassociation).
  fs::path sd = scratchDir();
  compileHostSource(printHostSource(toRun), (sd / "fre.cpp").string(), (sd / "fre.so").string());
  LoadedLibrary lib((sd / "fre.so").string());
  std::vector<float> A(24), B(48), Cb(32);
  for (size_t i = 0; i < A.size(); ++i)
    A[i] = float(int(i % 7) - 3) * 0.25f;
  for (size_t i = 0; i < B.size(); ++i)
    B[i] = float(int(i % 5) - 2) * 0.5f;
  for (size_t i = 0; i < Cb.size(); ++i)
    Cb[i] = float(i) * 0.125f - 1.0f;
  for (const auto &[b, a] : pairs) {
    CAPTURE(b);
    std::vector<float> d1(32, -7.f), d2(32, -7.f), e1(32), e2(32);
    void *args1[] = {A.data(), B.data(), Cb.data(), d1.data(), e1.data()};
    void *args2[] = {A.data(), B.data(), Cb.data(), d2.data(), e2.data()};
    lib.kernel(b)(args1);
    lib.kernel(a)(args2);
    for (size_t i = 0; i < 32; ++i)
      CHECK(std::abs(d1[i] - d2[i]) <= 1e-5f);
    CHECK(d1[5] != -7.f);
  }
}

TEST_CASE("FuseReductionEpilogue: index maps must line up") {
  MatmulFixture f;
  E t = var("t");
  // The epilogue reads acc[t, 0] for every q: not the element the init writes for that row.
  Kernel k = f.kernel("misaligned", [&](E, E q) {
    return std::vector<StmtP>{
        store(f.D, {q, t}, load(f.acc, {t, E(int64_t(0))}) + load(f.Cb, {q, t})),
        store(f.D2, {q, t}, fconst(0.0))};
  });
  FuseReductionEpilogueResult res = fuseReductionEpilogue(k, false);
  REQUIRE(res.outcomes.size() == 1);
  CHECK_FALSE(res.outcomes[0].applied);
  CHECK(res.outcomes[0].reason ==
        "index maps do not line up: the epilogue reads acc[t, 0], the init writes acc[t, r]");
  CHECK_FALSE(res.applied());
}
