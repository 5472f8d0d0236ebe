// Loop and Scan (onnx_importer.cpp step 6): unrolled when the trip count is known and small,
// else a Loop kept at run time (runtimeLoop: its body's steps run per iteration).
#include "frontend/onnx_importer_impl.h"

#include "ir/npy.h"
#include "ir/verifier.h"
#include "support/checked_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace aicf::onnx_import {

// x[i] along the first axis, that axis dropped (a scan slice, a batch element).
Value *Importer::elementAt(ConvertCtx &ctx, Value *x, int64_t i) {
  Shape rest(x->type().shape.begin() + 1, x->type().shape.end());
  Value *sl = ctx.emit(
      Op::Slice, {x},
      {{"starts", Shape{i}}, {"ends", Shape{i + 1}}, {"axes", Shape{0}}, {"steps", Shape{1}}});
  return ctx.reshape(sl, rest);
}

// Loop with a trip count known at compile time, and Scan (static scan length), unrolled: the
// body's nodes are converted once per iteration with the loop-carried values (and Loop's
// iteration number, Scan's slices) bound to its inputs. Loop's scan outputs, and Scan's, are
// the per-iteration values stacked on a new first axis. At most kMaxUnroll iterations.
// Returns false, converting nothing, for a Loop to keep at run time (runtimeLoop): no trip
// count, one known only at run time or above kMaxUnroll, or a condition computed at run time.
bool Importer::unrollLoop(const onnx::NodeProto &n, int index, bool scan9) {
  ConvertCtx ctx(env_, n, index, opset_);
  const onnx::GraphProto &body = graphAttr(ctx, n, "body");
  bool loop = n.op_type() == "Loop";
  int64_t states = 0, trips = 0, scanIn = 0;
  std::vector<Value *> carried;
  std::vector<std::string> seqKey; // Loop: where a carried sequence lives now ("": a tensor)
  Value *cond = nullptr;
  // What the unrolling binds, restored when it gives up (the nodes it added are dead then).
  std::unordered_map<std::string, Value *> before;
  if (loop) {
    const Tensor *m = ctx.constInput(0);
    if (!m || m->numel() != 1 || m->getInt(0) > kMaxUnroll)
      return false;
    trips = m->getInt(0);
    if (ctx.hasInput(1)) {
      cond = ctx.input(1);
      if (!cond->isWeight())
        return false;
    }
    before = env_.values;
    states = static_cast<int64_t>(n.input_size()) - 2;
    for (int64_t j = 0; j < states; ++j) { // a carried sequence is followed by name
      const std::string &in = n.input(static_cast<int>(2 + j));
      seqKey.push_back(seqs_.count(in) ? in : "");
      carried.push_back(seqKey.back().empty() ? ctx.input(static_cast<size_t>(2 + j)) : nullptr);
    }
    if (body.input_size() != 2 + states || body.output_size() < 1 + states)
      ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ", body.output_size(),
                   " values for ", states, " loop-carried values"));
  } else {
    scanIn = ctx.attrIntReq("num_scan_inputs");
    states = static_cast<int64_t>(n.input_size()) - scanIn;
    for (const char *a :
         {"scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"})
      for (int64_t v : ctx.attrInts(a))
        if (v != 0)
          ctx.fail(cat(a, " other than 0 is not supported"));
    if (opset_ < 9 && !scan9) {
      scan8(ctx, n, index);
      return true;
    }
    for (int64_t j = 0; j < states; ++j)
      carried.push_back(ctx.input(static_cast<size_t>(j)));
    trips = scanIn > 0 ? ctx.input(static_cast<size_t>(states))->type().shape.at(0) : 0;
    for (int64_t j = 0; j < scanIn; ++j)
      if (ctx.input(static_cast<size_t>(states + j))->type().shape.at(0) != trips)
        ctx.fail("the scan inputs differ in length");
    if (body.input_size() != states + scanIn || body.output_size() < states)
      ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ", body.output_size(),
                   " values for ", states, " state values"));
  }
  if (trips > kMaxUnroll)
    ctx.fail(cat(trips, " iterations: Scan is unrolled at compile time, at most ", kMaxUnroll,
                 " iterations"));
  const int64_t scanOut = body.output_size() - (loop ? 1 : 0) - states;
  std::vector<std::vector<Value *>> scans(static_cast<size_t>(scanOut));
  int64_t it = 0;
  for (; it < trips; ++it) {
    if (cond) {
      if (!cond->isWeight()) { // computed at run time: the loop is kept at run time
        env_.values = std::move(before);
        return false;
      }
      if (cond->data()->getDouble(0) == 0)
        break;
    }
    int64_t first = 0;
    if (loop) {
      env_.values[body.input(0).name()] = ctx.constant(Tensor::fromI64({it}, {}));
      if (!body.input(1).name().empty()) { // without a condition input it reads true
        Tensor yes(TensorType(DType::Bool, {}));
        yes.setInt(0, 1);
        env_.values[body.input(1).name()] = cond ? cond : ctx.constant(yes);
      }
      first = 2;
    }
    for (int64_t j = 0; j < states; ++j)
      if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty())
        aliasSequence(body.input(static_cast<int>(first + j)).name(), seqKey[j]);
      else
        env_.values[body.input(static_cast<int>(first + j)).name()] = carried[j];
    for (int64_t j = 0; j < scanIn; ++j) { // Scan: this iteration's slice of each input
      env_.values[body.input(static_cast<int>(states + j)).name()] =
          elementAt(ctx, ctx.input(static_cast<size_t>(states + j)), it);
    }
    addBranchWeights(ctx, body);
    for (const onnx::NodeProto &m : body.node())
      convertNode(m, index);
    auto out = [&](int64_t k) {
      auto f = env_.values.find(body.output(static_cast<int>(k)).name());
      if (f == env_.values.end())
        ctx.fail(
            cat("body output '", body.output(static_cast<int>(k)).name(), "' is not computed"));
      return f->second;
    };
    int64_t o = 0;
    if (loop) { // without a condition input the body's condition is ignored (a for loop)
      Value *next = out(o++);
      if (ctx.hasInput(1))
        cond = next;
    }
    for (int64_t j = 0; j < states; ++j) {
      if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty()) {
        seqKey[j] = body.output(static_cast<int>(o++)).name();
        if (!seqs_.count(seqKey[j]))
          ctx.fail(cat("body output '", seqKey[j], "' is not a sequence"));
        continue;
      }
      carried[j] = out(o++);
    }
    for (int64_t k = 0; k < scanOut; ++k) {
      Value *v = out(o++);
      Shape one = v->type().shape;
      one.insert(one.begin(), 1);
      scans[k].push_back(ctx.reshape(v, one));
    }
  }
  for (int64_t j = 0; j < states; ++j) {
    if (n.output(static_cast<int>(j)).empty())
      continue;
    if (j < static_cast<int64_t>(seqKey.size()) && !seqKey[j].empty())
      aliasSequence(n.output(static_cast<int>(j)), seqKey[j]);
    else
      env_.values[n.output(static_cast<int>(j))] = carried[j];
  }
  for (int64_t k = 0; k < scanOut; ++k) {
    const std::string &name = n.output(static_cast<int>(states + k));
    if (name.empty())
      continue;
    if (scans[k].empty())
      ctx.fail(cat("scan output '", name, "' would be empty (no iteration ran)"));
    env_.values[name] =
        scans[k].size() == 1 ? scans[k][0] : ctx.emit(Op::Concat, scans[k], {{"axis", int64_t(0)}});
  }
  return true;
}

// Scan-8: every input and output has a leading batch axis (scan inputs [batch, sequence, ...])
// and input 0 is the optional sequence_lens. Each batch element is a Scan-9 of its own,
// unrolled, and the results are stacked on the batch axis. Sequence lengths other than the
// full one (ragged batches) and reversed directions are refused.
void Importer::scan8(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
  for (int64_t v : ctx.attrInts("directions"))
    if (v != 0)
      ctx.fail("directions other than 0 are not supported");
  const int64_t scanIn = ctx.attrIntReq("num_scan_inputs");
  const int ins = n.input_size() - 1;
  if (ins < scanIn || scanIn < 1)
    ctx.fail(cat(ins, " inputs after sequence_lens for ", scanIn, " scan inputs"));
  const Shape &first = ctx.type(static_cast<size_t>(1 + ins - scanIn)).shape;
  if (first.size() < 2)
    ctx.fail("a scan input needs a batch and a sequence axis");
  const int64_t batch = first[0], length = first[1];
  if (ctx.hasInput(0))
    for (int64_t l : ctx.constInts(0, "sequence_lens"))
      if (l != length)
        ctx.fail(cat("sequence_lens ", l, " differs from the scan length ", length,
                     " (ragged batches are not supported)"));
  for (int k = 1; k <= ins; ++k)
    if (ctx.rank(static_cast<size_t>(k)) < 1 || ctx.type(static_cast<size_t>(k)).shape[0] != batch)
      ctx.fail(cat("input '", n.input(k), "' has no batch axis of ", batch));
  std::vector<std::vector<Value *>> outs(static_cast<size_t>(n.output_size()));
  for (int64_t b = 0; b < batch; ++b) {
    onnx::NodeProto one = n; // this batch element's Scan-9
    one.clear_input();
    one.clear_output();
    for (int k = 1; k <= ins; ++k) {
      std::string name = cat(n.input(k), ".batch", b);
      env_.values[name] = elementAt(ctx, ctx.input(static_cast<size_t>(k)), b);
      one.add_input(name);
    }
    for (int k = 0; k < n.output_size(); ++k)
      one.add_output(n.output(k).empty() ? "" : cat(n.output(k), ".batch", b));
    unrollLoop(one, index, /*scan9=*/true);
    for (int k = 0; k < n.output_size(); ++k) {
      if (n.output(k).empty())
        continue;
      Value *v = env_.values.at(one.output(k));
      Shape withBatch = v->type().shape;
      withBatch.insert(withBatch.begin(), 1);
      outs[static_cast<size_t>(k)].push_back(ctx.reshape(v, withBatch));
    }
  }
  for (int k = 0; k < n.output_size(); ++k)
    if (!n.output(k).empty())
      env_.values[n.output(k)] =
          outs[k].size() == 1 ? outs[k][0] : ctx.emit(Op::Concat, outs[k], {{"axis", int64_t(0)}});
}

// A run-time loop's scan outputs, in its body (runtimeLoop, issue 51): each value written at
// row `iteration` of its stack (the last row once past the bound: the count then fails the
// run after the loop, naming --max), the stacks' inputs typed from the values, and the count
// of iterations run (iteration + 1), appended to the body's outputs.
void Importer::appendScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n,
                                const onnx::GraphProto &body, Graph &g, const std::string &name,
                                int states, int64_t scanBound, const std::vector<Value *> &stackIns,
                                std::vector<Value *> &outs) {
  const int scanOut = static_cast<int>(stackIns.size()) - 1;
  const int64_t rows = std::max<int64_t>(scanBound, 1);
  Value *iter = g.inputs()[0];
  // (Constants named after the body: the plan finds weights by name, and the loop node's own
  // outputs name the outer graph's.)
  auto constant = [&](const std::string &what, int64_t v) {
    Value *w =
        g.addWeight(cat(name, ".", what), std::make_shared<const Tensor>(Tensor::fromI64({v}, {})));
    w->loc = ctx.loc();
    return w;
  };
  Value *at = ctx.reshape(ctx.emit(Op::Min, {iter, constant("last_row", rows - 1)}), {1, 1});
  for (int k = 0; k < scanOut; ++k) {
    const std::string &o = body.output(1 + states + k).name();
    auto it = env_.values.find(o);
    Value *v = it != env_.values.end() ? it->second : env_.capture(o);
    if (!v)
      ctx.fail(cat("body output '", o, "' is not computed"));
    const TensorType &t = v->type();
    if (!t.isStatic())
      ctx.fail(cat("scan output '", o, "' is ", t.str(),
                   ": a loop kept at run time needs its scan values' shapes fixed"));
    Shape stacked = t.shape, one = t.shape;
    stacked.insert(stacked.begin(), rows);
    one.insert(one.begin(), 1);
    int64_t elems = 1;
    for (int64_t d : stacked)
      elems = checkedMul(elems, d).value_or(kMaxTensorElements + 1);
    if (elems > kMaxTensorElements)
      ctx.fail(cat("scan output '", o, "': ", rows, " rows of ", t.str(),
                   " are too many elements (lower them with --max ", n.output(states), "=N)"));
    Value *stack = stackIns[static_cast<size_t>(k)];
    stack->setType(TensorType(t.dtype, stacked));
    outs.push_back(ctx.emit(Op::ScatterND, {stack, at, ctx.reshape(v, one)}));
  }
  outs.push_back(ctx.emit(Op::Add, {iter, constant("one", 1)}));
}

// After a run-time loop with scan outputs: the count of iterations run becomes a data dim
// (set_dim, bounded by scanBound) and each stack is sliced to it.
void Importer::sliceScanStacks(ConvertCtx &ctx, const onnx::NodeProto &n, Node &node, int states,
                               int scanOut, int64_t scanBound) {
  Value *count = node.result(static_cast<size_t>(states + scanOut));
  Value *len =
      ctx.emitDataDim(Op::SetDim, {count}, {}, 1, scanBound, static_cast<size_t>(states))[0];
  const std::string &dim = len->def()->s("dim");
  const int64_t bound = len->def()->i("bound");
  for (int k = 0; k < scanOut && states + k < n.output_size(); ++k) {
    if (n.output(states + k).empty())
      continue;
    Value *stack = node.result(static_cast<size_t>(states + k));
    env_.values[n.output(states + k)] = ctx.emit(Op::Slice, {stack},
                                                 {{"starts", Shape{0}},
                                                  {"ends", Shape{bound}},
                                                  {"axes", Shape{0}},
                                                  {"steps", Shape{1}},
                                                  {"sym_ends", std::vector<std::string>{dim}}});
  }
}

namespace {

// A loop node's first operands: the trip count and the condition as scalars (absent: no bound,
// true), then the carried values.
std::vector<Value *> loopOperands(ConvertCtx &ctx, const onnx::NodeProto &n, int states) {
  auto scalar = [&](size_t i, DType dt, const char *what) {
    Value *v = ctx.input(i);
    const TensorType &t = v->type();
    if (t.dtype != dt || !t.isStatic() || t.numel() != 1)
      ctx.fail(cat(what, " '", n.input(static_cast<int>(i)), "' is ", t.str(), ", not one ",
                   dtypeName(dt)));
    return ctx.reshape(v, {});
  };
  Value *trip = ctx.hasInput(0) ? scalar(0, DType::I64, "trip count M")
                                : ctx.constant(Tensor::fromI64({INT64_MAX}, {}));
  Value *cond = nullptr;
  if (ctx.hasInput(1)) {
    cond = scalar(1, DType::Bool, "condition");
  } else {
    Tensor yes(TensorType(DType::Bool, {}));
    yes.setInt(0, 1);
    cond = ctx.constant(yes);
  }
  std::vector<Value *> operands = {trip, cond};
  for (int j = 0; j < states; ++j)
    operands.push_back(ctx.input(static_cast<size_t>(2 + j)));
  return operands;
}

} // namespace

// A loop kept at run time carries no sequence; its scan outputs (a value per iteration,
// stacked) are as long as the iterations it runs, known only at run time: at most the trip
// count when it is a constant, or the --max the user gives for the first scan output. Returns
// that bound (-1: no scan outputs).
int64_t Importer::runtimeScanBound(ConvertCtx &ctx, const onnx::NodeProto &n, int states,
                                   int scanOut) {
  for (int j = 0; j < states; ++j)
    if (seqs_.count(n.input(2 + j))) { // a carried sequence: unrolled, or nothing
      std::string what = "of a loop carrying a sequence (unrolled at compile time)";
      if (ctx.hasInput(0))
        ctx.requireConst(0, "trip count " + what);
      if (ctx.hasInput(1))
        ctx.requireConst(1, "condition " + what);
      ctx.fail(cat("loop-carried sequence '", n.input(2 + j), "': a loop carrying a sequence ",
                   "is unrolled at compile time, at most ", kMaxUnroll, " iterations with a ",
                   "condition known then"));
    }
  int64_t scanBound = -1;
  if (scanOut > 0) {
    const int first = states; // the node output of the first scan output
    if (const Tensor *m = ctx.constInput(0);
        m && m->numel() == 1 && m->getInt(0) >= 0 && m->getInt(0) <= kMaxTensorElements)
      scanBound = m->getInt(0);
    if (auto most = ctx.dataDimMaxEntry(static_cast<size_t>(first)))
      scanBound = scanBound < 0 ? most->second : std::min(scanBound, most->second);
    if (scanBound < 0)
      ctx.fail(cat("the scan outputs of a loop kept at run time are as long as the iterations "
                   "it runs, and the trip count M gives no bound",
                   ctx.hasInput(0) ? "" : " (none)", ": give their most with --max ",
                   n.output(first), "=N"));
  }
  return scanBound;
}

// The body's condition and carried values as its outputs (`outs`), each a distinct node result:
// a condition of one bool (true without a condition input), the carried values of the types
// they came in with (`operands`).
void Importer::loopBodyOutputs(ConvertCtx &ctx, const onnx::NodeProto &n,
                               const onnx::GraphProto &body, Graph &g, const std::string &name,
                               int states, const std::vector<Value *> &operands,
                               std::vector<Value *> &outs) {
  for (int k = 0; k < 1 + states; ++k) {
    const std::string &o = body.output(k).name();
    auto it = env_.values.find(o);
    Value *v = it != env_.values.end() ? it->second : env_.capture(o);
    if (!v)
      ctx.fail(cat("body output '", o, "' is not computed"));
    if (k == 0 && !ctx.hasInput(1)) {
      // No condition input: ONNX ignores the body's condition (a for loop).
      Tensor yes(TensorType(DType::Bool, {}));
      yes.setInt(0, 1);
      v = g.addWeight(cat(name, ".true"), std::make_shared<const Tensor>(std::move(yes)));
    } else if (k == 0) {
      if (v->type().dtype != DType::Bool || v->type().numel() != 1)
        ctx.fail(
            cat("body output '", o, "' (the condition) is ", v->type().str(), ", not one bool"));
      if (v->type().rank() != 0)
        v = g.createNode(Op::Reshape, {v}, {{"shape", Shape{}}}, ctx.loc())->result();
    } else if (v->type() != operands[static_cast<size_t>(1 + k)]->type()) {
      ctx.fail(cat("loop-carried value '", n.input(1 + k), "' is ",
                   operands[static_cast<size_t>(1 + k)]->type().str(), " but the body returns ",
                   v->type().str(), " for it: a loop kept at run time needs its carried ",
                   "values to keep their types (bind the trip count with --const to unroll)"));
    }
    // Each output a distinct node result of the body.
    bool shared = std::find(outs.begin(), outs.end(), v) != outs.end();
    if (v->kind() != ValueKind::Result || shared)
      v = g.createNode(Op::Identity, {v}, {}, ctx.loc())->result();
    outs.push_back(v);
  }
}

// A Loop kept at run time (ONNX Loop semantics; interp kernel_Loop, plan `loop` steps): a loop
// node owning its body, converted into a graph of its own. The values the body reads from
// enclosing graphs become body inputs (operands of the node after the carried values);
// constants are copied in, so they fold inside the body. The carried values must keep their
// types from one iteration to the next, and scan outputs (stacked per iteration, so as long
// as the loop runs) need a trip count known at compile time.
void Importer::runtimeLoop(const onnx::NodeProto &n, int index) {
  ConvertCtx ctx(env_, n, index, opset_);
  const onnx::GraphProto &body = graphAttr(ctx, n, "body");
  const int states = n.input_size() - 2;
  if (states < 0 || body.input_size() != 2 + states || body.output_size() < 1 + states)
    ctx.fail(cat("the body takes ", body.input_size(), " inputs and returns ", body.output_size(),
                 " values for ", std::max(states, 0), " loop-carried values"));
  const int scanOut = body.output_size() - 1 - states;
  if (n.output_size() > states + scanOut)
    ctx.fail(cat("the loop has ", n.output_size(), " outputs, its body ", states,
                 " loop-carried values and ", scanOut, " scan outputs"));
  int64_t scanBound = runtimeScanBound(ctx, n, states, scanOut);
  std::vector<Value *> operands = loopOperands(ctx, n, states);

  // The body graph, its inputs mirroring the operands.
  std::string name = "loop_" + (n.name().empty() ? n.output(0) : n.name());
  for (char &ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_')
      ch = '_';
  auto g = std::make_shared<Graph>(name);
  std::vector<std::string> bodyIn;
  for (int k = 0; k < body.input_size(); ++k)
    bodyIn.push_back(body.input(k).name().empty() ? cat("in", k) : body.input(k).name());
  std::unordered_map<std::string, Value *> values;
  for (size_t k = 0; k < operands.size(); ++k) {
    TensorType t = k == 0 ? TensorType(DType::I64, {}) : operands[k]->type();
    Value *v = g->addInput(bodyIn[k], t);
    v->loc = Location(bodyIn[k]);
    values[bodyIn[k]] = v;
  }
  // Scan outputs kept at run time: each a carried stack of scanBound rows that the body writes
  // its value into at row `iteration` (scatter_nd), and one carried count of the iterations
  // run (iteration + 1); after the loop, set_dim makes the count a data dim and each stack is
  // sliced to it. The stacks' types are the body's values', known once it is converted: their
  // inputs are typed then, their initial values (zeros) made in the outer graph after.
  std::vector<Value *> stackIns;
  for (int k = 0; k <= scanOut && scanOut > 0; ++k) { // the stacks, then the count
    std::string in = k < scanOut ? cat(name, ".scan", k) : cat(name, ".count");
    Value *v = g->addInput(in, TensorType(DType::I64, {}));
    v->loc = Location(in);
    stackIns.push_back(v);
    operands.push_back(nullptr); // set after the body
  }
  // Names the body reads from outside: resolved once each, through the enclosing scopes.
  Graph *outerGraph = env_.graph;
  std::unordered_map<std::string, Value *> outerValues = std::move(env_.values);
  std::function<Value *(const std::string &)> outerCapture = std::move(env_.capture);
  std::unordered_map<std::string, Value *> captured;
  env_.graph = g.get();
  env_.values = std::move(values);
  env_.capture = [&](const std::string &vname) -> Value * {
    if (auto it = captured.find(vname); it != captured.end())
      return it->second;
    Value *outer = nullptr;
    if (auto it = outerValues.find(vname); it != outerValues.end())
      outer = it->second;
    else if (outerCapture)
      outer = outerCapture(vname);
    if (!outer)
      return nullptr;
    Value *v = nullptr;
    if (auto sym = env_.symValues.find(outer); sym != env_.symValues.end())
      ctx.fail(cat("the body reads '", vname, "', the shape value ", symElemsStr(sym->second),
                   " computed from the symbolic dims: not supported in a loop kept at run "
                   "time (bind the dims with --dim NAME=N)"));
    if (outer->isWeight()) {
      v = g->addWeight(vname, outer->data());
    } else {
      v = g->addInput(vname, outer->type());
      operands.push_back(outer);
    }
    v->loc = Location(vname);
    return captured[vname] = v;
  };
  auto restore = [&] {
    env_.graph = outerGraph;
    env_.values = std::move(outerValues);
    env_.capture = std::move(outerCapture);
  };
  std::vector<Value *> outs;
  try {
    addBranchWeights(ctx, body);
    for (const onnx::NodeProto &m : body.node())
      convertNode(m, index);
    loopBodyOutputs(ctx, n, body, *g, name, states, operands, outs);
    if (scanOut > 0)
      appendScanStacks(ctx, n, body, *g, name, states, scanBound, stackIns, outs);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  g->setOutputs(outs);
  g->removeDeadCode();
  for (int k = 0; k <= scanOut && scanOut > 0; ++k) { // the stacks' zeros, the count's 0
    const TensorType &t = stackIns[static_cast<size_t>(k)]->type();
    ctx.checkComputeBudget(t.bytes());
    Value *w = outerGraph->addWeight(stackIns[static_cast<size_t>(k)]->name() + ".init",
                                     std::make_shared<const Tensor>(Tensor(t)));
    w->loc = ctx.loc();
    operands[static_cast<size_t>(2 + states + k)] = w;
  }
  std::vector<TensorType> types;
  for (int j = 0; j < states + (scanOut > 0 ? scanOut + 1 : 0); ++j)
    types.push_back(operands[static_cast<size_t>(2 + j)]->type());
  Node *node = outerGraph->addNode(Op::Loop, operands, types, {}, ctx.loc());
  node->body = std::move(g);
  for (int j = 0; j < states; ++j)
    if (j < n.output_size() && !n.output(j).empty())
      env_.values[n.output(j)] = node->result(static_cast<size_t>(j));
  if (scanOut > 0)
    sliceScanStacks(ctx, n, *node, states, scanOut, scanBound);
}

} // namespace aicf::onnx_import
