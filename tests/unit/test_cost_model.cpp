// Tests of the cost model and the planner (plan/cost_model.h, plan/planner.h): the CUDA
// occupancy formula against the calculator's worked examples, the register estimate's
// calibration points, constraint rejections with their messages, deterministic choices that
// differ between targets for a stated reason, rank ordering, the error when nothing fits, and
// store-or-recompute decisions of the fusion (compiled, run and compared with the interpreter).
#include "driver/compile.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "lower/flat_loop.h"
#include "lower/fusion.h"
#include "lower/recipes.h"
#include "plan/cost_model.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf;

namespace {

std::unique_ptr<Graph> graphOf(const std::string &text) {
  return parseGraph(text, "cost_model_test.mcir");
}

// One attention of head size D over [1, 8, 256, D]: the GPU tile sizes are limited by shared
// memory (qs + ksT + vs + ps = 4·(BR·D + D·BC + BC·D + BR·BC) bytes).
std::string attentionGraph(int64_t D) {
  std::string t = cat("f32[1,8,256,", D, "]");
  return cat("graph @a(%q: ", t, ", %k: ", t, ", %v: ", t, ") -> (%o: ", t, ") {\n",
             "  %o = attention(%q, %k, %v) {scale = 0.0625, causal = 0}\n  return %o\n}\n");
}

const KernelGroup &anchorGroup(const Partition &p, Op op) {
  for (const KernelGroup &g : p.groups)
    if (g.anchor && g.anchor->op() == op)
      return g;
  FAIL("no group anchored on the op");
  return p.groups.front();
}

} // namespace

TEST_CASE("cost model: CUDA occupancy follows the occupancy calculator") {
  Hardware a100 = builtinHardware("a100");
  // docs/cost-model.md's example: 128-thread blocks at 121 registers -> 4 blocks / SM, at 157 -> 3.
  Occupancy o = cudaOccupancy(a100, 128, 121, 0);
  CHECK(o.blocksPerSm == 4);
  CHECK(o.limiter == "registers");
  CHECK(cudaOccupancy(a100, 128, 157, 0).blocksPerSm == 3);
  // 32 registers, 256 threads: 8 blocks of 8 warps fill the 64 warps.
  o = cudaOccupancy(a100, 256, 32, 0);
  CHECK(o.blocksPerSm == 8);
  CHECK(o.fraction == doctest::Approx(1.0));
  // Shared memory: 48 KB + the 1 KB reserve, in 128-byte units: 167936 / 50176 -> 3 blocks.
  o = cudaOccupancy(a100, 128, 32, 48 * 1024);
  CHECK(o.blocksPerSm == 3);
  CHECK(o.limiter == "shared memory");
  // Tiny blocks hit the 32 blocks per SM limit; the RTX 4090 allows 24 blocks and 48 warps.
  CHECK(cudaOccupancy(a100, 32, 16, 0).blocksPerSm == 32);
  Hardware rtx = builtinHardware("rtx4090");
  o = cudaOccupancy(rtx, 32, 16, 0);
  CHECK(o.blocksPerSm == 24);
  CHECK(o.limiter == "blocks");
  o = cudaOccupancy(rtx, 512, 32, 0);
  CHECK(o.blocksPerSm == 3);
  CHECK(o.limiter == "warps");
  CHECK(o.fraction == doctest::Approx(1.0));
  // A block that cannot fit at all.
  CHECK(cudaOccupancy(rtx, 128, 32, 200 * 1024).blocksPerSm == 0);
}

TEST_CASE("cost model: register estimates at the ptxas calibration points") {
  // ptxas (CUDA 13, sm_80): 8x8 accumulator tiles used 99-128 registers, 2x2 tiles 32-64,
  // attention with head size 64 and BC 32 223-248, norms 20-33, flat loops 10-36.
  kir::Kernel k;
  const Recipe &tiled = tiledContractionRecipe();
  k.knobs = {{"TM", 8}, {"TN", 8}};
  CHECK(tiled.registers(k) >= 99);
  CHECK(tiled.registers(k) <= 135); // a little high for 8x8: erring high costs occupancy only
  k.knobs = {{"TM", 2}, {"TN", 2}};
  CHECK(tiled.registers(k) >= 32);
  CHECK(tiled.registers(k) <= 64);
  k.threads = 64;
  k.knobs = {{"BR", 64}, {"BC", 32}};
  auto problem = std::make_shared<AttentionProblem>();
  problem->D = 64;
  problem->Dv = 64;
  k.problem = problem;
  CHECK(streamingAttentionRecipe().registers(k) >= 200);
  CHECK(streamingAttentionRecipe().registers(k) <= 250);
  k.knobs = {{"vec", 4}, {"cache_row", 1}};
  CHECK(onlineNormRecipe().registers(k) >= 20);
  CHECK(onlineNormRecipe().registers(k) <= 40);
}

TEST_CASE("planner: shared memory limits make plans differ between targets, and say so") {
  // Head size 128: the BR 64 x BC 64 tile needs 4·(64·128·3 + 64·64) = 114688 B: it fits the
  // A100 (166912 B per block) and the H100, not the RTX 4090 (101376 B).
  auto g = graphOf(attentionGraph(128));
  Partition part = partitionGraph(*g);
  const KernelGroup &grp = anchorGroup(part, Op::Attention);
  PlannerOptions po;
  po.planFor = Target::parse("cuda:sm_89");
  PlanDecision d89;
  kir::Kernel k89 = planKernel(grp, "k0", builtinHardware("rtx4090"), po, &d89);
  CHECK(d89.chosen.cost.feasible());
  CHECK(d89.chosen.cost.sharedBytes <= 101376);
  CHECK(d89.feasible < d89.considered);
  bool sawShared = false;
  for (const Candidate &c : d89.rejected)
    sawShared = sawShared || c.rejected.find("shared memory") == 0;
  CHECK_MESSAGE(sawShared, "a candidate is rejected for shared memory on the RTX 4090");
  REQUIRE_FALSE(d89.rejected.empty());
  CHECK(d89.rejected.front().rejected.find("> 101376 bytes per block") != std::string::npos);

  po.planFor = Target::parse("cuda:sm_90");
  PlanDecision d90;
  planKernel(grp, "k0", builtinHardware("h100"), po, &d90);
  CHECK(d90.feasible > d89.feasible);
  CHECK(!d90.reason.empty());
  CHECK(!d89.reason.empty());
  // Every feasible choice fits its target: shared memory, threads, registers.
  for (const PlanDecision *d : {&d89, &d90}) {
    CHECK(d->chosen.cost.occupancy.blocksPerSm >= 1);
    CHECK(d->chosen.rejected.empty());
  }
}

TEST_CASE("planner: deterministic, ranked, and the defaults are costed") {
  auto g = graphOf("graph @m(%x: f32[128,256]) -> (%y: f32[128,512]) {\n"
                   "  %w = weight f32[256,512]\n  %y = matmul(%x, %w)\n  return %y\n}\n");
  Partition part = partitionGraph(*g);
  const KernelGroup &grp = anchorGroup(part, Op::MatMul);
  for (const char *hwName : {"a100", "rtx4090", "h200"}) {
    Hardware hw = builtinHardware(hwName);
    PlannerOptions po;
    po.planFor = Target::of(hw);
    PlanDecision a, b;
    kir::Kernel ka = planKernel(grp, "k0", hw, po, &a);
    kir::Kernel kb = planKernel(grp, "k0", hw, po, &b);
    CHECK(ka.knobs == kb.knobs);
    CHECK(kir::printKernel(ka) == kir::printKernel(kb));
    CHECK(a.considered > 10);
    CHECK(a.defaults.cost.timeUs > 0);
    // Runner-ups cost at least as much as the choice (the defaults enjoy a small margin).
    for (const Candidate &r : a.runnersUp)
      CHECK(r.cost.timeUs >= a.chosen.cost.timeUs * 0.97);
    // Rank 1000 clamps to the most expensive feasible candidate.
    po.rank = 1000;
    PlanDecision worst;
    planKernel(grp, "k0", hw, po, &worst);
    CHECK(worst.chosen.cost.timeUs >= a.chosen.cost.timeUs);
    // --schedule default keeps the recipe's knobs.
    po.rank = 0;
    po.schedule = Schedule::Default;
    PlanDecision dflt;
    planKernel(grp, "k0", hw, po, &dflt);
    CHECK(dflt.isDefault);
    CHECK(dflt.considered == 1);
  }
}

TEST_CASE("planner: the host plan's traffic includes tile re-reads") {
  auto g = graphOf("graph @m(%x: f32[512,512]) -> (%y: f32[512,1024]) {\n"
                   "  %w = weight f32[512,1024]\n  %y = matmul(%x, %w)\n  return %y\n}\n");
  Partition part = partitionGraph(*g);
  const KernelGroup &grp = anchorGroup(part, Op::MatMul);
  Hardware host = loadHardwareFile(AICF_TESTDATA "/targets/ci-host.yaml");
  host.l3Bytes = 0; // (without a shared L3: what a core's L2 does not keep comes from memory)
  PlannerOptions po;
  PlanDecision d;
  kir::Kernel k = planKernel(grp, "k0", host, po, &d);
  const KernelCost &c = d.chosen.cost;
  CHECK(c.lowerBoundBytes == 4 * (512 * 512 + 512 * 1024 + 512 * 1024));
  int64_t BM = k.knobs.at("BM"), BN = k.knobs.at("BN");
  int64_t rereads =
      4 * 512 * 512 * ((1024 + BN - 1) / BN - 1) + 4 * 512 * 1024 * ((512 + BM - 1) / BM - 1);
  // Every re-read is either moved again or served by the cache; B (2 MiB, re-read once per row
  // of tiles) does not stay in a 2 MiB L2 beside A's panel, so its re-reads are moved.
  Rereads r = tiledContractionRecipe().rereads(grp, k, host);
  CHECK(r.memory + r.cached == rereads);
  CHECK(r.memory >= 4 * 512 * 1024 * ((512 + BM - 1) / BM - 1));
  CHECK(c.bytes == c.lowerBoundBytes + r.memory);
  CHECK(c.flops == 2LL * 512 * 512 * 1024);
  CHECK(c.timeUs > 0);
  CHECK(c.occupancy.blocksPerSm == 0); // host: no occupancy
}

TEST_CASE("cost model: re-reads a cache keeps between uses are not moved again") {
  Hardware host = loadHardwareFile(AICF_TESTDATA "/targets/ci-host.yaml"); // 2 cores, 2 MiB L2
  REQUIRE(host.cores == 2);
  REQUIRE(host.l2Bytes == 2 * 1024 * 1024);
  // A shared L3 keeps an operand that fits in half of it: every re-read is served from a cache,
  // the two cores included (they fetch it from memory once).
  host.l3Bytes = 32 << 20;
  Rereads r = rereadsOf(host, 3 << 20, 1, 4, 4, 65536);
  CHECK(r.memory == 0);
  CHECK(r.cached == 3 * (3 << 20));
  // Past half of it, the cores' L2s decide (below, without an L3).
  r = rereadsOf(host, 20 << 20, 1, 4, 4, 65536);
  CHECK(r.memory == 3 * (20 << 20));
  host.l3Bytes = 0;
  // 8 heads of 32 KiB, each read by 2 consecutive blocks of 16: resident; the 16 blocks go to
  // the 2 cores in chunks of 8, so a head's 2 uses touch 1 + 1 x 2 / 16 cores on average.
  r = rereadsOf(host, 8 * 32768, 8, 2, 16, 65536);
  CHECK(r.memory == 32768);
  CHECK(r.cached == 8 * 32768 - 32768);
  // A 3 MiB slice never stays: every re-read is moved.
  r = rereadsOf(host, 3 << 20, 1, 4, 4, 65536);
  CHECK(r.memory == 3 * (3 << 20));
  CHECK(r.cached == 0);
  // Uses spread over the launch (a GEMM's B): once per core that holds it.
  r = rereadsOf(host, 1 << 20, 1, 4, 16, 65536, true);
  CHECK(r.memory == 1 << 20);
  CHECK(r.cached == 2 << 20);
  // One use: nothing is re-read.
  r = rereadsOf(host, 1 << 20, 1, 1, 16, 65536);
  CHECK(r.memory + r.cached == 0);
  // GPU: the re-reads hit the device L2 when the whole operand fits in half of it.
  Hardware h100 = builtinHardware("h100");
  r = rereadsOf(h100, 1 << 20, 4, 3, 64, 65536);
  CHECK(r.memory == 0);
  CHECK(r.cached == 2 << 20);
  r = rereadsOf(h100, h100.l2Bytes, 4, 3, 64, 65536);
  CHECK(r.memory == 2 * h100.l2Bytes);
}

TEST_CASE("planner: a kernel no candidate fits is an error naming the node") {
  auto g = graphOf(attentionGraph(64));
  Partition part = partitionGraph(*g);
  const KernelGroup &grp = anchorGroup(part, Op::Attention);
  Hardware tiny = builtinHardware("a100");
  tiny.smemPerBlock = 2048; // no tile of head size 64 fits
  PlannerOptions po;
  po.planFor = Target::of(tiny);
  try {
    planKernel(grp, "k0", tiny, po, nullptr);
    FAIL("expected an error");
  } catch (const UserError &e) {
    CHECK(std::string(e.what()).find("no schedule of streaming_attention fits a100-sxm4-80gb: "
                                     "shared memory") != std::string::npos);
  }
}

namespace {

// Compiles `g` for the host under `hw`, runs it through the runtime on seeded inputs and checks
// every output against the interpreter (1e-5 + 1e-4 |ref|).
void compileRunCompare(const Graph &g, const std::string &hwFile, CompiledModel *out) {
  CompileOptions co;
  co.target = co.planFor = Target::parse("cpu", hwFile);
  CompiledModel m = buildModel(g, co);
  fs::path dir = fs::temp_directory_path() / cat("aicf_cost_model_", ::getpid());
  writeArtifacts(g, m, co, dir.string());
  std::vector<Tensor> ins = randomInputs(g, 7);
  std::vector<Tensor> want = interpret(g, ins);
  aicf_model *rt = aicf_open(dir.string().c_str());
  REQUIRE_MESSAGE(rt != nullptr, aicf_last_error());
  std::vector<const void *> inPtrs;
  for (const Tensor &t : ins)
    inPtrs.push_back(t.raw());
  std::vector<Tensor> got;
  for (const Tensor &t : want)
    got.emplace_back(t.type());
  std::vector<void *> outPtrs;
  for (Tensor &t : got)
    outPtrs.push_back(t.raw());
  REQUIRE_MESSAGE(aicf_run(rt, inPtrs.data(), outPtrs.data()) == 0, aicf_last_error());
  aicf_close(rt);
  fs::remove_all(dir);
  for (size_t k = 0; k < want.size(); ++k) {
    const float *a = got[k].data<float>();
    const float *b = want[k].data<float>();
    for (int64_t i = 0; i < want[k].type().numel(); ++i)
      REQUIRE(std::fabs(a[i] - b[i]) <= 1e-5 + 1e-4 * std::fabs(b[i]));
  }
  if (out)
    *out = std::move(m);
}

} // namespace

TEST_CASE("fusion by cost: a cheap shared elementwise value is recomputed in its consumers") {
  // x * x + x read by two matmuls: recomputing it in both (read x twice, 2 FLOPs per element
  // each) beats a kernel that reads x, writes the value, and two reloads. (silu(x) in its
  // place is stored on this host: its 21 FLOPs per element twice cost more than the traffic.)
  auto g = graphOf("graph @r(%x: f32[64,256], %w1: f32[256,128], %w2: f32[256,128])"
                   " -> (%a: f32[64,128], %b: f32[64,128]) {\n"
                   "  %s = mul(%x, %x)\n  %g = add(%s, %x)\n"
                   "  %a = matmul(%g, %w1)\n  %b = matmul(%g, %w2)\n  return %a, %b\n}\n");
  std::string host = AICF_TESTDATA "/targets/ci-host.yaml";
  Hardware hw = loadHardwareFile(host);
  FusionOptions fo;
  fo.rematCost = rematCostFor(hw);
  Partition p = partitionGraph(*g, fo);
  REQUIRE(p.remat.size() == 1);
  CHECK(p.remat[0].recomputed);
  CHECK(p.remat[0].consumers == 2);
  CHECK(p.remat[0].recomputeUs < p.remat[0].storeUs);
  CHECK(p.remat[0].values == std::vector<std::string>{"g"});
  REQUIRE(p.groups.size() == 2); // the two matmuls, each with sigmoid and mul as prologue
  for (const KernelGroup &grp : p.groups) {
    CHECK(grp.nodes.size() == 3);
    CHECK(grp.inputs.front()->name() == "x");
    CHECK(grp.outputs.size() == 1);
  }
  // Without a description the rule stores it once.
  CHECK(partitionGraph(*g).groups.size() == 3);
  CompiledModel m;
  compileRunCompare(*g, host, &m);
  REQUIRE(m.plan.remat.size() == 1);
  std::ostringstream report;
  printPlanReport(report, m.plan);
  CHECK(report.str().find("recomputed g (read by 2 kernels): recompute ") != std::string::npos);
}

TEST_CASE("fusion by cost: an expensive shared value read by many kernels is stored") {
  // Eight consumers of exp(tanh(erf(x))) over a large x: recomputing costs eight passes of
  // transcendental work and eight reads of x; storing costs one pass and eight reloads.
  std::string text = "graph @r(%x: f32[512,1024]) -> (";
  for (int i = 0; i < 8; ++i)
    text += cat(i ? ", " : "", "%r", i, ": f32[512]");
  text += ") {\n  %e = erf(%x)\n  %t = tanh(%e)\n  %u = exp(%t)\n";
  for (int i = 0; i < 8; ++i)
    text += cat("  %r", i, " = ", i % 2 ? "reduce_max" : "reduce_sum", "(%u) {axes = [", 1,
                "], keepdims = 0}\n");
  text += "  return ";
  for (int i = 0; i < 8; ++i)
    text += cat(i ? ", " : "", "%r", i);
  text += "\n}\n";
  auto g = graphOf(text);
  Hardware hw = loadHardwareFile(AICF_TESTDATA "/targets/ci-host.yaml");
  FusionOptions fo;
  fo.rematCost = rematCostFor(hw);
  Partition p = partitionGraph(*g, fo);
  REQUIRE(p.remat.size() == 1);
  CHECK_FALSE(p.remat[0].recomputed);
  CHECK(p.remat[0].consumers == 8);
  CHECK(p.groups.size() == 9);
  CompiledModel m;
  compileRunCompare(*g, AICF_TESTDATA "/targets/ci-host.yaml", &m);
  std::ostringstream report;
  printPlanReport(report, m.plan);
  CHECK(report.str().find("stored u (read by 8 kernels)") != std::string::npos);
}

// A QDQ model's requantize stored through a channel shuffle (reshape, transpose, reshape): the
// pointwise kernel writes element [c, h, w] at [(c % C2) * 2 + c / C2, h, w].
std::unique_ptr<Graph> shuffledRequantize(int64_t c, int64_t h, int64_t w) {
  std::string t = cat("f32[1,", c, ",", h, ",", w, "]");
  return graphOf(
      cat("graph @q(%x: ", t, ") -> (%y: ", t, ") {\n", "  %s = weight f32[] = [0.25]\n",
          "  %d = div(%x, %s)\n  %r = round(%d)\n", "  %c = clip(%r) {min = 0.0, max = 255.0}\n",
          "  %a = reshape(%c) {shape = [1, 2, ", c / 2, ", ", h, ", ", w, "]}\n",
          "  %t = transpose(%a) {perm = [0, 2, 1, 3, 4]}\n", "  %y = reshape(%t) {shape = [1, ", c,
          ", ", h, ", ", w, "]}\n  return %y\n}\n"));
}

TEST_CASE("cost model: a flat loop's lane divisions are priced, so the planner avoids them") {
  // On a 14 x 14 map no 8- or 16-wide vector stays in one 196-pixel plane, and every lane would
  // divide its own flat index (a scalar multiply-high each, no vector form: 100 us measured for
  // 45472 elements where the vector loop's 6 were predicted). The loop runs in planes padded to
  // the vector (flatloop::planes): the channel digit once per vector, the pixel digits joined
  // back into the flat offset, no division per lane at any width.
  auto g = shuffledRequantize(232, 14, 14);
  std::string host = AICF_TESTDATA "/targets/ci-host.yaml";
  CompiledModel m;
  compileRunCompare(*g, host, &m);
  REQUIRE(m.kernels.size() == 1);
  const kir::Kernel &k = m.kernels.front();
  CHECK(k.recipe == "pointwise");
  CHECK(flatloop::elementIndexCycles(k) == 0);
  CHECK(k.knobs.at("vec") > 1);
  // A 3 x 5 map is too small a plane (15 pixels): at 8 lanes each lane divides (the channel
  // digit and its two uses, the row), priced at a scalar element plus one cycle per distinct
  // division.
  auto small = shuffledRequantize(232, 3, 5);
  Partition p = partitionGraph(*small);
  REQUIRE(p.groups.size() == 1);
  Knobs eight;
  eight.values = {{"threads", 16}, {"vec", 8}};
  kir::Kernel wide = recipePointwise(p.groups.front(), "k", eight);
  CHECK(flatloop::elementIndexCycles(wide) >= 3.0);
  // The 14 x 14 group at 8 lanes: planes of 196 padded to 200, nothing divided per lane.
  Partition p14 = partitionGraph(*g);
  REQUIRE(p14.groups.size() == 1);
  kir::Kernel planes = recipePointwise(p14.groups.front(), "k", eight);
  CHECK(flatloop::elementIndexCycles(planes) == 0);
  CHECK(kir::printKernel(planes).find("i0 % 200") != std::string::npos);
}
