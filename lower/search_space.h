// The planner's candidate space per recipe (DESIGN.md §5): which knob values are worth costing
// for a kernel, derived from its problem extents (the default lowering's kir::Kernel::extents)
// and the hardware: tile sizes from the problem's dimensions and arithmetic intensity, thread
// counts by warp multiples, vector widths dividing the rows, and on GPUs the register-tile
// shapes. Only structurally valid knob sets are produced (TM divides BM, threads divides BR,
// vec divides the row...); whether a candidate fits the hardware is the cost model's question.
#pragma once

#include "kir/kir.h"
#include "target/hardware.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace aicf {

using KnobSet = std::map<std::string, int64_t>;

// Candidates for the kernel `dflt` (lowered with the recipe's defaults), in a fixed order and
// without duplicates. Empty for recipes without knobs.
std::vector<KnobSet> candidateKnobs(const kir::Kernel &dflt, const Hardware &hw);

} // namespace aicf
