// Sequences and optionals (onnx_importer.cpp step 6): a sequence is a list of tensors known at
// compile time and the sequence ops edit the lists; an optional is present or absent.
#include "frontend/onnx_importer_impl.h"

#include "ir/npy.h"
#include "ir/verifier.h"
#include "support/checked_math.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace aicf::onnx_import {

// ---- sequences and optionals --------------------------------------------------------------
// A sequence is a list of tensors known at compile time (its length and each element's type):
// seqs_ maps its ONNX name to the element values, and the sequence ops edit the lists. An
// optional is a tensor or sequence that may be absent: optional_ says whether it is present
// (its value is under the same name, as a tensor or sequence). A sequence input is given as
// its elements (--seq NAME=COUNT: inputs NAME.0 ...), a sequence output as its elements.
bool Importer::isSequenceOp(const std::string &op) {
  static const std::set<std::string> ops = {
      "SequenceConstruct", "SequenceEmpty",  "SequenceInsert",     "SequenceErase",
      "SequenceAt",        "SequenceLength", "ConcatFromSequence", "SplitToSequence",
      "SequenceMap",       "Optional",       "OptionalHasElement", "OptionalGetElement"};
  return ops.count(op) > 0;
}

// `to` becomes the same sequence or optional as `from` (or the same tensor).
void Importer::aliasSequence(const std::string &to, const std::string &from) {
  if (auto it = seqs_.find(from); it != seqs_.end())
    seqs_[to] = it->second;
  if (auto it = optional_.find(from); it != optional_.end())
    optional_[to] = it->second;
  if (auto it = env_.values.find(from); it != env_.values.end())
    env_.values[to] = it->second;
}

std::vector<Value *> &Importer::sequenceInput(const ConvertCtx &ctx, size_t i) {
  auto it = seqs_.find(ctx.inputName(i));
  if (!ctx.hasInput(i) || it == seqs_.end())
    ctx.fail(cat("input ", i, " ('", ctx.inputName(i), "') is not a sequence"));
  return it->second;
}

// A position input (Sequence At / Insert / Erase): constant, negative from the end, within
// [-size, size] (`end` true: insert may append) or [-size, size - 1].
size_t Importer::sequencePosition(ConvertCtx &ctx, size_t i, size_t size, bool end) {
  if (!ctx.hasInput(i))
    return end ? size : size - 1;
  int64_t p = ctx.constInts(i, "position").at(0), n = static_cast<int64_t>(size);
  if (p < -n || p > (end ? n : n - 1))
    ctx.fail(cat("position ", p, " is outside the sequence of ", n));
  return static_cast<size_t>(p < 0 ? p + n : p);
}

void Importer::convertSequenceOp(const onnx::NodeProto &n, int index) {
  ConvertCtx ctx(env_, n, index, opset_);
  const std::string &op = n.op_type();
  const std::string out = n.output_size() ? n.output(0) : "";
  if (op == "SequenceEmpty") {
    seqs_[out] = {};
  } else if (op == "SequenceConstruct") {
    std::vector<Value *> xs;
    for (size_t k = 0; k < ctx.numInputs(); ++k)
      xs.push_back(ctx.input(k));
    for (Value *x : xs)
      if (x->type().dtype != xs[0]->type().dtype)
        ctx.fail(
            cat("the elements differ in dtype: ", xs[0]->type().str(), " and ", x->type().str()));
    seqs_[out] = xs;
  } else if (op == "SequenceInsert") {
    std::vector<Value *> xs = sequenceInput(ctx, 0);
    Value *x = ctx.input(1);
    if (!xs.empty() && x->type().dtype != xs[0]->type().dtype)
      ctx.fail(cat("inserting ", x->type().str(), " into a sequence of ",
                   dtypeName(xs[0]->type().dtype)));
    xs.insert(xs.begin() + static_cast<int64_t>(sequencePosition(ctx, 2, xs.size(), true)), x);
    seqs_[out] = xs;
  } else if (op == "SequenceErase") {
    std::vector<Value *> xs = sequenceInput(ctx, 0);
    if (xs.empty())
      ctx.fail("erasing from an empty sequence");
    xs.erase(xs.begin() + static_cast<int64_t>(sequencePosition(ctx, 1, xs.size(), false)));
    seqs_[out] = xs;
  } else if (op == "SequenceAt") {
    std::vector<Value *> &xs = sequenceInput(ctx, 0);
    if (xs.empty())
      ctx.fail("reading from an empty sequence");
    ctx.setOutput(0, xs[sequencePosition(ctx, 1, xs.size(), false)]);
  } else if (op == "SequenceLength") {
    ctx.setOutput(
        0, ctx.constant(Tensor::fromI64({static_cast<int64_t>(sequenceInput(ctx, 0).size())}, {})));
  } else if (op == "ConcatFromSequence") {
    std::vector<Value *> xs = sequenceInput(ctx, 0);
    if (xs.empty())
      ctx.fail("concatenating an empty sequence");
    const int64_t rank = xs[0]->type().rank();
    const bool fresh = ctx.attrInt("new_axis", 0) != 0;
    int64_t axis = ctx.attrIntReq("axis");
    if (axis < -(rank + fresh) || axis > rank - 1 + fresh)
      ctx.fail(cat("axis ", axis, " is outside rank ", rank + fresh));
    if (axis < 0)
      axis += rank + fresh;
    if (fresh)
      for (Value *&x : xs) {
        Shape sh = x->type().shape;
        sh.insert(sh.begin() + axis, 1);
        x = ctx.reshape(x, sh);
      }
    ctx.setOutput(0, xs.size() == 1 ? xs[0] : ctx.emit(Op::Concat, xs, {{"axis", axis}}));
  } else if (op == "SplitToSequence") {
    Value *x = ctx.input(0);
    const Shape &shape = x->type().shape;
    int64_t axis = ctx.attrInt("axis", 0);
    if (axis < -x->type().rank() || axis >= x->type().rank())
      ctx.fail(cat("axis ", axis, " is outside rank ", x->type().rank()));
    if (axis < 0)
      axis += x->type().rank();
    const int64_t dim = shape[static_cast<size_t>(axis)];
    Shape sizes;
    bool squeeze = false;
    if (!ctx.hasInput(1)) { // pieces of 1, squeezed unless keepdims
      sizes.assign(static_cast<size_t>(dim), 1);
      squeeze = ctx.attrInt("keepdims", 1) == 0;
    } else {
      const Tensor &t = ctx.requireConst(1, "split");
      if (t.shape().empty()) { // a scalar: chunks of that size, the last one smaller
        int64_t chunk = t.getInt(0);
        if (chunk <= 0)
          ctx.fail(cat("split ", chunk, " is not positive"));
        for (int64_t at = 0; at < dim; at += chunk)
          sizes.push_back(std::min(chunk, dim - at));
      } else {
        sizes = ctx.constInts(1, "split");
      }
    }
    std::vector<Value *> pieces =
        sizes.size() == 1 ? std::vector<Value *>{x}
                          : ctx.emitMulti(Op::Split, {x}, {{"axis", axis}, {"sizes", sizes}},
                                          static_cast<int>(sizes.size()));
    if (squeeze)
      for (Value *&v : pieces) {
        Shape sh = v->type().shape;
        sh.erase(sh.begin() + axis);
        v = ctx.reshape(v, sh);
      }
    seqs_[out] = pieces;
  } else if (op == "SequenceMap") {
    sequenceMap(ctx, n, index);
  } else if (op == "Optional") {
    if (ctx.hasInput(0))
      aliasSequence(out, n.input(0));
    optional_[out] = ctx.hasInput(0);
  } else if (op == "OptionalHasElement") {
    bool present = false;
    if (ctx.hasInput(0)) {
      auto it = optional_.find(n.input(0));
      present = it == optional_.end() ? true : it->second; // a plain tensor or sequence
    }
    Tensor t(TensorType(DType::Bool, {}));
    t.setInt(0, present ? 1 : 0);
    ctx.setOutput(0, ctx.constant(std::move(t)));
  } else if (op == "OptionalGetElement") {
    auto it = optional_.find(n.input(0));
    if (it != optional_.end() && !it->second)
      ctx.fail(cat("optional '", n.input(0), "' holds no element"));
    if (!seqs_.count(n.input(0)))
      ctx.input(0); // fails naming it when it is undefined
    aliasSequence(out, n.input(0));
  }
}

// SequenceMap: the body once per element (unrolled), reading the k-th element of each
// sequence input and every tensor input whole; each body output collects a sequence.
void Importer::sequenceMap(ConvertCtx &ctx, const onnx::NodeProto &n, int index) {
  const onnx::GraphProto &body = graphAttr(ctx, n, "body");
  const size_t count = sequenceInput(ctx, 0).size();
  if (static_cast<size_t>(body.input_size()) != ctx.numInputs())
    ctx.fail(cat("the body takes ", body.input_size(), " inputs for ", ctx.numInputs()));
  for (size_t i = 1; i < ctx.numInputs(); ++i)
    if (seqs_.count(ctx.inputName(i)) && seqs_.at(ctx.inputName(i)).size() != count)
      ctx.fail(cat("the sequences differ in length (", count, " and ",
                   seqs_.at(ctx.inputName(i)).size(), ")"));
  std::vector<std::vector<Value *>> outs(static_cast<size_t>(body.output_size()));
  for (size_t k = 0; k < count; ++k) {
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      auto it = seqs_.find(ctx.inputName(i));
      env_.values[body.input(static_cast<int>(i)).name()] =
          it != seqs_.end() ? it->second[k] : ctx.input(i);
    }
    addBranchWeights(ctx, body);
    for (const onnx::NodeProto &m : body.node())
      convertNode(m, index);
    for (int j = 0; j < body.output_size(); ++j) {
      auto it = env_.values.find(body.output(j).name());
      if (it == env_.values.end())
        ctx.fail(cat("body output '", body.output(j).name(), "' is not computed"));
      outs[static_cast<size_t>(j)].push_back(it->second);
    }
  }
  for (int j = 0; j < n.output_size() && j < body.output_size(); ++j)
    seqs_[n.output(j)] = outs[static_cast<size_t>(j)];
}

} // namespace aicf::onnx_import
