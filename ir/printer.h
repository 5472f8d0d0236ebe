// The Graph IR text printer (format: docs/ir-format.md).
// Printing is deterministic: values are numbered in order, attributes sorted, floats printed in
// their shortest round-trip form, so parse(print(g)) prints identically.
#pragma once

#include "ir/graph.h"

#include <ostream>
#include <string>

namespace aicf {

void printGraph(std::ostream &os, const Graph &g);
std::string printGraph(const Graph &g);

} // namespace aicf
