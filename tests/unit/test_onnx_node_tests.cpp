// ONNX backend node tests (libonnx-testdata, /usr/share/libonnx-testdata/data/node/*): every
// model whose ops are all in our mapping table is imported, its output types are compared with
// the reference outputs, and it is interpreted on the reference inputs and compared numerically.
//
// Node tests feed compile-time parameters (Reshape's shape, Slice's starts, ...) as graph
// inputs. Our IR needs those as constants, so when the importer answers "input 'x' is not a
// compile-time constant" for a graph input, the test binds that input to its test-data value (as
// an initializer, in a temporary copy of the model) and imports again.
//
// testdata/conformance/import_passing.txt lists the tests that import (with the right output
// types), numeric_passing.txt those whose results also match; neither may regress. Regenerate
// both with AICF_UPDATE_CONFORMANCE=1 build/tests/aicf_unit -tc='onnx node tests*' and review
// the diff. AICF_NODE_TESTS_VERBOSE=1 prints why each covered test fails.
#include "frontend/onnx_importer.h"
#include "frontend/onnx_ops.h"
#include "frontend/onnx_tensor.h"
#include "interp/interpreter.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <cstdio>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

const fs::path kNodeTests = "/usr/share/libonnx-testdata/data/node";

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

// The test data stores bfloat16 tensors as uint16 bit patterns.
void fixBf16(onnx::TensorProto &t, int32_t declared) {
  if (t.data_type() == onnx::TensorProto::UINT16 && declared == onnx::TensorProto::BFLOAT16)
    t.set_data_type(onnx::TensorProto::BFLOAT16);
}

// All nodes in the default domain and in our table.
bool covered(const onnx::ModelProto &m) {
  for (const auto &n : m.graph().node())
    if ((!n.domain().empty() && n.domain() != "ai.onnx") || !findOnnxOp(n.op_type()))
      return false;
  return true;
}

std::vector<std::string> realInputs(const onnx::ModelProto &m) {
  std::set<std::string> inits;
  for (const auto &t : m.graph().initializer())
    inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto &v : m.graph().input())
    if (!inits.count(v.name()))
      names.push_back(v.name());
  return names;
}

Result runNodeTest(const fs::path &dir, const fs::path &scratch) {
  onnx::ModelProto model;
  if (!readProto(dir / "model.onnx", model) || !covered(model))
    return {};
  // Reference inputs and outputs, by graph input / output position.
  std::vector<std::string> inputs = realInputs(model);
  std::map<std::string, onnx::TensorProto> inputData;
  std::set<std::string> integerInputs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    onnx::TensorProto t;
    if (!readProto(dir / "test_data_set_0" / cat("input_", k, ".pb"), t))
      return {Status::ImportFailed, cat("cannot read test input ", k)};
    for (const auto &v : model.graph().input())
      if (v.name() == inputs[k]) {
        fixBf16(t, v.type().tensor_type().elem_type());
        if (t.data_type() == onnx::TensorProto::INT64 || t.data_type() == onnx::TensorProto::INT32)
          integerInputs.insert(inputs[k]);
      }
    inputData[inputs[k]] = t;
  }
  std::string path = (dir / "model.onnx").string();
  std::unique_ptr<Graph> g;
  std::set<std::string> bound;
  for (;;) {
    try {
      g = importOnnx(path);
      break;
    } catch (const UserError &e) {
      static const std::regex notConst("input '([^']+)' is not a compile-time constant");
      std::smatch m;
      std::string msg = e.what();
      if (e.exitCode() != 2 || msg.rfind(path + ": ", 0) != 0)
        return {Status::Crashed, cat("exit code ", e.exitCode(), ": ", msg)};
      if (!std::regex_search(msg, m, notConst))
        return {Status::ImportFailed, msg};
      // Bind that graph input to its test value and try again. When the non-constant value is
      // computed inside the graph, bind every integer input (sizes, lengths) at once.
      std::vector<std::string> toBind;
      if (inputData.count(m[1]) && !bound.count(m[1]))
        toBind.push_back(m[1]);
      else if (!inputData.count(m[1]))
        for (const std::string &n : integerInputs)
          if (!bound.count(n))
            toBind.push_back(n);
      if (toBind.empty())
        return {Status::ImportFailed, msg};
      for (const std::string &name : toBind) {
        bound.insert(name);
        onnx::TensorProto t = inputData[name];
        t.set_name(name);
        *model.mutable_graph()->add_initializer() = t;
        auto *ins = model.mutable_graph()->mutable_input();
        for (int i = 0; i < ins->size(); ++i)
          if (ins->Get(i).name() == name) {
            ins->erase(ins->begin() + i);
            break;
          }
      }
      fs::create_directories(scratch);
      path = (scratch / (dir.filename().string() + ".onnx")).string();
      std::ofstream f(path, std::ios::binary);
      model.SerializeToOstream(&f);
    } catch (const std::exception &e) {
      return {Status::Crashed, cat("not a UserError: ", e.what())};
    }
  }
  // Output types against the reference outputs.
  std::vector<Tensor> want;
  for (size_t k = 0; k < g->outputs().size(); ++k) {
    onnx::TensorProto t;
    if (!readProto(dir / "test_data_set_0" / cat("output_", k, ".pb"), t))
      return {Status::TypeMismatch, cat("cannot read reference output ", k)};
    if (static_cast<int>(k) < model.graph().output_size())
      fixBf16(t, model.graph().output(static_cast<int>(k)).type().tensor_type().elem_type());
    try {
      want.push_back(tensorFromOnnx(t, ""));
    } catch (const UserError &e) {
      return {Status::TypeMismatch, cat("reference output ", k, " ", e.what())};
    }
    if (want.back().type() != g->outputs()[k]->type())
      return {Status::TypeMismatch, cat("output ", k, " is ", g->outputs()[k]->type().str(),
                                        ", the reference is ", want.back().type().str())};
  }
  // Numbers: interpret on the reference inputs.
  std::vector<Tensor> got;
  try {
    std::vector<Tensor> args;
    for (Value *in : g->inputs())
      args.push_back(tensorFromOnnx(inputData.at(in->name()), ""));
    got = interpret(*g, args);
  } catch (const std::exception &e) {
    return {Status::NumericMismatch, cat("interpreter: ", e.what())};
  }
  for (size_t k = 0; k < got.size(); ++k)
    for (int64_t i = 0; i < want[k].numel(); ++i) {
      double a = got[k].getDouble(i), b = want[k].getDouble(i);
      bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                  std::fabs(a - b) <= 1e-4 + 1e-3 * std::fabs(b);
      if (!same)
        return {Status::NumericMismatch,
                cat("output ", k, " element ", i, ": got ", a, ", want ", b)};
    }
  return {Status::Pass, ""};
}

std::set<std::string> readList(const fs::path &p) {
  std::set<std::string> names;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty() && line[0] != '#')
      names.insert(line);
  return names;
}

void writeList(const fs::path &p, const std::string &header, const std::set<std::string> &names) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p);
  f << header;
  for (const std::string &n : names)
    f << n << "\n";
}

} // namespace

TEST_CASE("onnx node tests: covered models import and match the reference outputs") {
  if (!fs::exists(kNodeTests)) {
    MESSAGE("libonnx-testdata is not installed: skipped");
    return;
  }
  std::vector<fs::path> dirs;
  for (const auto &e : fs::directory_iterator(kNodeTests))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  fs::path scratch = fs::temp_directory_path() / cat("aicf_node_tests_", ::getpid());

  std::map<std::string, Result> results;
  std::map<Status, int> counts;
  for (const fs::path &d : dirs) {
    Result r = runNodeTest(d, scratch);
    ++counts[r.status];
    results[d.filename().string()] = r;
  }
  fs::remove_all(scratch);

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

  // `make conformance`: a table of passed / failed / unsupported tests by ONNX op type.
  if (std::getenv("AICF_CONFORMANCE_TABLE")) {
    struct Row {
      int pass = 0, numeric = 0, types = 0, refused = 0, unsupported = 0;
    };
    std::map<std::string, Row> rows;
    for (const fs::path &d : dirs) {
      onnx::ModelProto m;
      std::string op = "(unreadable)";
      if (readProto(d / "model.onnx", m) && m.graph().node_size() > 0)
        op = m.graph().node(m.graph().node_size() - 1).op_type();
      Row &row = rows[op];
      switch (results[d.filename().string()].status) {
      case Status::Pass: ++row.pass; break;
      case Status::NumericMismatch: ++row.numeric; break;
      case Status::TypeMismatch: ++row.types; break;
      case Status::ImportFailed:
      case Status::Crashed: ++row.refused; break;
      case Status::NotCovered: ++row.unsupported; break;
      }
    }
    std::printf("\n%-28s %6s %8s %8s %8s %12s\n", "op", "passed", "numeric", "types", "refused",
                "unsupported");
    Row total;
    for (const auto &[op, r] : rows) {
      std::printf("%-28s %6d %8d %8d %8d %12d\n", op.c_str(), r.pass, r.numeric, r.types, r.refused,
                  r.unsupported);
      total.pass += r.pass;
      total.numeric += r.numeric;
      total.types += r.types;
      total.refused += r.refused;
      total.unsupported += r.unsupported;
    }
    std::printf("%-28s %6d %8d %8d %8d %12d\n", "TOTAL", total.pass, total.numeric, total.types,
                total.refused, total.unsupported);
    std::printf("passed: imported and matched the reference; numeric: imported, outputs differ;\n"
                "types: imported with wrong output types; refused: a covered op that the importer\n"
                "rejects with an error (unsupported dtype, mode or attribute); unsupported: an op\n"
                "aicf does not map.\n");
  }

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
  fs::path listDir = fs::path(AICF_TESTDATA) / "conformance";
  if (std::getenv("AICF_UPDATE_CONFORMANCE")) {
    writeList(listDir / "import_passing.txt",
              "# ONNX node tests that import with the right output types (regenerate: see\n"
              "# tests/unit/test_onnx_node_tests.cpp)\n",
              importing);
    writeList(listDir / "numeric_passing.txt",
              "# ONNX node tests that import and whose interpreted outputs match the reference\n",
              matching);
    MESSAGE("wrote ", importing.size(), " and ", matching.size(), " names under ",
            listDir.string());
    return;
  }
  std::set<std::string> wantImport = readList(listDir / "import_passing.txt");
  std::set<std::string> wantMatch = readList(listDir / "numeric_passing.txt");
  CHECK(wantImport.size() >= 500);
  for (const std::string &name : wantImport) {
    CAPTURE(name);
    CHECK_MESSAGE(importing.count(name), results[name].detail);
  }
  for (const std::string &name : wantMatch) {
    CAPTURE(name);
    CHECK_MESSAGE(matching.count(name), results[name].detail);
  }
}
