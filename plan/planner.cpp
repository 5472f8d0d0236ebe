// See planner.h. The search is exhaustive over the recipe's candidate space (tens of candidates
// per kernel; lowering one is microseconds of work), so no pruning heuristic can hide the best.
#include "plan/planner.h"

#include "ir/index_map.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace aicf {

std::string knobsText(const KnobSet &knobs) {
  std::string s;
  for (const auto &[k, v] : knobs)
    s += cat(s.empty() ? "" : " ", k, "=", v);
  return s;
}

namespace {

// How much cheaper than the recipe defaults a candidate must be predicted to be to replace
// them: the host model's step-time predictions scatter by ~10% around the measurements, and
// candidates of one kernel often differ by less (bench/costmodel.md).
constexpr double kDefaultMargin = 0.03;
// Predicted times this close (a share of the best) are a tie: the model's resolution is coarser.
constexpr double kTieShare = 1e-3;

// The term that separates two candidates most, as words for the explain output.
std::string whyCheaper(const KernelCost &a, const KernelCost &b) {
  struct Term {
    const char *what;
    double diff;
  };
  Term terms[] = {{"less memory traffic", b.trafficUs - a.trafficUs},
                  {"less compute (less padding, better vector use)", b.computeUs - a.computeUs},
                  {"shorter latency chains", b.latencyUs - a.latencyUs},
                  {"no register spills", b.spillUs - a.spillUs},
                  {"more overlap from higher occupancy", a.overlapUs - b.overlapUs}};
  const Term *best = &terms[0];
  for (const Term &t : terms)
    if (t.diff > best->diff)
      best = &t;
  return best->what;
}

std::string fmtUs(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", us);
  return buf;
}

} // namespace

kir::Kernel planKernel(const KernelGroup &g, const std::string &name, const Hardware &hw,
                       const PlannerOptions &opts, PlanDecision *decision) {
  Knobs base;
  base.planFor = opts.planFor;
  RecipeSelection sel = selectRecipe(g);
  const Recipe &recipe = *sel.recipe;
  kir::Kernel dflt = buildKernel(recipe, g, name, base);
  PlanDecision d;
  d.recipeReason = sel.reason;
  d.recipeFallback = sel.fallback;
  // A kernel storing through a layout op, or reading through a folded one, touches other
  // indices of its buffers than the element it computes: never in place, whatever the recipe.
  d.writesInPlace =
      recipe.writesInPlace() && g.storeThrough.empty() &&
      std::none_of(g.nodes.begin(), g.nodes.end(), [](const Node *n) { return isLayoutOp(*n); });
  d.defaults.knobs = dflt.knobs;
  d.defaults.cost = evaluateKernel(g, recipe, dflt, hw);
  if (!d.defaults.cost.feasible())
    d.defaults.rejected = d.defaults.cost.violations.front();

  struct Lowered {
    Candidate c;
    kir::Kernel k;
  };
  std::vector<Lowered> all;
  all.push_back({d.defaults, dflt});
  if (opts.schedule != Schedule::Default) {
    for (const KnobSet &ks : recipe.candidates(dflt, hw)) {
      Knobs kn = base;
      kn.values = ks;
      kir::Kernel k = buildKernel(recipe, g, name, kn);
      bool seen = false;
      for (const Lowered &l : all)
        seen = seen || l.k.knobs == k.knobs;
      if (seen)
        continue;
      Candidate c;
      c.knobs = k.knobs;
      c.cost = evaluateKernel(g, recipe, k, hw);
      if (!c.cost.feasible())
        c.rejected = c.cost.violations.front();
      all.push_back({std::move(c), std::move(k)});
    }
  }
  d.considered = static_cast<int>(all.size());

  std::vector<size_t> ok;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].c.rejected.empty())
      ok.push_back(i);
    else if (d.rejected.size() < 3)
      d.rejected.push_back(all[i].c);
  }
  d.feasible = static_cast<int>(ok.size());
  if (ok.empty()) {
    const Node *a = g.anchor ? g.anchor : g.nodes.front();
    throw UserError(cat(a->where(), ": ", a->name(), ": no schedule of ", dflt.recipe, " fits ",
                        hw.name, ": ", d.defaults.rejected));
  }
  // The recipe defaults were tuned by measurement; a candidate must beat them by more than the
  // model's resolution (kDefaultMargin) to replace them.
  auto effective = [&](size_t i) {
    return i == 0 ? all[i].c.cost.timeUs * (1.0 - kDefaultMargin) : all[i].c.cost.timeUs;
  };
  std::stable_sort(ok.begin(), ok.end(), [&](size_t x, size_t y) {
    double cx = effective(x), cy = effective(y);
    if (cx != cy)
      return cx < cy;
    return all[x].c.knobs < all[y].c.knobs;
  });
  // Candidates the model cannot tell apart (within kTieShare of the best) are ranked by the
  // bytes they move, then by their knobs: where time does not decide, memory traffic does
  // (GPT-2's c_fc with its norm folded: BM = 128 reads its 1 MB weight once, BM = 64 twice, at
  // the same predicted time).
  if (ok.size() > 1) {
    double best = effective(ok[0]);
    size_t ties = 1;
    while (ties < ok.size() && effective(ok[ties]) <= best * (1.0 + kTieShare))
      ++ties;
    std::stable_sort(ok.begin(), ok.begin() + static_cast<std::ptrdiff_t>(ties),
                     [&](size_t x, size_t y) {
                       if (all[x].c.cost.bytes != all[y].c.cost.bytes)
                         return all[x].c.cost.bytes < all[y].c.cost.bytes;
                       return all[x].c.knobs < all[y].c.knobs;
                     });
  }
  size_t pick = 0; // the defaults under Schedule::Default
  if (opts.schedule != Schedule::Default)
    pick = ok[std::min<size_t>(static_cast<size_t>(std::max(opts.rank, 0)), ok.size() - 1)];
  else if (!all[0].c.rejected.empty())
    throw UserError(cat(name, ": the ", dflt.recipe, " defaults do not fit ", hw.name, ": ",
                        all[0].c.rejected));
  d.chosen = all[pick].c;
  d.isDefault = pick == 0;
  for (size_t i : ok)
    if (i != pick && d.runnersUp.size() < 3)
      d.runnersUp.push_back(all[i].c);
  if (!d.runnersUp.empty()) {
    const Candidate &r = d.runnersUp.front();
    double delta = r.cost.timeUs - d.chosen.cost.timeUs;
    if (d.isDefault && delta < kDefaultMargin * d.chosen.cost.timeUs)
      d.reason = cat("the defaults are within ", static_cast<int>(kDefaultMargin * 100),
                     "% of the best prediction (", knobsText(r.knobs), ": ", fmtUs(r.cost.timeUs),
                     " us): kept");
    else if (delta < 0 && opts.rank > 0)
      d.reason = cat("rank ", opts.rank, " by request; the best is ", knobsText(r.knobs));
    else if (delta <= kTieShare * d.chosen.cost.timeUs)
      d.reason =
          cat("ties with ", knobsText(r.knobs), " (", fmtUs(r.cost.timeUs), " us); ",
              r.cost.bytes != d.chosen.cost.bytes ? "fewer bytes win" : "the smaller knobs win");
    else
      d.reason = cat("beats ", knobsText(r.knobs), " by ", fmtUs(delta), " us (",
                     fmtUs(100.0 * delta / d.chosen.cost.timeUs),
                     "%): ", whyCheaper(d.chosen.cost, r.cost));
  } else {
    d.reason = "the only feasible candidate";
  }
  if (decision)
    *decision = std::move(d);
  return std::move(all[pick].k);
}

Value *ScratchOperands::operator()(const Value *v) {
  Value *&copy = copied_[v];
  if (!copy)
    copy = v->isWeight() && v->hasData()
               ? scratch_.addWeight(v->name(), v->data())
               : scratch_.addInput(v->name().empty() ? cat("x", copied_.size()) : v->name(),
                                   v->type());
  return copy;
}

Price plannedGraphCost(const Graph &g, const Hardware &hw, const PlannerOptions &opts,
                       std::string *why, FusePolicy chains) {
  FusionOptions fo;
  fo.chains = chains;
  fo.rematCost = rematCostFor(hw);
  fo.kernelCost = kernelCostFor(hw, opts);
  Partition part = partitionGraph(g, fo);
  Price total;
  for (size_t i = 0; i < part.groups.size(); ++i) {
    PlanDecision d;
    try {
      planKernel(part.groups[i], cat("m", i), hw, opts, &d);
    } catch (const UserError &e) {
      *why = e.what();
      return Price(-1);
    }
    total.us += d.chosen.cost.timeUs;
    total.bytes += d.chosen.cost.bytes;
  }
  return total;
}

KernelCostFn kernelCostFor(const Hardware &hw, const PlannerOptions &opts) {
  PlannerOptions best = opts;
  best.rank = 0;
  return [&hw, best](const KernelGroup &g) {
    PlanDecision d;
    try {
      planKernel(g, "probe", hw, best, &d);
    } catch (const UserError &) {
      return KernelPrice(std::numeric_limits<double>::infinity());
    }
    return KernelPrice(d.chosen.cost.timeUs, d.chosen.cost.bytes);
  };
}

} // namespace aicf
