// aicf-run: runs a model. For now the model is an ONNX file or a Graph IR (.mcir) file, run by
// the reference interpreter (interp/); running compiled artifact folders comes with the runtime.
// Inputs come from .npy files or are seeded random values; outputs go to DIR/<name>.npy and/or
// a short summary on stdout.
#include "aicf/build_config.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

struct Flags {
  std::string model;
  std::vector<std::string> inputs, shapes, dims;
  bool random = false;
  uint64_t seed = 0;
  std::string outputDir;
  bool print = false;
  bool time = false;
};

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Graph> loadModel(const Flags &flags) {
  const std::string &path = flags.model;
  if (fs::is_directory(path))
    throw UserError("not implemented yet: running compiled artifact folders", 2);
  if (!std::ifstream(path, std::ios::binary))
    throw UserError(cat("cannot open ", path), 1);
  if (endsWith(path, ".onnx")) {
    ImportOptions opts;
    for (const std::string &s : flags.shapes)
      opts.inputShapes.insert(parseShapeFlag(s));
    for (const std::string &d : flags.dims)
      opts.dimParams.insert(parseDimFlag(d));
    return importOnnx(path, opts);
  }
  if (endsWith(path, ".mcir")) {
    if (!flags.shapes.empty() || !flags.dims.empty())
      throw UserError("--shape and --dim apply to .onnx models only (.mcir shapes are static)");
    return parseGraphFile(path);
  }
  throw UserError(cat(path, ": unknown model format (expected a .onnx or .mcir file)"));
}

std::string inputNames(const Graph &g) {
  std::string s;
  for (const Value *v : g.inputs())
    s += (s.empty() ? "" : ", ") + v->name();
  return s;
}

// Graph inputs in order: from --input files, else random (with --random), else an error.
std::vector<Tensor> loadInputs(const Graph &g, const Flags &flags) {
  std::map<std::string, std::string> files;
  for (const std::string &spec : flags.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw UserError(cat("bad --input '", spec, "': expected NAME=FILE.npy"));
    std::string name = spec.substr(0, eq);
    if (!g.findValue(name) || !g.findValue(name)->isInput())
      throw UserError(cat("--input ", name, ": the model has no input '", name,
                          "' (inputs: ", inputNames(g), ")"));
    if (!files.emplace(name, spec.substr(eq + 1)).second)
      throw UserError(cat("--input ", name, " given twice"));
  }
  std::vector<std::string> missing;
  for (const Value *v : g.inputs())
    if (!files.count(v->name()))
      missing.push_back(v->name());
  if (!missing.empty() && !flags.random) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    throw UserError(cat("missing inputs: ", list, " (give --input NAME=FILE.npy or --random)"));
  }
  // Random values for every input first, so an input's random data does not depend on which
  // other inputs came from files.
  std::vector<Tensor> values;
  if (flags.random)
    values = randomInputs(g, flags.seed);
  else
    values.resize(g.inputs().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *in = g.inputs()[i];
    auto it = files.find(in->name());
    if (it == files.end())
      continue;
    Tensor t = readNpy(it->second);
    const TensorType &want = in->type();
    // bf16 is stored as f32 in .npy files (support/npy.h): accept f32 data for a bf16 input.
    if (want.dtype == DType::BF16 && t.dtype() == DType::F32 && t.shape() == want.shape) {
      Tensor b(want);
      for (int64_t k = 0; k < t.numel(); ++k)
        b.setDouble(k, t.getDouble(k));
      t = std::move(b);
    }
    if (t.type() != want)
      throw UserError(cat("input '", in->name(), "': expected ", want.str(), ", got ",
                          t.type().str(), " from ", it->second));
    values[i] = std::move(t);
  }
  return values;
}

// A file name for an output: its name with anything but [A-Za-z0-9._-] replaced by '_'.
std::string fileNameFor(const std::string &name, size_t index) {
  if (name.empty())
    return cat("output_", index);
  std::string s = name;
  for (char &c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  if (s == "." || s == "..")
    s = cat("output_", index);
  return s;
}

void printSummary(std::ostream &os, const std::string &name, const Tensor &t) {
  os << name << ": " << t.type().str();
  int64_t n = t.numel();
  bool asInt = !isFloat(t.dtype());
  auto fmt = [&](double v) {
    std::ostringstream s;
    if (asInt)
      s << static_cast<int64_t>(v);
    else
      s << v;
    return s.str();
  };
  os << " [";
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i)
    os << (i ? ", " : "") << fmt(t.getDouble(i));
  os << (n > 6 ? ", ...]" : "]");
  if (n > 0) {
    double mn = t.getDouble(0), mx = mn, sum = 0.0;
    int64_t nans = 0;
    for (int64_t i = 0; i < n; ++i) {
      double v = t.getDouble(i);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      mn = std::isnan(mn) ? v : std::min(mn, v);
      mx = std::isnan(mx) ? v : std::max(mx, v);
      sum += v;
    }
    os << " min " << fmt(mn) << " max " << fmt(mx) << " mean " << sum / double(n - nans);
    if (nans)
      os << " (" << nans << " NaN)";
  }
  os << "\n";
}

int run(const Flags &flags) {
  std::unique_ptr<Graph> g = loadModel(flags);
  std::vector<Tensor> inputs = loadInputs(*g, flags);

  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs = interpret(*g, inputs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (flags.time)
    std::cerr << "interpreted in " << ms << " ms\n";

  if (!flags.outputDir.empty()) {
    fs::create_directories(flags.outputDir);
    for (size_t i = 0; i < outputs.size(); ++i)
      writeNpy(
          (fs::path(flags.outputDir) / (fileNameFor(g->outputs()[i]->name(), i) + ".npy")).string(),
          outputs[i]);
  }
  if (flags.print || flags.outputDir.empty())
    for (size_t i = 0; i < outputs.size(); ++i)
      printSummary(std::cout, g->outputs()[i]->name(), outputs[i]);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"aicf-run: run a model (.onnx or .mcir) with the reference interpreter"};
  app.set_version_flag("--version", std::string("aicf-run ") + AICF_VERSION);
  Flags flags;
  app.add_option("model", flags.model, "model: .onnx or .mcir file")->required();
  app.add_option("--input", flags.inputs, "an input from a .npy file: NAME=FILE.npy (repeatable)");
  app.add_flag("--random", flags.random, "seeded random values for inputs not given by --input");
  app.add_option("--seed", flags.seed, "seed for --random")->capture_default_str();
  app.add_option("--output-dir", flags.outputDir, "write each output to DIR/<name>.npy");
  app.add_option("--shape", flags.shapes, "bind an ONNX input's shape: NAME=2x64x256 (repeatable)");
  app.add_option("--dim", flags.dims, "bind a named ONNX dim: PARAM=VALUE (repeatable)");
  app.add_flag("--print", flags.print,
               "print a summary of each output (default without --output-dir)");
  app.add_flag("--time", flags.time, "print the interpreter's wall time to stderr");
  CLI11_PARSE(app, argc, argv);
  return runTool([&] { return run(flags); });
}
