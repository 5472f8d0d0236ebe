// Fusion rule 0 (lower/fusion.cpp's list): layout ops folded into their readers (read through
// the composed index map) or stored by their producers (written through the scatter map), or
// else materialised, each decision priced and recorded; and the folded copies every group holds.
#include "lower/fusion_partitioner.h"

#include "ir/norm_readers.h"
#include "ir/precision.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace aicf::fusion {

std::string Partitioner::valueName(const Value *v) {
  return v->name().empty() ? cat("%", v->id()) : cat("%", v->name());
}

// Rule 0: the reads of layout op n's results by nodes that are no layout op, each with the
// map composed through the layout ops and reshapes between; `why` is set when n cannot fold.
void Partitioner::collectReads(const Node *n, std::vector<LayoutRead> &reads,
                               std::string &why) const {
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

std::vector<Partitioner::Sink> Partitioner::sinkPlan(const Node *n) const {
  if (n->op() != Op::Transpose && n->op() != Op::Concat && n->op() != Op::Slice)
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
  // Walked through besides reshapes: a transpose or a unit-step slice over static shapes (a
  // blocked conv's conversion back to NCHW, its padded channels sliced off, then a
  // channels-last transpose: the conv stores each kept lane at its final place). Over symbolic
  // dims storeIndex places the index op by op (GroupExpr), which knows reshapes only.
  auto symbolicOp = [](const Node *d) {
    auto sym = [](const Value *v) { return v->type().isSymbolic(); };
    return std::any_of(d->operands().begin(), d->operands().end(), sym) ||
           std::any_of(d->results().begin(), d->results().end(), sym);
  };
  bool symbolic = symbolicOp(n);
  auto walksThrough = [&](const Node *d) {
    return d->info().has(VIEW) || (!symbolic && !symbolicOp(d) && isLayoutOp(*d) &&
                                   (d->op() == Op::Transpose || d->op() == Op::Slice));
  };
  for (size_t i = 0; i < n->numOperands(); ++i) {
    const Value *v = n->operand(i);
    std::optional<Scatter> m = partialScatter(*n, static_cast<int>(i));
    if (m && symbolic && !m->keep.empty())
      m.reset();
    Sink sk;
    const Node *reader = n;
    while (m && v->def() && walksThrough(v->def()) && onlyReader(v, reader)) {
      const Node *view = v->def();
      std::optional<Scatter> vm = isLayoutOp(*view) ? partialScatter(*view, 0) : std::nullopt;
      if (!vm) {
        m.reset();
        break;
      }
      // The bounds so far are over view's result: read them over its operand.
      for (IndexBound &b : m->keep)
        b.e = simplify(substitute(b.e, vm->map.exprs), vm->map.domain);
      m->keep.insert(m->keep.end(), vm->keep.begin(), vm->keep.end());
      m->map = compose(vm->map, m->map);
      if (!view->info().has(VIEW))
        sk.through.push_back(view);
      reader = view;
      v = view->operand(0);
    }
    const Node *d = v->def();
    if (!m || !d || d->info().has(VIEW) || isLayoutOp(*d) || d->numResults() != 1 ||
        d->op() == Op::Loop || d->op() == Op::Fail || d->info().has(SETS_DIM) ||
        !onlyReader(v, reader))
      return {};
    sk.value = v;
    sk.map = std::move(m->map);
    sk.keep = std::move(m->keep);
    out.push_back(std::move(sk));
  }
  return out;
}

// Whether the producers' stores through the maps stay contiguous along their innermost dim, in
// runs of a 16-float vector at least (or the whole dim): a depth-to-space store of 2 floats per
// run, with a division and a modulo per lane, costs more than its readers reading through the
// map (a text detector's transposed-conv head).
bool Partitioner::contiguousStores(const std::vector<Sink> &sinks) {
  for (const Sink &s : sinks) {
    const std::vector<int64_t> &shape = s.value->type().shape;
    if (shape.empty() || shape.back() == 1)
      continue;
    std::optional<IndexMap::Stride> st = s.map.strideOf(static_cast<int>(shape.size()) - 1);
    if (!st || st->step != 1 || st->run < std::min<int64_t>(16, shape.back()))
      return false;
  }
  return true;
}

void Partitioner::decideLayout(Partition &p) {
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
    // pack-weights' panel view (a weight's transpose and reshape read as B by the products it
    // packed for): the micro-kernel reads the panels in place. Materialised, the panels would be
    // unpacked into a plain copy on every run and the product would lose its packed kernel (a
    // QDQ GPT-2 block's int8 projections, priced a few microseconds either way, ran as f32
    // tiles behind an 84 us transpose each).
    // (Constant folding leaves no other layout op over a weight before a product's B.)
    bool panels =
        n->operand(0)->isWeight() && !reads.empty() &&
        std::all_of(reads.begin(), reads.end(), [](const LayoutRead &r) {
          Op op = r.reader->op();
          return r.operand == 1 && (op == Op::MatMul || op == Op::Gemm || op == Op::BlockedConv);
        });
    if (d.reason.empty() && panels) {
      d.folded = true;
      d.reason = "a packed weight's panel view, read in place by its products' micro-kernel";
    } else if (d.reason.empty()) {
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
      // A slice is stored only where it would otherwise be a kernel: read through its map,
      // its readers skip the dropped elements for free.
      bool store = n->op() == Op::Concat || !d.folded || (n->op() == Op::Transpose && contiguous);
      if (store) {
        d.reason = n->op() == Op::Concat ? "its producers write their slices of one buffer"
                   : n->op() == Op::Slice
                       ? cat("its producer stores only the kept window (",
                             d.reason.empty() ? "the alternative is a kernel" : d.reason, ")")
                   : contiguous
                       ? "its producer stores in the transposed order, contiguous "
                         "along the innermost dim"
                       : cat("its producer stores in the transposed order (",
                             d.reason.empty() ? "the alternative is a kernel" : d.reason, ")");
        d.folded = false;
        d.stored = true;
        d.reads.clear(); // its readers read the result's buffer plainly
        for (const Sink &sk : sinks) {
          std::string keep;
          for (const IndexBound &b : sk.keep)
            keep += cat(keep.empty() ? " where " : " and ", b.lo, " <= ", str(b.e), " < ", b.hi);
          d.stores.push_back(
              cat(sk.value->def()->name(), " ", valueName(sk.value), ": ", sk.map.str(), keep));
          sinkOf_[sk.value] = KernelGroup::StoreThrough{sk.value, n->result(0), sk.map, sk.keep};
          // The transposes and slices on the way are written by nobody now: the producer
          // stores past them.
          for (const Node *t : sk.through) {
            stored_[idx(t)] = 1;
            floating_[idx(t)] = 0;
            for (LayoutDecision &e : p.layout)
              if (e.node == t) {
                e.folded = false;
                e.stored = true;
                e.reads.clear();
                e.stores.clear();
                e.reason = cat("its producer stores past it, into ", valueName(n->result(0)));
              }
          }
        }
        stored_[idx(n)] = 1;
      }
    }
    if (d.folded)
      floating_[idx(n)] = 1;
    p.layout.push_back(std::move(d));
  }
}

// Rule 0: every group holds a copy of the folded layout ops it reads through.
void Partitioner::attachFolded(int gi) {
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

} // namespace aicf::fusion
