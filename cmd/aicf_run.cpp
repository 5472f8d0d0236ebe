// aicf-run: runs a model. A compiled output folder (aicfc MODEL -o OUT) runs through the runtime
// (runtime/aicf_runtime.h; cpu or cuda plans) with --bench / --threads / --profile /
// --no-cuda-graph; an ONNX file or a Graph IR
// (.mcir) file runs on the reference interpreter (interp/). Inputs come from .npy files or are
// seeded random values (the same values for the same input types either way); outputs go to
// DIR/<name>.npy and/or a short summary on stdout.
#include "aicf/build_config.h"
#include "frontend/onnx_importer.h"
#include "interp/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "plan/report_html.h"
#include "runtime/aicf_runtime.h"
#include "runtime/cudart.h"
#include "support/cli_parse.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"
#include "support/plan_schema.h"

#include <CLI/CLI.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;
namespace pk = aicf::plan_key; // plan.yaml's keys (support/plan_schema.def)

namespace {

struct Flags {
  std::string model;
  std::vector<std::string> inputs, shapes, dims, consts, seqs, absent;
  bool random = false;
  uint64_t seed = 0;
  std::string outputDir;
  bool print = false;
  bool time = false;
  int bench = 0;
  int threads = 0;
  bool benchGiven = false, threadsGiven = false;
  bool pinThreads = false, fixedThreads = false;
  bool profile = false;
  bool report = false;
  bool noCudaGraph = false;
  bool deviceIo = false;
  std::string referenceDir;
  double rtol = 1e-4, atol = 1e-4;
};

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::unique_ptr<Graph> loadModel(const Flags &flags) {
  const std::string &path = flags.model;
  if (!std::ifstream(path, std::ios::binary))
    throw UserError(cat("cannot open ", path), 1);
  // A .mcir weight printed without its data (over 16 elements) refuses to run when the
  // interpreter reads it (Value::data), naming the weight.
  if (endsWith(path, ".onnx")) {
    ImportOptions opts;
    opts.inputShapes = parseShapeFlags(flags.shapes);
    opts.dimParams = parseDimFlags(flags.dims);
    opts.constInputs = parseConstFlags(flags.consts);
    opts.sequenceLengths = parseDimFlags(flags.seqs, "--seq");
    opts.absentInputs.insert(flags.absent.begin(), flags.absent.end());
    return importOnnx(path, opts);
  }
  if (endsWith(path, ".mcir")) {
    if (!flags.shapes.empty() || !flags.dims.empty() || !flags.consts.empty())
      throw UserError(
          "--shape, --dim and --const apply to .onnx models only (.mcir shapes are static)", 1);
    return parseGraphFile(path);
  }
  throw UserError(cat(path, ": unknown model format (expected a .onnx or .mcir file)"), 1);
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
      throw UserError(cat("bad --input '", spec, "': expected NAME=FILE.npy"), 1);
    std::string name = spec.substr(0, eq);
    if (!g.findValue(name) || !g.findValue(name)->isInput())
      throw UserError(cat("--input ", name, ": the model has no input '", name,
                          "' (inputs: ", inputNames(g), ")"),
                      1);
    std::string file = spec.substr(eq + 1);
    if (fs::is_directory(file))
      throw UserError(cat("--input ", name, ": ", file, " is a directory, not a .npy file"), 1);
    if (!files.emplace(name, file).second)
      throw UserError(cat("--input ", name, " given twice"), 1);
  }
  std::vector<std::string> missing;
  for (const Value *v : g.inputs())
    if (!files.count(v->name()))
      missing.push_back(v->name());
  if (!missing.empty() && !flags.random) {
    std::string list;
    for (const std::string &m : missing)
      list += (list.empty() ? "" : ", ") + m;
    throw UserError(cat("missing inputs: ", list, " (give --input NAME=FILE.npy or --random)"), 1);
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
    const TensorType &want = in->type();
    Tensor t = npyFor(readNpy(it->second), want.dtype); // bf16 comes as f32 (ir/npy.h)
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

// --reference DIR: compares each output with DIR/<name>.npy; a UserError when any element is
// off by more than atol + rtol*|reference|.
void compareWithReference(const Flags &flags, const std::vector<std::string> &names,
                          const std::vector<Tensor> &outputs) {
  if (flags.referenceDir.empty())
    return;
  std::string failed;
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor want =
        readNpy((fs::path(flags.referenceDir) / (fileNameFor(names[i], i) + ".npy")).string());
    if (want.shape() != outputs[i].shape())
      throw UserError(cat("output '", names[i], "': shape ", outputs[i].type().str(),
                          " but the reference is ", want.type().str()));
    // Also the accuracy a reduced-precision folder is judged by: the largest relative error
    // over the elements larger than atol, and the cosine similarity of the two outputs.
    double worst = 0, worstRel = 0, dot = 0, gotSq = 0, wantSq = 0;
    int64_t bad = 0;
    for (int64_t k = 0; k < want.numel(); ++k) {
      double got = outputs[i].getDouble(k), ref = want.getDouble(k), err = std::fabs(got - ref);
      worst = std::max(worst, err);
      if (std::fabs(ref) > flags.atol)
        worstRel = std::max(worstRel, err / std::fabs(ref));
      dot += got * ref;
      gotSq += got * got;
      wantSq += ref * ref;
      bad += err <= flags.atol + flags.rtol * std::fabs(ref) ? 0 : 1;
    }
    double cosine = gotSq == 0 && wantSq == 0 ? 1.0 : dot / std::sqrt(gotSq * wantSq);
    std::cout << "reference " << names[i] << ": max abs error " << worst << ", " << bad << " of "
              << want.numel() << " elements outside " << flags.atol << " + " << flags.rtol
              << "*|ref|; max rel error " << worstRel << ", cosine similarity " << cosine << "\n";
    if (bad)
      failed += (failed.empty() ? "" : ", ") + names[i];
  }
  if (!failed.empty())
    throw UserError(cat("outputs differ from the reference: ", failed), 1);
}

void writeOutputs(const Flags &flags, const std::vector<std::string> &names,
                  const std::vector<Tensor> &outputs) {
  compareWithReference(flags, names, outputs);
  if (!flags.outputDir.empty()) {
    if (fs::exists(flags.outputDir) && !fs::is_directory(flags.outputDir))
      throw UserError(cat("--output-dir ", flags.outputDir, ": exists and is not a directory"), 1);
    fs::create_directories(flags.outputDir);
    for (size_t i = 0; i < outputs.size(); ++i)
      writeNpy((fs::path(flags.outputDir) / (fileNameFor(names[i], i) + ".npy")).string(),
               outputs[i]);
  }
  if (flags.print || (flags.outputDir.empty() && flags.bench == 0 && !flags.profile))
    for (size_t i = 0; i < outputs.size(); ++i)
      printSummary(std::cout, names[i], outputs[i]);
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(k, v.size() - 1)];
}

// --bench N: min(N, 5) warm-up runs, then N timed ones; prints the median and p90 under label.
void benchRuns(const char *label, int reps, const std::function<void()> &runOnce) {
  for (int w = 0; w < std::min(reps, 5); ++w)
    runOnce();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    runOnce();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::cout << label << ": " << reps << " runs, median " << percentile(ms, 0.5) << " ms, p90 "
            << percentile(ms, 0.9) << " ms\n";
}

// The device buffers and stream of --device-io, released however the bench ends.
struct DeviceIo {
  const rt::Cudart *cu = nullptr;
  std::vector<void *> in, out;
  rt::CudaStream stream = nullptr;
  ~DeviceIo() {
    if (stream)
      cu->streamDestroy(stream);
    for (void *p : in)
      cu->free(p);
    for (void *p : out)
      cu->free(p);
  }
  void check(rt::CudaError e, const char *what) const {
    if (e != 0)
      throw UserError(cat("--device-io: ", what, ": ", cu->describe(e)));
  }
  void *alloc(std::vector<void *> &into, size_t bytes) {
    void *p = nullptr;
    check(cu->malloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc");
    into.push_back(p);
    return p;
  }
};

// --bench --device-io on a cuda folder: the inputs are copied to device buffers once, then each
// timed run is aicf_run_device plus a stream synchronisation, so the figure is the kernels' (and
// the graph launch's) time without the host copies, as a peer with device-resident I/O measures.
void benchDeviceIo(aicf_model *m, const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
                   int reps) {
  DeviceIo d;
  std::string err;
  d.cu = rt::loadCudart(&err);
  if (!d.cu)
    throw UserError(cat("--device-io: ", err));
  for (const Tensor &t : inputs)
    d.check(d.cu->memcpyAsync(d.alloc(d.in, t.byteSize()), t.raw(), t.byteSize(),
                              rt::kMemcpyHostToDevice, nullptr),
            "cudaMemcpyAsync");
  for (const Tensor &t : outputs)
    d.alloc(d.out, t.byteSize());
  d.check(d.cu->streamCreate(&d.stream), "cudaStreamCreate");
  std::vector<const void *> in(d.in.begin(), d.in.end());
  benchRuns("bench (device I/O)", reps, [&] {
    if (aicf_run_device(m, in.data(), d.out.data(), d.stream) != 0)
      throw UserError(aicf_last_error());
    d.check(d.cu->streamSynchronize(d.stream), "cudaStreamSynchronize");
  });
  for (size_t i = 0; i < outputs.size(); ++i)
    d.check(d.cu->memcpyAsync(outputs[i].raw(), d.out[i], outputs[i].byteSize(),
                              rt::kMemcpyDeviceToHost, d.stream),
            "cudaMemcpyAsync");
  d.check(d.cu->streamSynchronize(d.stream), "cudaStreamSynchronize");
}

// A measured step this many times its predicted time is off the cost model: a missing fast
// path (a kernel far slower than its form should be), not a constant to refit. --profile marks
// such steps and says what share of the run they hold (`make bench` reports the same share).
constexpr double kOffModel = 3.0;

// --profile: each step's mean time beside the plan's predicted time (plan.yaml
// hints.predicted.time_us), so a profile shows where the cost model is off. A host plan is
// priced for every core of its machine; at --threads 1 a step is measured against its time on
// one core (hints.predicted.one_core_us, where the plan records one), not the machine's.
void printProfile(const Flags &flags, aicf_model *m, const std::function<void(double *)> &runOnce) {
  int steps = aicf_num_steps(m);
  std::vector<double> total(static_cast<size_t>(steps), 0.0), once(static_cast<size_t>(steps));
  int reps = std::max(flags.bench, 10);
  for (int r = 0; r < reps; ++r) {
    runOnce(once.data());
    for (int s = 0; s < steps; ++s)
      total[s] += once[s];
  }
  double sum = 0;
  for (double t : total)
    sum += t;
  std::vector<double> predicted(static_cast<size_t>(steps), -1.0);
  try {
    YAML::Node plan = YAML::LoadFile((fs::path(flags.model) / "plan.yaml").string());
    for (int s = 0; s < steps && s < static_cast<int>(plan[pk::plan::steps].size()); ++s) {
      YAML::Node p = plan[pk::plan::steps][s][pk::step::hints][pk::hints::predicted];
      YAML::Node t = p[pk::predicted::time_us], one = p[pk::predicted::one_core_us];
      if (flags.threads == 1 && one)
        predicted[s] = one.as<double>() / 1e3;
      else if (t)
        predicted[s] = t.as<double>() / 1e3;
    }
  } catch (const YAML::Exception &) {
    // aicf_open already validated the plan; predictions are optional hints.
  }
  std::printf("%-5s %-22s %-34s %10s %7s %10s %8s\n", "step", "kind", "kernel", "ms", "share",
              "pred ms", "x pred");
  double predSum = 0, offSum = 0;
  int offSteps = 0;
  for (int s = 0; s < steps; ++s) {
    double ms = 1e3 * total[s] / reps;
    char pred[32] = "-", ratio[32] = "-";
    if (predicted[s] >= 0) {
      std::snprintf(pred, sizeof pred, "%.4f", predicted[s]);
      predSum += predicted[s];
      if (predicted[s] > 0) {
        bool off = ms > kOffModel * predicted[s];
        std::snprintf(ratio, sizeof ratio, "%.1f%s", ms / predicted[s], off ? " !" : "");
        if (off) {
          offSum += total[s];
          ++offSteps;
        }
      }
    }
    std::printf("%-5d %-22s %-34s %10.4f %6.1f%% %10s %8s\n", s, aicf_step_kind(m, s),
                aicf_step_symbol(m, s), ms, sum > 0 ? 100.0 * total[s] / sum : 0.0, pred, ratio);
  }
  std::printf("total %.4f ms per run (mean of %d); predicted %.4f ms\n", 1e3 * sum / reps, reps,
              predSum);
  std::printf("off the cost model (! : measured > %.0fx predicted): %d steps, %.1f%% of the time\n",
              kOffModel, offSteps, sum > 0 ? 100.0 * offSum / sum : 0.0);
  if (flags.report) { // the measured points in OUT/report.html (plan/report_html.h)
    std::vector<double> us;
    for (double t : total)
      us.push_back(1e6 * t / reps);
    rewriteReportHtml(flags.model, us);
    std::printf("wrote %s\n", (fs::path(flags.model) / "report.html").string().c_str());
  }
}

// A compiled output folder, through the runtime.
int runFolder(const Flags &flags) {
  if (!flags.dims.empty() || !flags.consts.empty())
    throw UserError("--dim and --const apply to .onnx models only (a compiled folder's dims and "
                    "bound inputs are fixed)",
                    1);
  std::unique_ptr<aicf_model, void (*)(aicf_model *)> m(aicf_open(flags.model.c_str()), aicf_close);
  if (!m)
    throw UserError(aicf_last_error(), 2);
  if (aicf_num_dims(m.get()) == 0 && !flags.shapes.empty())
    throw UserError("--shape applies to .onnx models and to folders compiled for ranges of dims "
                    "(this folder's shapes are fixed)",
                    1);
  if (aicf_num_dims(m.get()) > 0) {
    // A folder compiled for ranges of dims: each input takes the shape --shape gives, else its
    // .npy file's, else the one the folder was optimised for; the runtime checks them.
    std::map<std::string, std::vector<int64_t>> shapes = parseShapeFlags(flags.shapes);
    for (const std::string &spec : flags.inputs) {
      auto eq = spec.find('=');
      if (eq != std::string::npos && !shapes.count(spec.substr(0, eq)) &&
          !fs::is_directory(spec.substr(eq + 1)))
        shapes[spec.substr(0, eq)] = readNpy(spec.substr(eq + 1)).shape();
    }
    std::set<std::string> known;
    for (int i = 0; i < aicf_num_inputs(m.get()); ++i) {
      aicf_tensor_info info;
      aicf_input_info(m.get(), i, &info);
      known.insert(info.name);
      auto it = shapes.find(info.name);
      if (it != shapes.end() &&
          aicf_set_input_shape(m.get(), i, static_cast<int>(it->second.size()),
                               it->second.data()) != 0)
        throw UserError(aicf_last_error());
    }
    for (const auto &[name, shape] : shapes)
      if (!known.count(name))
        throw UserError(cat("--shape ", name, ": the folder has no input '", name, "'"), 1);
    aicf_tensor_info probe;
    if (aicf_num_outputs(m.get()) > 0 && aicf_output_info(m.get(), 0, &probe) != 0)
      throw UserError(aicf_last_error());
  }
  if (flags.deviceIo) {
    // aicf_open validated plan.yaml, so its target kind is there to read.
    YAML::Node plan = YAML::LoadFile((fs::path(flags.model) / "plan.yaml").string());
    std::string kind = plan[pk::plan::target][pk::target::kind].as<std::string>();
    if (kind != "cuda")
      throw UserError(cat("--device-io needs a cuda folder (this is a ", kind, " plan)"), 1);
  }
  // The inputs as a graph signature, so --input/--random work exactly as for models.
  Graph io("io");
  for (int i = 0; i < aicf_num_inputs(m.get()); ++i) {
    aicf_tensor_info info;
    aicf_input_info(m.get(), i, &info);
    std::optional<DType> dt = parseDType(info.dtype);
    if (!dt)
      throw UserError(cat("input '", info.name, "': unknown dtype ", info.dtype));
    io.addInput(info.name,
                TensorType(*dt, std::vector<int64_t>(info.shape, info.shape + info.rank)));
  }
  std::vector<Tensor> inputs = loadInputs(io, flags);
  std::vector<Tensor> outputs;
  std::vector<std::string> names;
  for (int i = 0; i < aicf_num_outputs(m.get()); ++i) {
    aicf_tensor_info info;
    aicf_output_info(m.get(), i, &info);
    std::optional<DType> dt = parseDType(info.dtype);
    if (!dt)
      throw UserError(cat("output '", info.name, "': unknown dtype ", info.dtype));
    outputs.emplace_back(TensorType(*dt, std::vector<int64_t>(info.shape, info.shape + info.rank)));
    names.push_back(info.name);
  }
  std::vector<const void *> in;
  for (const Tensor &t : inputs)
    in.push_back(t.raw());
  std::vector<void *> out;
  for (Tensor &t : outputs)
    out.push_back(t.raw());
  if (flags.threads > 0 && aicf_set_num_threads(m.get(), flags.threads) != 0)
    throw UserError(aicf_last_error());
  if (flags.pinThreads && aicf_set_thread_affinity(m.get(), 1) != 0)
    throw UserError(aicf_last_error());
  if (flags.fixedThreads && aicf_set_adaptive_threads(m.get(), 0) != 0)
    throw UserError(aicf_last_error());
  if (flags.noCudaGraph && aicf_set_cuda_graph(m.get(), 0) != 0)
    throw UserError(aicf_last_error());
  auto runOnce = [&](double *steps) {
    int rc = steps ? aicf_run_profiled(m.get(), in.data(), out.data(), steps)
                   : aicf_run(m.get(), in.data(), out.data());
    if (rc != 0)
      throw UserError(aicf_last_error());
  };
  runOnce(nullptr);
  if (flags.bench > 0 && flags.deviceIo) {
    benchDeviceIo(m.get(), inputs, outputs, flags.bench);
  } else if (flags.bench > 0) {
    benchRuns("bench", flags.bench, [&] { runOnce(nullptr); });
  }
  if (flags.profile)
    printProfile(flags, m.get(), runOnce);
  // An output whose length is known only at run time was given its bound's memory (what
  // aicf_output_info reports before a run); the run says how much of it holds the result.
  for (int i = 0; i < aicf_num_outputs(m.get()); ++i) {
    aicf_tensor_info info;
    if (aicf_output_info(m.get(), i, &info) != 0)
      throw UserError(aicf_last_error());
    TensorType t(outputs[i].dtype(), std::vector<int64_t>(info.shape, info.shape + info.rank));
    if (t == outputs[i].type())
      continue;
    Tensor actual(t);
    if (t.bytes() > 0) // (an empty tensor's data pointer is null)
      std::memcpy(actual.raw(), outputs[i].raw(), static_cast<size_t>(t.bytes()));
    outputs[i] = std::move(actual);
  }
  writeOutputs(flags, names, outputs);
  return 0;
}

int run(const Flags &flags) {
  // 0 means "not given" for both; any value given must be a real count.
  if (flags.threadsGiven && (flags.threads < 1 || flags.threads > AICF_MAX_THREADS))
    throw UserError(cat("--threads ", flags.threads, ": expected 1 to ", AICF_MAX_THREADS), 1);
  if (flags.benchGiven && flags.bench < 1)
    throw UserError(cat("--bench ", flags.bench, ": expected a number of runs >= 1"), 1);
  if (flags.deviceIo && flags.bench == 0)
    throw UserError("--device-io times runs: give --bench N too", 1);
  if (fs::is_directory(flags.model))
    return runFolder(flags);
  if (flags.bench > 0 || flags.threads > 0 || flags.pinThreads || flags.fixedThreads ||
      flags.profile || flags.noCudaGraph || flags.deviceIo)
    throw UserError("--bench, --threads, --pin-threads, --fixed-threads, --profile, "
                    "--no-cuda-graph and --device-io apply to compiled output folders",
                    1);
  std::unique_ptr<Graph> g = loadModel(flags);
  std::vector<Tensor> inputs = loadInputs(*g, flags);

  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs = interpret(*g, inputs);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (flags.time)
    std::cerr << "interpreted in " << ms << " ms\n";

  std::vector<std::string> names;
  for (const Value *o : g->outputs())
    names.push_back(o->name());
  writeOutputs(flags, names, outputs);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"aicf-run: run a compiled output folder, or a model (.onnx or .mcir) with the "
               "reference interpreter"};
  app.set_version_flag("--version", std::string("aicf-run ") + AICF_VERSION);
  Flags flags;
  app.add_option("model", flags.model, "compiled output folder, or a .onnx or .mcir file")
      ->required();
  app.add_option("--input", flags.inputs, "an input from a .npy file: NAME=FILE.npy (repeatable)");
  app.add_flag("--random", flags.random, "seeded random values for inputs not given by --input");
  app.add_option("--seed", flags.seed, "seed for --random")->capture_default_str();
  app.add_option("--output-dir", flags.outputDir, "write each output to DIR/<name>.npy");
  app.add_option("--shape", flags.shapes, "bind an ONNX input's shape: NAME=2x64x256 (repeatable)");
  app.add_option("--dim", flags.dims, "bind a named ONNX dim: PARAM=VALUE (repeatable)");
  app.add_option("--const", flags.consts,
                 "bind an ONNX input to a constant: NAME=FILE.npy or NAME=VALUE (repeatable)");
  app.add_option("--seq", flags.seqs,
                 "an ONNX sequence input of COUNT tensors, given as NAME.0 ...: NAME=COUNT "
                 "(repeatable)");
  app.add_option("--absent", flags.absent,
                 "an ONNX optional input holding no element: NAME (repeatable)");
  app.add_flag("--print", flags.print,
               "print a summary of each output (default without --output-dir)");
  app.add_flag("--time", flags.time, "print the interpreter's wall time to stderr");
  app.add_option("--bench", flags.bench, "folder: time N runs after warm-up; print median and p90");
  app.add_option("--threads", flags.threads, "folder: threads the kernels use (1 to 1024)");
  app.add_flag("--pin-threads", flags.pinThreads,
               "cpu folder: pin the pool's worker threads to CPUs (off by default)");
  app.add_flag("--fixed-threads", flags.fixedThreads,
               "cpu folder: always use every thread (by default, while workers stall steps or runs "
               "are under ~0.2 ms, the pool tries fewer and keeps the faster)");
  app.add_flag("--profile", flags.profile,
               "folder: per-step time table (step, kind, ms, share, the plan's predicted ms, "
               "measured / predicted; ! marks a step over 3x)");
  app.add_flag("--report", flags.report,
               "with --profile: add the measured step times to the folder's report.html (a "
               "folder compiled with --explain)")
      ->needs("--profile");
  app.add_flag("--no-cuda-graph", flags.noCudaGraph,
               "cuda folder: launch every step on each run instead of replaying a CUDA Graph");
  app.add_flag("--device-io", flags.deviceIo,
               "cuda folder, with --bench: time aicf_run_device on device-resident inputs and "
               "outputs (no host copies in the timed runs)");
  app.add_option("--reference", flags.referenceDir,
                 "compare each output with DIR/<name>.npy (exit 1 when outside tolerance)");
  app.add_option("--rtol", flags.rtol, "relative tolerance for --reference")->capture_default_str();
  app.add_option("--atol", flags.atol, "absolute tolerance for --reference")->capture_default_str();
  if (std::optional<int> rc = parseCommandLine(app, argc, argv))
    return *rc;
  flags.benchGiven = app.count("--bench") > 0;
  flags.threadsGiven = app.count("--threads") > 0;
  return runTool([&] { return run(flags); });
}
