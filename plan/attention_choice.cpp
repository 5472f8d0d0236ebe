// See attention_choice.h. The materialised alternative is costed on a scratch graph holding
// only the attention's operands and its decomposition, partitioned and planned like the real
// one; the decomposition itself is shared by the costing and the rewrite.
#include "plan/attention_choice.h"

#include "support/diagnostics.h"

#include <cmath>
#include <limits>

namespace aicf {

namespace {

// Why the materialised form would change the result, or "" when it is exact.
std::string notOffered(const Node &a) {
  const TensorType &q = a.operand(0)->type(), &k = a.operand(1)->type();
  int64_t sq = q.shape[q.rank() - 2], sk = k.shape[k.rank() - 2];
  if (a.i("causal") && sk < sq)
    return "a causal mask with Sk < Sq hides whole rows (attention gives zeros, softmax NaN)";
  if (a.numOperands() < 4)
    return "";
  const Value *m = a.operand(3);
  if (m->type().dtype == DType::Bool)
    return "a bool mask may hide whole rows (attention gives zeros, softmax NaN)";
  if (!m->hasData())
    return "a non-constant additive mask may hold -inf rows";
  const Tensor &t = *m->data();
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isfinite(t.getDouble(i)))
      return "the additive mask holds non-finite values";
  return "";
}

TensorPtr scalar(double v) {
  auto t = std::make_shared<Tensor>(TensorType(DType::F32, {}));
  t->setDouble(0, v);
  return t;
}

// Emits the materialised sequence for attention `a` (operands already in `g`) before `before`;
// returns the output value.
Value *emitMaterialized(Graph &g, const Node &a, Node *before) {
  Value *q = a.operand(0), *k = a.operand(1), *v = a.operand(2);
  Location loc = a.loc;
  int64_t r = k->type().rank();
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < r; ++d)
    perm.push_back(d);
  std::swap(perm[r - 1], perm[r - 2]);
  Value *kt = g.createNode(Op::Transpose, {k}, {{"perm", perm}}, loc, before)->result();
  Value *s = g.createNode(Op::MatMul, {q, kt}, {}, loc, before)->result();
  Value *scale = g.addWeight("attention_scale", scalar(a.f("scale")));
  s = g.createNode(Op::Mul, {s, scale}, {}, loc, before)->result();
  if (a.numOperands() == 4)
    s = g.createNode(Op::Add, {s, a.operand(3)}, {}, loc, before)->result();
  if (a.i("causal")) {
    // Key j is visible to query i when j <= i + (Sk - Sq).
    const TensorType &st = s->type();
    int64_t sq = st.shape[st.rank() - 2], sk = st.shape[st.rank() - 1];
    auto mask = std::make_shared<Tensor>(TensorType(DType::Bool, {sq, sk}));
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < sk; ++j)
        mask->setInt(i * sk + j, j <= i + (sk - sq) ? 1 : 0);
    Value *mv = g.addWeight("attention_causal_mask", mask);
    Value *ninf =
        g.addWeight("attention_neg_inf", scalar(-std::numeric_limits<double>::infinity()));
    s = g.createNode(Op::Where, {mv, s, ninf}, {}, loc, before)->result();
  }
  Value *p = g.createNode(Op::Softmax, {s}, {{"axis", int64_t(-1)}}, loc, before)->result();
  return g.createNode(Op::MatMul, {p, v}, {}, loc, before)->result();
}

// Sum of the planned kernels' costs of `g`, or -1 with `why` when a kernel fits no schedule.
double planCost(const Graph &g, const Hardware &hw, const PlannerOptions &opts, std::string *why) {
  FusionOptions fo;
  fo.rematCost = rematCostFor(hw);
  Partition part = partitionGraph(g, fo);
  double total = 0;
  for (size_t i = 0; i < part.groups.size(); ++i) {
    PlanDecision d;
    try {
      planKernel(part.groups[i], cat("m", i), hw, opts, &d);
    } catch (const UserError &e) {
      *why = e.what();
      return -1;
    }
    total += d.chosen.cost.timeUs;
  }
  return total;
}

} // namespace

AttentionDecision chooseAttention(const KernelGroup &g, const Hardware &hw,
                                  const PlannerOptions &opts) {
  const Node &a = *g.anchor;
  AttentionDecision d;
  d.node = a.where();
  try {
    PlanDecision pd;
    planKernel(g, "attention", hw, opts, &pd);
    d.streamingUs = pd.chosen.cost.timeUs;
  } catch (const UserError &e) {
    d.streamingWhy = e.what();
  }
  d.materializedWhy = notOffered(a);
  if (d.materializedWhy.empty()) {
    // A scratch graph: the operands as inputs (constant masks as weights), the decomposition.
    Graph scratch("attention_alternative");
    std::vector<Value *> ops;
    for (const Value *o : a.operands())
      ops.push_back(o->kind() == ValueKind::Weight
                        ? scratch.addWeight(o->name(), o->data())
                        : scratch.addInput(o->name().empty() ? "x" : o->name(), o->type()));
    Node *copy = scratch.addNode(Op::Attention, ops, {a.result()->type()}, a.attrs, a.loc);
    scratch.addOutput(emitMaterialized(scratch, *copy, copy));
    scratch.eraseNode(copy);
    d.materializedUs = planCost(scratch, hw, opts, &d.materializedWhy);
  }
  d.materialized = d.materializedUs >= 0 && (d.streamingUs < 0 || d.materializedUs < d.streamingUs);
  return d;
}

void materializeAttention(Graph &graph, int nodeIndex) {
  std::vector<Node *> nodes = graph.nodes();
  AICF_CHECK(nodeIndex >= 0 && nodeIndex < static_cast<int>(nodes.size()) &&
                 nodes[nodeIndex]->op() == Op::Attention,
             "materializeAttention: node ", nodeIndex, " is not an attention");
  Node *a = nodes[nodeIndex];
  Value *out = emitMaterialized(graph, *a, a);
  graph.replaceAllUsesWith(a->result(), out);
  graph.eraseNode(a);
}

} // namespace aicf
