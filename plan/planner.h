// The planner (docs/cost-model.md): for each kernel group, selects the recipe (lower/recipe.h, by
// the anchor's certified properties), lowers every candidate of the recipe's search space, costs it
// on the hardware description (plan/cost_model.h), rejects those that do not fit, and keeps the
// cheapest. Ties break on the knob values (smallest first), so plans are deterministic. The
// decision keeps the runner-ups and the rejected candidates with the constraint that failed, and
// why the recipe was selected, for plan.yaml and --explain.
#pragma once

#include "lower/lower.h"
#include "lower/recipe.h"
#include "plan/cost_model.h"
#include "support/enum_names.h"

#include <map>
#include <string>
#include <vector>

namespace aicf {

// aicfc --schedule: each kernel's cheapest feasible candidate (Cost), or its recipe's defaults
// (Default, costed, for comparison).
enum class Schedule { Cost, Default };
constexpr EnumNames<Schedule, 2> enumNames(Schedule) {
  return {{{Schedule::Cost, "cost"}, {Schedule::Default, "default"}}};
}

struct PlannerOptions {
  Target planFor; // the plan's target (its kind decides the recipes' defaults)
  Schedule schedule = Schedule::Cost;
  // Take the rank-th cheapest feasible candidate instead of the cheapest (bench-costmodel
  // measures predicted vs real time across ranks); clamped to the last feasible one
  // (buildModel refuses a rank no kernel reaches).
  int rank = 0;
};

struct Candidate {
  KnobSet knobs; // as the recipe recorded them (defaults filled in)
  KernelCost cost;
  std::string rejected; // first violated constraint; "" when feasible
};

struct PlanDecision {
  Candidate chosen;
  bool isDefault = false;           // the chosen knobs are the recipe's defaults
  Candidate defaults;               // the recipe's defaults, costed
  std::vector<Candidate> runnersUp; // the next feasible candidates, cheapest first (at most 3)
  std::vector<Candidate> rejected;  // infeasible candidates (at most 3, first in search order)
  int considered = 0, feasible = 0;
  std::string reason; // one line: why the chosen beats the first runner-up
  // Why the recipe: the certified property that selected it, or (recipeFallback) the failed
  // certificate condition that sent the group to its family's generic recipe.
  std::string recipeReason;
  bool recipeFallback = false;
  bool writesInPlace = false; // the recipe's Recipe::writesInPlace
};

// Lowers `g` as kernel `name` with the planned knobs. Throws UserError naming the node when no
// candidate (defaults included) fits the hardware.
kir::Kernel planKernel(const KernelGroup &g, const std::string &name, const Hardware &hw,
                       const PlannerOptions &opts, PlanDecision *decision);

// The operands of the nodes a structural choice prices, copied into its scratch graph: a
// constant weight as a weight (the alternative may re-lay it), any other value as an input
// (named after the value, or x<N>); each value once.
class ScratchOperands {
public:
  explicit ScratchOperands(Graph &scratch) : scratch_(scratch) {}
  Value *operator()(const Value *v);
  // v is computed in the scratch graph as `copy` (a node the caller copied there).
  void computed(const Value *v, Value *copy) { copied_[v] = copy; }

private:
  Graph &scratch_;
  std::map<const Value *, Value *> copied_;
};

// The summed planned time and bytes of every kernel of graph `g` (partitioned as the compile
// driver does), or a time of -1 with the planner's reason in `why` when a kernel fits no
// schedule. The structural choices
// (attention's form, split-k, split-chains) price their alternatives on scratch graphs with it;
// `chains` is fusion rule 8's policy for the partition (split-chains prices its split forms
// with their pairs chained).
Price plannedGraphCost(const Graph &g, const Hardware &hw, const PlannerOptions &opts,
                       std::string *why, FusePolicy chains = FusePolicy::Cost);

// The fusion's kernel cost callback (lower/fusion.h, rule 7): a candidate group's planned time
// on its best schedule (whatever rank `opts` asks of the kernels), +inf when none fits. `hw`
// must outlive it.
KernelCostFn kernelCostFor(const Hardware &hw, const PlannerOptions &opts);

// "BM=64 BN=128 BK=32" (knobs in name order).
std::string knobsText(const KnobSet &knobs);

} // namespace aicf
