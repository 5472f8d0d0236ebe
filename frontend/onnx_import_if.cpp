// If (onnx_importer.cpp step 6): inlined when its condition is known at compile time, else both
// branches converted and selected per element, or kept for the runtime to choose (runtimeIf);
// a branch that cannot convert becomes a fail step.
#include "frontend/onnx_importer_impl.h"

#include "ir/npy.h"
#include "ir/verifier.h"
#include "support/checked_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace aicf::onnx_import {

// If with a condition known at compile time (a constant, or computed from constants and
// --const inputs): its outputs are the selected branch's, whose initializers and nodes join
// the graph (nested Ifs the same way). A condition known only at run time: runtimeIf.
void Importer::inlineIf(const onnx::NodeProto &n, int index) {
  ConvertCtx ctx(env_, n, index, opset_);
  const Tensor *cond = ctx.constInput(0);
  if (!cond) {
    runtimeIf(ctx, n, index);
    return;
  }
  if (cond->numel() != 1)
    ctx.fail(cat("condition '", n.input(0), "' has ", cond->numel(), " elements, not one"));
  bool taken = cond->getDouble(0) != 0;
  branchSeqs_.clear();
  std::vector<Value *> outs = convertBranch(ctx, n, index, taken);
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty())
      continue;
    if (auto b = branchSeqs_.find(k); b != branchSeqs_.end())
      aliasSequence(n.output(k), b->second);
    else
      env_.values[n.output(k)] = outs[static_cast<size_t>(k)];
  }
}

// If with a condition known only at run time: both branches join the graph, and each output
// is where(cond, then value, else value) with the scalar condition. Host plans run a branch's
// kernels only when its side is taken (plan/branch_guards.h); GPU plans and the interpreter
// compute both. The branches must give each output the same dtype and shape.
// A branch that cannot be converted at the bound shapes (a UserError while converting it: a
// VAD's branch for the other sample rate, given this rate's chunk) becomes a run-time failure
// when the other converts (issue 51): what it added is dropped (dead code, its names unbound
// again), each of its outputs is a `fail` node of the other branch's type, and a warning names
// the inputs the condition is computed from (tryBranch, failBranch). Both failing is an error.
void Importer::runtimeIf(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
  for (const auto &a : n.attribute())
    if (a.type() == onnx::AttributeProto::GRAPH)
      for (const auto &o : a.g().output())
        if (o.type().has_sequence_type() || o.type().has_optional_type())
          ctx.requireConst(0, "condition of an If returning a sequence or optional");
  Value *cond = ctx.input(0);
  const TensorType &ct = cond->type();
  if (ct.dtype != DType::Bool)
    ctx.fail(cat("condition '", n.input(0), "' is ", ct.str(), ", not bool"));
  if (!ct.isStatic() || ct.numel() != 1)
    ctx.fail(cat("condition '", n.input(0), "' is ", ct.str(), ", not one element"));
  cond = ctx.reshape(cond, {});
  branchSeqs_.clear();
  std::exception_ptr thenError, elseError;
  std::vector<Value *> thenOuts = tryBranch(ctx, n, index, true, thenError);
  std::vector<Value *> elseOuts = tryBranch(ctx, n, index, false, elseError);
  if (thenError && elseError)
    std::rethrow_exception(thenError); // as when the then branch stopped the import
  if (thenError || elseError) {
    bool then = thenError != nullptr;
    std::vector<Value *> &fails = then ? thenOuts : elseOuts;
    fails =
        failBranch(ctx, n, cond, then, then ? thenError : elseError, then ? elseOuts : thenOuts);
  }
  if (!branchSeqs_.empty())
    ctx.fail(cat("output ", branchSeqs_.begin()->first, " is a sequence or optional: an If ",
                 "chosen at run time returns tensors only (bind its condition with --const)"));
  for (int k = 0; k < n.output_size(); ++k) {
    if (n.output(k).empty())
      continue;
    const TensorType &t = thenOuts[static_cast<size_t>(k)]->type(),
                     &e = elseOuts[static_cast<size_t>(k)]->type();
    // Lengths that differ (dim 0, the other dims equal): the chosen side's length is known
    // only at run time (a data dim), at most the longer side's.
    bool lengths = t.dtype == e.dtype && t.rank() == e.rank() && t.rank() >= 1 && t != e;
    for (size_t d = 1; lengths && d < t.shape.size(); ++d)
      lengths = t.symDim(d) == e.symDim(d);
    if (lengths) {
      int64_t most =
          std::max(ctx.bounds(t.symDim(0), "length").hi, ctx.bounds(e.symDim(0), "length").hi);
      env_.values[n.output(k)] = ctx.emitDataDim(
          Op::Choose, {cond, thenOuts[static_cast<size_t>(k)], elseOuts[static_cast<size_t>(k)]},
          {}, 2, most, static_cast<size_t>(k))[0];
      continue;
    }
    if (t != e)
      ctx.fail(cat("output ", k, " ('", n.output(k), "') is ", t.str(), " in the then branch and ",
                   e.str(),
                   " in the else branch: a branch chosen at run time needs the same "
                   "type from both (bind the condition's inputs with --const to choose at "
                   "compile time)"));
    env_.values[n.output(k)] = ctx.emit(
        Op::Where, {cond, thenOuts[static_cast<size_t>(k)], elseOuts[static_cast<size_t>(k)]});
  }
}

// convertBranch, or, when it throws a UserError, nothing: the names it bound (values,
// sequences, optionals) are restored, the nodes and weights it added are left dead (the graph's
// dead code goes at the end of the import, as an unrolling given up leaves it), and `error`
// holds the exception.
std::vector<Value *> Importer::tryBranch(const ConvertCtx &ctx, const onnx::NodeProto &n, int index,
                                         bool then, std::exception_ptr &error) {
  std::unordered_map<std::string, Value *> values = env_.values;
  auto seqs = seqs_;
  auto optional = optional_;
  auto branchSeqs = branchSeqs_;
  // The warnings of Ifs nested in the branch count only if the branch converts.
  std::vector<std::string> warnings;
  struct Collect {
    std::vector<std::string> *&at, *outer;
    ~Collect() { at = outer; }
  } collect{branchWarnings_, branchWarnings_};
  branchWarnings_ = &warnings;
  try {
    std::vector<Value *> outs = convertBranch(ctx, n, index, then);
    branchWarnings_ = collect.outer;
    for (const std::string &w : warnings)
      warnIf(w);
    return outs;
  } catch (const UserError &) {
    error = std::current_exception();
  }
  env_.values = std::move(values);
  seqs_ = std::move(seqs);
  optional_ = std::move(optional);
  branchSeqs_ = std::move(branchSeqs);
  return {};
}

// The outputs of the branch (`then` true: the then branch) that failed with `error`, given
// that the other converted to `others`: one fail node per output, of the other's type, whose
// message is the run-time error "branch 'then_branch' of If 'NAME' cannot run at these shapes:
// <the converter's message>" (NAME: the If's node name, else its first output's name). Warns,
// naming the graph inputs the condition is computed from and the --const that removes the
// branch.
std::vector<Value *> Importer::failBranch(const ConvertCtx &ctx, const onnx::NodeProto &n,
                                          Value *cond, bool then, std::exception_ptr error,
                                          const std::vector<Value *> &others) {
  std::string reason;
  try {
    std::rethrow_exception(error);
  } catch (const UserError &e) {
    reason = e.what();
  }
  if (std::string file = env_.file + ": "; reason.rfind(file, 0) == 0)
    reason = reason.substr(file.size());
  const char *side = then ? "then" : "else";
  std::string ifName = !n.name().empty() ? n.name() : n.output_size() ? n.output(0) : "";
  std::string message =
      cat("branch '", side, "_branch' of If '", ifName, "' cannot run at these shapes: ", reason);
  std::vector<Value *> outs;
  for (size_t k = 0; k < others.size(); ++k) {
    const Value *o = others[k];
    if (!o) { // a sequence: refused below, as for any If chosen at run time
      outs.push_back(nullptr);
      continue;
    }
    const TensorType &t = o->type();
    AttrMap attrs{
        {"message", message}, {"dtype", std::string(dtypeName(t.dtype))}, {"shape", t.shape}};
    if (t.isSymbolic()) {
      std::vector<std::string> texts;
      for (size_t d = 0; d < t.shape.size(); ++d)
        texts.push_back(t.symDim(d).str());
      attrs["sym_shape"] = texts;
    }
    // Not ctx.emit: a node without operands would be folded, that is, run.
    outs.push_back(env_.graph->createNode(Op::Fail, {}, std::move(attrs), ctx.loc())->result());
  }
  // The graph inputs the condition is computed from.
  std::vector<const Value *> inputs, stack{cond};
  std::set<const Value *> seen;
  while (!stack.empty()) {
    const Value *v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (v->isInput())
      inputs.push_back(v);
    else if (v->def())
      stack.insert(stack.end(), v->def()->operands().begin(), v->def()->operands().end());
  }
  std::sort(inputs.begin(), inputs.end(),
            [](const Value *a, const Value *b) { return a->name() < b->name(); });
  std::string names, flags;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value *in = inputs[k];
    names += cat(k == 0 ? "" : k + 1 == inputs.size() ? " and " : ", ", "'", in->name(), "'");
    flags += cat(k ? " " : "", "--const ", in->name(), "=",
                 in->type().isStatic() && in->type().numel() == 1 ? "<value>" : "<file.npy>");
  }
  std::string decided =
      env_.capture     ? std::string("Its condition is computed inside a loop body")
      : inputs.empty() ? std::string("Its condition is computed at run time")
                       : cat("Its condition is decided by input", inputs.size() > 1 ? "s " : " ",
                             names, ": ", flags, " removes the branch");
  warnIf(cat("If '", ifName, "': the ", side, " branch cannot run at these shapes (", reason,
             "); it fails at run time if taken. ", decided));
  return outs;
}

// A warning of failBranch: printed, or kept while the branch it was found in converts.
void Importer::warnIf(const std::string &w) {
  if (branchWarnings_)
    branchWarnings_->push_back(w);
  else
    warn(w);
}

// The then (`then` true) or else branch of an If converted into the graph: its initializers
// and nodes; returns the values of its outputs, one per output of n.
std::vector<Value *> Importer::convertBranch(const ConvertCtx &ctx, const onnx::NodeProto &n,
                                             int index, bool then) {
  const char *side = then ? "then" : "else";
  const onnx::GraphProto &branch = graphAttr(ctx, n, cat(side, "_branch"));
  if (branch.output_size() != n.output_size())
    ctx.fail(cat("the ", side, " branch returns ", branch.output_size(), " values for ",
                 n.output_size(), " outputs"));
  addBranchWeights(ctx, branch);
  for (const onnx::NodeProto &m : branch.node())
    convertNode(m, index);
  std::vector<Value *> outs;
  for (int k = 0; k < n.output_size(); ++k) {
    const std::string &o = branch.output(k).name();
    if (seqs_.count(o) || optional_.count(o)) { // a sequence or optional: by name
      outs.push_back(nullptr);
      branchSeqs_[k] = o;
      continue;
    }
    auto it = env_.values.find(o);
    if (it == env_.values.end())
      ctx.fail(cat("branch output '", o, "' is not computed"));
    outs.push_back(it->second);
  }
  return outs;
}

// The graph attribute `name` of n (failing through ctx when it is missing).
const onnx::GraphProto &Importer::graphAttr(const ConvertCtx &ctx, const onnx::NodeProto &n,
                                            const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto::GRAPH)
      return a.g();
  ctx.fail(cat("has no ", name, " graph"));
}

// A subgraph's initializers as weights.
void Importer::addBranchWeights(const ConvertCtx &ctx, const onnx::GraphProto &b) {
  for (const auto &t : b.initializer()) {
    TensorPtr v;
    try {
      v = std::make_shared<const Tensor>(tensorFromOnnx(t, env_.modelDir));
    } catch (const UserError &e) {
      ctx.fail(cat("subgraph initializer '", t.name(), "' ", e.what()));
    }
    Value *w = env_.graph->addWeight(t.name(), v);
    w->loc = Location(t.name());
    env_.values[t.name()] = w;
  }
}

} // namespace aicf::onnx_import
