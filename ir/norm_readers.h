// Row norms read as whole rows (issue 17): a layer_norm / rms_norm over the last axis whose only
// readers are contractions reading it as their left operand A along that axis, directly or
// through reshapes that keep the last dim. Each reader's tile then holds whole rows of A, so it
// can compute those rows' statistics itself and normalise A as it stages it, and the norm's
// result need never be stored: rematerializable_intermediate (passes/property_*.cpp) certifies
// it, the fusion prices it (lower/fusion.h rule 7), the tiled contraction lowers it.
#pragma once

#include "ir/graph.h"

#include <optional>
#include <string>
#include <vector>

namespace aicf {

// A layer_norm or rms_norm normalising only its last axis.
bool isRowNorm(const Node &n);

struct RowNormReaders {
  std::vector<const Node *> contractions;       // reading the norm's rows as A, in discovery order
  std::vector<std::vector<const Node *>> views; // per contraction, the reshapes between
};

// The readers of row norm `norm`'s result, or nullopt with `why` saying which read is not one of
// whole rows (a graph output, another reader, a transposed A...).
std::optional<RowNormReaders> rowNormReaders(const Graph &g, const Node &norm, std::string *why);

} // namespace aicf
