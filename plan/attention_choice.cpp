// See attention_choice.h. The materialised alternative is costed on a scratch graph holding
// only the attention's operands and its decomposition (emitMaterializedAttention, shared with
// the pass's rewrite), partitioned and planned like the real one.
#include "plan/attention_choice.h"

#include "support/diagnostics.h"

namespace aicf {

namespace {

// Costs both lowerings of the attention group `g` (anchor: an attention node).
AttentionCost costAttention(const Graph &graph, const KernelGroup &g, const Hardware &hw,
                            const PlannerOptions &opts, bool offerMaterialized) {
  const Node &a = *g.anchor;
  AttentionCost d;
  try {
    PlanDecision pd;
    planKernel(g, "attention", hw, opts, &pd);
    d.streamingUs = pd.chosen.cost.timeUs;
  } catch (const UserError &e) {
    d.streamingWhy = e.what();
  }
  if (offerMaterialized) {
    // A scratch graph: the operands as inputs (constant masks as weights), the decomposition,
    // over the graph's dims: priced at their planning values, and lowered with the symbolic
    // dims it must run with (a decomposition whose products cannot take a symbolic key length
    // is not an alternative; its kernels' refusal is the reason recorded).
    Graph scratch("attention_alternative");
    scratch.setDims(graph.dims());
    std::vector<Value *> ops;
    for (const Value *o : a.operands())
      ops.push_back(o->kind() == ValueKind::Weight
                        ? scratch.addWeight(o->name(), o->data())
                        : scratch.addInput(o->name().empty() ? "x" : o->name(), o->type()));
    Node *copy = scratch.addNode(Op::Attention, ops, {a.result()->type()}, a.attrs, a.loc);
    scratch.addOutput(emitMaterializedAttention(scratch, *copy, copy));
    scratch.eraseNode(copy);
    d.materializedUs = plannedGraphCost(scratch, hw, opts, &d.materializedWhy).us;
  }
  return d;
}

} // namespace

AttentionCostFn attentionCostFn(const Hardware &hw, const PlannerOptions &opts) {
  // The pass prices every attention of a graph before it rewrites any: one partition per graph.
  struct Cache {
    const Graph *graph = nullptr;
    Partition part;
  };
  auto cache = std::make_shared<Cache>();
  return [&hw, opts, cache](const Graph &g, const Node &a, bool offerMaterialized) {
    if (cache->graph != &g) {
      FusionOptions fo;
      fo.rematCost = rematCostFor(hw);
      cache->part = partitionGraph(g, fo);
      cache->graph = &g;
    }
    for (const KernelGroup &grp : cache->part.groups)
      if (grp.anchor == &a)
        return costAttention(g, grp, hw, opts, offerMaterialized);
    throw InternalError(cat("attention cost: ", a.where(), " anchors no kernel group"));
  };
}

} // namespace aicf
