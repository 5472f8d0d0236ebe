// The pass manager and the pass registry: passes run in order, the IR is verified after each
// changed pass, --print-ir-before/after print only around changes, exceptions name the pass,
// and (AICF_EXPENSIVE_CHECKS) a pass that lies about "unchanged" is caught. Also dce itself.
#include "driver/pipeline.h"
#include "passes/pass.h"

#include "ir/parser.h"
#include "ir/printer.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

using namespace aicf;

namespace {

const char *kDeadCode = R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %w = weight f32[4] = [1.0, 2.0, 3.0, 4.0]
  %unused = weight f32[2] = [0.0, 0.0]
  %0 = mul(%x, %w) : f32[4]
  %1 = neg(%0) : f32[4]
  %2 = exp(%1) : f32[4]
  %y = relu(%0) : f32[4]
  return %y
}
)";

const char *kAfterDce = R"(graph @g(%x: f32[4]) -> (%y: f32[4]) {
  %w = weight f32[4] = [1.0, 2.0, 3.0, 4.0]
  %0 = mul(%x, %w) : f32[4]
  %y = relu(%0) : f32[4]
  return %y
}
)";

// A pass with behaviour chosen by the test.
class TestPass : public Pass {
public:
  TestPass(const char *name, std::function<bool(Graph &)> body)
      : name_(name), body_(std::move(body)) {}
  const char *name() const override { return name_; }
  const char *summary() const override { return "test pass"; }
  bool run(Graph &g, PassContext &) override { return body_(g); }

private:
  const char *name_;
  std::function<bool(Graph &)> body_;
};

std::unique_ptr<Pass> testPass(const char *name, std::function<bool(Graph &)> body) {
  return std::make_unique<TestPass>(name, std::move(body));
}

std::unique_ptr<Graph> deadCodeGraph() {
  return parseGraph(kDeadCode, "dead.mcir");
}

} // namespace

TEST_CASE("passes: registry lists every pass by name") {
  std::vector<std::string> names = allPassNames();
  CHECK(std::find(names.begin(), names.end(), "dce") != names.end());
  for (const std::string &n : names) {
    std::unique_ptr<Pass> p = createPass(n);
    REQUIRE(p != nullptr);
    CHECK(n == p->name());
    CHECK(std::string(p->summary()).size() > 0);
  }
  CHECK(createPass("no_such_pass") == nullptr);
  PassManager pm;
  buildDefaultPipeline(pm);
  REQUIRE(pm.passes().size() >= 2);
  // dce cleans up before the final property annotation, which reads the final graph.
  CHECK(std::string(pm.passes().back()->name()) == "annotate-properties");
  CHECK(std::string(pm.passes()[pm.passes().size() - 2]->name()) == "dce");
}

TEST_CASE("passes: dce removes dead chains and unused weights, then reports no change") {
  std::unique_ptr<Graph> g = deadCodeGraph();
  PassManager pm;
  pm.add(createPass("dce"));
  PassContext ctx;
  CHECK(pm.run(*g, ctx));
  CHECK(printGraph(*g) == kAfterDce);
  CHECK_FALSE(pm.run(*g, ctx));
  CHECK(printGraph(*g) == kAfterDce);
}

TEST_CASE("passes: print-ir-before/after print only passes that changed the graph") {
  std::ostringstream ir;
  PassManagerOptions opts;
  opts.printIrBefore = {"dce"};
  opts.printIrAfter = {"all"};
  opts.irOut = &ir;
  PassManager pm(opts);
  pm.add(testPass("noop", [](Graph &) { return false; }));
  pm.add(createPass("dce"));
  pm.add(testPass("noop2", [](Graph &) { return false; }));
  std::unique_ptr<Graph> g = deadCodeGraph();
  PassContext ctx;
  pm.run(*g, ctx);
  CHECK(ir.str() == std::string("// -----// IR before dce //----- //\n") + kDeadCode +
                        "// -----// IR after dce //----- //\n" + kAfterDce);
}

TEST_CASE("passes: the IR is verified after each changed pass") {
  auto breaker = [](Graph &g) {
    // A result type that contradicts inference.
    g.addNode(Op::Relu, {g.inputs()[0]}, {TensorType(DType::F32, {5})});
    return true;
  };
  {
    PassManager pm;
    pm.add(testPass("breaker", breaker));
    std::unique_ptr<Graph> g = deadCodeGraph();
    PassContext ctx;
    try {
      pm.run(*g, ctx);
      FAIL("expected an InternalError");
    } catch (const InternalError &e) {
      CHECK(std::string(e.what()) ==
            "pass 'breaker' produced invalid IR: node #4 (relu): result type f32[5] does not "
            "match inferred f32[4]");
    }
  }
  {
    PassManagerOptions opts;
    opts.verifyEachPass = false;
    PassManager pm(opts);
    pm.add(testPass("breaker", breaker));
    std::unique_ptr<Graph> g = deadCodeGraph();
    PassContext ctx;
    CHECK_NOTHROW(pm.run(*g, ctx));
  }
}

TEST_CASE("passes: an exception inside a pass names the pass and keeps its kind") {
  PassContext ctx;
  std::unique_ptr<Graph> g = deadCodeGraph();
  {
    PassManager pm;
    pm.add(testPass("thrower", [](Graph &) -> bool { throw UserError("bad input", 7); }));
    try {
      pm.run(*g, ctx);
      FAIL("expected a UserError");
    } catch (const UserError &e) {
      CHECK(std::string(e.what()) == "pass 'thrower' failed: bad input");
      CHECK(e.exitCode() == 7);
    }
  }
  {
    PassManager pm;
    pm.add(testPass("crasher", [](Graph &) -> bool { throw std::out_of_range("vector::at"); }));
    try {
      pm.run(*g, ctx);
      FAIL("expected an InternalError");
    } catch (const InternalError &e) {
      CHECK(std::string(e.what()) == "pass 'crasher' failed: vector::at");
    }
  }
}

TEST_CASE("passes: a pass that reports no change but changed the IR is caught") {
  PassManager pm;
  pm.add(testPass("liar", [](Graph &g) {
    g.setName("renamed");
    return false;
  }));
  std::unique_ptr<Graph> g = deadCodeGraph();
  PassContext ctx;
#ifdef AICF_EXPENSIVE_CHECKS
  try {
    pm.run(*g, ctx);
    FAIL("expected an InternalError");
  } catch (const InternalError &e) {
    CHECK(std::string(e.what()) == "pass 'liar' reported no change but changed the IR");
  }
#else
  CHECK_FALSE(pm.run(*g, ctx));
#endif
}

TEST_CASE("passes: timing table and callbacks") {
  std::ostringstream timing;
  std::vector<std::string> before, after;
  PassManagerOptions opts;
  opts.timing = true;
  opts.timingOut = &timing;
  opts.beforePass = [&](const Pass &p, const Graph &) { before.push_back(p.name()); };
  opts.afterChangedPass = [&](const Pass &p, const Graph &g) {
    after.push_back(p.name());
    CHECK(printGraph(g) == kAfterDce);
  };
  PassManager pm(opts);
  pm.add(testPass("noop", [](Graph &) { return false; }));
  pm.add(createPass("dce"));
  std::unique_ptr<Graph> g = deadCodeGraph();
  PassContext ctx;
  CHECK(pm.run(*g, ctx));
  CHECK(before == std::vector<std::string>{"noop", "dce"});
  CHECK(after == std::vector<std::string>{"dce"});
  std::string t = timing.str();
  CHECK(t.find("// ----- pass timing ----- //") == 0);
  CHECK(t.find("no       noop") != std::string::npos);
  CHECK(t.find("yes      dce") != std::string::npos);
  CHECK(t.find("total") != std::string::npos);
}
