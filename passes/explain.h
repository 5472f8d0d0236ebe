// The explain log: every pattern match and property check a pass makes is recorded here —
// applied or rejected, with its certificates — so `aicfc --explain` can say exactly what
// happened and why (docs/architecture.md). Passes append; the driver prints and serialises.
#pragma once

#include "ir/graph.h"
#include "ir/properties.h"

#include <ostream>
#include <string>
#include <vector>

namespace aicf {

struct RewriteRecord {
  std::string pass;                 // "detect-layer-norm"
  std::string pattern;              // "layer_norm (decomposed, opset 13 export)"
  std::vector<std::string> origins; // ONNX nodes of the match, in graph order
  std::vector<Certificate> certificates;
  bool applied = false;
  std::string result; // what the match became ("layer_norm", "gemm + [add, gelu]"), if applied
  std::string note;   // why it was rejected (the first failed condition), else ""
};

class ExplainLog {
public:
  void add(RewriteRecord r) { records_.push_back(std::move(r)); }
  const std::vector<RewriteRecord> &records() const { return records_; }
  int applied() const;
  int rejected() const;

  // Human-readable report (what `aicfc --explain` prints).
  void printText(std::ostream &os) const;
  // The same as YAML (OUT/explain.yaml), with the coverage summary of the final graph.
  void writeYaml(std::ostream &os, const Graph &finalGraph) const;

private:
  std::vector<RewriteRecord> records_;
};

// Coverage: how many of the original ONNX nodes ended inside semantic or fused operators, and
// the original nodes left as plain primitive ops, grouped by op.
struct Coverage {
  int originalNodes = 0; // distinct ONNX origins over the final graph
  int inSemantic = 0;    // origins that ended in a semantic op or a fused contraction
  std::vector<std::pair<std::string, std::vector<std::string>>> unmatched; // op -> origins
};
Coverage computeCoverage(const Graph &g);
void printCoverage(std::ostream &os, const Coverage &c);

} // namespace aicf
