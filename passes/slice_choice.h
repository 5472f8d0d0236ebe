// The structural choices priced in slices (passes/split_k.h: a contraction in K slices;
// passes/split_chains.h: an MLP's chain in hidden slices): the decision both record, the
// choice among the slice counts by their prices, and the explain record of it.
#pragma once

#include "passes/explain.h"
#include "passes/pass.h"
#include "passes/price.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace aicf {

// One node's choice, as plan.yaml (split_k, split_chains) and --explain report it.
struct SliceDecision {
  struct Priced {
    int slices = 1;
    Price price; // us -1: no schedule fits
  };
  std::string node;           // the (last) node's location
  int nodeIndex = -1;         // its position in the graph
  Price unsplit{-1};          // us -1: not priced
  std::vector<Priced> splits; // every count priced, ascending
  int chosen = 1;             // 1: not split
};

// Prices the form as it is (`price(1)`) and every count of `counts`, recording each, and
// chooses by takeForm (passes/price.h): the cheapest split when it costs under `margin` x the
// form as it is; else, among the splits within kTimeBand of it, the one moving the fewest bytes
// when that is fewer than the form as it is moves.
void chooseSlices(SliceDecision &d, const std::vector<int> &counts,
                  const std::function<Price(int)> &price, double margin);

// Every price of `d`, as --explain and the report print them: "unsplit 486 us 4.2 MB; 2: 494 us
// 3.2 MB, 4: ...".
std::string slicePrices(const SliceDecision &d);

// The --explain record of `d` for pass `pass` on `pattern` (with `origins`): applied as "N
// <what> + reduce_sum (unsplit ..; prices)", or the note that the unsplit form is cheapest.
RewriteRecord sliceRecord(const char *pass, std::string pattern, std::vector<std::string> origins,
                          const SliceDecision &d, const std::string &what);

} // namespace aicf
