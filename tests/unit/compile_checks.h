// Unit-test helpers shared by the tests that compile a graph and run it through the runtime.
#pragma once

#include "backend/host/host_build.h"
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace aicf::compile_checks {

// Whether this machine's CPU has the extension (as -march=native names it: "avx512bf16",
// "avx512vnni", ...): the tests of an ISA path run where it does and skip with a message where not.
inline bool cpuHas(const std::string &feature) {
  const std::vector<std::string> &isa = hostIsaFeatures("native");
  return std::find(isa.begin(), isa.end(), feature) != isa.end();
}

// Compiles `g` with `opts` into a scratch folder (named after `prefix` and a counter), runs it on
// `in` through the runtime; returns the outputs (in the graph's output types) and, when `model`
// is given, the compiled model.
inline std::vector<Tensor> compileRun(const Graph &g, const CompileOptions &opts,
                                      const std::vector<Tensor> &in, const std::string &prefix,
                                      CompiledModel *model = nullptr) {
  CompiledModel cm = buildModel(g, opts);
  static int built = 0;
  std::string out = (test_files::scratchDir(prefix) / cat("net", built++)).string();
  const Graph &compiled = cm.graph ? *cm.graph : g;
  writeArtifacts(compiled, cm, opts, out);
  aicf_model *m = aicf_open(out.c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  std::vector<Tensor> got;
  std::vector<const void *> ip;
  std::vector<void *> op;
  for (const Tensor &t : in)
    ip.push_back(t.raw());
  for (const Value *v : compiled.outputs())
    got.emplace_back(v->type());
  for (Tensor &t : got)
    op.push_back(t.raw());
  REQUIRE_MESSAGE(aicf_run(m, ip.data(), op.data()) == 0, aicf_last_error());
  aicf_close(m);
  if (model)
    *model = std::move(cm);
  return got;
}

// compileRun, then every output checked against the interpreter's with graph_checks::checkClose
// (|got - want| <= 1e-4 + 1e-4 |want|); returns the compiled model.
inline CompiledModel compileRunCheck(const Graph &g, const CompileOptions &opts,
                                     const std::vector<Tensor> &in, const std::string &prefix) {
  std::vector<Tensor> want = interpret(g, in);
  CompiledModel cm;
  std::vector<Tensor> got = compileRun(g, opts, in, prefix, &cm);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    graph_checks::checkClose(got[i], want[i]);
  }
  return cm;
}

} // namespace aicf::compile_checks
