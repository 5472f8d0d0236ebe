// The text report of a plan (aicfc --explain): the step table with each kernel's bytes against
// the compulsory lower bound and its predicted time, the plan's totals, the decisions the passes
// and the fusion rules recorded with their prices, and each kernel's schedule search. Moved out
// of the driver: it reads the plan only.
#include "plan/plan_report.h"

#include "ir/precision.h"
#include "passes/slice_choice.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

namespace aicf {

namespace {

// The target, hardware and schedule, and the symbolic dims with their planned values.
void printHeader(std::ostream &os, const Plan &p) {
  os << "== plan: " << p.steps.size() << " steps for " << p.target.name();
  if (p.planFor.name() != p.target.name())
    os << " (the " << p.planFor.name() << " plan, emulated)";
  os << "\n   hardware: " << p.hardwareSummary << "\n   schedule: "
     << (p.schedule == Schedule::Cost ? "chosen by the cost model" : "recipe defaults") << "\n";
  if (!p.dims.empty()) {
    // Symbolic dims: one plan for the ranges, priced at the opt point; memory for the maxima.
    os << "   dims:";
    for (size_t i = 0; i < p.dims.size(); ++i) {
      os << (i ? ", " : " ") << p.dims[i].name << " in " << p.dims[i].min << ".." << p.dims[i].max
         << " (planned for " << p.dims[i].opt;
      // A length known only at run time: the step whose count sets it (aicfc --max bounds it).
      if (auto it = p.dimSetBy.find(p.dims[i].name); it != p.dimSetBy.end())
        for (size_t s = 0; s < p.steps.size(); ++s)
          if (std::find(p.steps[s].setsDims.begin(), p.steps[s].setsDims.end(), p.dims[i].name) !=
              p.steps[s].setsDims.end())
            os << "; set at run time by step " << s << ", --max " << p.dims[i].name << "=N";
      os << ")";
    }
    os << "; one generic plan for every value (its kernels certified shape-generic at the ranges' "
          "ends), full tiles versioned without guards; figures below at the planned values, "
          "buffers sized for the maxima\n";
    for (size_t s = 0; s < p.steps.size(); ++s)
      if (!p.steps[s].symGrid.empty()) {
        os << "   step " << s << " grid:";
        for (const SymExtent &e : p.steps[s].symGrid)
          os << " " << e.str();
        os << "\n";
      }
  }
}

// One row per step: kind, kernel, recipe, bytes against the lower bound, FLOPs, predicted time
// (GPU plans: occupancy and registers); then the totals.
void printSteps(std::ostream &os, const Plan &p) {
  bool gpu = false;
  for (const PlanStep &st : p.steps)
    gpu = gpu || st.occupancy >= 0;
  char line[320];
  std::snprintf(line, sizeof line, "%-4s %-20s %-28s %-20s %12s %12s %6s %12s %10s%s\n", "step",
                "kind", "kernel", "recipe", "bytes", "lower bound", "ratio", "flops", "pred us",
                gpu ? "  occupancy regs" : "");
  os << line;
  int64_t bytes = 0, lower = 0, flops = 0;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const PlanStep &st = p.steps[s];
    std::string occ;
    if (st.occupancy >= 0)
      occ = cat("  ", std::to_string(static_cast<int>(std::lround(100 * st.occupancy))), "%",
                std::string(7, ' '), st.registers);
    std::snprintf(line, sizeof line,
                  "%-4zu %-20s %-28s %-20s %12lld %12lld %6.2f %12lld %10.2f%s\n", s,
                  st.kind.c_str(),
                  !st.kindId.empty() ? st.kindId.c_str()
                  : st.loop          ? "(runtime loop)"
                  : st.fail          ? "(runtime fail)"
                                     : "(runtime copy)",
                  st.recipe.c_str(), static_cast<long long>(st.bytes),
                  static_cast<long long>(st.lowerBoundBytes),
                  st.lowerBoundBytes ? double(st.bytes) / double(st.lowerBoundBytes) : 1.0,
                  static_cast<long long>(st.flops), st.timeUs, occ.c_str());
    os << line;
    bytes += st.bytes;
    lower += st.lowerBoundBytes;
    flops += st.flops;
  }
  os << "   total: " << bytes
     << " bytes moved by the kernels to and from memory (re-reads the last-level cache serves, "
        "the host's shared L3 or the GPU's L2, not counted) ("
     << lower << " if each kernel touched its buffers once); model lower bound "
     << p.lowerBoundBytes << " bytes (inputs + weights read once, outputs written once); " << flops
     << " FLOPs\n";
}

// The steps run at run time only under a branch's condition or as a loop's body.
void printRuntimeControl(std::ostream &os, const Plan &p) {
  for (size_t s = 0; s < p.steps.size(); ++s) // branches chosen at run time (branch_guards.h)
    if (!p.steps[s].guard.empty()) {
      const PlanBuffer *b = p.buffer(p.steps[s].guard);
      os << "   step " << s << " runs only when " << b->id << " (" << b->value << ") is "
         << (p.steps[s].guardWhen ? "true" : "false") << " (a branch chosen at run time)\n";
    }
  for (size_t s = 0; s < p.steps.size(); ++s) // loops kept at run time (loop_bodies.h)
    if (const auto &l = p.steps[s].loop; l && l->bodySteps > 0) {
      const PlanStep &st = p.steps[s];
      os << "   step " << s << " runs steps " << s + 1 << "-" << s + size_t(l->bodySteps)
         << " per iteration while " << l->state[0] << " < " << st.inputs[0] << " (trip count) and "
         << l->state[1] << " (condition); the body writes " << l->next[0] << " (next condition)\n";
    }
}

void printPrecision(std::ostream &os, const Plan &p) {
  char line[320];
  // Reduced precision (aicfc --precision, or a quantized model's integer products on the host's
  // int8 / bf16 micro-kernels): the policy, then each step against the same tiles in fp32.
  const bool reducedSteps = std::any_of(p.steps.begin(), p.steps.end(), [](const PlanStep &st) {
    return st.precision != Precision::F32;
  });
  if (p.precision == Precision::F32 && reducedSteps) {
    os << "   precision: fp32, the quantized model's integer products on int8 / bf16 dot products "
          "(exact, i32 / f32 sums; scales and requantization in f32 epilogues)\n";
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const PlanStep &st = p.steps[s];
      if (st.precision == Precision::F32)
        continue;
      std::snprintf(line, sizeof line,
                    "   step %zu %s: %s, %.2f us predicted vs %.2f us in fp32 (%.1fx)\n", s,
                    st.kindId.c_str(), precisionName(st.precision), st.timeUs, st.fp32Us,
                    st.fp32Us / std::max(st.timeUs, 1e-9));
      os << line;
    }
  }
  if (p.precision != Precision::F32) {
    double tc = 0, simt = 0;
    for (const PlanStep &st : p.steps)
      if (st.fp32Us > 0) {
        tc += st.timeUs;
        simt += st.fp32Us;
      }
    // A GPU plan's products run on tensor cores (or their emulation); a host plan's on the CPU's
    // dot-product instructions (vdpbf16ps, AMX tiles, vpdpbusd), priced against f32 FMAs.
    const bool tensorCores = p.planFor.gpu();
    const char *base = tensorCores ? "fp32 SIMT" : "fp32 FMAs";
    os << "   precision: " << precisionName(p.precision) << " products on "
       << (tensorCores ? "tensor cores" : "the CPU's dot-product instructions")
       << " (operands rounded, f32 accumulation); norms, softmax, reductions and elementwise "
          "steps in fp32\n";
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const PlanStep &st = p.steps[s];
      if (st.kindId.empty())
        continue;
      if (st.fp32Us > 0)
        std::snprintf(line, sizeof line,
                      "   step %zu %s: %s, %.2f us predicted vs %.2f us in %s (%.1fx)\n", s,
                      st.kindId.c_str(), precisionName(st.precision), st.timeUs, st.fp32Us, base,
                      st.fp32Us / std::max(st.timeUs, 1e-9));
      else
        std::snprintf(line, sizeof line, "   step %zu %s: %s\n", s, st.kindId.c_str(),
                      precisionName(st.precision));
      os << line;
    }
    if (simt > 0) {
      std::snprintf(line, sizeof line, "   %s steps: %.2f us predicted vs %.2f us in %s (%.1fx)\n",
                    tensorCores ? "tensor-core" : "reduced-precision", tc, simt, base,
                    simt / std::max(tc, 1e-9));
      os << line;
    }
  }
}

// The arena against no reuse, and the predicted time.
void printArena(std::ostream &os, const Plan &p) {
  char line[320];
  os << "   arena: " << p.arenaBytes << " bytes planned vs " << p.naiveArenaBytes
     << " bytes for all intermediates without reuse; weights.bin " << p.weightsBytes << " bytes\n";
  std::snprintf(line, sizeof line, "   predicted time: %.2f us (sum of the kernels%s)\n",
                p.predictedTimeUs,
                std::any_of(p.steps.begin(), p.steps.end(),
                            [](const PlanStep &st) { return st.loop.has_value(); })
                    ? "; one iteration of each loop"
                    : "");
  os << line;
}

// The graph passes' priced decisions: attention form, split-k, split-chains, merge-siblings.
void printPassDecisions(std::ostream &os, const Plan &p) {
  char line[320];
  for (const AttentionDecision &d : p.attention) {
    auto us = [&](double v, const std::string &why) {
      if (v >= 0) {
        std::snprintf(line, sizeof line, "%.3g us", v);
        return std::string(line);
      }
      return why;
    };
    os << "   attention " << d.node << ": " << (d.materialized ? "materialised" : "streaming")
       << " (streaming " << us(d.streamingUs, d.streamingWhy) << "; materialised "
       << us(d.materializedUs, "not offered: " + d.materializedWhy) << ")\n";
  }
  auto slices = [&os](const char *pass, const SliceDecision &d) {
    os << "   " << pass << " " << d.node << ": "
       << (d.chosen > 1 ? cat(d.chosen, " slices") : std::string("not split")) << " ("
       << slicePrices(d) << ")\n";
  };
  for (const SplitKDecision &d : p.splitK)
    slices("split-k", d);
  for (const ChainSplitDecision &d : p.splitChains)
    slices("split-chains", d);
  for (const SiblingMergeDecision &d : p.mergeSiblings) {
    std::string nodes;
    for (const std::string &n : d.nodes)
      nodes += (nodes.empty() ? "" : ", ") + n;
    auto price = [&line](const Price &pr) {
      std::snprintf(line, sizeof line, "%.3g us %.3g MB", pr.us, double(pr.bytes) / 1e6);
      return std::string(line);
    };
    os << "   merge-siblings [" << nodes
       << "]: " << (d.chosen ? "one contraction " + d.merged : std::string("kept apart"))
       << " (merged " << price(d.together) << "; separate " << price(d.separate) << ")\n";
  }
}

// The fusion rules' priced decisions (lower/fusion.cpp rules 5, 7-10).
void printRemat(std::ostream &os, const Plan &p) {
  char line[320];
  for (const RematDecision &d : p.remat) {
    std::string vals;
    for (const std::string &v : d.values)
      vals += (vals.empty() ? "" : ", ") + v;
    if (d.kind == RematDecision::Kind::NormEpilogue) { // fusion rule 9: whole kernels' times
      std::snprintf(line, sizeof line, "%.3g us vs two kernels %.3g us", d.recomputeUs, d.storeUs);
      os << "   " << (d.recomputed ? "applied" : "not applied") << " " << d.what
         << " as its epilogue (" << vals << " " << (d.recomputed ? "never stored" : "stored")
         << "): one kernel " << line << "\n";
      continue;
    }
    if (d.kind == RematDecision::Kind::ConvChain) { // fusion rule 10: whole kernels' times
      std::snprintf(line, sizeof line, "%.3g us vs %zu kernels %.3g us", d.recomputeUs,
                    d.values.size() + 1, d.storeUs);
      os << "   " << (d.recomputed ? "chained" : "not chained") << " " << d.what << " (" << vals
         << " " << (d.recomputed ? "never stored" : "stored") << "): one kernel " << line << "\n";
      continue;
    }
    if (d.kind == RematDecision::Kind::Chain) { // fusion rule 8: whole kernels' times
      std::snprintf(line, sizeof line, "%.3g us vs two kernels %.3g us", d.recomputeUs, d.storeUs);
      os << "   " << (d.recomputed ? "chained" : "not chained") << " " << d.what << " (" << vals
         << " " << (d.recomputed ? "never stored" : "stored") << "): one kernel " << line << "\n";
      continue;
    }
    if (!d.what.empty()) { // a row norm (fusion rule 7): both sides are whole kernels' times
      std::snprintf(line, sizeof line, "%.3g us vs the norm's kernel and theirs %.3g us",
                    d.recomputeUs, d.storeUs);
      os << "   " << (d.recomputed ? "recomputed" : "stored") << " " << d.what << " -> " << vals
         << " in the A reads of its " << d.consumers << " reader kernel(s): " << line << "\n";
      continue;
    }
    std::snprintf(line, sizeof line, "%.3g us vs store + reload %.3g us", d.recomputeUs, d.storeUs);
    os << "   " << (d.recomputed ? "recomputed" : "stored") << " " << vals << " (read by "
       << d.consumers << " kernels): recompute " << line << "\n";
  }
}

// Rule 0's decisions: each layout op folded, stored or materialised, with its maps and prices.
void printLayoutFolds(std::ostream &os, const Plan &p) {
  char line[320];
  for (const LayoutFoldRecord &d : p.layoutFolds) {
    os << "   "
       << (d.stored   ? "stored "
           : d.folded ? "folded "
                      : "materialised ")
       << d.op << " " << d.node << ": " << d.reason;
    if (d.foldUs > 0 || d.materializeUs > 0) {
      std::snprintf(line, sizeof line, " (through the map +%.3g us, as a kernel %.3g us)", d.foldUs,
                    d.materializeUs);
      os << line;
    }
    os << "\n";
    for (const std::string &w : d.stores)
      os << "     stores " << w << "\n";
    for (const std::string &r : d.reads)
      os << "     " << r << "\n";
  }
}

void printSchedules(std::ostream &os, const Plan &p) {
  char line[320];
  // Why each kernel's knobs: the search, the decision and what it weighed.
  os << "== schedules (cost model; times in us)\n";
  auto knobText = [](const std::map<std::string, int64_t> &knobs) {
    std::string t;
    for (const auto &[k, v] : knobs)
      t += cat(t.empty() ? "" : " ", k, "=", v);
    return t.empty() ? std::string("(none)") : t;
  };
  std::map<std::string, int> callers; // kernel symbol -> steps calling it
  for (const PlanStep &st : p.steps)
    if (!st.kindId.empty())
      ++callers[st.kindId];
  std::set<std::string> shown;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const PlanStep &st = p.steps[s];
    if (st.kindId.empty() || !shown.insert(st.kindId).second)
      continue; // a shared kernel: one search, shown once
    std::snprintf(line, sizeof line, "%.3g", st.timeUs);
    os << st.kindId << ": " << knobText(st.knobs) << " -> " << line << " us";
    if (callers[st.kindId] > 1)
      os << " (" << callers[st.kindId] << " steps)";
    if (st.ptxas.present)
      os << "; ptxas " << st.ptxas.registers << " registers (estimated " << st.registers << ")";
    os << "\n    " << st.search.candidates << " candidates, " << st.search.feasible << " fit; "
       << (st.search.isDefault ? "the recipe defaults" : "defaults would take ");
    if (!st.search.isDefault) {
      std::snprintf(line, sizeof line, "%.3g us", st.search.defaultUs);
      os << line;
    }
    os << "; " << st.search.reason << "\n";
    for (const PlanStep::Alternative &a : st.alternatives) {
      std::snprintf(line, sizeof line, "%.3g", a.costUs);
      os << "    " << (a.rejected.empty() ? "runner-up " : "rejected  ") << knobText(a.knobs)
         << ": " << line << " us" << (a.rejected.empty() ? "" : " — " + a.rejected) << "\n";
    }
    if (!st.recipeReason.empty())
      os << "    recipe " << st.recipe << ": " << st.recipeReason << "\n";
  }
}

} // namespace

void printPlanReport(std::ostream &os, const Plan &p) {
  printHeader(os, p);
  printSteps(os, p);
  printRuntimeControl(os, p);
  printPrecision(os, p);
  printArena(os, p);
  printPassDecisions(os, p);
  printRemat(os, p);
  printLayoutFolds(os, p);
  printSchedules(os, p);
}

} // namespace aicf
