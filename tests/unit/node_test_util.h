// Shared by the ONNX backend node-test suites (test_onnx_node_tests.cpp: imported and
// interpreted; test_conformance_host.cpp: compiled and run through the host target): reading a
// node test (/usr/share/libonnx-testdata/data/node/NAME/{model.onnx, test_data_set_0/*.pb}),
// importing it with compile-time-parameter inputs bound as constants, comparing outputs with the
// reference with one tolerance, the conformance lists under testdata/conformance and the
// `make conformance` table. Kept in one place so that both suites import and judge a test the
// same way.
#pragma once

#include "ir/graph.h"
#include "ir/types.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace aicf::nodetest {

namespace fs = std::filesystem;

inline const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

enum class Status { NotCovered, ImportFailed, Crashed, TypeMismatch, NumericMismatch, Pass };

struct Result {
  Status status = Status::NotCovered;
  std::string detail;
};

template <typename Proto>
bool readProto(const fs::path &p, Proto &out) {
  std::ifstream f(p, std::ios::binary);
  return f && out.ParseFromIstream(&f);
}

// One imported node test: the graph (compile-time-parameter inputs bound as initializers), the
// reference inputs by graph-input name and the reference outputs in graph-output order (their
// types equal the graph outputs' types).
struct ImportedTest {
  std::unique_ptr<Graph> graph;
  std::map<std::string, onnx::TensorProto> inputData;
  std::vector<Tensor> want;
};

// Imports the test in `dir` (temporary model copies go under `scratch`) and checks its output
// types. Returns NotCovered, ImportFailed, Crashed or TypeMismatch, or Pass when `out` is ready
// to run.
Result importNodeTest(const fs::path &dir, const fs::path &scratch, ImportedTest &out);

// The graph inputs as tensors, in graph-input order (throws UserError for unreadable data).
std::vector<Tensor> inputTensors(const ImportedTest &t);

// Compares outputs with the reference: per element |got - want| <= 1e-4 + 1e-3 |want|, NaN
// matches NaN. Returns "" when all match, else "output K element I: got A, want B".
std::string compareWithReference(const std::vector<Tensor> &got, const std::vector<Tensor> &want);

// Import, then interpret on the reference inputs and compare (the interpreter suite).
Result runNodeTest(const fs::path &dir, const fs::path &scratch);

// Every node-test directory (holding a model.onnx), sorted; empty when the data is missing.
std::vector<fs::path> nodeTestDirs();

// runNodeTest over every nodeTestDirs() entry, by test name; computed once per process (both
// suites and the table use it).
const std::map<std::string, Result> &interpreterResults();

// The op a test is filed under in the table: its model's last node's op type.
std::string tableOp(const fs::path &dir);

// Conformance lists: one test name per line, '#' lines are comments.
std::set<std::string> readList(const fs::path &p);
void writeList(const fs::path &p, const std::string &header, const std::set<std::string> &names);
fs::path listDir(); // testdata/conformance

// `make conformance`: prints passed / failed / unsupported counts by op. `results` holds every
// test's interpreter result by name; `host`, when given, the tests that also pass through the
// host target (an extra "host" column).
void printConformanceTable(const std::vector<fs::path> &dirs,
                           const std::map<std::string, Result> &results,
                           const std::set<std::string> *host);

} // namespace aicf::nodetest
