// The harness bodies (see fuzz_bodies.h): each writes the fuzzed bytes where the tool would read
// them (a per-process scratch folder) and calls the same entry point the tool calls.
#include "tests/fuzz/fuzz_bodies.h"
#include "driver/pipeline.h"

#include "driver/compile.h"
#include "frontend/onnx_importer.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"

#include <onnx/onnx_pb.h>

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <vector>

namespace fs = std::filesystem;

namespace aicf::fuzz {
namespace {

std::string &scratchSlot() {
  static std::string dir;
  return dir;
}

void removeScratch() {
  std::error_code ec;
  if (!scratchSlot().empty())
    fs::remove_all(scratchSlot(), ec);
}

// One folder per process (libFuzzer's -fork children each get their own), removed at exit.
const std::string &scratch() {
  std::string &dir = scratchSlot();
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "aicf-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw InternalError("fuzz: cannot create a scratch folder under " +
                          fs::temp_directory_path().string());
    dir = tmpl;
    std::atexit(removeScratch);
  }
  return dir;
}

void writeBytes(const std::string &path, const void *data, size_t size) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char *>(data), static_cast<std::streamsize>(size));
  if (!f.flush())
    throw InternalError("fuzz: cannot write " + path);
}

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Messages name the scratch folder, which differs per process: "<dir>" keeps them comparable.
std::string normalize(std::string msg) {
  const std::string &dir = scratch();
  for (size_t at = msg.find(dir); at != std::string::npos; at = msg.find(dir, at))
    msg.replace(at, dir.size(), "<dir>");
  return msg;
}

// Runs `body` with the tools' error conventions (support/cli_util.cpp's runTool).
Outcome guarded(const std::function<void()> &body) {
  try {
    body();
    return {false, "ok"};
  } catch (const UserError &e) {
    return {false, normalize(e.what())};
  } catch (const std::exception &e) {
    return {true, normalize(e.what())};
  } catch (...) {
    return {true, "unknown exception"};
  }
}

// The pipeline aicfc runs, up to the kernel source: passes, then partition, lower, plan, print.
void compileToSource(Graph &g) {
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  pm.run(g, ctx);
  (void)printGraph(g);
  CompileOptions copts;
  copts.cpuArch = "x86-64"; // not compiled here; fixed so that nothing depends on the machine
  CompiledModel cm = buildModel(g, copts);
  (void)packWeights(cm.graph ? *cm.graph : g, cm.plan);
}

// The fixed model of the runtime harness: small (so the fuzzed weights.bin stays small), with a
// weight, a contraction and a pointwise kernel.
constexpr const char *kRuntimeModel = R"(graph @fuzz_model(%x: f32[2,4]) -> (%y: f32[2,3]) {
  %w = weight f32[4,3] = [0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 1.0, 0.0, -2.0, 0.75, 0.125, 3.0]
  %b = weight f32[3] = [0.1, -0.2, 0.3]
  %m = matmul(%x, %w)
  %a = add(%m, %b)
  %y = relu(%a)
  return %y
}
)";

// Compiles kRuntimeModel once per process into SCRATCH/model and copies the folder to
// SCRATCH/run, where each input's plan.yaml and weights.bin replace the compiled ones.
const std::string &runtimeFolder() {
  static const std::string dir = [] {
    // Keep libgomp loaded for the whole process: libmodel.so (g++ -fopenmp) pulls it in, and
    // unloading it at aicf_close while its threads live is a known crash (issue 15 item 2)
    // that would hide everything the loader can do wrong.
    dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    std::string model = scratch() + "/model", run = scratch() + "/run";
    std::unique_ptr<Graph> g = parseGraph(kRuntimeModel, "fuzz_model.mcir");
    PassManager pm;
    buildDefaultPipeline(pm);
    PassContext ctx;
    pm.run(*g, ctx);
    CompileOptions copts;
    copts.cpuArch = "x86-64"; // saved inputs must run on any x86-64 machine
    CompiledModel cm = buildModel(*g, copts);
    writeArtifacts(*g, cm, copts, model);
    fs::copy(model, run, fs::copy_options::recursive);
    return run;
  }();
  return dir;
}

} // namespace

int writeOnnxSeeds(const std::string &testdata, const std::string &dir) {
  std::vector<fs::path> models;
  for (const auto &e : fs::recursive_directory_iterator(testdata))
    if (e.is_regular_file() && e.path().extension() == ".onnx" &&
        e.path().string().find("/fuzz/") == std::string::npos)
      models.push_back(e.path());
  std::sort(models.begin(), models.end());
  fs::create_directories(dir);
  int written = 0;
  for (const fs::path &p : models) {
    onnx::ModelProto m;
    std::ifstream f(p, std::ios::binary);
    if (!m.ParseFromIstream(&f))
      continue; // a deliberately unreadable bad model: the saved regressions cover those
    onnx::GraphProto &g = *m.mutable_graph();
    google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
    for (const onnx::TensorProto &t : g.initializer()) {
      int64_t n = 1;
      for (int64_t d : t.dims())
        n *= d;
      if (n <= 256) {
        *kept.Add() = t;
        continue;
      }
      onnx::ValueInfoProto *in = g.add_input();
      in->set_name(t.name());
      auto *tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      for (int64_t d : t.dims())
        tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    g.mutable_initializer()->Swap(&kept);
    // Constant nodes holding large values (index tables, masks) the same way.
    google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
    for (const onnx::NodeProto &n : g.node()) {
      const onnx::TensorProto *value = nullptr;
      if (n.op_type() == "Constant" && n.output_size() == 1)
        for (const onnx::AttributeProto &a : n.attribute())
          if (a.name() == "value" && a.has_t())
            value = &a.t();
      int64_t count = 1;
      if (value)
        for (int64_t d : value->dims())
          count *= d;
      if (!value || count <= 256) {
        *nodes.Add() = n;
        continue;
      }
      onnx::ValueInfoProto *in = g.add_input();
      in->set_name(n.output(0));
      auto *tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(value->data_type());
      for (int64_t d : value->dims())
        tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
    g.mutable_node()->Swap(&nodes);
    // Names and docs are most of a large graph's bytes (the Swin block's 1,592 nodes): nodes lose
    // theirs, and values get short ones where no subgraph reads them by name.
    g.clear_value_info();
    g.clear_doc_string();
    bool subgraphs = false;
    for (onnx::NodeProto &n : *g.mutable_node()) {
      n.clear_name();
      n.clear_doc_string();
      for (const onnx::AttributeProto &a : n.attribute())
        subgraphs = subgraphs || a.has_g() || a.graphs_size() > 0;
    }
    if (!subgraphs) {
      std::map<std::string, std::string> shortName;
      auto rename = [&](std::string *name) {
        if (name->empty())
          return;
        auto it = shortName.find(*name);
        if (it == shortName.end())
          it = shortName.emplace(*name, cat("v", shortName.size())).first;
        *name = it->second;
      };
      for (onnx::ValueInfoProto &v : *g.mutable_input())
        rename(v.mutable_name());
      for (onnx::TensorProto &t : *g.mutable_initializer())
        rename(t.mutable_name());
      for (onnx::NodeProto &n : *g.mutable_node()) {
        for (std::string &i : *n.mutable_input())
          rename(&i);
        for (std::string &o : *n.mutable_output())
          rename(&o);
      }
      for (onnx::ValueInfoProto &v : *g.mutable_output())
        rename(v.mutable_name());
    }
    for (onnx::ValueInfoProto &in : *g.mutable_input())
      if (in.type().has_tensor_type())
        for (auto &d : *in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
          if (!d.has_dim_value())
            d.set_dim_value(2);
    std::string rel = fs::relative(p, testdata).string();
    for (char &c : rel)
      if (c == '/')
        c = '_';
    std::string bytes;
    if (!m.SerializeToString(&bytes) || bytes.size() > kOnnxSeedMaxBytes)
      continue;
    writeBytes((fs::path(dir) / rel).string(), bytes.data(), bytes.size());
    ++written;
  }
  return written;
}

void init(const std::string &testdata) {
  setenv("AICF_HOST_HARDWARE", (testdata + "/targets/ci-host.yaml").c_str(), /*overwrite=*/0);
  // scripts/fuzz.sh asks for the runtime harness' seed this way (it needs the compiled folder).
  if (const char *seed = std::getenv("AICF_FUZZ_RUNTIME_SEED"); seed && *seed) {
    std::string bytes = runtimeSeed();
    writeBytes(seed, bytes.data(), bytes.size());
  }
  if (const char *seeds = std::getenv("AICF_FUZZ_ONNX_SEEDS"); seeds && *seeds)
    writeOnnxSeeds(testdata, seeds);
}

Outcome onnx(const uint8_t *data, size_t size) {
  return guarded([&] {
    std::string path = scratch() + "/model.onnx";
    writeBytes(path, data, size);
    std::unique_ptr<Graph> g = importOnnx(path);
    compileToSource(*g);
  });
}

Outcome ir(const uint8_t *data, size_t size) {
  return guarded([&] {
    std::string_view text(reinterpret_cast<const char *>(data), size);
    for (const std::unique_ptr<Graph> &g : parseGraphs(text, "fuzz.mcir")) {
      std::string printed = printGraph(*g);
      try {
        parseGraph(printed, "printed.mcir");
      } catch (const UserError &e) {
        throw InternalError(
            cat("the printed graph does not parse again: ", e.what(), "\n", printed));
      }
    }
  });
}

Outcome npy(const uint8_t *data, size_t size) {
  return guarded([&] {
    std::string in = scratch() + "/in.npy", out = scratch() + "/out.npy";
    writeBytes(in, data, size);
    Tensor t = readNpy(in);
    if (t.dtype() == DType::BF16)
      return; // written as f32 (no NumPy dtype): reads back as another dtype by design
    writeNpy(out, t);
    Tensor back = readNpy(out);
    if (back.type() != t.type() || back.bytes() != t.bytes())
      throw InternalError(
          cat("npy: written and read back as ", back.type().str(), ", was ", t.type().str()));
  });
}

Outcome runtime(const uint8_t *data, size_t size) {
  const std::string &dir = runtimeFolder();
  std::string_view input(reinterpret_cast<const char *>(data), size);
  size_t sep = input.find(kWeightsSeparator);
  std::string_view plan = input.substr(0, sep), weights;
  if (sep != std::string_view::npos)
    weights = input.substr(sep + std::string_view(kWeightsSeparator).size());
  writeBytes(dir + "/plan.yaml", plan.data(), plan.size());
  writeBytes(dir + "/weights.bin", weights.data(), weights.size());

  aicf_model *m = aicf_open(dir.c_str());
  if (!m)
    return {false, normalize(aicf_last_error())};
  Outcome result{false, "ok"};
  // Buffers of the announced sizes, unless they are absurd (the open already checked them
  // against libmodel.so, so a large size here is itself worth a look, not a run).
  constexpr size_t kMaxRunBytes = size_t(64) << 20;
  std::vector<std::vector<uint8_t>> ins, outs;
  size_t total = 0;
  bool infoOk = true;
  for (int i = 0, n = aicf_num_inputs(m); i < n && infoOk; ++i) {
    aicf_tensor_info info;
    infoOk = aicf_input_info(m, i, &info) == 0;
    total += infoOk ? info.bytes : 0;
    if (infoOk && total <= kMaxRunBytes)
      ins.emplace_back(info.bytes);
  }
  for (int i = 0, n = aicf_num_outputs(m); i < n && infoOk; ++i) {
    aicf_tensor_info info;
    infoOk = aicf_output_info(m, i, &info) == 0;
    total += infoOk ? info.bytes : 0;
    if (infoOk && total <= kMaxRunBytes)
      outs.emplace_back(info.bytes);
  }
  if (!infoOk)
    result = {true,
              "runtime: tensor info failed on an opened model: " + normalize(aicf_last_error())};
  else if (total > kMaxRunBytes)
    result = {true,
              cat("runtime: an opened model announces ", total, " bytes of inputs and outputs")};
  else {
    std::vector<const void *> inPtrs;
    std::vector<void *> outPtrs;
    for (auto &b : ins)
      inPtrs.push_back(b.data());
    for (auto &b : outs)
      outPtrs.push_back(b.data());
    aicf_set_num_threads(m, 1);
    if (aicf_run(m, inPtrs.data(), outPtrs.data()) != 0)
      result = {false, "run: " + normalize(aicf_last_error())};
  }
  aicf_close(m);
  return result;
}

std::string runtimeSeed() {
  const std::string &dir = runtimeFolder();
  return readBytes(dir + "/../model/plan.yaml") + kWeightsSeparator +
         readBytes(dir + "/../model/weights.bin");
}

Body bodyByName(const std::string &name) {
  if (name == "onnx")
    return onnx;
  if (name == "ir")
    return ir;
  if (name == "npy")
    return npy;
  if (name == "runtime")
    return runtime;
  return nullptr;
}

} // namespace aicf::fuzz
