// The structural choices priced in slices (passes/split_k.h: a contraction in K slices;
// passes/split_chains.h: an MLP's chain in hidden slices): the decision both record, the
// choice among the slice counts by their prices, and the explain record of it.
#pragma once

#include "passes/explain.h"
#include "passes/pass.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace aicf {

// One node's choice, as plan.yaml (split_k, split_chains) and --explain report it.
struct SliceDecision {
  std::string node;                           // the (last) node's location
  int nodeIndex = -1;                         // its position in the graph
  double unsplitUs = -1;                      // -1: not priced
  std::vector<std::pair<int, double>> splits; // (S, predicted us; -1: no schedule fits)
  int chosen = 1;                             // 1: not split
};

// Prices the form as it is (`price(1)`) and every count of `counts`, recording each, and
// chooses the cheapest split when it beats the form as it is by `margin` (a split must cost
// under margin x unsplit; a price < 0: no schedule fits).
void chooseSlices(SliceDecision &d, const std::vector<int> &counts,
                  const std::function<double(int)> &price, double margin);

// The --explain record of `d` for pass `pass` on `pattern` (with `origins`): applied as "N
// <what> + reduce_sum (unsplit ..; prices)", or the note that the unsplit form is cheapest.
RewriteRecord sliceRecord(const char *pass, std::string pattern, std::vector<std::string> origins,
                          const SliceDecision &d, const std::string &what);

} // namespace aicf
