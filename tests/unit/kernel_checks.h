// Kernel-level differential checks shared by the kernel tests (tests/unit/test_kernels.cpp,
// tests/unit/test_norm_lanes.cpp): a partition's groups lowered by their recipes and verified,
// printed with the host printer, compiled and loaded, each group run on the interpreter's values
// for its inputs and its outputs compared with the interpreter's (tolerances: interpTol).
#pragma once

#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "driver/pipeline.h"
#include "group_buffers.h"
#include "interp/interpreter.h"
#include "kir/kir_pass.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "support/diagnostics.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

namespace aicf::kernel_checks {

namespace fs = std::filesystem;

// Recipes not yet implemented: their groups are skipped (with a message), never passed.
inline const std::set<std::string> kPendingRecipes = {};

inline const char *const kPlans[] = {"cpu", "cuda:sm_90"};

inline std::string planTag(const std::string &plan) {
  return plan == "cpu" ? "cpu" : "gpu";
}

struct Tol {
  double abs = 0, rel = 0;
};

inline Tol interpTol(DType t) {
  switch (t) {
  case DType::F32: return {1e-5, 1e-4};
  case DType::F16: return {1e-3, 1e-2};
  case DType::BF16: return {1e-2, 2e-2};
  case DType::F64: return {1e-13, 1e-12}; // computed in double: a few ulps of summation order
  default: return {0, 0};
  }
}

struct Diff {
  int64_t bad = 0;
  double maxAbs = 0;
  std::string first; // the first mismatch, for the message
};

inline Diff compareTensors(const Tensor &got, const Tensor &want, Tol tol) {
  Diff d;
  REQUIRE(got.numel() == want.numel());
  bool fl = isFloat(want.dtype());
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (fl) {
      double a = got.getDouble(i), b = want.getDouble(i);
      if (std::isnan(b) || std::isinf(b)) {
        ok = std::isnan(b) ? std::isnan(a) : a == b;
      } else {
        double err = std::fabs(a - b);
        ok = err <= tol.abs + tol.rel * std::fabs(b);
        if (!std::isnan(err))
          d.maxAbs = std::max(d.maxAbs, err);
      }
      if (!ok && d.first.empty())
        d.first = cat("element ", i, ": got ", a, ", want ", b);
    } else {
      ok = got.getInt(i) == want.getInt(i);
      if (!ok && d.first.empty())
        d.first = cat("element ", i, ": got ", got.getInt(i), ", want ", want.getInt(i));
    }
    d.bad += !ok;
  }
  return d;
}

inline fs::path scratchDir() {
  static std::atomic<int> counter{0};
  fs::path dir = fs::temp_directory_path() / cat("aicf_kernels_", ::getpid(), "_", counter++);
  fs::create_directories(dir);
  return dir;
}

struct ScratchDir {
  fs::path path = scratchDir();
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

inline std::string joined(const std::vector<std::string> &v) {
  std::string s;
  for (const std::string &x : v)
    s += (s.empty() ? "" : "\n") + x;
  return s;
}

// The kernels of one graph under one plan.
struct Lowered {
  std::vector<kir::Kernel> kernels;
  std::vector<int> kernelOf; // per group: index into kernels, -1 when skipped
  int skipped = 0;
};

inline Lowered lowerAll(const Partition &p, const Knobs &knobs, const std::string &prefix) {
  Lowered out;
  for (const KernelGroup &g : p.groups) {
    std::string recipe = recipeFor(g);
    CAPTURE(g.kind);
    CAPTURE(recipe);
    if (kPendingRecipes.count(recipe)) {
      MESSAGE("skipped group ", g.id, " (", g.kind, "): recipe ", recipe, " not implemented yet");
      out.kernelOf.push_back(-1);
      ++out.skipped;
      continue;
    }
    kir::Kernel k = lowerGroup(g, cat(prefix, "k", g.id), knobs);
    kir::runDefaultKernelPipeline(k); // as the driver does (kir/kir_pass.h)
    std::vector<std::string> errs = kir::verifyKernel(k);
    CHECK_MESSAGE(errs.empty(), "group ", g.id, " (", g.kind, ", ", recipe, "): ", joined(errs));
    out.kernelOf.push_back(static_cast<int>(out.kernels.size()));
    out.kernels.push_back(std::move(k));
  }
  return out;
}

// Runs `fn` on copies of `inputs` and fresh outputs (filled with 0xff bytes, so an element
// the kernel never writes shows up as NaN or -1), returns the outputs.
inline std::vector<Tensor> runKernel(LoadedLibrary::KernelFn fn,
                                     const std::vector<const Tensor *> &inputs,
                                     const std::vector<TensorType> &outTypes) {
  std::vector<Tensor> ins, outs;
  for (const Tensor *t : inputs)
    ins.push_back(*t);
  for (const TensorType &t : outTypes) {
    Tensor o(t);
    if (o.byteSize())
      std::memset(o.raw(), 0xff, o.byteSize());
    outs.push_back(std::move(o));
  }
  std::vector<void *> args;
  for (Tensor &t : ins)
    args.push_back(t.raw());
  for (Tensor &t : outs)
    args.push_back(t.raw());
  fn(args.data());
  return outs;
}

// Checks every lowered group of `p` against the interpreter's values; returns how many groups
// were checked.
inline int checkGroups(const Partition &p, const Lowered &low, const LoadedLibrary &lib,
                       const std::map<const Value *, Tensor> &vals) {
  int checked = 0;
  for (const KernelGroup &g : p.groups) {
    int ki = low.kernelOf[g.id];
    if (ki < 0)
      continue;
    const kir::Kernel &k = low.kernels[ki];
    CAPTURE(k.name);
    CAPTURE(g.kind);
    std::vector<const Tensor *> ins;
    for (const Value *v : g.inputs)
      ins.push_back(&vals.at(v));
    std::vector<TensorType> outTypes;
    for (const Value *v : g.outputs)
      outTypes.push_back(testing::outputBufferType(g, v));
    std::vector<Tensor> outs = runKernel(lib.kernel(k.name), ins, outTypes);
    bool ok = true;
    for (size_t o = 0; o < g.outputs.size(); ++o) {
      const Value *v = g.outputs[o];
      Diff d = compareTensors(testing::outputValue(g, v, outs[o]), vals.at(v),
                              interpTol(v->type().dtype));
      CHECK_MESSAGE(d.bad == 0, "group ", g.id, " (", g.kind, ", ", k.recipe, ") output %",
                    v->name(), " ", v->type().str(), ": ", d.bad, " elements off; ", d.first);
      ok = ok && d.bad == 0;
    }
    checked += ok;
  }
  return checked;
}

// `unit` and `opts`: the vector unit the source is printed for and the build's -march (the
// defaults: AVX-512's registers, this machine).
inline std::unique_ptr<LoadedLibrary> buildLibrary(const std::vector<kir::Kernel> &kernels,
                                                   const fs::path &dir, const std::string &stem,
                                                   HostVectorUnit unit = {},
                                                   const HostBuildOptions &opts = {}) {
  std::string src = printHostSource(kernels, unit);
  fs::path cpp = dir / (stem + ".cpp"), so = dir / (stem + ".so");
  compileHostSource(src, cpp.string(), so.string(), opts);
  return std::make_unique<LoadedLibrary>(so.string());
}

// Lowers every group of `part` for the host plan with the knob values `values`, builds the
// kernels into `dir` (library `lib`) and checks every group against the interpreter's `vals`;
// returns the kernels for further checks.
inline Lowered checkHostKnobs(const Partition &part, const std::map<const Value *, Tensor> &vals,
                              const std::map<std::string, int64_t> &values, const fs::path &dir,
                              const std::string &lib, HostVectorUnit unit = {},
                              const HostBuildOptions &opts = {}) {
  Knobs knobs;
  knobs.planFor = Target::parseSpec("cpu");
  knobs.values = values;
  Lowered low = lowerAll(part, knobs, lib + "_");
  REQUIRE(low.skipped == 0);
  std::unique_ptr<LoadedLibrary> built = buildLibrary(low.kernels, dir, lib, unit, opts);
  CHECK(checkGroups(part, low, *built, vals) == static_cast<int>(part.groups.size()));
  return low;
}

// Gives every weight of `g` values uniform in [-0.5, 0.5) from `seed`.
inline void randomWeights(Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (Value *w : g.weights()) {
    auto t = std::make_shared<Tensor>(w->type());
    for (int64_t i = 0; i < t->numel(); ++i)
      t->data<float>()[i] = dist(rng);
    w->setData(t);
  }
}

// How many of `low`'s kernels print `text` in their Kernel IR.
inline int kernelsPrinting(const Lowered &low, const std::string &text) {
  int n = 0;
  for (const kir::Kernel &k : low.kernels)
    n += kir::printKernel(k).find(text) != std::string::npos ? 1 : 0;
  return n;
}

} // namespace aicf::kernel_checks
