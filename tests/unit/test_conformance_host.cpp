// ONNX backend node tests through the host target: every test whose interpreted outputs match
// the reference (testdata/conformance/numeric_passing.txt) is imported exactly as the
// interpreter suite imports it (node_test_util.h), run through the default pipeline,
// partitioned into kernel groups, lowered by the recipes, printed as host C++, compiled, and
// its kernels run in group order on host buffers; the graph outputs must match the reference
// outputs with the interpreter suite's tolerance. This is the issue's "node conformance tests
// also pass through the host target, not just the interpreter".
//
// Compiling one shared object per test would take far too long, so the kernels of many tests
// (unique names t<index>_k<group>) are printed into one source per batch and the batches are
// compiled concurrently. A batch that fails to compile is repaired, not lost: the compiler's
// error lines are mapped back to the kernels (hence tests) they fall in, those tests fail with
// the error and the rest is compiled again (halving the batch when an error cannot be placed).
//
// Kernels run in this process (a kernel that crashes takes the suite down with it: none does).
// Buffers: graph inputs and weights are tensors; every kernel writes fresh outputs (filled with
// 0xff bytes, so an element it never writes shows up as NaN or -1); a view (reshape) result is
// its source's bytes with the view's shape (storageOf, lower/fusion.h). Data dims (NonZero,
// NonMaxSuppression, TopK with a run-time k) as the runtime keeps them: buffers at the bound, a
// dim set from the count its step wrote, the dims passed to the kernels reading them, outputs
// read at their actual length.
//
// testdata/conformance/host_passing.txt lists the tests that pass through the host target; it
// may not regress. Regenerate it with
//   AICF_UPDATE_CONFORMANCE=1 build/tests/aicf_unit -tc='onnx node tests*,conformance host*'
// and review the diff. AICF_NODE_TESTS_VERBOSE=1 prints why each failing test fails (its
// stage: pipeline, lower, verify, print, compile, run, numeric). AICF_CONFORMANCE_TABLE=1
// (`make conformance`) prints the by-op table with the host column.
#include "driver/pipeline.h"
#include "group_buffers.h"
#include "node_test_util.h"

#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>
#include <thread>

#include <unistd.h>

using namespace aicf;
using namespace aicf::nodetest;

namespace {

constexpr size_t kTestsPerBatch = 150;

struct HostCase {
  std::string name;
  ImportedTest test;
  Partition part;
  std::vector<kir::Kernel> kernels; // one per group, in group order
  std::string stage;                // where it failed; empty while it is still passing
  std::string detail;
  void fail(std::string st, std::string why) {
    if (stage.empty()) {
      stage = std::move(st);
      detail = std::move(why);
    }
  }
  bool ok() const { return stage.empty(); }
};

// The compiler's first error line (else the message's first line).
std::string firstError(const std::string &msg) {
  std::istringstream in(msg);
  for (std::string line; std::getline(in, line);)
    if (line.find("error:") != std::string::npos)
      return line;
  return msg.substr(0, msg.find('\n'));
}

// Import, pipeline, partition, lower (names t<index>_k<group>), verify, and print alone (so a
// printer error is pinned on its test before batching).
void prepare(HostCase &c, size_t index, const fs::path &scratch) {
  Result r = importNodeTest(kNodeTests / c.name, scratch, c.test);
  if (r.status != Status::Pass)
    return c.fail("import", r.detail);
  try {
    PassManager pm;
    buildDefaultPipeline(pm);
    PassContext ctx;
    pm.run(*c.test.graph, ctx);
  } catch (const std::exception &e) {
    return c.fail("pipeline", e.what());
  }
  Knobs knobs;
  std::string what = "partition: ";
  try {
    c.part = partitionGraph(*c.test.graph);
    for (const KernelGroup &g : c.part.groups) {
      what = cat("group ", g.id, " (", g.kind, "): "); // recipeFor may throw
      what = cat("group ", g.id, " (", g.kind, ", ", recipeFor(g), "): ");
      c.kernels.push_back(lowerGroup(g, cat("t", index, "_k", g.id), knobs));
      kir::runDefaultKernelPipeline(c.kernels.back()); // as the driver does (kir/kir_pass.h)
      std::vector<std::string> errs = kir::verifyKernel(c.kernels.back());
      if (!errs.empty())
        return c.fail("verify", what + errs.front());
    }
  } catch (const std::exception &e) {
    return c.fail("lower", what + e.what());
  }
  try {
    (void)printHostSource(c.kernels);
  } catch (const std::exception &e) {
    return c.fail("print", e.what());
  }
}

// One compiled batch of tests.
struct Batch {
  std::vector<HostCase *> cases;
  std::vector<std::unique_ptr<LoadedLibrary>> libs; // the libraries the passing cases live in
};

// Compiles `cases` into one library under `dir` (stem numbered by `serial`). On a compiler
// error, the tests whose kernels the error lines fall in fail with it and the others are
// compiled again; an error outside every kernel halves the set.
void compileCases(std::vector<HostCase *> cases, Batch &batch, const fs::path &dir,
                  std::atomic<int> &serial) {
  while (!cases.empty()) {
    std::vector<kir::Kernel> kernels;
    for (HostCase *c : cases)
      kernels.insert(kernels.end(), c->kernels.begin(), c->kernels.end());
    int n = serial++;
    std::string cpp = (dir / cat("b", n, ".cpp")).string(),
                so = (dir / cat("b", n, ".so")).string();
    std::string source = printHostSource(kernels);
    try {
      compileHostSource(source, cpp, so);
      batch.libs.push_back(std::make_unique<LoadedLibrary>(so));
      return;
    } catch (const UserError &e) {
      std::string msg = e.what();
      // Kernel spans: the line each `extern "C" void NAME(` starts on.
      std::vector<std::pair<int, std::string>> starts;
      std::istringstream src(source);
      std::string line;
      const std::string marker = "extern \"C\" void ";
      for (int ln = 1; std::getline(src, line); ++ln)
        if (line.rfind(marker, 0) == 0)
          starts.emplace_back(ln, line.substr(marker.size(), line.find('(') - marker.size()));
      std::map<HostCase *, std::string> culprits;
      std::regex errLine(std::regex_replace(cpp, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                         R"(:(\d+):\d+: error: (.*))");
      std::istringstream out(msg);
      while (std::getline(out, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, errLine))
          continue;
        int ln = std::stoi(m[1]);
        auto it = std::upper_bound(starts.begin(), starts.end(), std::make_pair(ln, std::string()),
                                   [](const auto &a, const auto &b) { return a.first < b.first; });
        if (it == starts.begin())
          continue; // in the fixed helpers
        const std::string &kernel = std::prev(it)->second;
        for (HostCase *c : cases)
          for (const kir::Kernel &k : c->kernels)
            if (k.name == kernel && !culprits.count(c))
              culprits[c] = cat(kernel, ": ", m[2].str());
      }
      if (!culprits.empty()) {
        std::vector<HostCase *> rest;
        for (HostCase *c : cases) {
          auto it = culprits.find(c);
          if (it != culprits.end())
            c->fail("compile", it->second);
          else
            rest.push_back(c);
        }
        cases = std::move(rest);
      } else if (cases.size() == 1) {
        cases.front()->fail("compile", firstError(msg));
        return;
      } else {
        size_t half = cases.size() / 2;
        compileCases({cases.begin(), cases.begin() + static_cast<std::ptrdiff_t>(half)}, batch, dir,
                     serial);
        cases.erase(cases.begin(), cases.begin() + static_cast<std::ptrdiff_t>(half));
      }
    }
  }
}

LoadedLibrary::KernelFn findKernel(const Batch &batch, const std::string &name) {
  for (const auto &lib : batch.libs)
    try {
      return lib->kernel(name);
    } catch (const UserError &) {
    }
  throw UserError(cat("no compiled kernel ", name));
}

// Runs the test's kernels in group order; returns the graph outputs.
std::vector<Tensor> runCase(const HostCase &c, const Batch &batch) {
  const Graph &g = *c.test.graph;
  std::map<const Value *, Tensor> buf; // storage values only
  std::vector<Tensor> inputs = inputTensors(c.test);
  for (size_t i = 0; i < g.inputs().size(); ++i)
    buf[g.inputs()[i]] = std::move(inputs[i]);
  for (const Value *w : g.weights())
    buf[w] = *w->data();
  auto storage = [&](const Value *v) -> Tensor & {
    auto it = buf.find(storageOf(v));
    if (it == buf.end())
      throw UserError(cat("%", v->name(), " is read before any kernel wrote it"));
    return it->second;
  };
  // Data dims (lengths known only at run time): 0 until the step setting one has run, then its
  // count; a kernel reading dims gets their values after its params, as the runtime passes them.
  std::map<std::string, int64_t> dims;
  for (const DimRange &d : g.dims())
    dims[d.name] = g.dataDimSetter(d.name) ? 0 : d.opt;
  for (size_t gi = 0; gi < c.part.groups.size(); ++gi) {
    const KernelGroup &grp = c.part.groups[gi];
    LoadedLibrary::KernelFn fn = findKernel(batch, c.kernels[gi].name);
    std::vector<Tensor> ins, outs;
    for (const Value *v : grp.inputs) {
      const Tensor &s = storage(v);
      if (s.byteSize() != Tensor(v->type()).byteSize())
        throw UserError(
            cat("%", v->name(), " ", v->type().str(), ": storage holds ", s.byteSize(), " bytes"));
      ins.push_back(s);
    }
    for (const Value *v : grp.outputs) {
      Tensor o(testing::outputBufferType(grp, v));
      if (o.byteSize())
        std::memset(o.raw(), 0xff, o.byteSize());
      outs.push_back(std::move(o));
    }
    std::vector<void *> args;
    for (Tensor &t : ins)
      args.push_back(t.raw());
    for (Tensor &t : outs)
      args.push_back(t.raw());
    std::vector<int64_t> dimValues;
    for (const std::string &d : c.kernels[gi].dims)
      dimValues.push_back(dims.at(d));
    if (!dimValues.empty())
      args.push_back(dimValues.data());
    fn(args.data());
    for (const Node *n : grp.nodes)
      if (n->info().has(SETS_DIM)) {
        size_t o = static_cast<size_t>(
            std::find(grp.outputs.begin(), grp.outputs.end(), n->results().back()) -
            grp.outputs.begin());
        REQUIRE(o < outs.size());
        int64_t count = outs[o].getInt(0);
        if (count < 0 || count > n->i("bound"))
          throw UserError(
              cat("data dim ", n->s("dim"), " is ", count, ", outside [0, ", n->i("bound"), "]"));
        dims[n->s("dim")] = count;
      }
    for (size_t o = 0; o < grp.outputs.size(); ++o)
      testing::keepOutput(grp, grp.outputs[o], std::move(outs[o]), buf);
  }
  // Outputs a data dim sizes are packed at their actual shape: the first bytes of the buffer.
  std::vector<Tensor> result;
  for (const Value *o : g.outputs()) {
    TensorType t = o->type();
    for (size_t d = 0; d < t.sym.size(); ++d)
      t.shape[d] = *t.sym[d].eval(dims);
    t.sym.clear();
    const std::vector<uint8_t> &bytes = storage(o).bytes();
    result.push_back(
        Tensor(t, std::vector<uint8_t>(bytes.begin(),
                                       bytes.begin() + static_cast<std::ptrdiff_t>(t.bytes()))));
  }
  return result;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

TEST_CASE("conformance host: node tests that interpret correctly also pass through the host "
          "target") {
  if (nodeTestDirs().empty()) {
    MESSAGE("libonnx-testdata is not installed: skipped");
    return;
  }
  bool update = std::getenv("AICF_UPDATE_CONFORMANCE") != nullptr;
  fs::path lists = listDir();
  // The tests to run: numeric_passing.txt, or when regenerating the lists, what passes now.
  std::set<std::string> names;
  if (update) {
    for (const auto &[name, r] : interpreterResults())
      if (r.status == Status::Pass)
        names.insert(name);
  } else {
    names = readList(lists / "numeric_passing.txt");
  }
  REQUIRE(names.size() >= 500);

  auto t0 = std::chrono::steady_clock::now();
  fs::path scratch = fs::temp_directory_path() / cat("aicf_conformance_host_", ::getpid());
  fs::create_directories(scratch);
  struct RemoveAtExit {
    fs::path dir;
    ~RemoveAtExit() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } removeScratch{scratch};
  std::vector<HostCase> cases(names.size());
  size_t index = 0;
  for (const std::string &name : names) {
    cases[index].name = name;
    prepare(cases[index], index, scratch / "models");
    ++index;
  }
  double prepareS = secondsSince(t0);

  // Batches of compilable tests, compiled concurrently.
  auto t1 = std::chrono::steady_clock::now();
  std::vector<HostCase *> ready;
  for (HostCase &c : cases)
    if (c.ok())
      ready.push_back(&c);
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  size_t nBatches = std::max<size_t>(1, (ready.size() + kTestsPerBatch - 1) / kTestsPerBatch);
  nBatches = (nBatches + threads - 1) / threads * threads;
  std::vector<Batch> batches(nBatches);
  for (size_t i = 0; i < ready.size(); ++i)
    batches[i * nBatches / ready.size()].cases.push_back(ready[i]);
  std::atomic<size_t> next{0};
  std::atomic<int> serial{0};
  std::vector<std::string> errors(threads);
  std::vector<std::thread> workers;
  for (unsigned w = 0; w < threads; ++w)
    workers.emplace_back([&, w] {
      try {
        for (size_t b; (b = next++) < batches.size();)
          compileCases(batches[b].cases, batches[b], scratch, serial);
      } catch (const std::exception &e) {
        errors[w] = e.what();
      }
    });
  for (std::thread &t : workers)
    t.join();
  for (const std::string &e : errors)
    REQUIRE_MESSAGE(e.empty(), e);
  double compileS = secondsSince(t1);

  // Run and compare, batch by batch.
  auto t2 = std::chrono::steady_clock::now();
  for (const Batch &b : batches)
    for (HostCase *c : b.cases) {
      if (!c->ok())
        continue;
      std::vector<Tensor> got;
      try {
        got = runCase(*c, b);
      } catch (const std::exception &e) {
        c->fail("run", e.what());
        continue;
      }
      std::string diff = compareWithReference(got, c->test.want);
      if (!diff.empty())
        c->fail("numeric", diff);
    }
  double runS = secondsSince(t2);

  std::set<std::string> passing;
  std::map<std::string, int> byStage;
  size_t kernelCount = 0;
  for (const HostCase &c : cases) {
    kernelCount += c.kernels.size();
    if (c.ok())
      passing.insert(c.name);
    else
      ++byStage[c.stage];
  }
  std::string stages;
  for (const auto &[st, n] : byStage)
    stages += cat(stages.empty() ? "" : ", ", st, " ", n);
  MESSAGE(names.size(), " interpreter-passing node tests, ", passing.size(),
          " also pass through the host target (", kernelCount, " kernels in ", serial.load(),
          " compiles); failures by stage: ", stages.empty() ? "none" : stages, "; prepare ",
          prepareS, " s, compile ", compileS, " s, run ", runS, " s");
  if (std::getenv("AICF_NODE_TESTS_VERBOSE"))
    for (const HostCase &c : cases)
      if (!c.ok())
        MESSAGE(c.name, ": [host ", c.stage, "] ", c.detail);
  if (std::getenv("AICF_CONFORMANCE_TABLE"))
    printConformanceTable(nodeTestDirs(), interpreterResults(), &passing);

  if (update) {
    writeList(lists / "host_passing.txt",
              "# ONNX node tests whose outputs match the reference when compiled through the host\n"
              "# target (regenerate: see tests/unit/test_conformance_host.cpp)\n",
              passing);
    MESSAGE("wrote ", passing.size(), " names to ", (lists / "host_passing.txt").string());
    return;
  }
  std::set<std::string> wantHost = readList(lists / "host_passing.txt");
  CHECK(wantHost.size() >= 600);
  std::map<std::string, const HostCase *> byName;
  for (const HostCase &c : cases)
    byName[c.name] = &c;
  for (const std::string &name : wantHost) {
    CAPTURE(name);
    auto it = byName.find(name);
    std::string why = it == byName.end()
                          ? std::string("not in numeric_passing.txt")
                          : cat("[host ", it->second->stage, "] ", it->second->detail);
    CHECK_MESSAGE(passing.count(name), why);
  }
}
