// Contraction epilogue steps as registry ops (ir/epilogue.h): every elementwise op that
// qualifies is a step, spelled by its name; the interpreter runs a step through the op's own
// kernel (so matmul{epilogue=[op]} equals matmul followed by the op node, bit for bit) and the
// compiled kernels through the op's own expression (agreeing with the interpreter within the
// kernel tolerances, host plan and GPU plan emulated on the host). The attribute's text form
// round-trips, and an unknown step is reported with its exact message.
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "interp/interpreter.h"
#include "ir/epilogue.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "support/diagnostics.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

std::vector<Op> stepOps() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (isEpilogueOp(static_cast<Op>(i)))
      ops.push_back(static_cast<Op>(i));
  return ops;
}

// Every spelling: each step op by name, plus the attribute variants.
std::vector<std::string> stepNames() {
  std::vector<std::string> names;
  for (Op op : stepOps())
    names.push_back(opName(op));
  names.push_back("gelu_tanh");
  return names;
}

// matmul(a, b[, e]) {epilogue = [steps]} with e (f32[7]) broadcast to the f32[3,7] result.
std::string fusedText(const std::string &name, const std::vector<std::string> &steps) {
  int extras = epilogueOperandCount(steps);
  std::string params = "%a: f32[3,5], %b: f32[5,7]", operands = "%a, %b", list;
  for (int i = 0; i < extras; ++i) {
    params += cat(", %e", i, ": f32[7]");
    operands += cat(", %e", i);
  }
  for (const std::string &s : steps)
    list += (list.empty() ? "\"" : ", \"") + s + "\"";
  return cat("graph @", name, "(", params, ") -> (%y: f32[3,7]) {\n  %y = matmul(", operands,
             ") {epilogue = [", list, "]} : f32[3,7]\n  return %y\n}\n");
}

// The same computation unfused: matmul, then one node per step.
std::string unfusedText(const std::string &step) {
  EpilogueStep s = *parseEpilogueStep(step);
  std::string attrs = s.attrs.empty() ? "" : " {approximate = \"tanh\"}";
  if (s.takesOperand())
    return cat("graph @u(%a: f32[3,5], %b: f32[5,7], %e0: f32[7]) -> (%y: f32[3,7]) {\n",
               "  %m = matmul(%a, %b) : f32[3,7]\n  %y = ", opName(s.op), "(%m, %e0)", attrs,
               " : f32[3,7]\n  return %y\n}\n");
  return cat("graph @u(%a: f32[3,5], %b: f32[5,7]) -> (%y: f32[3,7]) {\n",
             "  %m = matmul(%a, %b) : f32[3,7]\n  %y = ", opName(s.op), "(%m)", attrs,
             " : f32[3,7]\n  return %y\n}\n");
}

bool sameBits(const Tensor &a, const Tensor &b, std::string &why) {
  if (a.type() != b.type()) {
    why = cat(a.type().str(), " vs ", b.type().str());
    return false;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.getDouble(i), y = b.getDouble(i);
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) {
      why = cat("element ", i, ": ", x, " vs ", y);
      return false;
    }
  }
  return true;
}

struct ScratchDir {
  fs::path path;
  ScratchDir() {
    static std::atomic<int> counter{0};
    path = fs::temp_directory_path() / cat("aicf_epilogue_", ::getpid(), "_", counter++);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

} // namespace

TEST_CASE("epilogue steps: the registry's elementwise ops, by name") {
  std::vector<std::string> names = stepNames();
  // Today's spellings (goldens, fuse-epilogue) are all steps ...
  for (const char *s : {"add", "mul", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"})
    CHECK_MESSAGE(std::find(names.begin(), names.end(), s) != names.end(), s);
  // ... and so is every other unary / binary elementwise op mapping f32 to f32.
  for (const char *s : {"sub", "div", "pow", "max", "exp", "leaky_relu", "clip", "hard_swish"})
    CHECK_MESSAGE(parseEpilogueStep(s).has_value(), s);
  // Not steps: results of another dtype, required attributes, three operands, non-elementwise.
  for (const char *s : {"equal", "not", "and", "cast", "where", "matmul", "reduce_sum", "bogus"})
    CHECK_MESSAGE(!parseEpilogueStep(s).has_value(), s);
  CHECK(parseEpilogueStep("add")->takesOperand());
  CHECK(parseEpilogueStep("max")->takesOperand());
  CHECK(!parseEpilogueStep("gelu_tanh")->takesOperand());
  CHECK(parseEpilogueStep("gelu_tanh")->op == Op::Gelu);
  CHECK(parseEpilogueStep("gelu_tanh")->attrs == AttrMap{{"approximate", std::string("tanh")}});
  CHECK(epilogueOperandCount({"add", "relu", "mul", "gelu_tanh", "sub"}) == 3);
}

TEST_CASE("epilogue steps: spelling round-trips (step, attribute, IR text)") {
  for (const std::string &name : stepNames()) {
    CAPTURE(name);
    std::optional<EpilogueStep> s = parseEpilogueStep(name);
    REQUIRE(s);
    CHECK(s->str() == name);
    CHECK(parseEpilogueStep(s->str()) == s);
  }
  std::vector<std::string> attr = {"add", "gelu_tanh", "mul", "leaky_relu", "relu"};
  CHECK(epilogueAttr(epilogueSteps(attr)) == attr);
  std::string text = fusedText("rt", attr);
  std::unique_ptr<Graph> g = parseGraph(text, "rt.mcir");
  std::string printed = printGraph(*g);
  CHECK(printed.find("{epilogue = [\"add\", \"gelu_tanh\", \"mul\", \"leaky_relu\", \"relu\"]}") !=
        std::string::npos);
  CHECK(printGraph(*parseGraph(printed, "rt2.mcir")) == printed);
}

TEST_CASE("epilogue steps: a node's step keeps only spellable attributes") {
  auto nodeStep = [](const std::string &body, const std::string &type = "f32[4]") {
    std::unique_ptr<Graph> g =
        parseGraph(cat("graph @n(%x: f32[4]) -> (%y: ", type, ") {\n  %y = ", body, " : ", type,
                       "\n  return %y\n}\n"),
                   "n.mcir");
    return epilogueStepOf(*g->nodes().at(0));
  };
  CHECK(nodeStep("gelu(%x) {approximate = \"tanh\"}")->str() == "gelu_tanh");
  CHECK(nodeStep("gelu(%x) {approximate = \"none\"}")->str() == "gelu"); // the default
  CHECK(nodeStep("leaky_relu(%x) {alpha = 0.01}")->str() == "leaky_relu");
  CHECK(!nodeStep("leaky_relu(%x) {alpha = 0.2}")); // no spelling for a non-default alpha
  CHECK(!nodeStep("cast(%x) {to = \"f16\"}", "f16[4]").has_value());
  CHECK(!nodeStep("less(%x, %x)", "bool[4]").has_value());
}

TEST_CASE("epilogue steps: an unknown step is a located user error") {
  std::string text = fusedText("bad", {"add", "bogus"});
  try {
    parseGraph(text, "bad.mcir");
    FAIL("no error for an unknown epilogue step");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()) == "bad.mcir:2:3: matmul epilogue step 'bogus' is unknown");
  }
}

TEST_CASE("epilogue steps: the interpreter runs each step as its op, bit for bit") {
  for (const std::string &name : stepNames()) {
    CAPTURE(name);
    std::unique_ptr<Graph> fused = parseGraph(fusedText("f", {name}), "f.mcir");
    std::unique_ptr<Graph> unfused = parseGraph(unfusedText(name), "u.mcir");
    std::vector<Tensor> in = randomInputs(*fused, 11);
    std::vector<Tensor> a = interpret(*fused, in), b = interpret(*unfused, in);
    std::string why;
    CHECK_MESSAGE(sameBits(a.at(0), b.at(0), why), why);
  }
}

TEST_CASE("epilogue steps: compiled steps agree with the interpreter (host and GPU plans)") {
  // One chain of several steps too: operands are consumed in order, acc is the left operand.
  std::vector<std::vector<std::string>> cases;
  for (const std::string &name : stepNames())
    cases.push_back({name});
  cases.push_back({"add", "gelu_tanh", "sub", "mul", "sigmoid", "div"});
  ScratchDir scratch;
  for (const char *plan : {"cpu", "cuda:sm_90"}) {
    CAPTURE(plan);
    Knobs knobs;
    knobs.planFor = Target::parseSpec(plan);
    std::vector<std::unique_ptr<Graph>> graphs;
    std::vector<std::string> kernelNames;
    std::vector<kir::Kernel> kernels;
    for (size_t c = 0; c < cases.size(); ++c) {
      graphs.push_back(parseGraph(fusedText(cat("s", c), cases[c]), "s.mcir"));
      Partition p = partitionGraph(*graphs.back());
      REQUIRE(p.groups.size() == 1);
      kernels.push_back(lowerGroup(p.groups[0], cat("k", c), knobs));
      CHECK(kir::verifyKernel(kernels.back()).empty());
    }
    std::string src = printHostSource(kernels);
    fs::path cpp = scratch.path / cat("steps_", std::string(plan) == "cpu" ? "cpu" : "gpu", ".cpp");
    fs::path so = scratch.path / cat("steps_", std::string(plan) == "cpu" ? "cpu" : "gpu", ".so");
    compileHostSource(src, cpp.string(), so.string());
    LoadedLibrary lib(so.string());
    for (size_t c = 0; c < cases.size(); ++c) {
      std::string steps = cat(cases[c].size(), " step(s) from ", cases[c][0]);
      CAPTURE(steps);
      const Graph &g = *graphs[c];
      std::vector<Tensor> in = randomInputs(g, 100 + c);
      std::vector<Tensor> want = interpret(g, in);
      Tensor got(g.outputs()[0]->type());
      std::vector<void *> args;
      for (Tensor &t : in)
        args.push_back(t.raw());
      args.push_back(got.raw());
      lib.kernel(kernels[c].name)(args.data());
      int bad = 0;
      std::string first;
      for (int64_t i = 0; i < got.numel(); ++i) {
        double x = got.getDouble(i), y = want[0].getDouble(i);
        bool ok = std::isnan(y)   ? std::isnan(x)
                  : std::isinf(y) ? x == y
                                  : std::fabs(x - y) <= 1e-5 + 1e-4 * std::fabs(y);
        if (!ok && first.empty())
          first = cat("element ", i, ": got ", x, ", want ", y);
        bad += !ok;
      }
      CHECK_MESSAGE(bad == 0, first);
    }
  }
}
