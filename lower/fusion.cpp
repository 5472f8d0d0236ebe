// Fusion into kernel groups (see fusion.h). Deterministic, graph order throughout; the rules:
//
//  0. Layout ops (issue 17). A transpose, split, slice, expand or concat (ir/index_map.h:
//     isLayoutOp) is folded into its readers unless that costs more: it then belongs to no group
//     of its own; every group reading its result (directly or through further layout ops and
//     reshapes, which fold with it) holds a copy of it and reads the operand through the
//     composed index map (GroupExpr::at), so no kernel moves its bytes. It is materialised as a
//     data-movement kernel when its result (through the chain) is a graph output, when a reader
//     cannot read through a map, or when the cost function (FusionOptions::layoutCost) prices
//     the reads through the map (strided, uncoalesced) above one kernel writing the result
//     once. The producer side comes first: a transpose or concat whose every operand is
//     computed by a kernel for it alone (directly or through reshapes) is stored instead — each
//     producer writes its operand straight into the layout op's result through the scatter map
//     (KernelGroup::storeThrough), so a concat is one buffer its producers fill and a transpose
//     is the producer's store order. A concat is always stored when it can be (its readers then
//     read one plain buffer, not a select per element); a transpose when the producer's stores
//     stay contiguous along its innermost dim, or when the alternative is a kernel. Every
//     decision is recorded with the maps and both costs (Partition::layout). Over symbolic dims
//     (issue 21) the maps, which hold planning-point integers, only price and record the
//     decision: readers read a folded op, and producers store through a stored one, op by op
//     from the dims' expressions (GroupExpr, storeIndex); a chain read through a reshape that
//     regroups symbolic dims (a division by a run-time size per element) is materialised.
//  1. Views. A VIEW node (reshape) is no kernel: its result aliases its operand's buffer
//     (storageOf). A view also ends fusion: a consumer reading a view reads a materialised
//     buffer, so the view's source is an output of the group that computes it. A reshape of a
//     folded layout op's result is part of the folded chain instead (rule 0).
//  2. Anchors. Every node that is neither elementwise nor a view starts its own group.
//  3. Epilogues ("stays with its producer"). Each elementwise node, in graph order, joins the
//     group that produced one of its operands (the first eligible one, in operand order):
//       * anchor groups take elementwise consumers of the anchor's result (or of an epilogue
//         value) whose shape is the anchor's result shape, so the epilogue runs per output
//         element before the store;
//       * anchors whose recipe writes one result only (contraction, norms, attention: the
//         recipes of lower/recipe_tiled_contraction.cpp ...) take a node only when the value it
//         reads from the group has no other user: the group keeps exactly one output;
//       * pure elementwise groups take any elementwise consumer as long as every output of the
//         grown group has one shape (the pointwise recipe iterates over that shape);
//       * the join must not make the group graph cyclic: no other operand of the node may
//         depend, through other groups, on the joined group.
//     A node with several consumers in different groups is therefore computed exactly once:
//     with its producer (its result becomes an output of that group), or in a group of its own.
//     Otherwise the node starts a new pure elementwise group.
//  4. Prologues ("fused into its only consumer"). A pure elementwise group all of whose outputs
//     are read by one other group only (an anchor group whose recipe inlines operands through
//     GroupExpr, or another elementwise group), and none of which is a graph output, is merged
//     into that group; its nodes are then recomputed where the consumer reads them, never
//     stored. Consumers are visited last-first so chains fold in one sweep. A consumer that
//     reads a window of its operand (a conv or pool, several taps per stride) evaluates the
//     prologue at every tap: with a hardware description that fold is priced (tryMerge) and
//     recorded as a rematerialisation decision with one consumer.
//  5. Rematerialisation (with a hardware description). A pure elementwise group whose nodes
//     carry rematerializable_intermediate (certified by annotate-properties), read by several
//     groups, all of which inline operands, none through a view and none a graph output, is
//     copied into every consumer when the cost model prices recomputing it there below storing
//     it once and reloading it in each; its nodes then belong to several groups. Each copy
//     gives its consumer the group's reads: refused when a consumer computes, directly or
//     through other groups, a value the group reads (the group graph would be cyclic).
//     Branch conditions are exempt from rules 4 and 5 (and a branch select does not join its
//     condition's group by rule 3): the one-element condition of a where choosing between the
//     branches of an If chosen at run time (isBranchSelect) is stored, so that host plans read
//     it before the branches' steps and skip the side not taken (plan/branch_guards.h).
//  6. Size cap. No group grows past FusionOptions::maxGroupNodes nodes (by rules 3-5): a very
//     long elementwise chain becomes a sequence of kernels of at most that many nodes, each a
//     round trip through memory that costs little next to its work, and each a function the
//     host compiler optimises in bounded time (g++'s CFG cleanup grows quadratically with the
//     selects of one loop body). The cut chain's kernels are identical, so codegen emits one.
//  7. Row norms (with a kernel cost function). A layer_norm or rms_norm over the last axis whose
//     result is read only as contractions' A along that axis (ir/norm_readers.h), certified
//     rematerializable_intermediate, is copied with the reshapes between into every reader's
//     group when the planner prices those kernels (each computing its tile rows' statistics and
//     normalising A as it stages it) below the norm's kernel plus the readers' kernels as they
//     are, or within the model's error of them and moving fewer bytes (kTimeBand); the decision
//     is recorded with both times (Partition::remat). The norm's result is then never stored:
//     its write and the readers' reads of it leave the plan.
//  8. Chained contractions (with a kernel cost function). A matmul / gemm (transA 0, f32)
//     whose result (through elementwise nodes of its shape) is read only as the A operand of
//     another matmul / gemm over the same batch (split-chains' slices are a batch), in a group
//     of its own (plus what rule 7 copied in: a row norm and its reshapes), is merged into the
//     reader's group, with any other contraction over the same X that those elementwise nodes
//     combine with it (SwiGLU's gate beside its up projection), when the planner prices the
//     merged kernel (lower/recipe_chained_contraction.cpp: each row tile computes the hidden
//     rows one tile at a time and multiplies them into its output tile at once) clearly below
//     the kernels it replaces, or within the model's error of them and moving fewer bytes
//     (kTimeBand); the decision is recorded with both times
//     (Partition::remat, kind Chain). The hidden result is never stored: an MLP's [M, H]
//     activation leaves the plan.
//  9. Norm epilogues (with a kernel cost function). A layer_norm / rms_norm over the last axis,
//     alone in its group, whose input is the only output of a contraction group (plain or
//     chained) and read by nothing else, is applied in that group after the contraction's epilogue:
//     the tiles hold whole output rows, compute their statistics and store the normalised
//     rows (BERT's post-LN), when the planner prices it lower (or as fast within the model's
//     error and fewer bytes); recorded with both times (Partition::remat, kind NormEpilogue).
//     The un-normalised rows are never stored.
// 10. Conv chains (with a kernel cost function; host plans' channel-blocked convs). A 1 x 1
//     blocked_conv (the projection) whose input is read only by it and computed by a depthwise
//     blocked_conv alone in its group (stride at most its window's height, padding less than
//     it), itself reading a value computed only for it by a 1 x 1 blocked_conv alone in its
//     group (the expansion; optional; its input stored, not a folded layout op's result), is
//     merged with them into one kernel
//     (lower/recipe_conv_chain.cpp: each block keeps the expanded rows its depthwise windows
//     read in a ring and feeds the depthwise rows straight to the projection) when the planner
//     prices it lower, or within the model's error and fewer bytes (kTimeBand); recorded with
//     both times (Partition::remat, kind ConvChain). The expanded and depthwise tensors are
//     never stored.
// 11. Data dims (issue 51). A node that sets a data dim (SETS_DIM: non_zero, set_dim,
//     non_max_suppression, choose) anchors a group that takes no epilogue (rule 3), stores no
//     result through a layout op (rule 0's producer side) and stores every result, read elsewhere
//     or not. Its kernel writes its results packed at the length it computes, and the runtime
//     sets the dim from the count (the last result) only after the step: a consumer fused into
//     that kernel would see the dim's stale value (a shape, a stride, a loop bound), a store
//     through a layout op's map would place elements by strides from that stale value, and a
//     count not stored could not be read at all (non_max_suppression also reads its rows back).
//     Its consumers therefore run in later steps; prologues are fine (earlier steps' values).
//     Likewise no producer stores through a layout op whose result a data dim sizes (a concat of
//     pieces of run-time lengths): the producer may run before that dim is set. And every group
//     touching a value a data dim sizes comes after the dim's setter in the order, whether or not
//     it reads the count (a slice to a run-time length reads the dim only).
// Rules 7-10 copy or merge only where the group graph stays acyclic, as rules 3 and 5 do.
// Groups are finally ordered topologically, ties broken by their first node's position.
//
// Cost: near-linear in the graph. Group membership is groupOf_ (plus the copies of rule 5),
// never a scan of a group's node list; the group-dependency search is pruned by node position
// (a group can depend on another only if it holds a later node); the final order is Kahn's
// algorithm with a heap.
#include "lower/fusion_partitioner.h"

#include "ir/norm_readers.h"
#include "ir/precision.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace aicf {

namespace fusion {

// Whether two values have the same dims at every point of the symbolic dims' ranges: their
// planning shapes may agree by chance ([n, 128] and [128, 128] planned at n = 128).
bool sameDims(const TensorType &a, const TensorType &b) {
  return a.shape == b.shape && symShapeOf(a) == symShapeOf(b);
}

// Whether reading through reshape n divides by a symbolic size per element (issue 21): the
// dims it regroups, past those it keeps at either end, are not all static ([3 * seq, 128] to
// [3, seq, 128] splits 3 * seq by seq; [seq, 128] to [seq, 4, 32] only splits 128).
bool symbolicRegroup(const Node &n) {
  std::vector<SymExpr> from = symShapeOf(n.operand(0)->type()),
                       to = symShapeOf(n.result(0)->type());
  auto [lead, tail] = keptDims(from, to);
  auto constant = [](const SymExpr &e) { return e.isConstant(); };
  return !std::all_of(from.begin() + static_cast<std::ptrdiff_t>(lead),
                      from.end() - static_cast<std::ptrdiff_t>(tail), constant) ||
         !std::all_of(to.begin() + static_cast<std::ptrdiff_t>(lead),
                      to.end() - static_cast<std::ptrdiff_t>(tail), constant);
}

Caps capsFor(const Node *anchor) {
  Caps c;
  if (!anchor)
    return c;
  const OpInfo &info = anchor->info();
  // Run by the runtime (over its body's steps; a fail step's error): absorbs nothing.
  if (anchor->op() == Op::Loop || anchor->op() == Op::Fail)
    return Caps{false, false, true};
  // Sets a data dim: nothing runs after it in its kernel (rule 11).
  if (info.has(SETS_DIM)) {
    c.epilogue = false;
    return c;
  }
  if (anchor->numResults() != 1) { // split: several results, no single epilogue shape
    c.epilogue = false;
    return c;
  }
  // A scatter's element is final only after its last update (lower/recipe_scatter.cpp): no
  // epilogue runs on it before the store.
  if (anchor->op() == Op::ScatterElements || anchor->op() == Op::ScatterND) {
    c.epilogue = false;
    return c;
  }
  switch (anchor->op()) {
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::LayerNorm:
  case Op::RmsNorm:
  case Op::Attention: c.multiOutput = false; return c;
  default: break;
  }
  if (info.has(CONTRACT))
    c.multiOutput = false;
  // A pointwise blocked conv reads its input where it lies (the micro-kernel's k-block view);
  // with a prologue each tile first fills a band of its rows (lower/contraction_conv_specs.cpp),
  // which pays where the prologue's own kernel would store and re-read a wide operand
  // (DenseNet's BN -> ReLU after each concat) and not where that kernel is cheap.
  if (anchor->op() == Op::BlockedConv && anchor->i("depthwise") == 0 &&
      anchor->i("blocked_input") != 0 &&
      anchor->ints("kernel_shape") == std::vector<int64_t>{1, 1} &&
      anchor->ints("strides") == std::vector<int64_t>{1, 1} &&
      anchor->ints("pads") == std::vector<int64_t>{0, 0, 0, 0})
    c.pricedPrologue = true;
  return c;
}

Partitioner::Partitioner(const Graph &g, const FusionOptions &opts)
    : g_(g), opts_(opts), nodes_(g.nodes()) {
  for (size_t i = 0; i < nodes_.size(); ++i)
    index_[nodes_[i]] = static_cast<int>(i);
  groupOf_.assign(nodes_.size(), -1);
  isEpilogue_.assign(nodes_.size(), 0);
  outputs_.insert(g.outputs().begin(), g.outputs().end());
  for (Node *n : nodes_)
    if (n->info().has(SETS_DIM))
      dataDims_.insert(n->s("dim"));
  for (Node *n : nodes_)
    for (Value *o : n->operands()) {
      auto &us = users_[o];
      if (us.empty() || us.back() != n)
        us.push_back(n);
    }
}

// The rules in the order they run (the list at the top of this file: rule 6, the size cap, and
// rule 11, data dims, are checks inside the others), each with why it exists and when it runs.
const Partitioner::Rule Partitioner::kRules[] = {
    {"0 layout ops",
     "a transpose, split, slice, expand or concat read or stored through its index map moves no "
     "bytes of its own",
     nullptr, &Partitioner::decideLayout},
    {"1-2 views and anchors",
     "a view aliases its operand; every other non-elementwise node is a kernel", nullptr,
     &Partitioner::viewsAndAnchors},
    {"3 epilogues", "an elementwise consumer applied before the anchor's store saves a round trip",
     nullptr, &Partitioner::joinEpilogues},
    {"4 prologues", "an elementwise group read by one group only is recomputed there, never stored",
     nullptr, &Partitioner::foldPrologues},
    {"5 rematerialisation",
     "recomputing a cheap elementwise group in each reader can cost less than storing it once",
     [](const FusionOptions &o) { return static_cast<bool>(o.rematCost); },
     &Partitioner::rematerialize},
    {"7 row norms", "a norm recomputed as its contractions stage A is never stored",
     [](const FusionOptions &o) {
       return static_cast<bool>(o.kernelCost) && o.rowNorms != RowNormPolicy::Store;
     },
     &Partitioner::foldRowNorms},
    {"8 chained contractions", "an MLP's hidden activation computed tile by tile is never stored",
     [](const FusionOptions &o) {
       return static_cast<bool>(o.kernelCost) && o.chains != FusePolicy::Store;
     },
     &Partitioner::chainContractions},
    {"9 norm epilogues", "a post-norm applied to the contraction's whole-row tiles is never stored",
     [](const FusionOptions &o) {
       return static_cast<bool>(o.kernelCost) && o.normEpilogues != FusePolicy::Store;
     },
     &Partitioner::foldNormEpilogues},
    {"10 conv chains",
     "an inverted residual's expanded and depthwise tensors kept in a ring are never stored",
     [](const FusionOptions &o) {
       return static_cast<bool>(o.kernelCost) && o.convChains != FusePolicy::Store;
     },
     &Partitioner::chainConvs},
};

Partition Partitioner::run() {
  Partition p;
  for (const Rule &r : kRules)
    if (!r.enabled || r.enabled(opts_))
      (this->*r.apply)(p);
  finish(p);
  return p;
}

// Rules 1-2: views and anchors. Layout ops folded into their readers float and those stored by
// their producers are written by them (rule 0): no group of their own.
void Partitioner::viewsAndAnchors(Partition &p) {
  for (Node *n : nodes_) {
    if (floating_[idx(n)] || stored_[idx(n)])
      continue;
    if (n->info().has(VIEW))
      p.views.push_back(n);
    else if (!n->info().has(EW))
      newGroup(n, n);
  }
}

// The groups `v` is read from: the group computing v's storage or, for a value of a folded
// layout chain, the groups computing the chain's sources.
void Partitioner::sourceGroups(const Value *v, std::vector<int> &out) const {
  const Node *d = v->def();
  if (floating(d)) {
    for (const Value *o : d->operands())
      sourceGroups(o, out);
    return;
  }
  storageGroups(v, out);
}
// The nodes reading `v` that belong to groups: its users, looking through folded layout ops.
void Partitioner::readers(const Value *v, std::vector<const Node *> &out) const {
  for (const Node *u : usersOf(v)) {
    if (floating(u)) {
      for (const Value *r : u->results())
        readers(r, out);
    } else {
      out.push_back(u);
    }
  }
}
void Partitioner::newGroup(Node *anchor, Node *first) {
  groups_.push_back(Group{anchor, {}, true, idx(first), idx(first), {}});
  add(static_cast<int>(groups_.size()) - 1, first, /*epilogue=*/false);
}
void Partitioner::add(int gi, Node *n, bool epilogue) {
  Group &grp = groups_[gi];
  grp.nodes.push_back(n);
  if (epilogue)
    isEpilogue_[idx(n)] = 1;
  groupOf_[idx(n)] = gi;
  grp.minIdx = std::min(grp.minIdx, idx(n));
  grp.maxIdx = std::max(grp.maxIdx, idx(n));
  for (const Value *r : n->results())
    grp.resultsByShape[symShapeOf(r->type())].push_back(r);
}
// Rule 6: whether group gi cannot take `more` nodes.
bool Partitioner::full(int gi, size_t more) const {
  return groups_[gi].nodes.size() + more > static_cast<size_t>(opts_.maxGroupNodes);
}
// Whether n is a member of group gi: its owner, or one of rule 5's copies.
bool Partitioner::contains(int gi, const Node *n) const {
  if (!n)
    return false;
  int i = idx(n);
  return groupOf_[i] == gi || copies_.count({gi, i}) > 0;
}
// Whether group gi computes a branch select's condition (isBranchSelect): it must store it.
bool Partitioner::holdsBranchCondition(int gi) const {
  for (const Node *m : groups_[gi].nodes)
    for (const Value *r : m->results())
      for (const Node *u : usersOf(r))
        if (isBranchSelect(*u) && u->operand(0) == r)
          return true;
  return false;
}
// The group whose node defines v directly (views end fusion: -1 for them, for inputs and
// weights).
int Partitioner::directGroup(const Value *v) const {
  const Node *d = v->def();
  if (!d || d->info().has(VIEW))
    return -1;
  return groupOf_[idx(d)];
}
// The groups writing v's storage (through views), added to `out` once each: the group
// computing it, or for the result of a layout op stored by its producers, theirs; none for
// inputs and weights.
void Partitioner::storageGroups(const Value *v, std::vector<int> &out) const {
  const Node *d = storageOf(v)->def();
  if (d && stored_[idx(d)]) {
    for (const Value *o : d->operands())
      storageGroups(o, out);
    return;
  }
  int g = d ? groupOf_[idx(d)] : -1;
  if (g >= 0 && std::find(out.begin(), out.end(), g) == out.end())
    out.push_back(g);
}
// Whether group `from` depends (transitively) on group `target`. A group reaching target
// holds a node after target's first one (a path of nodes leads there from target's), so
// groups wholly before target are not searched.
bool Partitioner::dependsOn(int from, int target) const {
  if (seen_.size() < groups_.size())
    seen_.resize(groups_.size(), 0);
  ++stamp_;
  const int floor = groups_[target].minIdx;
  std::function<bool(int)> visit = [&](int gi) {
    if (gi == target)
      return true;
    if (seen_[gi] == stamp_ || groups_[gi].maxIdx < floor)
      return false;
    seen_[gi] = stamp_;
    std::vector<int> srcs;
    for (const Node *m : groups_[gi].nodes)
      for (const Value *o : m->operands())
        sourceGroups(o, srcs);
    for (int p : srcs)
      if (p != gi && visit(p))
        return true;
    return false;
  };
  return visit(from);
}
// The groups that the nodes of groups `gs` read from, outside `gs`: what those nodes would
// still read from elsewhere if they were copied or merged into other groups. Operands that a
// member of `gs` computes itself (its own nodes, its copies) are no reads.
std::vector<int> Partitioner::externalSources(const std::vector<int> &gs) const {
  auto inside = [&](const Node *d) {
    return d && !floating(d) &&
           std::any_of(gs.begin(), gs.end(), [&](int g) { return contains(g, d); });
  };
  std::vector<int> srcs;
  for (int g : gs)
    for (const Node *m : groups_[g].nodes)
      for (const Value *o : m->operands())
        if (!inside(o->def()))
          sourceGroups(o, srcs);
  srcs.erase(std::remove_if(srcs.begin(), srcs.end(),
                            [&](int p) { return std::find(gs.begin(), gs.end(), p) != gs.end(); }),
             srcs.end());
  return srcs;
}
// Whether giving groups `targets` the reads from groups `srcs` (copying or merging nodes that
// read them into the targets) keeps the group graph acyclic: no source is a target or depends,
// through other groups, on one. (A source depending on a target would then be read by the
// target it needs: two kernels each waiting for the other, which finish() cannot order.)
bool Partitioner::staysAcyclic(const std::vector<int> &srcs,
                               const std::vector<int> &targets) const {
  for (int p : srcs)
    for (int t : targets)
      if (p == t || dependsOn(p, t))
        return false;
  return true;
}
// A value that something outside group gi (with `joining`, when given, counted as a
// member) or the graph's outputs needs.
bool Partitioner::neededOutside(const Value *v, int gi, const Node *joining) const {
  if (outputs_.count(v))
    return true;
  std::vector<const Node *> rs;
  readers(v, rs);
  for (const Node *u : rs)
    if (u != joining && !contains(gi, u))
      return true;
  return false;
}
void Partitioner::finish(Partition &p) {
  // Live groups with sorted nodes.
  std::vector<int> live;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (!groups_[gi].alive)
      continue;
    attachFolded(static_cast<int>(gi));
    std::sort(groups_[gi].nodes.begin(), groups_[gi].nodes.end(),
              [&](const Node *a, const Node *b) { return idx(a) < idx(b); });
    live.push_back(static_cast<int>(gi));
  }
  // Topological order (Kahn), ties by first node position.
  std::vector<std::vector<int>> dependents(groups_.size());
  std::vector<int> pending(groups_.size(), 0); // unfinished producers of each group
  // Rule 11: a group touching a value a data dim sizes runs after the group setting the dim,
  // data edge or not (a slice to a run-time length reads the dim, not the count).
  std::map<std::string, int> setterGroup;
  for (int gi : live)
    for (const Node *m : groups_[gi].nodes)
      if (m->info().has(SETS_DIM))
        setterGroup[m->s("dim")] = gi;
  for (int gi : live) {
    std::unordered_set<int> deps;
    auto dependsOn = [&](int pg) {
      if (pg != gi && deps.insert(pg).second) {
        dependents[pg].push_back(gi);
        ++pending[gi];
      }
    };
    for (const Node *m : groups_[gi].nodes) {
      for (const Value *o : m->operands()) {
        if (o->def() && contains(gi, o->def()))
          continue; // computed inside (a recomputed prologue)
        std::vector<int> srcs;
        storageGroups(o, srcs);
        for (int pg : srcs)
          dependsOn(pg);
      }
      if (setterGroup.empty())
        continue;
      for (const auto *list : {&m->operands(), &m->results()})
        for (const Value *v : *list)
          for (const SymExpr &d : v->type().sym)
            for (const std::string &sym : d.symbols())
              if (auto it = setterGroup.find(sym); it != setterGroup.end())
                dependsOn(it->second);
    }
  }
  // Ready groups by first node position: the same order as picking the earliest ready group
  // each time.
  using Entry = std::pair<int, int>; // (first node position, group)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (int gi : live)
    if (pending[gi] == 0)
      ready.push({idx(groups_[gi].nodes.front()), gi});
  std::vector<int> order;
  while (!ready.empty()) {
    int pick = ready.top().second;
    ready.pop();
    order.push_back(pick);
    for (int d : dependents[pick])
      if (--pending[d] == 0)
        ready.push({idx(groups_[d].nodes.front()), d});
  }
  AICF_CHECK(order.size() == live.size(), "fusion produced a cyclic group graph");
  for (int gi : order) {
    p.groups.push_back(kernelGroup(gi));
    p.groups.back().id = static_cast<int>(p.groups.size()) - 1;
  }
  // Views copied into their readers' groups (rule 7) are no aliases of their own any more.
  p.views.erase(std::remove_if(p.views.begin(), p.views.end(),
                               [&](const Node *v) { return recomputed_.count(v) > 0; }),
                p.views.end());
}
// Group gi as a kernel group (nodes in graph order, its inputs and outputs); id 0.
KernelGroup Partitioner::kernelGroup(int gi) const {
  const Group &grp = groups_[gi];
  KernelGroup kg;
  kg.anchor = grp.anchor;
  kg.kind = grp.anchor ? grp.anchor->name() : "fused_elementwise";
  if (auto it = chained_.find(gi); it != chained_.end())
    kg.chained = it->second;
  if (auto it = normEpilogue_.find(gi); it != normEpilogue_.end())
    kg.normEpilogue = it->second;
  kg.nodes = grp.nodes;
  std::sort(kg.nodes.begin(), kg.nodes.end(),
            [&](const Node *a, const Node *b) { return idx(a) < idx(b); });
  std::unordered_set<const Value *> seen;
  for (const Node *m : kg.nodes)
    for (Value *o : m->operands()) {
      if (o->def() && contains(gi, o->def()))
        continue;
      if (seen.insert(o).second)
        kg.inputs.push_back(o);
    }
  for (const Node *m : kg.nodes)
    for (Value *r : m->results())
      if (!recomputed_.count(m) && !floating(m) && (neededOutside(r, gi) || setsDataDim(m))) {
        kg.outputs.push_back(r);
        if (auto it = sinkOf_.find(r); it != sinkOf_.end())
          kg.storeThrough.push_back(it->second);
      }
  if (grp.anchor && grp.anchor->op() == Op::Loop) { // positional: every operand and result
    kg.inputs = grp.anchor->operands();
    kg.outputs = grp.anchor->results();
  }
  return kg;
}
// Rules 8-10: whether merging groups `from` into group `into` keeps the group graph acyclic:
// no group the merged one reads depends on one of them (it would then read the merged group
// and be read by it). The merged groups' results are read only inside them as the rules pick
// them; the check keeps that assumption from turning into a cycle.
bool Partitioner::mergeStaysAcyclic(int into, const std::vector<int> &from) const {
  std::vector<int> all = from;
  all.push_back(into);
  return staysAcyclic(externalSources(all), all);
}
// Rules 7-9: the planner's price of group g as it stands (its folded layout ops attached).
KernelPrice Partitioner::priceGroup(int g) {
  attachFolded(g);
  return opts_.kernelCost(kernelGroup(g));
}
// Rules 8 and 9: merges the groups `from` into group `into` when the planner prices the merged
// kernel below them (takeForm, passes/price.h) or `fuse` forces it, recording both times in
// `dec`; `mark` sets the merged group's recipe facts (its chain, its norm epilogue), `unmark`
// clears them. Rejected: everything is put back. Returns whether the merge stands.
bool Partitioner::tryMerge(int into, const std::vector<int> &from, bool fuse, RematDecision &dec,
                           const std::function<void()> &mark, const std::function<void()> &unmark) {
  KernelPrice stored = priceGroup(into);
  for (int f : from) {
    KernelPrice k = priceGroup(f);
    stored.us += k.us;
    stored.bytes += k.bytes;
  }
  dec.storeUs = stored.us;
  std::vector<Node *> before = groups_[into].nodes;
  std::set<std::pair<int, int>> copiesBefore = copies_;
  std::vector<std::pair<Node *, int>> owners; // (node, its group before)
  for (int f : from)
    for (Node *m : groups_[f].nodes) {
      if (std::find(groups_[into].nodes.begin(), groups_[into].nodes.end(), m) ==
          groups_[into].nodes.end())
        groups_[into].nodes.push_back(m);
      if (copies_.count({f, idx(m)})) {
        copies_.insert({into, idx(m)});
      } else {
        owners.emplace_back(m, f);
        groupOf_[idx(m)] = into;
      }
    }
  mark();
  KernelPrice merged = priceGroup(into);
  dec.recomputeUs = merged.us;
  dec.recomputed = std::isfinite(merged.us) && (fuse || takeForm(merged, stored, kTimeBand));
  if (!dec.recomputed) {
    groups_[into].nodes = before;
    copies_ = copiesBefore;
    for (const auto &[m, f] : owners)
      groupOf_[idx(m)] = f;
    unmark();
    return false;
  }
  for (int f : from) {
    groups_[into].minIdx = std::min(groups_[into].minIdx, groups_[f].minIdx);
    groups_[into].maxIdx = std::max(groups_[into].maxIdx, groups_[f].maxIdx);
    groups_[f].nodes.clear();
    groups_[f].alive = false;
  }
  return true;
}

} // namespace fusion

bool isBranchSelect(const Node &n) {
  if (n.op() != Op::Where)
    return false;
  const Value *c = n.operand(0);
  return !c->hasData() && c->type().isStatic() && c->type().numel() == 1;
}

Partition partitionGraph(const Graph &g, const FusionOptions &opts) {
  Partition p = fusion::Partitioner(g, opts).run();
  for (KernelGroup &grp : p.groups)
    for (const DimRange &d : g.dims())
      grp.dims.push_back(d.name);
  return p;
}

const Value *storageOf(const Value *v) {
  while (v->def() && v->def()->info().has(VIEW))
    v = v->def()->operand(0);
  return v;
}

} // namespace aicf
