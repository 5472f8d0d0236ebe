// The shared ONNX node-test machinery (see node_test_util.h).
//
// Node tests feed compile-time parameters (Reshape's shape, Slice's starts, ...) as graph
// inputs. Our IR needs those as constants, so when the importer answers "input 'x' is not a
// compile-time constant" for a graph input, importNodeTest binds that input to its test-data
// value (as an initializer, in a temporary copy of the model) and imports again.
#include "node_test_util.h"

#include "frontend/onnx_importer.h"
#include "frontend/onnx_ops.h"
#include "frontend/onnx_tensor.h"
#include "interp/interpreter.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <regex>

#include <unistd.h>

namespace aicf::nodetest {

namespace {

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

} // namespace

Result importNodeTest(const fs::path &dir, const fs::path &scratch, ImportedTest &out) {
  onnx::ModelProto model;
  if (!readProto(dir / "model.onnx", model) || !covered(model))
    return {};
  // Reference inputs and outputs, by graph input / output position.
  std::vector<std::string> inputs = realInputs(model);
  std::map<std::string, onnx::TensorProto> &inputData = out.inputData;
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
  std::unique_ptr<Graph> &g = out.graph;
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
  std::vector<Tensor> &want = out.want;
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
    // A length known only at run time (a data dim, the only symbolic dims here) matches any.
    const TensorType &got = g->outputs()[k]->type();
    bool same = want.back().type().dtype == got.dtype && want.back().type().rank() == got.rank();
    for (size_t d = 0; same && d < got.shape.size(); ++d)
      same = !got.symDim(d).isConstant() || got.shape[d] == want.back().type().shape[d];
    if (!same)
      return {Status::TypeMismatch, cat("output ", k, " is ", g->outputs()[k]->type().str(),
                                        ", the reference is ", want.back().type().str())};
  }
  return {Status::Pass, ""};
}

std::vector<Tensor> inputTensors(const ImportedTest &t) {
  std::vector<Tensor> args;
  for (Value *in : t.graph->inputs())
    args.push_back(tensorFromOnnx(t.inputData.at(in->name()), ""));
  return args;
}

std::string compareWithReference(const std::vector<Tensor> &got, const std::vector<Tensor> &want) {
  for (size_t k = 0; k < got.size(); ++k)
    for (int64_t i = 0; i < want[k].numel(); ++i) {
      double a = got[k].getDouble(i), b = want[k].getDouble(i);
      bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                  std::fabs(a - b) <= 1e-4 + 1e-3 * std::fabs(b);
      if (!same)
        return cat("output ", k, " element ", i, ": got ", a, ", want ", b);
    }
  return "";
}

Result runNodeTest(const fs::path &dir, const fs::path &scratch) {
  ImportedTest t;
  Result r = importNodeTest(dir, scratch, t);
  if (r.status != Status::Pass)
    return r;
  // Numbers: interpret on the reference inputs.
  std::vector<Tensor> got;
  try {
    got = interpret(*t.graph, inputTensors(t));
  } catch (const std::exception &e) {
    return {Status::NumericMismatch, cat("interpreter: ", e.what())};
  }
  std::string diff = compareWithReference(got, t.want);
  if (!diff.empty())
    return {Status::NumericMismatch, diff};
  return {Status::Pass, ""};
}

std::vector<fs::path> nodeTestDirs() {
  std::vector<fs::path> dirs;
  if (!fs::exists(kNodeTests))
    return dirs;
  for (const auto &e : fs::directory_iterator(kNodeTests))
    if (fs::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

const std::map<std::string, Result> &interpreterResults() {
  static const std::map<std::string, Result> results = [] {
    std::map<std::string, Result> out;
    fs::path scratch = fs::temp_directory_path() / cat("aicf_node_tests_", ::getpid());
    for (const fs::path &d : nodeTestDirs())
      out[d.filename().string()] = runNodeTest(d, scratch);
    fs::remove_all(scratch);
    return out;
  }();
  return results;
}

std::string tableOp(const fs::path &dir) {
  onnx::ModelProto m;
  if (readProto(dir / "model.onnx", m) && m.graph().node_size() > 0)
    return m.graph().node(m.graph().node_size() - 1).op_type();
  return "(unreadable)";
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

fs::path listDir() {
  return fs::path(AICF_TESTDATA) / "conformance";
}

void printConformanceTable(const std::vector<fs::path> &dirs,
                           const std::map<std::string, Result> &results,
                           const std::set<std::string> *host) {
  struct Row {
    int pass = 0, host = 0, numeric = 0, types = 0, refused = 0, unsupported = 0;
  };
  std::map<std::string, Row> rows;
  for (const fs::path &d : dirs) {
    std::string name = d.filename().string();
    Row &row = rows[tableOp(d)];
    auto it = results.find(name);
    switch (it == results.end() ? Status::NotCovered : it->second.status) {
    case Status::Pass: ++row.pass; break;
    case Status::NumericMismatch: ++row.numeric; break;
    case Status::TypeMismatch: ++row.types; break;
    case Status::ImportFailed:
    case Status::Crashed: ++row.refused; break;
    case Status::NotCovered: ++row.unsupported; break;
    }
    if (host && host->count(name))
      ++row.host;
  }
  auto print = [&](const std::string &op, const Row &r) {
    std::printf("%-28s %6d", op.c_str(), r.pass);
    if (host)
      std::printf(" %6d", r.host);
    std::printf(" %8d %8d %8d %12d\n", r.numeric, r.types, r.refused, r.unsupported);
  };
  std::printf("\n%-28s %6s", "op", "passed");
  if (host)
    std::printf(" %6s", "host");
  std::printf(" %8s %8s %8s %12s\n", "numeric", "types", "refused", "unsupported");
  Row total;
  for (const auto &[op, r] : rows) {
    print(op, r);
    total.pass += r.pass;
    total.host += r.host;
    total.numeric += r.numeric;
    total.types += r.types;
    total.refused += r.refused;
    total.unsupported += r.unsupported;
  }
  print("TOTAL", total);
  std::printf("passed: imported and matched the reference (interpreted); %s"
              "numeric: imported, outputs differ;\n"
              "types: imported with wrong output types; refused: a covered op that the importer\n"
              "rejects with an error (unsupported dtype, mode or attribute); unsupported: an op\n"
              "aicf does not map.\n",
              host ? "host: also matched when\n"
                     "compiled through the host target (pipeline, fusion, recipes, host C++); "
                   : "");
  std::fflush(stdout);
}

} // namespace aicf::nodetest
