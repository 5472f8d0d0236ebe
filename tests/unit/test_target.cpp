// Tests of the typed target (target/target.h): every valid spec parses to its kind, arch, name
// and default description; every invalid one gives the command line's exact message and exit
// code; --hardware choices are checked against the target; and a description read from a file
// (testdata/targets/tiny_smem.yaml: 16 KiB of shared memory per block, 8 KiB static) is the one
// source of the limits: the graph passes' tile legality, the CUDA printer's static / dynamic
// split and the ptxas check all follow it.
#include "target/target.h"

#include "backend/cuda/cuda_build.h"
#include "backend/cuda/cuda_printer.h"
#include "ir/parser.h"
#include "passes/pass.h"
#include "passes/property_checks.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

const fs::path kTargets = fs::path(AICF_TESTDATA) / "targets";
const std::string kTiny = (kTargets / "tiny_smem.yaml").string();

// The message and exit code of the UserError `f` throws.
std::pair<std::string, int> errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const UserError &e) {
    return {e.what(), e.exitCode()};
  }
  return {"(no error)", 0};
}

// Sets AICF_HOST_HARDWARE for one scope, restoring what was there.
struct HostHardwareEnv {
  std::optional<std::string> saved;
  explicit HostHardwareEnv(const std::string &value) {
    if (const char *old = std::getenv("AICF_HOST_HARDWARE"))
      saved = old;
    setenv("AICF_HOST_HARDWARE", value.c_str(), 1);
  }
  ~HostHardwareEnv() {
    if (saved)
      setenv("AICF_HOST_HARDWARE", saved->c_str(), 1);
    else
      unsetenv("AICF_HOST_HARDWARE");
  }
};

const std::string kUnknownTail = " (cpu, cuda:sm_80, cuda:sm_86, cuda:sm_89, cuda:sm_90)";

// A head-size-64 attention and a matmul: the tile legality of tile_compatible_compute.
const char *kGraph = "graph @g(%x: f32[64,256], %q: f32[1,2,64,64], %k: f32[1,2,64,64], "
                     "%v: f32[1,2,64,64]) -> (%y: f32[64,256], %o: f32[1,2,64,64]) {\n"
                     "  %w = weight f32[256,256]\n"
                     "  %y = matmul(%x, %w)\n"
                     "  %o = attention(%q, %k, %v) {scale = 0.125, causal = 0}\n"
                     "  return %y, %o\n}\n";

// The tile_compatible_compute certificate of the node with op `op` under `t`.
Certificate tileCertificate(const Target &t, Op op) {
  std::unique_ptr<Graph> g = parseGraph(kGraph, "target_test.mcir");
  for (Node *n : g->nodes())
    if (n->op() == op) {
      std::optional<Certificate> c = checkTileCompatibleCompute(*g, *n, t);
      REQUIRE(c.has_value());
      return *c;
    }
  FAIL("no such node");
  return {};
}

} // namespace

TEST_CASE("target: every known spec parses to its kind, arch, name and default description") {
  HostHardwareEnv env((kTargets / "ci-host.yaml").string());
  CHECK(Target::knownNames() ==
        std::vector<std::string>{"cpu", "cuda:sm_80", "cuda:sm_86", "cuda:sm_89", "cuda:sm_90"});
  Target cpu = Target::parse("cpu");
  CHECK_FALSE(cpu.hw.gpu);
  CHECK_FALSE(cpu.gpu());
  CHECK(cpu.arch.empty());
  CHECK(cpu.name() == "cpu");
  CHECK(cpu.hw.name == "ci-host");
  CHECK(cpu.onChipBytes() == 2 << 20); // ci-host's L2 per core
  CHECK(std::string(cpu.onChipName()) == "L2 per core");

  struct Case {
    const char *spec, *arch, *hardware;
    int64_t smemPerBlock;
  };
  for (const Case &c : {Case{"cuda:sm_80", "sm_80", "a100-sxm4-80gb", 163 << 10},
                        Case{"cuda:sm_86", "sm_86", "rtx3090", 99 << 10},
                        Case{"cuda:sm_89", "sm_89", "rtx4090", 99 << 10},
                        Case{"cuda:sm_90", "sm_90", "h100-sxm5", 227 << 10}}) {
    CAPTURE(c.spec);
    Target t = Target::parse(c.spec);
    CHECK(t.hw.gpu);
    CHECK(Target::parseSpec(c.spec).gpu()); // the kind, before any description is loaded
    CHECK_FALSE(Target::parseSpec(c.spec).hasHardware());
    CHECK(t.gpu());
    CHECK(t.arch == c.arch);
    CHECK(t.name() == c.spec);
    CHECK(t.hw.name == c.hardware);
    CHECK(t.onChipBytes() == c.smemPerBlock);
    CHECK(std::string(t.onChipName()) == "shared memory per block");
    // parseSpec: the same kind and arch, no description until loaded.
    Target spec = Target::parseSpec(c.spec);
    CHECK(spec.name() == c.spec);
    CHECK_FALSE(spec.hasHardware());
    CHECK(spec.loaded().hw.name == c.hardware);
    CHECK(Target::parsePlanFor(c.spec).name() == c.spec);
    CHECK(Target::of(t.hw).name() == c.spec);
  }
  // A default Target is the cpu without a description; loaded() detects the host.
  Target dflt;
  CHECK(dflt.name() == "cpu");
  CHECK_FALSE(dflt.hasHardware());
  CHECK(dflt.loaded().hw.name == "ci-host");
}

TEST_CASE("target: unknown specs are command-line errors naming the known targets") {
  for (const char *spec :
       {"cuda:sm_75", "bogus", "", "CPU", "cuda:", "cuda:sm_90 ", "sm_90", "cuda:90", "cuda"}) {
    CAPTURE(spec);
    auto [msg, code] = errorOf([&] { Target::parse(spec); });
    CHECK(msg == cat("unknown target '", spec, "'", kUnknownTail));
    CHECK(code == 1);
    CHECK(errorOf([&] { Target::parseSpec(spec); }).first == msg);
  }
  // --plan-for: a GPU target only.
  CHECK(errorOf([] { Target::parsePlanFor("cpu"); }) ==
        std::pair<std::string, int>{"--plan-for cpu: expected cuda:sm_XX", 1});
  CHECK(errorOf([] { Target::parsePlanFor("bogus"); }) ==
        std::pair<std::string, int>{"--plan-for bogus: expected cuda:sm_XX", 1});
  CHECK(errorOf([] { Target::parsePlanFor("cuda:sm_75"); }) ==
        std::pair<std::string, int>{"unknown target 'cuda:sm_75'" + kUnknownTail, 1});
  // A target made from a description of an arch with no built-in cannot load a default.
  Hardware t4 = builtinHardware("a100");
  t4.arch = "sm_75";
  t4.name.clear();
  CHECK(errorOf([&] { Target::of(t4).loaded(); }).first ==
        "no built-in hardware description for cuda:sm_75; pass --hardware FILE.yaml");
}

TEST_CASE("target: --hardware choices: built-ins, files, and the mismatches") {
  const std::string ci = (kTargets / "ci-host.yaml").string();
  const std::string a100File =
      (fs::path(AICF_TESTDATA) / ".." / "target" / "hardware" / "a100.yaml").string();
  CHECK(Target::parse("cuda:sm_90", "h200").hw.name == "h200-sxm");
  CHECK(Target::parse("cuda:sm_90", "h100").hw.name == "h100-sxm5");
  CHECK(Target::parse("cpu", ci).hw.name == "ci-host");
  CHECK(Target::parse("cuda:sm_80", a100File).hw.source == a100File);
  CHECK(Target::parse("cuda:sm_90", kTiny).hw.name == "tiny-smem");

  using E = std::pair<std::string, int>;
  CHECK(errorOf([] { Target::parse("cuda:sm_80", "h100"); }) ==
        E{"--hardware h100: a sm_90 description cannot plan for cuda:sm_80", 2});
  CHECK(errorOf([] { Target::parse("cpu", "a100"); }) ==
        E{"--hardware a100: a GPU description cannot plan for the cpu target", 2});
  CHECK(errorOf([&] { Target::parse("cuda:sm_80", ci); }) ==
        E{"--hardware " + ci + ": a CPU description cannot plan for cuda:sm_80", 2});
  CHECK(errorOf([] { Target::parse("cuda:sm_90", "foo"); }) ==
        E{"unknown hardware 'foo' (a100, h100, h200, rtx3090, rtx4090, or a .yaml file)", 2});
  // A name with a '/' or a .yaml / .yml ending is a file.
  CHECK(errorOf([] { Target::parse("cuda:sm_90", "targets/h100"); }) ==
        E{"cannot open targets/h100", 1});
  CHECK(errorOf([] { Target::parse("cuda:sm_90", "h100.yml"); }) == E{"cannot open h100.yml", 1});
  // The spec is checked before the description is read.
  CHECK(errorOf([] { Target::parse("cuda:sm_75", "nonexistent.yaml"); }).first ==
        "unknown target 'cuda:sm_75'" + kUnknownTail);
}

TEST_CASE("target: --hardware FILE changes the graph passes' tile legality") {
  const Target h100 = Target::parse("cuda:sm_90");
  const Target tiny = Target::parse("cuda:sm_90", kTiny);

  // Attention, head size 64: a 128x128 tile fits the H100; not even 16x16 (17408 B) fits 16 KiB.
  Certificate big = tileCertificate(h100, Op::Attention);
  CHECK(big.holds());
  CHECK(big.conditions.back().evidence ==
        "128x128 q/kv tiles with head size 64: 196608 B <= 232448 B shared memory per block");
  Certificate small = tileCertificate(tiny, Op::Attention);
  CHECK_FALSE(small.holds());
  CHECK(small.conditions.back().name == "working set fits on chip (cuda:sm_90)");
  CHECK(small.conditions.back().evidence ==
        "even 16x16 tiles with head size 64 exceed 16384 B shared memory per block");

  // The matmul's tile shrinks from 128x128 to 32x32 (3 * 32 * 32 * 4 = 12288 B <= 16384 B).
  CHECK(tileCertificate(h100, Op::MatMul).conditions.back().evidence.rfind("128x128 output", 0) ==
        0);
  Certificate mm = tileCertificate(tiny, Op::MatMul);
  CHECK(mm.holds());
  CHECK(mm.conditions.back().evidence ==
        "32x32 output tile, K step 32 (M=64, N=256, K=256): 12288 B <= 16384 B shared memory "
        "per block");

  // Through the pass manager: annotate-properties reads the PassContext's target.
  for (const Target *t : {&h100, &tiny}) {
    std::unique_ptr<Graph> g = parseGraph(kGraph, "target_test.mcir");
    PassManager pm;
    pm.add(createPass("annotate-properties"));
    PassContext ctx;
    ctx.target = *t;
    pm.run(*g, ctx);
    for (Node *n : g->nodes())
      if (n->op() == Op::Attention)
        CHECK(n->props.has(MemProperty::TileCompatibleCompute) == (t == &h100));
  }
}

TEST_CASE("target: --hardware FILE changes the ptxas check and the printer's static limit") {
  const Target h100 = Target::parse("cuda:sm_90");
  const Target tiny = Target::parse("cuda:sm_90", kTiny);

  // A kernel with 6 KiB static + 12 KiB dynamic shared memory: within the H100's 227 KiB per
  // block, beyond the file's 16 KiB; the message names the file's limit.
  Plan p;
  PlanStep st;
  st.kind = "gemm";
  st.kindId = "k0_gemm";
  st.threads = 128;
  st.dynamicSharedBytes = 12 << 10;
  p.steps.push_back(st);
  PtxasFigures f;
  f.present = true;
  f.registers = 32;
  f.staticShared = 6 << 10;
  Plan ok = p;
  recordPtxas(ok, {{"k0_gemm", f}}, h100);
  CHECK(ok.steps[0].ptxas.present);
  Plan bad = p;
  CHECK(errorOf([&] {
          recordPtxas(bad, {{"k0_gemm", f}}, tiny);
        }).first ==
        "kernel k0_gemm (cuda:sm_90): 18432 bytes of shared memory per block (6144 static + "
        "12288 dynamic) exceed the limit of 16384 bytes (shared memory per block)");
  // Threads and registers come from the description too.
  Target fewThreads = h100;
  fewThreads.hw.maxThreadsPerBlock = 64;
  CHECK(errorOf([&] {
          recordPtxas(bad, {{"k0_gemm", f}}, fewThreads);
        }).first == "kernel k0_gemm (cuda:sm_90): 128 threads per block exceed the limit of 64");

  // 10000 bytes of shared buffers: static under the H100's 48 KiB, dynamic under the file's 8 KiB.
  kir::Kernel k;
  k.name = "k0_smem";
  k.recipe = "test";
  k.grid = {{"b", 1}};
  k.threads = 32;
  auto sh = std::make_shared<kir::Buffer>();
  sh->name = "tile";
  sh->shape = {2500};
  sh->scope = kir::Scope::Shared;
  sh->role = kir::Role::Temp;
  auto out = std::make_shared<kir::Buffer>();
  out->name = "p0";
  out->shape = {32};
  out->scope = kir::Scope::Global;
  out->role = kir::Role::Out;
  k.params = {out};
  k.allocs = {sh};
  kir::E t = kir::var("t");
  k.body = {kir::region(
      "t", {kir::store(sh, {t}, kir::fconst(1.0)), kir::store(out, {t}, kir::load(sh, {t}))})};
  REQUIRE(kir::verifyKernel(k).empty());
  CHECK(cudaDynamicSharedBytes(k, h100.hw) == 0);
  CHECK(cudaDynamicSharedBytes(k, tiny.hw) == 10000);
  CHECK(printCudaSource({k}, h100).find("aicf_smem") == std::string::npos);
  CHECK(printCudaSource({k}, tiny).find("extern __shared__ __align__(16) unsigned char "
                                        "aicf_smem[];") != std::string::npos);
}
