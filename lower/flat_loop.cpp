// Helpers shared by the pointwise, reduction, pooling and data-movement recipes (see
// flat_loop.h).
#include "lower/flat_loop.h"

#include "lower/recipes.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf::flatloop {

using kir::E;

Schedule schedule(const Knobs &k, int64_t n, int64_t maxVec, std::optional<SymExpr> symN) {
  Schedule s;
  if (symN && symN->isConstant())
    symN.reset();
  // The default knobs are the planning-point count's: build keeps the guard wherever the chunk
  // does not divide a symbolic count for every value of the dims (a guarded 16-wide loop beats
  // one element per block).
  s.symN = symN;
  if (isGpuPlan(k)) {
    s.threads = k.get("threads", n >= 65536 ? 256 : 128);
    s.vec = k.get("vec", (maxVec >= 4 && n % 4 == 0) ? 4 : 1);
  } else {
    int64_t v = 16;
    while (v > 1 && (v > maxVec || n % v != 0))
      v /= 2;
    s.threads = k.get("threads", 1);
    s.vec = k.get("vec", v);
  }
  AICF_CHECK(s.threads >= 1 && s.vec >= 1, "bad schedule: threads ", s.threads, ", vec ", s.vec);
  int64_t chunk = s.threads * s.vec;
  s.blocks = std::max<int64_t>(1, (n + chunk - 1) / chunk);
  return s;
}

void build(kir::Kernel &kern, int64_t n, const Schedule &s,
           const std::function<std::vector<kir::StmtP>(E i)> &body) {
  kern.grid = {{"b", s.blocks}};
  kern.threadVar = "t";
  kern.threads = s.threads;
  kern.knobs["threads"] = s.threads;
  kern.knobs["vec"] = s.vec;
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = n;
  kern.problem = problem;
  int64_t chunk = s.threads * s.vec;
  bool guard = s.blocks * chunk != n;
  E count = E(n);
  if (s.symN) {
    // The grid and the guard from the dims: exact blocks when the chunk divides the count for
    // every value, else ceil and a guard.
    std::optional<SymExpr> exact = SymExpr::divExact(*s.symN, chunk);
    kern.symGrid = {exact ? SymExtent{*exact, 1} : SymExtent{*s.symN, chunk}};
    guard = !exact.has_value();
    count = kir::symE(*s.symN);
  }
  E base = kir::var("b") * E(s.threads) + kir::var(kern.threadVar);
  E i = s.vec == 1 ? base : vectorStart(kern, s) + lane();
  std::vector<kir::StmtP> inner = {kir::decl("i", DType::I64, i)};
  std::vector<kir::StmtP> work = body(kir::var("i"));
  if (guard)
    inner.push_back(kir::ifThen(kir::var("i") < count, work));
  else
    inner.insert(inner.end(), work.begin(), work.end());
  std::vector<kir::StmtP> regionBody;
  if (s.vec == 1)
    regionBody = inner;
  else
    regionBody = {
        kir::forLoop("v", E(int64_t(0)), E(s.vec), inner, 1, kir::Stmt::LoopKind::Vectorized)};
  kern.body.push_back(kir::region(kern.threadVar, regionBody));
}

E vectorStart(const kir::Kernel &kern, const Schedule &s) {
  return (kir::var("b") * E(s.threads) + kir::var(kern.threadVar)) * E(s.vec);
}

E lane() {
  return kir::var("v");
}

E ne(E a, E b) {
  return kir::binary(kir::BinOp::Ne, std::move(a), std::move(b));
}

E orE(E a, E b) {
  return kir::binary(kir::BinOp::Or, std::move(a), std::move(b));
}

std::vector<KnobSet> candidates(const kir::Kernel &k, const Hardware &hw, int64_t maxVec) {
  int64_t n = problemOf<FlatLoopProblem>(k).n;
  std::vector<KnobSet> out;
  for (int64_t t :
       hw.gpu ? std::vector<int64_t>{64, 128, 256, 512} : std::vector<int64_t>{1, 4, 16})
    for (int64_t v : {1, 2, 4, 8, 16}) {
      if (v > maxVec || (v > 1 && n % v != 0) || (hw.gpu && v > 4))
        continue;
      if (t * v > 16 && t * v / 2 >= n)
        continue; // one mostly idle block
      out.push_back(knobsToMap(FlatLoopKnobs{t, v}));
    }
  return out;
}

CostShape costShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                    double hostCyclesPerElement) {
  CostShape s;
  s.flops = double(flops);
  int64_t lanes = std::max<int64_t>(1, hw.gpu ? 1 : hw.vectorLanesF32());
  int64_t threads = std::max<int64_t>(1, k.threads);
  int64_t vec = knobOf(k, &FlatLoopKnobs::vec, 1);
  // Independent elements; the vector width is the explicit inner loop's.
  s.vectorShare =
      hw.gpu ? 0.5 : 0.6 * double(std::min(std::max<int64_t>(vec, 1), lanes)) / double(lanes);
  if (!hw.gpu && hostCyclesPerElement > 0)
    s.scalarCycles =
        hostCyclesPerElement * double(std::max<int64_t>(threads, 1) * std::max<int64_t>(vec, 1));
  return s;
}

E isNaN(E x) {
  return ne(x, x);
}

E nanMaxUpdate(E acc, E x) {
  // (x > acc || isnan(x)) && !isnan(acc) ? x : acc
  return kir::select(orE(x > acc, isNaN(x)) && (acc == acc), x, acc);
}

E nanMinUpdate(E acc, E x) {
  return kir::select(orE(x < acc, isNaN(x)) && (acc == acc), x, acc);
}

void buildLines(kir::Kernel &kern, const Knobs &k, int64_t lines, int64_t lineWork,
                const std::function<std::vector<kir::StmtP>(kir::E line)> &body) {
  Schedule s = schedule(k, lines, 1);
  s.vec = 1;
  s.blocks = (lines + s.threads - 1) / s.threads;
  build(kern, lines, s, body);
  auto problem = std::make_shared<FlatLoopProblem>();
  problem->n = lines;
  problem->lineWork = std::max<int64_t>(1, lineWork);
  kern.problem = problem;
}

void buildSerial(kir::Kernel &kern, const Knobs &k, int64_t work,
                 const std::function<std::vector<kir::StmtP>()> &body) {
  Knobs one = k;
  one.values["threads"] = 1;
  one.values["vec"] = 1;
  buildLines(kern, one, 1, work, [&](E) { return body(); });
}

CostShape lineCostShape(const kir::Kernel &k, const Hardware &hw, int64_t flops,
                        double hostCyclesPerStep) {
  const FlatLoopProblem &p = problemOf<FlatLoopProblem>(k);
  CostShape s = costShape(k, hw, flops, hostCyclesPerStep * double(p.lineWork));
  s.chainSteps = double(p.lineWork);
  return s;
}

kir::E computeValue(kir::E v) {
  if (v->type == DType::F16 || v->type == DType::BF16)
    return kir::cast(v, DType::F32);
  return v;
}

} // namespace aicf::flatloop
