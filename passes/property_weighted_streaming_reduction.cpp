// weighted_streaming_reduction (docs/algorithms.md): softmax(q k^T) v is a normalised weighted
// reduction over the keys that can be computed in a stream of key/value tiles (FlashAttention):
// per query row keep (m, l, acc); a new tile rescales them by e^(m - m'). Legality: the
// weighting is rescaling-invariant (softmax(s) = e^(s-c)/sum e^(s-c) for any c), the
// normalisation state merges, and the mask can be applied tile by tile (none, causal, additive,
// boolean). A fully masked row is defined as zeros (the streaming kernel never divides by 0).
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

std::optional<Certificate> checkWeightedStreamingReduction(const Graph &, const Node &n,
                                                           const Target &) {
  if (n.op() != Op::Attention)
    return std::nullopt;
  Certificate c;
  c.property = MemProperty::WeightedStreamingReduction;
  c.rewrite = "materialised scores -> streaming over key/value tiles (online softmax)";
  c.exactness = Exactness::Reassociated;
  c.conditions.push_back(
      {"rescaling invariant", "softmax(s) = e^(s-c) / sum e^(s-c) for any row constant c", true});
  c.conditions.push_back({"normalisation mergeable",
                          "(m, l, acc) merge: m = max, l and acc rescaled by e^(m_i - m)", true});
  std::string mask = "none";
  bool maskOk = true;
  if (n.numOperands() == 4) {
    const TensorType &mt = n.operand(3)->type();
    mask = cat(mt.dtype == DType::Bool ? "boolean " : "additive ", mt.str(), ", applied per tile");
    maskOk = mt.dtype == DType::Bool || isFloat(mt.dtype);
  }
  if (n.i("causal"))
    mask = (mask == "none" ? std::string("") : mask + " and ") +
           "causal (tiles above the diagonal skipped)";
  c.conditions.push_back({"mask applicable per tile", mask, maskOk});
  return c;
}

} // namespace aicf
