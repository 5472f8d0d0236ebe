// A unit-test helper shared by the tests that compile a graph and run it through the runtime:
// compile `g` with `opts` into a scratch folder (named after `prefix` and a counter), run it on
// `in` and check every output against the interpreter's with graph_checks::checkClose
// (|got - want| <= 1e-4 + 1e-4 |want|); returns the compiled model.
#pragma once

#include "driver/compile.h"
#include "interp/interpreter.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "tests/unit/graph_checks.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace aicf::compile_checks {

inline CompiledModel compileRunCheck(const Graph &g, const CompileOptions &opts,
                                     const std::vector<Tensor> &in, const std::string &prefix) {
  std::vector<Tensor> want = interpret(g, in);
  CompiledModel cm = buildModel(g, opts);
  static int built = 0;
  std::string out = (test_files::scratchDir(prefix) / cat("net", built++)).string();
  writeArtifacts(g, cm, opts, out);
  aicf_model *m = aicf_open(out.c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  std::vector<Tensor> got;
  std::vector<const void *> ip;
  std::vector<void *> op;
  for (const Tensor &t : in)
    ip.push_back(t.raw());
  for (const Tensor &t : want)
    got.emplace_back(t.type());
  for (Tensor &t : got)
    op.push_back(t.raw());
  REQUIRE_MESSAGE(aicf_run(m, ip.data(), op.data()) == 0, aicf_last_error());
  aicf_close(m);
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    graph_checks::checkClose(got[i], want[i]);
  }
  return cm;
}

} // namespace aicf::compile_checks
