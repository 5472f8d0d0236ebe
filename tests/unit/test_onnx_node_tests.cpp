// ONNX backend node tests (libonnx-testdata, /usr/share/libonnx-testdata/data/node/*): every
// model whose ops are all in our mapping table is imported, its output types are compared with
// the reference outputs, and it is interpreted on the reference inputs and compared numerically.
//
// Node tests feed compile-time parameters (Reshape's shape, Slice's starts, ...) as graph
// inputs. Our IR needs those as constants, so when the importer answers "input 'x' is not a
// compile-time constant" for a graph input, the test binds that input to its test-data value (as
// an initializer, in a temporary copy of the model) and imports again. That machinery is shared
// with the host-target suite (test_conformance_host.cpp) in node_test_util.h.
//
// testdata/conformance/import_passing.txt lists the tests that import (with the right output
// types), numeric_passing.txt those whose results also match; neither may regress. Regenerate
// both with AICF_UPDATE_CONFORMANCE=1 build/tests/aicf_unit -tc='onnx node tests*' and review
// the diff. AICF_NODE_TESTS_VERBOSE=1 prints why each covered test fails. The `make
// conformance` table (with the host column) is printed by test_conformance_host.cpp.
#include "node_test_util.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <set>

using namespace aicf;
using namespace aicf::nodetest;

namespace {

std::string detailOf(const std::map<std::string, Result> &results, const std::string &name) {
  auto it = results.find(name);
  return it == results.end() ? "no such test" : it->second.detail;
}

} // namespace

TEST_CASE("onnx node tests: covered models import and match the reference outputs") {
  std::vector<fs::path> dirs = nodeTestDirs();
  if (dirs.empty()) {
    MESSAGE("libonnx-testdata is not installed: skipped");
    return;
  }
  const std::map<std::string, Result> &results = interpreterResults();
  std::map<Status, int> counts;
  for (const auto &[name, r] : results)
    ++counts[r.status];

  int coveredCount = static_cast<int>(dirs.size()) - counts[Status::NotCovered];
  int imported =
      counts[Status::TypeMismatch] + counts[Status::NumericMismatch] + counts[Status::Pass];
  MESSAGE(dirs.size(), " node tests, ", coveredCount, " with covered ops: ", imported, " import (",
          counts[Status::TypeMismatch], " with wrong output types), ", counts[Status::Pass],
          " also match numerically; ", counts[Status::ImportFailed], " refused with an error");
  if (std::getenv("AICF_NODE_TESTS_VERBOSE"))
    for (const auto &[name, r] : results)
      if (r.status != Status::NotCovered && r.status != Status::Pass)
        MESSAGE(name, ": [", static_cast<int>(r.status), "] ", r.detail);

  // A refusal is always a clean UserError (exit code 2) naming the model, never a crash.
  for (const auto &[name, r] : results) {
    CAPTURE(name);
    CHECK_MESSAGE(r.status != Status::Crashed, r.detail);
  }

  std::set<std::string> importing, matching;
  for (const auto &[name, r] : results) {
    if (r.status == Status::NumericMismatch || r.status == Status::Pass)
      importing.insert(name);
    if (r.status == Status::Pass)
      matching.insert(name);
  }
  fs::path lists = listDir();
  if (std::getenv("AICF_UPDATE_CONFORMANCE")) {
    writeList(lists / "import_passing.txt",
              "# ONNX node tests that import with the right output types (regenerate: see\n"
              "# tests/unit/test_onnx_node_tests.cpp)\n",
              importing);
    writeList(lists / "numeric_passing.txt",
              "# ONNX node tests that import and whose interpreted outputs match the reference\n",
              matching);
    MESSAGE("wrote ", importing.size(), " and ", matching.size(), " names under ", lists.string());
    return;
  }
  std::set<std::string> wantImport = readList(lists / "import_passing.txt");
  std::set<std::string> wantMatch = readList(lists / "numeric_passing.txt");
  CHECK(wantImport.size() >= 500);
  for (const std::string &name : wantImport) {
    CAPTURE(name);
    CHECK_MESSAGE(importing.count(name), detailOf(results, name));
  }
  for (const std::string &name : wantMatch) {
    CAPTURE(name);
    CHECK_MESSAGE(matching.count(name), detailOf(results, name));
  }
}
