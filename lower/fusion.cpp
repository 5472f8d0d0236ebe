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
//     stored. Consumers are visited last-first so chains fold in one sweep.
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
#include "lower/fusion.h"

#include "lower/group_expr.h"

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

namespace {

// What a group's recipe can absorb, by anchor op (nullptr: a pure elementwise group).
struct Caps {
  bool prologue = true;    // inlines fused producers of its operands (GroupExpr::at)
  bool epilogue = true;    // applies elementwise consumers of its result before storing
  bool multiOutput = true; // writes every group output (not only the last epilogue value)
};

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
  // a fused prologue would turn that into a staged tile copy (EfficientNet's squeeze-excitation
  // scale before the projection: 2.1 ms in place of 0.4 for the scale as its own kernel).
  if (anchor->op() == Op::BlockedConv && anchor->i("depthwise") == 0 &&
      anchor->i("blocked_input") != 0 &&
      anchor->ints("kernel_shape") == std::vector<int64_t>{1, 1} &&
      anchor->ints("strides") == std::vector<int64_t>{1, 1} &&
      anchor->ints("pads") == std::vector<int64_t>{0, 0, 0, 0})
    c.prologue = false;
  return c;
}

class Partitioner {
public:
  Partitioner(const Graph &g, const FusionOptions &opts) : g_(g), opts_(opts), nodes_(g.nodes()) {
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

  Partition run() {
    Partition p;
    // 0: layout ops folded into their readers float and those stored by their producers are
    // written by them: no group of their own.
    decideLayout(p);
    // 1-2: views and anchors.
    for (Node *n : nodes_) {
      if (floating_[idx(n)] || stored_[idx(n)])
        continue;
      if (n->info().has(VIEW))
        p.views.push_back(n);
      else if (!n->info().has(EW))
        newGroup(n, n);
    }
    // 3: elementwise nodes join a producer or start a group.
    for (Node *n : nodes_) {
      if (!n->info().has(EW))
        continue;
      int target = -1;
      for (Value *o : n->operands()) {
        int gi = directGroup(o);
        // A branch select reads its condition from the condition's own store (isBranchSelect).
        if (isBranchSelect(*n) && gi >= 0 && gi == directGroup(n->operand(0)))
          continue;
        if (gi >= 0 && !full(gi, 1) && canJoinAsEpilogue(n, gi)) {
          target = gi;
          break;
        }
      }
      if (target >= 0)
        add(target, n, /*epilogue=*/true);
      else
        newGroup(nullptr, n);
    }
    // 4: prologues; 5: rematerialisation.
    foldPrologues();
    if (opts_.rematCost)
      rematerialize(p);
    if (opts_.kernelCost && opts_.rowNorms != RowNormPolicy::Store)
      foldRowNorms(p);
    if (opts_.kernelCost && opts_.chains != FusePolicy::Store)
      chainContractions(p);
    if (opts_.kernelCost && opts_.normEpilogues != FusePolicy::Store)
      foldNormEpilogues(p);
    if (opts_.kernelCost && opts_.convChains != FusePolicy::Store)
      chainConvs(p);
    finish(p);
    return p;
  }

private:
  struct Group {
    Node *anchor = nullptr;
    std::vector<Node *> nodes; // unsorted until finish()
    bool alive = true;
    int minIdx = 0, maxIdx = 0; // positions of its first and last node (rule 3's pruning)
    // The members' results by shape (rule 3 for pure elementwise groups: only results of
    // another shape than the joining node's can break the one-output-shape rule).
    // Keyed by the dims as expressions, which tell symbolic shapes apart.
    std::map<std::vector<SymExpr>, std::vector<const Value *>> resultsByShape;
  };

  bool floating(const Node *n) const { return n && floating_[idx(n)]; }

  // Rule 0: the reads of layout op n's results by nodes that are no layout op, each with the
  // map composed through the layout ops and reshapes between; `why` is set when n cannot fold.
  void collectReads(const Node *n, std::vector<LayoutRead> &reads, std::string &why) const {
    std::function<void(const Value *, const IndexMap &)> walk = [&](const Value *v,
                                                                    const IndexMap &m) {
      if (outputs_.count(v)) {
        why = "its result is a graph output";
        return;
      }
      for (const Node *u : usersOf(v)) {
        if (u->info().has(VIEW) || isLayoutOp(*u)) {
          if (!isLayoutOp(*u)) {
            why = cat("read by ", u->name(), " with a dynamic shape");
            return;
          }
          // Folded layout ops over symbolic dims are read op by op from the dims' expressions
          // (GroupExpr); a reshape regrouping symbolic dims would cost its readers a division by
          // a run-time size per element: a kernel writes the result once instead.
          if (u->info().has(VIEW) && symbolicRegroup(*u)) {
            why = cat("read through ", u->name(), " ", u->result(0)->type().str(),
                      ", which regroups symbolic dims");
            return;
          }
          for (int r = 0; r < static_cast<int>(u->numResults()); ++r)
            for (const LayoutPiece &pc : layoutPieces(*u, r))
              if (u->operand(static_cast<size_t>(pc.operand)) == v)
                walk(u->result(static_cast<size_t>(r)), compose(pc.map, m));
          continue;
        }
        if (u->op() == Op::BatchNorm) {
          why = "read by batch_norm, whose recipe reads plain buffers";
          return;
        }
        if (u->op() == Op::Loop) {
          why = "read by a loop, whose body reads plain buffers";
          return;
        }
        for (size_t k = 0; k < u->numOperands(); ++k)
          if (u->operand(k) == v)
            reads.push_back(LayoutRead{n, u, static_cast<int>(k), m, v->type().bytes()});
      }
    };
    for (int r = 0; r < static_cast<int>(n->numResults()); ++r)
      for (const LayoutPiece &pc : layoutPieces(*n, r))
        walk(n->result(static_cast<size_t>(r)), pc.map);
  }

  // Rule 0, producer side: where each operand of layout op n would be stored from — the value
  // its producer computes (the operand itself, or the source of a reshape chain), with the map
  // from that value's index to n's result index. Empty when n cannot be stored: it is no
  // transpose or concat, its result is sized by a data dim, or an operand is an input or
  // weight, another layout op's result, a graph output, read by anything else, or computed by a
  // node setting a data dim (rule 11) (the reader-side decision then stands).
  struct Sink {
    const Value *value = nullptr;
    IndexMap map;
  };
  std::vector<Sink> sinkPlan(const Node *n) const {
    if (n->op() != Op::Transpose && n->op() != Op::Concat)
      return {};
    // A result sized by a data dim (rule 11): a producer may run before the dim is set.
    for (const SymExpr &d : symShapeOf(n->result(0)->type()))
      for (const std::string &sym : d.symbols())
        if (dataDims_.count(sym))
          return {};
    std::vector<Sink> out;
    auto onlyReader = [&](const Value *v, const Node *u) {
      const std::vector<Node *> &us = usersOf(v);
      return !outputs_.count(v) && us.size() == 1 && us[0] == u &&
             std::count(u->operands().begin(), u->operands().end(), v) == 1;
    };
    for (size_t i = 0; i < n->numOperands(); ++i) {
      const Value *v = n->operand(i);
      std::optional<IndexMap> m = scatterMap(*n, static_cast<int>(i));
      const Node *reader = n;
      while (m && v->def() && v->def()->info().has(VIEW) && onlyReader(v, reader)) {
        const Node *view = v->def();
        std::optional<IndexMap> vm = isLayoutOp(*view) ? scatterMap(*view, 0) : std::nullopt;
        if (!vm) {
          m.reset();
          break;
        }
        m = compose(*vm, *m);
        reader = view;
        v = view->operand(0);
      }
      const Node *d = v->def();
      if (!m || !d || d->info().has(VIEW) || isLayoutOp(*d) || d->numResults() != 1 ||
          d->op() == Op::Loop || d->op() == Op::Fail || d->info().has(SETS_DIM) ||
          !onlyReader(v, reader))
        return {};
      out.push_back(Sink{v, *m});
    }
    return out;
  }

  // Whether the producers' stores through the maps stay contiguous along their innermost dim.
  static bool contiguousStores(const std::vector<Sink> &sinks) {
    for (const Sink &s : sinks) {
      const std::vector<int64_t> &shape = s.value->type().shape;
      if (shape.empty() || shape.back() == 1)
        continue;
      std::optional<IndexMap::Stride> st = s.map.strideOf(static_cast<int>(shape.size()) - 1);
      if (!st || st->step != 1)
        return false;
    }
    return true;
  }

  void decideLayout(Partition &p) {
    floating_.assign(nodes_.size(), 0);
    stored_.assign(nodes_.size(), 0);
    if (!opts_.foldLayout)
      return;
    for (Node *n : nodes_) {
      if (n->info().has(VIEW)) {
        // A reshape of a folded chain folds with it.
        if (floating(n->operand(0)->def()))
          floating_[idx(n)] = 1;
        continue;
      }
      if (!isLayoutOp(*n))
        continue;
      LayoutDecision d;
      d.node = n;
      std::vector<LayoutRead> reads;
      collectReads(n, reads, d.reason);
      for (const LayoutRead &r : reads)
        d.reads.push_back(cat(r.reader->name(), " operand ", r.operand, " ",
                              valueName(r.reader->operand(static_cast<size_t>(r.operand))), ": ",
                              r.map.str()));
      if (d.reason.empty() && reads.empty())
        d.reason = "no reader";
      if (d.reason.empty()) {
        if (opts_.layoutCost) {
          for (const LayoutRead &r : reads) {
            LayoutCost c = opts_.layoutCost(r);
            d.foldUs += c.foldUs;
            d.materializeUs = std::max(d.materializeUs, c.materializeUs);
          }
          d.folded = d.foldUs <= d.materializeUs;
          d.reason = d.folded ? "reading through the map costs no more than a kernel"
                              : "reading through the map costs more than a kernel";
        } else {
          d.folded = true;
          d.reason = "folded (no cost model)";
        }
      }
      std::vector<Sink> sinks = sinkPlan(n);
      if (!sinks.empty()) {
        bool contiguous = contiguousStores(sinks);
        if (n->op() == Op::Concat || contiguous || !d.folded) {
          d.reason = n->op() == Op::Concat ? "its producers write their slices of one buffer"
                     : contiguous
                         ? "its producer stores in the transposed order, contiguous "
                           "along the innermost dim"
                         : cat("its producer stores in the transposed order (",
                               d.reason.empty() ? "the alternative is a kernel" : d.reason, ")");
          d.folded = false;
          d.stored = true;
          d.reads.clear(); // its readers read the result's buffer plainly
          for (const Sink &sk : sinks) {
            d.stores.push_back(
                cat(sk.value->def()->name(), " ", valueName(sk.value), ": ", sk.map.str()));
            sinkOf_[sk.value] = {n->result(0), sk.map};
          }
          stored_[idx(n)] = 1;
        }
      }
      if (d.folded)
        floating_[idx(n)] = 1;
      p.layout.push_back(std::move(d));
    }
  }

  static std::string valueName(const Value *v) {
    return v->name().empty() ? cat("%", v->id()) : cat("%", v->name());
  }

  // The groups `v` is read from: the group computing v's storage or, for a value of a folded
  // layout chain, the groups computing the chain's sources.
  void sourceGroups(const Value *v, std::vector<int> &out) const {
    const Node *d = v->def();
    if (floating(d)) {
      for (const Value *o : d->operands())
        sourceGroups(o, out);
      return;
    }
    storageGroups(v, out);
  }

  // The nodes reading `v` that belong to groups: its users, looking through folded layout ops.
  void readers(const Value *v, std::vector<const Node *> &out) const {
    for (const Node *u : usersOf(v)) {
      if (floating(u)) {
        for (const Value *r : u->results())
          readers(r, out);
      } else {
        out.push_back(u);
      }
    }
  }

  const std::vector<Node *> &usersOf(const Value *v) const {
    static const std::vector<Node *> none;
    auto it = users_.find(v);
    return it == users_.end() ? none : it->second;
  }

  int idx(const Node *n) const { return index_.at(n); }

  void newGroup(Node *anchor, Node *first) {
    groups_.push_back(Group{anchor, {}, true, idx(first), idx(first), {}});
    add(static_cast<int>(groups_.size()) - 1, first, /*epilogue=*/false);
  }

  void add(int gi, Node *n, bool epilogue) {
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
  bool full(int gi, size_t more) const {
    return groups_[gi].nodes.size() + more > static_cast<size_t>(opts_.maxGroupNodes);
  }

  bool inGroup(const Node *n, int gi) const { return n && groupOf_[idx(n)] == gi; }

  // Whether n is a member of group gi: its owner, or one of rule 5's copies.
  bool contains(int gi, const Node *n) const {
    if (!n)
      return false;
    int i = idx(n);
    return groupOf_[i] == gi || copies_.count({gi, i}) > 0;
  }

  // Whether group gi computes a branch select's condition (isBranchSelect): it must store it.
  bool holdsBranchCondition(int gi) const {
    for (const Node *m : groups_[gi].nodes)
      for (const Value *r : m->results())
        for (const Node *u : usersOf(r))
          if (isBranchSelect(*u) && u->operand(0) == r)
            return true;
    return false;
  }

  // The group whose node defines v directly (views end fusion: -1 for them, for inputs and
  // weights).
  int directGroup(const Value *v) const {
    const Node *d = v->def();
    if (!d || d->info().has(VIEW))
      return -1;
    return groupOf_[idx(d)];
  }

  // The groups writing v's storage (through views), added to `out` once each: the group
  // computing it, or for the result of a layout op stored by its producers, theirs; none for
  // inputs and weights.
  void storageGroups(const Value *v, std::vector<int> &out) const {
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
  bool dependsOn(int from, int target) const {
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
  std::vector<int> externalSources(const std::vector<int> &gs) const {
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
    srcs.erase(
        std::remove_if(srcs.begin(), srcs.end(),
                       [&](int p) { return std::find(gs.begin(), gs.end(), p) != gs.end(); }),
        srcs.end());
    return srcs;
  }

  // Whether giving groups `targets` the reads from groups `srcs` (copying or merging nodes that
  // read them into the targets) keeps the group graph acyclic: no source is a target or depends,
  // through other groups, on one. (A source depending on a target would then be read by the
  // target it needs: two kernels each waiting for the other, which finish() cannot order.)
  bool staysAcyclic(const std::vector<int> &srcs, const std::vector<int> &targets) const {
    for (int p : srcs)
      for (int t : targets)
        if (p == t || dependsOn(p, t))
          return false;
    return true;
  }

  // A value that something outside group gi (with `joining`, when given, counted as a
  // member) or the graph's outputs needs.
  bool neededOutside(const Value *v, int gi, const Node *joining = nullptr) const {
    if (outputs_.count(v))
      return true;
    std::vector<const Node *> rs;
    readers(v, rs);
    for (const Node *u : rs)
      if (u != joining && !contains(gi, u))
        return true;
    return false;
  }

  bool canJoinAsEpilogue(Node *n, int gi) const {
    const Group &grp = groups_[gi];
    Caps caps = capsFor(grp.anchor);
    if (!caps.epilogue)
      return false;
    const TensorType &type = n->result(0)->type();
    std::vector<SymExpr> shape = symShapeOf(type);
    if (grp.anchor) {
      if (!sameDims(type, grp.anchor->result(0)->type()))
        return false;
      for (Value *o : n->operands()) {
        const Node *d = o->def();
        if (!inGroup(d, gi))
          continue;
        // Only the anchor's result and epilogue values are per-output-element values.
        bool epi = d == grp.anchor || isEpilogue_[idx(d)];
        if (!epi)
          return false;
        if (!caps.multiOutput && neededOutside(o, gi, n))
          return false;
      }
    } else {
      for (const auto &[s, results] : grp.resultsByShape)
        if (s != shape)
          for (const Value *r : results)
            if (neededOutside(r, gi, n))
              return false;
    }
    for (Value *o : n->operands()) {
      std::vector<int> srcs;
      sourceGroups(o, srcs);
      for (int p : srcs) {
        // A folded layout op reads the group's values at other indices than the one being
        // computed: it cannot read them from inside the group.
        if (p == gi && floating(o->def()))
          return false;
        if (p != gi && dependsOn(p, gi))
          return false;
      }
    }
    return true;
  }

  void foldPrologues() {
    bool changed = true;
    while (changed) {
      changed = false;
      // Consumers first: visit elementwise groups by descending last node.
      std::vector<int> order;
      for (size_t gi = 0; gi < groups_.size(); ++gi)
        if (groups_[gi].alive && !groups_[gi].anchor)
          order.push_back(static_cast<int>(gi));
      auto lastNode = [&](int gi) {
        int m = -1;
        for (const Node *n : groups_[gi].nodes)
          m = std::max(m, idx(n));
        return m;
      };
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return lastNode(a) > lastNode(b); });
      for (int gi : order) {
        if (holdsBranchCondition(gi))
          continue;
        int consumer = soleConsumer(gi);
        if (consumer < 0 || !capsFor(groups_[consumer].anchor).prologue ||
            full(consumer, groups_[gi].nodes.size()))
          continue;
        for (Node *n : groups_[gi].nodes)
          add(consumer, n, /*epilogue=*/false);
        groups_[gi].nodes.clear();
        groups_[gi].alive = false;
        changed = true;
      }
    }
  }

  // The groups reading group gi's outputs, in group order; empty when one of them is a graph
  // output or read through a view (those must be stored).
  std::vector<int> consumersOf(int gi) const {
    std::vector<int> out;
    for (const Node *m : groups_[gi].nodes)
      for (const Value *r : m->results()) {
        if (g_.isOutput(r))
          return {};
        std::vector<const Node *> rs;
        readers(r, rs);
        for (const Node *u : rs) {
          if (contains(gi, u))
            continue;
          int ug = groupOf_[idx(u)];
          if (ug < 0)
            return {};
          if (std::find(out.begin(), out.end(), ug) == out.end())
            out.push_back(ug);
        }
      }
    std::sort(out.begin(), out.end());
    return out;
  }

  void rematerialize(Partition &p) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group &grp = groups_[gi];
      if (!grp.alive || grp.anchor)
        continue;
      std::vector<int> cons = consumersOf(static_cast<int>(gi));
      if (cons.size() < 2 || holdsBranchCondition(static_cast<int>(gi)))
        continue;
      // Recomputing is allowed only where rematerializable_intermediate is certified (pure,
      // deterministic, elementwise); a node annotate-properties did not check is judged by the
      // group's shape alone (an elementwise group), as the recipes' selection does.
      bool certified = std::all_of(grp.nodes.begin(), grp.nodes.end(), [](const Node *m) {
        if (m->props.has(MemProperty::RematerializableIntermediate))
          return true;
        return std::none_of(m->certificates.begin(), m->certificates.end(),
                            [](const Certificate &c) {
                              return c.property == MemProperty::RematerializableIntermediate;
                            });
      });
      if (!certified)
        continue;
      bool inlinable = std::all_of(cons.begin(), cons.end(), [&](int c) {
        return groups_[c].alive && capsFor(groups_[c].anchor).prologue &&
               !full(c, grp.nodes.size());
      });
      if (!inlinable)
        continue;
      // Copied into a consumer, the group's nodes read there what the group reads: refused
      // when a consumer computes, itself or through other groups, something the group reads,
      // since the group graph would then be cyclic. A consumer that really reads the group
      // cannot (the graph would already be cyclic), but consumersOf also lists, for a copy an
      // earlier rematerialisation left in this group, every group reading the copied node, and
      // those hold their own copy and may need nothing from here. An unrolled LSTM: step t's
      // cell-state group holds copies of step t-1's and reads step t's gate matmul, whose group
      // reads step t-1's state and so is listed; copied there, that group would read its own
      // result, and with step t+1's state copied in too, the matmul groups of steps t and t+1
      // would each read the other's.
      if (!staysAcyclic(externalSources({static_cast<int>(gi)}), cons))
        continue;
      int64_t inBytes = 0, outBytes = 0;
      std::unordered_set<const Value *> seen;
      RematDecision d;
      for (const Node *m : grp.nodes) {
        for (const Value *o : m->operands())
          if (!contains(static_cast<int>(gi), o->def()) && seen.insert(o).second)
            inBytes += o->type().bytes();
        for (const Value *r : m->results())
          if (!usersOf(r).empty() &&
              std::any_of(usersOf(r).begin(), usersOf(r).end(),
                          [&](const Node *u) { return !contains(static_cast<int>(gi), u); })) {
            outBytes += r->type().bytes();
            d.values.push_back(r->name().empty() ? cat("%", r->id()) : r->name());
          }
      }
      KernelGroup probe;
      probe.nodes = grp.nodes;
      RematCost c = opts_.rematCost(probe, inBytes, outBytes, static_cast<int>(cons.size()));
      d.consumers = static_cast<int>(cons.size());
      d.storeUs = c.storeUs;
      d.recomputeUs = c.recomputeUs;
      d.recomputed = c.recomputeUs < c.storeUs;
      p.remat.push_back(d);
      if (!d.recomputed)
        continue;
      for (int c2 : cons)
        for (Node *n : grp.nodes) {
          groups_[c2].nodes.push_back(n); // groupOf_ keeps the first owner; copies_ the rest
          copies_.insert({c2, idx(n)});
        }
      recomputed_.insert(grp.nodes.begin(), grp.nodes.end());
      grp.nodes.clear();
      grp.alive = false;
    }
  }

  // The one group reading every output of group gi, or -1 (several readers, a view reader,
  // a graph output, or no reader).
  int soleConsumer(int gi) const {
    int consumer = -1;
    for (const Node *m : groups_[gi].nodes)
      for (const Value *r : m->results()) {
        if (g_.isOutput(r))
          return -1;
        std::vector<const Node *> rs;
        readers(r, rs);
        for (const Node *u : rs) {
          int ug = groupOf_[idx(u)];
          if (ug == gi)
            continue;
          if (ug < 0 || (consumer >= 0 && ug != consumer))
            return -1; // a view (no group) or a second consumer group
          consumer = ug;
        }
      }
    return consumer;
  }

  // Rule 0: every group holds a copy of the folded layout ops it reads through.
  void attachFolded(int gi) {
    std::vector<Node *> todo = groups_[gi].nodes;
    while (!todo.empty()) {
      Node *m = todo.back();
      todo.pop_back();
      for (Value *o : m->operands()) {
        Node *d = o->def();
        if (!floating(d) || contains(gi, d))
          continue;
        groups_[gi].nodes.push_back(d);
        copies_.insert({gi, idx(d)});
        todo.push_back(d);
      }
    }
  }

  void finish(Partition &p) {
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

  // A node setting a data dim: its every result is stored, read elsewhere or not (rule 11): the
  // runtime reads the count (the last one) after the step to size what follows, and
  // non_max_suppression reads its rows back.
  static bool setsDataDim(const Node *m) { return m->info().has(SETS_DIM); }

  // Group gi as a kernel group (nodes in graph order, its inputs and outputs); id 0.
  KernelGroup kernelGroup(int gi) const {
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
            kg.storeThrough.push_back({r, it->second.first, it->second.second});
        }
    if (grp.anchor && grp.anchor->op() == Op::Loop) { // positional: every operand and result
      kg.inputs = grp.anchor->operands();
      kg.outputs = grp.anchor->results();
    }
    return kg;
  }

  // Rule 7: row norms recomputed in the contractions reading them, where that is cheaper.
  void foldRowNorms(Partition &p) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      Group &grp = groups_[gi];
      Node *n = grp.anchor;
      if (!grp.alive || !n || grp.nodes.size() != 1 ||
          !n->props.has(MemProperty::RematerializableIntermediate) || !isRowNorm(*n))
        continue;
      std::optional<RowNormReaders> rd = rowNormReaders(g_, *n, nullptr);
      if (!rd)
        continue;
      // Each reader's group takes the norm and the reshapes on its own path.
      std::vector<int> cons;
      std::map<int, std::vector<Node *>> moved;
      bool ok = true;
      for (size_t i = 0; i < rd->contractions.size(); ++i) {
        int cg = groupOf_[idx(rd->contractions[i])];
        ok = ok && cg >= 0 && groups_[cg].alive && groups_[cg].anchor == rd->contractions[i];
        if (!ok)
          break;
        if (std::find(cons.begin(), cons.end(), cg) == cons.end()) {
          cons.push_back(cg);
          moved[cg].push_back(n);
        }
        for (const Node *v : rd->views[i])
          if (std::find(moved[cg].begin(), moved[cg].end(), v) == moved[cg].end())
            moved[cg].push_back(const_cast<Node *>(v));
      }
      for (int c : cons)
        ok = ok && !full(c, moved[c].size());
      // The readers take the norm's reads: none may come from them (see rule 5).
      ok = ok && staysAcyclic(externalSources({static_cast<int>(gi)}), cons);
      if (!ok || cons.empty())
        continue;
      int64_t bytes = 0; // planned bytes of the kernels priced so far
      auto price = [&](int g) {
        KernelPrice k = priceGroup(g);
        bytes += k.bytes;
        return k.us;
      };
      RematDecision d;
      d.kind = RematDecision::Kind::RowNorm;
      d.what = cat(n->name(), " ", n->where());
      d.values.push_back(n->result()->name().empty() ? cat("%", n->result()->id())
                                                     : n->result()->name());
      d.consumers = static_cast<int>(cons.size());
      d.storeUs = price(static_cast<int>(gi));
      // Tentatively copy the norm and its reshapes into every reader's group.
      // (The state to restore is taken after pricing: pricing attaches the folded layout ops
      // each group reads, as copies, to its nodes.)
      std::vector<std::vector<Node *>> before;
      for (int c : cons) {
        d.storeUs += price(c);
        before.push_back(groups_[c].nodes);
      }
      std::set<std::pair<int, int>> copiesBefore = copies_;
      const int64_t storeBytes = bytes;
      bytes = 0;
      std::set<Node *> all;
      for (int c : cons)
        for (Node *m : moved[c]) {
          groups_[c].nodes.push_back(m);
          copies_.insert({c, idx(m)});
          all.insert(m);
        }
      recomputed_.insert(all.begin(), all.end());
      d.recomputeUs = 0;
      for (int c : cons)
        d.recomputeUs += price(c);
      d.recomputed = opts_.rowNorms == RowNormPolicy::Fold ||
                     takeForm({d.recomputeUs, bytes}, {d.storeUs, storeBytes}, 1.0);
      p.remat.push_back(d);
      if (!d.recomputed) { // put everything back
        for (size_t i = 0; i < cons.size(); ++i)
          groups_[cons[i]].nodes = before[i];
        copies_ = copiesBefore;
        for (Node *m : all)
          recomputed_.erase(m);
        continue;
      }
      grp.nodes.clear();
      grp.alive = false;
    }
  }

  // Rules 8 and 9: whether n is a contraction the chained recipe (and a norm epilogue) can take:
  // matmul over rows of A (B of rank 2, or batched like A: split-chains' slices), gemm without
  // transA; f32, in fp32 (the chained recipe has no tensor-core form).
  static bool chainable(const Node &n) {
    if ((n.op() != Op::Gemm && n.op() != Op::MatMul) || n.numResults() != 1 ||
        n.numOperands() < 2 || nodePrecision(n) != Precision::F32)
      return false;
    if (n.result()->type().dtype != DType::F32 || n.operand(0)->type().dtype != DType::F32 ||
        n.operand(1)->type().dtype != DType::F32)
      return false;
    if (n.op() == Op::Gemm)
      return n.i("transA") == 0;
    return n.op() == Op::MatMul && n.operand(0)->type().shape.size() >= 2 &&
           n.operand(1)->type().shape.size() >= 2;
  }

  // Rule 8: both contractions run over the same batch (the chained kernel's grid).
  static bool sameBatch(const Node &c1, const Node &c2) {
    const auto &a = c1.result()->type().shape, &b = c2.result()->type().shape;
    std::vector<SymExpr> sa = symShapeOf(c1.result()->type()), sb = symShapeOf(c2.result()->type());
    return a.size() == b.size() && std::equal(a.begin(), a.end() - 2, b.begin()) &&
           std::equal(sa.begin(), sa.end() - 2, sb.begin());
  }

  // Rules 8 and 9: the group computing `v`, which node `n` (of group `own`) reads once, when v
  // has no other reader, is no graph output and that group is alive and another; else -1.
  int soleProducerGroup(const Node &n, const Value *v, int own) const {
    const Node *d = v->def();
    if (!d || outputs_.count(v) || usersOf(v).size() != 1 ||
        std::count(n.operands().begin(), n.operands().end(), v) != 1)
      return -1;
    const int g = groupOf_[idx(d)];
    return g < 0 || g == own || !groups_[g].alive ? -1 : g;
  }

  // Rule 8: whether group gi holds contraction c alone (with what rule 7 or rule 0 copied into
  // it), alive and unchained.
  bool aloneIn(int gi, const Node *c) const {
    const Group &grp = groups_[gi];
    return grp.alive && grp.anchor == c && !chained_.count(gi) &&
           std::all_of(grp.nodes.begin(), grp.nodes.end(), [&](Node *m) {
             return m == c || copies_.count({gi, idx(m)}) > 0;
           });
  }

  // Rule 8: contractions read only as another contraction's A (directly, or combined by
  // elementwise nodes: SwiGLU's gate and up projections over the same X) merged into its
  // group, where the planner prices that lower.
  void chainContractions(Partition &p) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const int g2 = static_cast<int>(gi);
      Node *c2 = groups_[g2].anchor;
      if (!groups_[g2].alive || !c2 || chained_.count(g2) || !chainable(*c2))
        continue;
      Value *a = c2->operand(0);
      const int gA = soleProducerGroup(*c2, a, g2);
      if (gA < 0 || chained_.count(gA))
        continue;
      Node *c1 = groups_[gA].anchor;
      if (!c1 || !chainable(*c1) || !sameBatch(*c1, *c2))
        continue;
      // The first group: c1 and elementwise nodes of its result's shape (and copies); A its one
      // output.
      const TensorType &hshape = c1->result()->type();
      bool ok = std::all_of(groups_[gA].nodes.begin(), groups_[gA].nodes.end(), [&](Node *m) {
        return m == c1 || copies_.count({gA, idx(m)}) > 0 ||
               (m->info().has(EW) && m->numResults() == 1 && sameDims(m->result()->type(), hshape));
      });
      KernelGroup kA = kernelGroup(gA);
      if (!ok || kA.outputs.size() != 1 || kA.outputs[0] != a)
        continue;
      // Siblings: contractions over the same X, alone in their groups, read only inside the
      // first group (a gate beside an up projection).
      std::vector<int> firsts = {gA};
      std::vector<const Node *> chain = {c1};
      for (const Value *in : kA.inputs) {
        const Node *s = in->def();
        int gs = s ? groupOf_[idx(s)] : -1;
        if (gs < 0 || gs == gA || gs == g2 || !chainable(*s) ||
            std::find(firsts.begin(), firsts.end(), gs) != firsts.end())
          continue;
        if (s->operand(0) != c1->operand(0) || !sameDims(s->result()->type(), hshape) ||
            !aloneIn(gs, s) || outputs_.count(in))
          continue;
        std::vector<const Node *> rs;
        readers(in, rs);
        if (!std::all_of(rs.begin(), rs.end(), [&](const Node *u) { return contains(gA, u); }))
          continue;
        firsts.push_back(gs);
        chain.push_back(s);
      }
      int merged = 0;
      for (int f : firsts)
        merged += static_cast<int>(groups_[f].nodes.size());
      if (full(g2, static_cast<size_t>(merged)) || !mergeStaysAcyclic(g2, firsts))
        continue;
      RematDecision dec;
      dec.kind = RematDecision::Kind::Chain;
      for (const Node *c : chain)
        dec.what += cat(dec.what.empty() ? "" : " and ", c->name(), " ", c->where());
      dec.what += cat(" -> ", c2->name(), " ", c2->where());
      dec.values.push_back(a->name().empty() ? cat("%", a->id()) : a->name());
      dec.consumers = 1;
      bool fuse = opts_.chains == FusePolicy::Fuse;
      tryMerge(
          g2, firsts, fuse, dec, [&] { chained_[g2] = chain; }, [&] { chained_.erase(g2); });
      p.remat.push_back(dec);
    }
  }

  // Rule 9: row norms of a contraction group's output applied as that group's epilogue.
  void foldNormEpilogues(Partition &p) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const int gn = static_cast<int>(gi);
      Node *n = groups_[gn].anchor;
      if (!n || !isRowNorm(*n) || !aloneIn(gn, n) || n->result()->type().dtype != DType::F32)
        continue;
      Value *v = n->operand(0);
      const int gc = soleProducerGroup(*n, v, gn);
      if (gc < 0 || normEpilogue_.count(gc))
        continue;
      Node *c = groups_[gc].anchor;
      if (!c || !chainable(*c) || !sameDims(c->result()->type(), v->type()))
        continue;
      KernelGroup kc = kernelGroup(gc);
      if (kc.outputs.size() != 1 || kc.outputs[0] != v || !kc.storeThrough.empty() ||
          full(gc, groups_[gn].nodes.size()) || !mergeStaysAcyclic(gc, {gn}))
        continue;
      RematDecision dec;
      dec.kind = RematDecision::Kind::NormEpilogue;
      dec.what = cat(n->name(), " ", n->where(), " after ", c->name(), " ", c->where());
      dec.values.push_back(v->name().empty() ? cat("%", v->id()) : v->name());
      dec.consumers = 1;
      bool fuse = opts_.normEpilogues == FusePolicy::Fuse;
      tryMerge(
          gc, {gn}, fuse, dec, [&] { normEpilogue_[gc] = n; }, [&] { normEpilogue_.erase(gc); });
      p.remat.push_back(dec);
    }
  }

  // Rule 10: a 1 x 1, stride 1, unpadded dense blocked_conv over a blocked input (an expansion or
  // a projection), f32.
  static bool pointwiseBlocked(const Node &n) {
    if (n.op() != Op::BlockedConv || n.i("depthwise") != 0 || n.i("blocked_input") == 0 ||
        n.result()->type().dtype != DType::F32)
      return false;
    const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads");
    return ks == std::vector<int64_t>{1, 1} && st == std::vector<int64_t>{1, 1} &&
           std::all_of(pd.begin(), pd.end(), [](int64_t v) { return v == 0; });
  }
  // Rule 10: a depthwise blocked_conv the ring form takes: equal strides at most the window's
  // height, top padding less than it.
  static bool ringDepthwise(const Node &n) {
    if (n.op() != Op::BlockedConv || n.i("depthwise") == 0 ||
        n.result()->type().dtype != DType::F32)
      return false;
    const auto &ks = n.ints("kernel_shape"), &st = n.ints("strides"), &pd = n.ints("pads"),
               &dl = n.ints("dilations");
    int64_t span = (ks[0] - 1) * dl[0] + 1;
    return st[0] == st[1] && st[0] <= span && pd[0] < span;
  }

  // Rule 10: whether group gi is its anchor conv and elementwise nodes of its result's shape
  // (its activation), alive and unchained, with `v` its one output.
  bool convLink(int gi, const Value *v) {
    const Group &grp = groups_[gi];
    const Node *c = grp.anchor;
    if (!grp.alive || !c || chained_.count(gi) || normEpilogue_.count(gi))
      return false;
    const TensorType &shape = c->result()->type();
    bool ok = std::all_of(grp.nodes.begin(), grp.nodes.end(), [&](Node *m) {
      return m == c || (!copies_.count({gi, idx(m)}) && m->info().has(EW) && m->numResults() == 1 &&
                        sameDims(m->result()->type(), shape));
    });
    if (!ok)
      return false;
    KernelGroup kg = kernelGroup(gi);
    return kg.outputs.size() == 1 && kg.outputs[0] == v && kg.storeThrough.empty();
  }

  // Rule 10: inverted residuals (expand -> depthwise -> project) merged into the projection's
  // group, where the planner prices that lower.
  void chainConvs(Partition &p) {
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      const int gP = static_cast<int>(gi);
      Node *pj = groups_[gP].anchor;
      if (!groups_[gP].alive || !pj || chained_.count(gP) || !pointwiseBlocked(*pj) ||
          normEpilogue_.count(gP))
        continue;
      const int gD = soleProducerGroup(*pj, pj->operand(0), gP);
      if (gD < 0 || !groups_[gD].anchor || !ringDepthwise(*groups_[gD].anchor) ||
          !convLink(gD, pj->operand(0)))
        continue;
      Node *dw = groups_[gD].anchor;
      std::vector<int> from = {gD};
      std::vector<const Node *> chain = {dw};
      const int gE = soleProducerGroup(*dw, dw->operand(0), gD);
      // (The expansion reads its input in place: not through a folded layout op.)
      if (gE >= 0 && groups_[gE].anchor && pointwiseBlocked(*groups_[gE].anchor) &&
          !floating(groups_[gE].anchor->operand(0)->def()) && convLink(gE, dw->operand(0))) {
        from.insert(from.begin(), gE);
        chain.insert(chain.begin(), groups_[gE].anchor);
      }
      if (full(gP, chain.size()) || !mergeStaysAcyclic(gP, from))
        continue;
      RematDecision dec;
      dec.kind = RematDecision::Kind::ConvChain;
      for (const Node *c : chain) {
        dec.what += cat(c->name(), " ", c->where(), " -> ");
        const Value *v = c->result();
        dec.values.push_back(v->name().empty() ? cat("%", v->id()) : v->name());
      }
      dec.what += cat(pj->name(), " ", pj->where());
      dec.consumers = 1;
      bool fuse = opts_.convChains == FusePolicy::Fuse;
      tryMerge(
          gP, from, fuse, dec, [&] { chained_[gP] = chain; }, [&] { chained_.erase(gP); });
      p.remat.push_back(dec);
    }
  }

  // Rules 8-10: whether merging groups `from` into group `into` keeps the group graph acyclic:
  // no group the merged one reads depends on one of them (it would then read the merged group
  // and be read by it). The merged groups' results are read only inside them as the rules pick
  // them; the check keeps that assumption from turning into a cycle.
  bool mergeStaysAcyclic(int into, const std::vector<int> &from) const {
    std::vector<int> all = from;
    all.push_back(into);
    return staysAcyclic(externalSources(all), all);
  }

  // Rules 7-9: the planner's price of group g as it stands (its folded layout ops attached).
  KernelPrice priceGroup(int g) {
    attachFolded(g);
    return opts_.kernelCost(kernelGroup(g));
  }

  // Rules 8 and 9: merges the groups `from` into group `into` when the planner prices the merged
  // kernel below them (takeForm, passes/price.h) or `fuse` forces it, recording both times in
  // `dec`; `mark` sets the merged group's recipe facts (its chain, its norm epilogue), `unmark`
  // clears them. Rejected: everything is put back. Returns whether the merge stands.
  bool tryMerge(int into, const std::vector<int> &from, bool fuse, RematDecision &dec,
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

  const Graph &g_;
  FusionOptions opts_;
  std::map<int, const Node *> normEpilogue_;         // rule 9: group -> its row norm epilogue
  std::map<int, std::vector<const Node *>> chained_; // rule 8: group -> the contractions
                                                     // chained into it
  std::set<const Node *> recomputed_; // nodes copied into several consumer groups (rules 5, 7)
  std::vector<Node *> nodes_;
  std::unordered_map<const Node *, int> index_;
  std::unordered_map<const Value *, std::vector<Node *>> users_;
  std::unordered_set<const Value *> outputs_; // the graph's outputs
  std::vector<int> groupOf_;
  std::vector<char> isEpilogue_;   // by node position: joined an anchor group as epilogue
  std::vector<char> floating_;     // by node position: a folded layout op (rule 0)
  std::vector<char> stored_;       // by node position: stored by its producers (rule 0)
  std::set<std::string> dataDims_; // the data dims the graph's nodes set (rule 11)
  // Rule 0's producer side: a value stored into a layout op's result, and through which map.
  std::unordered_map<const Value *, std::pair<const Value *, IndexMap>> sinkOf_;
  std::set<std::pair<int, int>> copies_; // (group, node position): rule 5's recomputed copies
  std::vector<Group> groups_;
  mutable std::vector<uint64_t> seen_; // dependsOn's visited marks (== stamp_)
  mutable uint64_t stamp_ = 0;
};

} // namespace

bool isBranchSelect(const Node &n) {
  if (n.op() != Op::Where)
    return false;
  const Value *c = n.operand(0);
  return !c->hasData() && c->type().isStatic() && c->type().numel() == 1;
}

Partition partitionGraph(const Graph &g, const FusionOptions &opts) {
  Partition p = Partitioner(g, opts).run();
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
