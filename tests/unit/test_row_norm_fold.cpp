// Row norms recomputed in their readers' A reads (issue 17; lower/fusion.h rule 7,
// ir/norm_readers.h): which norms may fold (the rematerializable_intermediate certificate and
// the condition that fails), the groups a fold makes (the norm and the reshapes between join
// every reader's group, the norm's input replaces its result among the readers' inputs), the
// cost function's say, and the decision recorded with both prices. The folded kernels' numbers
// are checked end to end by test_artifacts.cpp and test_recipes.cpp.
#include "graph_checks.h"
#include "ir/parser.h"
#include "lower/fusion.h"
#include "passes/pass.h"

#include <doctest/doctest.h>

#include <string>

using namespace aicf;
using aicf::graph_checks::names;

namespace {

const char *kGraph =
    R"(graph @n(%x: f32[2,8,32], %g: f32[32], %b: f32[32], %w: f32[32,24], %w2: f32[32,24], %v: f32[8,16], %u: f32[8,8]) -> (%y: f32[16,24], %y2: f32[2,8,24], %z: f32[2,8,32], %t: f32[16,8]) {
  %n = layer_norm(%x, %g, %b) {axis = -1, epsilon = 1e-05} : f32[2,8,32]
  %r = reshape(%n) {shape = [16, 32]} : f32[16,32]
  %y = matmul(%r, %w) : f32[16,24]
  %y2 = matmul(%n, %w2) : f32[2,8,24]
  %m = layer_norm(%x, %g) {axis = -1, epsilon = 1e-05} : f32[2,8,32]
  %z = add(%m, %x) : f32[2,8,32]
  %p = rms_norm(%v) {axis = -1, epsilon = 1e-06} : f32[8,16]
  %t = gemm(%p, %u) {transA = 1} : f32[16,8]
  return %y, %y2, %z, %t
}
)";

std::unique_ptr<Graph> annotated() {
  std::unique_ptr<Graph> g = parseGraph(kGraph, "norms.mcir");
  PassManager pm;
  pm.add(createPass("annotate-properties"));
  PassContext ctx;
  pm.run(*g, ctx);
  return g;
}

const Node *producer(const Graph &g, const std::string &result) {
  for (const Node *n : g.nodes())
    if (n->result(0)->name() == result)
      return n;
  FAIL("no node computes %" << result);
  return nullptr;
}

const Condition &rowsCondition(const Node &n) {
  for (const Certificate &c : n.certificates)
    if (c.property == MemProperty::RematerializableIntermediate)
      for (const Condition &k : c.conditions)
        if (k.name == "read as whole rows")
          return k;
  FAIL("no rematerializable_intermediate certificate on " << n.name());
  throw 0;
}

const KernelGroup &groupOf(const Partition &p, const std::string &anchorResult) {
  for (const KernelGroup &k : p.groups)
    if (k.anchor && k.anchor->result(0)->name() == anchorResult)
      return k;
  FAIL("no group anchored at %" << anchorResult);
  throw 0;
}

} // namespace

TEST_CASE("row norms: the certificate says which norms their readers can recompute") {
  std::unique_ptr<Graph> g = annotated();
  // Read as A by two matmuls, one through a reshape that keeps the last dim.
  const Node *n = producer(*g, "n");
  CHECK(n->props.has(MemProperty::RematerializableIntermediate));
  CHECK(rowsCondition(*n).held);
  // Read by an add as well: its result must be stored.
  const Node *m = producer(*g, "m");
  CHECK_FALSE(m->props.has(MemProperty::RematerializableIntermediate));
  CHECK(rowsCondition(*m).evidence.rfind("add (", 0) == 0);
  CHECK(rowsCondition(*m).evidence.find("does not read it as the rows of A") != std::string::npos);
  // Read transposed (gemm transA): the reader's rows are the norm's columns.
  const Node *p = producer(*g, "p");
  CHECK_FALSE(p->props.has(MemProperty::RematerializableIntermediate));
  CHECK(rowsCondition(*p).evidence.rfind("gemm (", 0) == 0);
}

TEST_CASE("row norms: folded into every reader's group, priced, recorded") {
  std::unique_ptr<Graph> g = annotated();
  // No cost function: every norm is a kernel of its own.
  Partition plain = partitionGraph(*g);
  CHECK(plain.remat.empty());
  CHECK(names(groupOf(plain, "y").inputs) == "r,w");

  FusionOptions fo;
  int probes = 0;
  fo.kernelCost = [&](const KernelGroup &k) {
    ++probes;
    // A reader holding the norm is priced 1 us above its plain form; the norm's kernel 5 us.
    bool norm = k.anchor->op() == Op::LayerNorm;
    bool folded = !norm && k.nodes.size() > 1;
    return norm ? 5.0 : folded ? 11.0 : 10.0;
  };
  Partition p = partitionGraph(*g, fo);
  CHECK(probes == 5); // the norm, its two readers plain, then folded
  REQUIRE(p.remat.size() == 1);
  const RematDecision &d = p.remat[0];
  CHECK(d.what.rfind("layer_norm ", 0) == 0);
  CHECK(d.values == std::vector<std::string>{"n"});
  CHECK(d.consumers == 2);
  CHECK(d.storeUs == 25.0);
  CHECK(d.recomputeUs == 22.0);
  CHECK(d.recomputed);
  // Each reader holds the norm (and the reshape between), reads the norm's input, and the
  // reshape is no alias any more.
  const KernelGroup &y = groupOf(p, "y");
  CHECK(names(y.nodes) == "n,r,y");
  CHECK(names(y.inputs) == "x,g,b,w");
  CHECK(names(y.outputs) == "y");
  const KernelGroup &y2 = groupOf(p, "y2");
  CHECK(names(y2.nodes) == "n,y2");
  CHECK(names(y2.inputs) == "x,g,b,w2");
  for (const Node *v : p.views)
    CHECK(v->result(0)->name() != "r");
  for (const KernelGroup &k : p.groups)
    CHECK(k.anchor != producer(*g, "n"));

  // Priced higher: stored, and the partition is the plain one.
  fo.kernelCost = [](const KernelGroup &k) {
    return k.anchor->op() == Op::LayerNorm ? 1.0 : k.nodes.size() > 1 ? 20.0 : 10.0;
  };
  Partition q = partitionGraph(*g, fo);
  REQUIRE(q.remat.size() == 1);
  CHECK_FALSE(q.remat[0].recomputed);
  CHECK(q.remat[0].storeUs == 21.0);
  CHECK(q.remat[0].recomputeUs == 40.0);
  CHECK(names(groupOf(q, "y").nodes) == "y");
  CHECK(names(groupOf(q, "y").inputs) == "r,w");
  // The policy can force the fold, or keep every norm a kernel.
  fo.rowNorms = RowNormPolicy::Fold;
  CHECK(names(groupOf(partitionGraph(*g, fo), "y").nodes) == "n,r,y");
  fo.rowNorms = RowNormPolicy::Store;
  Partition s = partitionGraph(*g, fo);
  CHECK(s.remat.empty());
  CHECK(names(groupOf(s, "y").nodes) == "y");
}
