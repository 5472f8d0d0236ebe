// Tests of the partition into kernel groups (lower/fusion.h) on small hand-written graphs:
// anchors with prologue / epilogue membership, elementwise nodes shared by several groups
// (computed once, with their producer or alone), the single-output rule of contraction
// epilogues, the one-shape rule of pointwise groups, views and storageOf, cycle avoidance (joins
// and recomputed copies), group inputs / outputs in first-use order, a valid execution order,
// and determinism.
#include "ir/parser.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "plan/cost_model.h"
#include "plan/planner.h"
#include "target/target.h"

#include <doctest/doctest.h>

#include <algorithm>

using namespace aicf;

namespace {

// "kind{v1,v2|in:a,b|out:c}" summary of one group, by value names.
std::string describe(const KernelGroup &g) {
  std::string s = g.kind + "{";
  for (size_t i = 0; i < g.nodes.size(); ++i)
    s += (i ? "," : "") + g.nodes[i]->result(0)->name();
  s += "|in:";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    s += (i ? "," : "") + g.inputs[i]->name();
  s += "|out:";
  for (size_t i = 0; i < g.outputs.size(); ++i)
    s += (i ? "," : "") + g.outputs[i]->name();
  return s + "}";
}

std::vector<std::string> describeAll(const Partition &p) {
  std::vector<std::string> out;
  for (const KernelGroup &g : p.groups)
    out.push_back(describe(g));
  return out;
}

// Every node is in exactly one group or is a view, except folded layout ops (and the reshapes
// of their chains), which are in every group reading them, and elementwise nodes recomputed in
// several groups (rule 5), none of which stores them; groups are in a valid execution order.
void checkInvariants(const Graph &g, const Partition &p) {
  std::vector<const Node *> seen, folded;
  for (const LayoutDecision &d : p.layout)
    if (d.folded)
      folded.push_back(d.node);
  auto isFolded = [&](const Node *n) {
    while (n) {
      if (std::find(folded.begin(), folded.end(), n) != folded.end())
        return true;
      n = n->info().has(VIEW) ? n->operand(0)->def() : nullptr;
    }
    return false;
  };
  for (const Node *n : g.nodes())
    if (isFolded(n))
      seen.push_back(n);
  std::vector<const Node *> grouped;
  std::vector<const Value *> stored;
  for (const KernelGroup &kg : p.groups) {
    CHECK(kg.id == static_cast<int>(&kg - p.groups.data()));
    for (const Node *n : kg.nodes)
      if (!isFolded(n))
        grouped.push_back(n);
    stored.insert(stored.end(), kg.outputs.begin(), kg.outputs.end());
    CHECK(std::is_sorted(kg.nodes.begin(), kg.nodes.end(), [&](const Node *a, const Node *b) {
      return g.nodeIndex(a) < g.nodeIndex(b);
    }));
  }
  std::sort(grouped.begin(), grouped.end());
  for (auto it = grouped.begin(); it != grouped.end();) {
    auto end = std::upper_bound(it, grouped.end(), *it);
    if (end - it > 1) { // recomputed: elementwise, stored by none of its groups
      CHECK((*it)->info().has(EW));
      CHECK(std::find(stored.begin(), stored.end(), (*it)->result(0)) == stored.end());
    }
    seen.push_back(*it);
    it = end;
  }
  for (const Node *n : p.views)
    seen.push_back(n);
  CHECK(seen.size() == g.numNodes());
  std::sort(seen.begin(), seen.end());
  CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
  // Execution order: a group's inputs are graph inputs, weights, or (through views) outputs of
  // earlier groups.
  std::vector<const Value *> ready;
  for (const Value *v : g.inputs())
    ready.push_back(v);
  for (const KernelGroup &kg : p.groups) {
    for (const Value *in : kg.inputs) {
      const Value *s = storageOf(in);
      bool ok = s->isWeight() || std::find(ready.begin(), ready.end(), s) != ready.end();
      CHECK_MESSAGE(ok, "group ", kg.id, " reads %", in->name(), " before it is computed");
    }
    for (const Value *o : kg.outputs)
      ready.push_back(o);
  }
}

Partition partitionText(const char *text, std::unique_ptr<Graph> &keep,
                        const FusionOptions &opts = {}) {
  keep = parseGraph(text, "fusion_test.mcir");
  Partition p = partitionGraph(*keep, opts);
  checkInvariants(*keep, p);
  return p;
}

} // namespace

TEST_CASE("fusion: an anchor takes its prologue and epilogue") {
  std::unique_ptr<Graph> g;
  Partition p =
      partitionText(R"(graph @t(%x: f32[4,8], %w: f32[8,16], %b: f32[16]) -> (%y: f32[4,16]) {
  %xe = exp(%x) : f32[4,8]
  %m = matmul(%xe, %w) : f32[4,16]
  %a = add(%m, %b) : f32[4,16]
  %y = relu(%a) : f32[4,16]
  return %y
}
)",
                    g);
  REQUIRE(p.groups.size() == 1);
  CHECK(describe(p.groups[0]) == "matmul{xe,m,a,y|in:x,w,b|out:y}");
  CHECK(p.groups[0].anchor == g->findValue("m")->def());
  CHECK(recipeFor(p.groups[0]) == "tiled_contraction");
}

TEST_CASE("fusion: a shared elementwise node is computed once") {
  std::unique_ptr<Graph> g;
  SUBCASE("alone, when its producer is an input") {
    Partition p = partitionText(R"(graph @t(%x: f32[4,8]) -> (%s: f32[4], %m: f32[4]) {
  %e = exp(%x) : f32[4,8]
  %s = reduce_sum(%e) {axes = [1], keepdims = 0} : f32[4]
  %m = reduce_max(%e) {axes = [1], keepdims = 0} : f32[4]
  return %s, %m
}
)",
                                g);
    CHECK(describeAll(p) == std::vector<std::string>{"fused_elementwise{e|in:x|out:e}",
                                                     "reduce_sum{s|in:e|out:s}",
                                                     "reduce_max{m|in:e|out:m}"});
  }
  SUBCASE("with its producer, whose group then has two outputs") {
    Partition p =
        partitionText(R"(graph @t(%x: f32[4,8]) -> (%y: f32[4,8], %s: f32[4], %t: f32[8,4]) {
  %r = reduce_max(%x) {axes = [1], keepdims = 1} : f32[4,1]
  %e = neg(%r) : f32[4,1]
  %y = sub(%x, %e) : f32[4,8]
  %s = reduce_sum(%y) {axes = [1], keepdims = 0} : f32[4]
  %t = transpose(%y) {perm = [1, 0]} : f32[8,4]
  return %y, %s, %t
}
)",
                      g);
    CHECK(describeAll(p) == std::vector<std::string>{
                                "reduce_max{r,e|in:x|out:e}", "fused_elementwise{y|in:x,e|out:y}",
                                "reduce_sum{s|in:y|out:s}", "transpose{t|in:y|out:t}"});
  }
}

TEST_CASE("fusion: contraction epilogues keep one output") {
  std::unique_ptr<Graph> g;
  // %m feeds relu and add: relu cannot join the matmul (the matmul result would be a second
  // output), so relu and add form a pointwise group reading %m.
  Partition p = partitionText(R"(graph @t(%x: f32[4,8], %w: f32[8,16]) -> (%y: f32[4,16]) {
  %m = matmul(%x, %w) : f32[4,16]
  %r = relu(%m) : f32[4,16]
  %y = add(%m, %r) : f32[4,16]
  return %y
}
)",
                              g);
  CHECK(describeAll(p) ==
        std::vector<std::string>{"matmul{m|in:x,w|out:m}", "fused_elementwise{r,y|in:m|out:y}"});
  // A reduction anchor writes every output: the same shape joins it.
  Partition q = partitionText(R"(graph @t(%x: f32[4,8]) -> (%y: f32[4]) {
  %m = reduce_sum(%x) {axes = [1], keepdims = 0} : f32[4]
  %r = relu(%m) : f32[4]
  %y = add(%m, %r) : f32[4]
  return %y
}
)",
                              g);
  CHECK(describeAll(q) == std::vector<std::string>{"reduce_sum{m,r,y|in:x|out:y}"});
}

TEST_CASE("fusion: pointwise groups keep one output shape") {
  std::unique_ptr<Graph> g;
  // %a [8] is needed by %c outside %b's shape [3,8], so %b starts its own group; %c joins %a.
  Partition p = partitionText(R"(graph @t(%x: f32[8], %y: f32[3,8]) -> (%b: f32[3,8], %c: f32[8]) {
  %a = exp(%x) : f32[8]
  %b = add(%a, %y) : f32[3,8]
  %c = neg(%a) : f32[8]
  return %b, %c
}
)",
                              g);
  CHECK(describeAll(p) == std::vector<std::string>{"fused_elementwise{a,c|in:x|out:a,c}",
                                                   "fused_elementwise{b|in:a,y|out:b}"});
  // Without the second consumer the broadcast chain is one group (exp recomputed per row).
  Partition q = partitionText(R"(graph @t(%x: f32[8], %y: f32[3,8]) -> (%b: f32[3,8]) {
  %a = exp(%x) : f32[8]
  %b = add(%a, %y) : f32[3,8]
  return %b
}
)",
                              g);
  CHECK(describeAll(q) == std::vector<std::string>{"fused_elementwise{a,b|in:x,y|out:b}"});
}

TEST_CASE("fusion: views alias their source and end fusion") {
  std::unique_ptr<Graph> g;
  Partition p = partitionText(R"(graph @t(%x: f32[4,8]) -> (%y: f32[32]) {
  %e = exp(%x) : f32[4,8]
  %r = reshape(%e) {shape = [32]} : f32[32]
  %y = neg(%r) : f32[32]
  return %y
}
)",
                              g);
  REQUIRE(p.views.size() == 1);
  CHECK(p.views[0]->result(0)->name() == "r");
  CHECK(describeAll(p) == std::vector<std::string>{"fused_elementwise{e|in:x|out:e}",
                                                   "fused_elementwise{y|in:r|out:y}"});
  CHECK(storageOf(g->findValue("r")) == g->findValue("e"));
  CHECK(storageOf(g->findValue("x")) == g->findValue("x"));
}

TEST_CASE("fusion: a join that would make the group graph cyclic is refused") {
  std::unique_ptr<Graph> g;
  // add(%m, %u) cannot join the reduction: %u (two transposes of %m) depends on it. It joins
  // the second transpose instead, as its epilogue. (Transposes as kernels: layout folding off.)
  FusionOptions noFold;
  noFold.foldLayout = false;
  Partition p = partitionText(R"(graph @t(%x: f32[4,8]) -> (%y: f32[4,1]) {
  %m = reduce_max(%x) {axes = [1], keepdims = 1} : f32[4,1]
  %t = transpose(%m) {perm = [1, 0]} : f32[1,4]
  %u = transpose(%t) {perm = [1, 0]} : f32[4,1]
  %y = add(%m, %u) : f32[4,1]
  return %y
}
)",
                              g, noFold);
  CHECK(describeAll(p) == std::vector<std::string>{"reduce_max{m|in:x|out:m}",
                                                   "transpose{t|in:m|out:t}",
                                                   "transpose{u,y|in:t,m|out:y}"});
}

TEST_CASE("fusion: a recomputed group is not copied into a group it reads from") {
  // Reduced from the unrolled LSTM of testdata/if_branch/vad_if_op17 on the H100 plan: each
  // step's state c_t reads a slice of its step's matmul m_t (a folded layout op) and c_{t-1};
  // each m_{t+1} reads c_t. Rule 5 recomputes c1 in m2's group and in c2's. c2's group then
  // holds a copy of c1, which m2 reads: m2's group is listed among its consumers, though it
  // has its own copy, while c2 reads m2's result. Copied there, m2's group would read itself;
  // with c3's group (reading m3, listed for the same reason) copied there too, m2's and m3's
  // groups each read the other's result: a cyclic group graph, an internal error in finish().
  // c2 stays a kernel of its own; c3 is recomputed in y's and z's groups.
  const char *text =
      R"(graph @t(%x: f32[1,4], %w2: f32[4,8], %w3: f32[4,8], %w4: f32[4,4], %w5: f32[4,4]) -> (%y: f32[1,4], %z: f32[1,4]) {
  %c1 = tanh(%x) : f32[1,4]
  %m2 = matmul(%c1, %w2) : f32[1,8]
  %s2 = slice(%m2) {axes = [1], ends = [4], starts = [0], steps = [1]} : f32[1,4]
  %c2 = add(%s2, %c1) : f32[1,4]
  %m3 = matmul(%c2, %w3) : f32[1,8]
  %s3 = slice(%m3) {axes = [1], ends = [4], starts = [0], steps = [1]} : f32[1,4]
  %c3 = add(%s3, %c2) : f32[1,4]
  %y = matmul(%c3, %w4) : f32[1,4]
  %z = matmul(%c3, %w5) : f32[1,4]
  return %y, %z
}
)";
  std::vector<std::string> want = {
      "matmul{c1,m2|in:x,w2|out:m2}", "fused_elementwise{c1,s2,c2|in:x,m2|out:c2}",
      "matmul{m3|in:c2,w3|out:m3}", "matmul{s3,c3,y|in:m3,c2,w4|out:y}",
      "matmul{s3,c3,z|in:m3,c2,w5|out:z}"};
  std::unique_ptr<Graph> g;
  SUBCASE("the H100 plan's cost model") {
    Target h100 = Target::parseSpec("cuda:sm_90").loaded();
    PlannerOptions po;
    po.planFor = h100;
    FusionOptions fo;
    fo.rematCost = rematCostFor(h100.hw);
    fo.layoutCost = layoutCostFor(h100.hw);
    fo.kernelCost = kernelCostFor(h100.hw, po);
    Partition p = partitionText(text, g, fo);
    CHECK(describeAll(p) == want);
  }
  SUBCASE("recomputing always priced lower") {
    FusionOptions fo;
    fo.rematCost = [](const KernelGroup &, int64_t, int64_t, int) { return RematCost{1, 0}; };
    Partition p = partitionText(text, g, fo);
    CHECK(describeAll(p) == want);
    // c1 and c3 recomputed; c2's copy refused before it was priced.
    REQUIRE(p.remat.size() == 2);
    CHECK(p.remat[0].values == std::vector<std::string>{"c1"});
    CHECK(p.remat[1].values == std::vector<std::string>{"c3"});
  }
}

TEST_CASE("fusion: multi-result anchors take prologues but no epilogue") {
  std::unique_ptr<Graph> g;
  FusionOptions noFold; // a split as a kernel
  noFold.foldLayout = false;
  Partition p = partitionText(R"(graph @t(%x: f32[2,6]) -> (%a: f32[2,2], %c: f32[2,4]) {
  %s = sigmoid(%x) : f32[2,6]
  %p, %q = split(%s) {axis = 1, sizes = [2, 4]} : f32[2,2], f32[2,4]
  %a = relu(%p) : f32[2,2]
  %c = neg(%q) : f32[2,4]
  return %a, %c
}
)",
                              g, noFold);
  CHECK(describeAll(p) == std::vector<std::string>{"split{s,p|in:x|out:p,q}",
                                                   "fused_elementwise{a|in:p|out:a}",
                                                   "fused_elementwise{c|in:q|out:c}"});
  CHECK(recipeFor(p.groups[0]) == "data_movement");
}

TEST_CASE("fusion: chains of prologue groups fold into their consumer") {
  std::unique_ptr<Graph> g;
  // The mask chain (cast, sub, mul) reads only an input: a pointwise group whose one consumer
  // is the attention, into which it folds.
  Partition p = partitionText(
      R"(graph @t(%q: f32[1,2,4,8], %k: f32[1,2,4,8], %v: f32[1,2,4,8], %m: i64[1,1,1,4]) -> (%y: f32[1,2,4,8]) {
  %one = weight f32[] = [1.0]
  %big = weight f32[] = [-10000.0]
  %c = cast(%m) {to = "f32"} : f32[1,1,1,4]
  %d = sub(%one, %c) : f32[1,1,1,4]
  %e = mul(%d, %big) : f32[1,1,1,4]
  %y = attention(%q, %k, %v, %e) {scale = 0.35} : f32[1,2,4,8]
  return %y
}
)",
      g);
  CHECK(describeAll(p) == std::vector<std::string>{"attention{c,d,e,y|in:m,one,big,q,k,v|out:y}"});
}

TEST_CASE("fusion: the partition is deterministic") {
  const char *text = R"(graph @t(%x: f32[4,8], %w: f32[8,8]) -> (%y: f32[4,8], %z: f32[4]) {
  %a = exp(%x) : f32[4,8]
  %b = matmul(%a, %w) : f32[4,8]
  %c = tanh(%b) : f32[4,8]
  %d = mul(%c, %a) : f32[4,8]
  %z = reduce_sum(%d) {axes = [1], keepdims = 0} : f32[4]
  %y = sigmoid(%d) : f32[4,8]
  return %y, %z
}
)";
  std::unique_ptr<Graph> g1, g2;
  Partition p1 = partitionText(text, g1);
  Partition p2 = partitionText(text, g2);
  CHECK(describeAll(p1) == describeAll(p2));
  // tanh and mul join the matmul as its epilogue (each value read once), sigmoid cannot (the
  // matmul keeps one output); exp, read only by the matmul group, folds in as its prologue.
  CHECK(describeAll(p1) == std::vector<std::string>{"matmul{a,b,c,d|in:x,w|out:d}",
                                                    "reduce_sum{z|in:d|out:z}",
                                                    "fused_elementwise{y|in:d|out:y}"});
}
