// The reference interpreter's driver (interpreter.h): evaluates nodes through the kernel table of
// interp/kernels.cpp, walks a graph in order keeping one tensor per live value and dropping each
// intermediate after its last use, and makes seeded random inputs.
#include "interp/interpreter.h"

#include "interp/kernels.h"
#include "ir/instantiate.h"
#include "support/diagnostics.h"

#include <iterator>
#include <map>
#include <unordered_map>

namespace aicf {

std::vector<Tensor> evalNode(const Node &node, const std::vector<const Tensor *> &operands) {
  const OpInfo &info = node.info();
  auto fail = [&](const std::string &msg) -> UserError {
    return UserError(cat(node.where(), ": ", info.name, ": ", msg));
  };
  int n = static_cast<int>(operands.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands))
    throw fail(cat("got ", n, " operands"));
  std::string bad = checkAttrs(info, node.attrs);
  if (!bad.empty())
    throw fail(bad);
  // Result types come from the operands actually given, so a node can be evaluated on tensors
  // of other shapes than its graph's (and disagreeing operands are reported here).
  std::vector<TensorType> types;
  for (const Tensor *t : operands) {
    AICF_CHECK(t != nullptr, "null operand for ", node.where());
    types.push_back(t->type());
  }
  InferCtx ictx(info, types, node.attrs, static_cast<int>(node.numResults()));
  std::vector<TensorType> outTypes;
  try {
    outTypes = info.infer(ictx);
  } catch (const InferError &e) {
    throw fail(e.message);
  }
  for (const TensorType &t : outTypes)
    if (!t.isStatic())
      throw fail(cat("result type ", t.str(), " is not static"));
  interp::KernelCtx kctx{node, operands, outTypes};
  std::vector<Tensor> results = interp::kernelFor(node.op())(kctx);
  AICF_CHECK(results.size() == outTypes.size(), "kernel for ", info.name, " returned ",
             results.size(), " results, expected ", outTypes.size());
  // An op that sets a data dim returns its results at their actual length: only the dtype and
  // rank are as planned (the planning types hold the bound).
  for (size_t i = 0; i < results.size(); ++i)
    AICF_CHECK(results[i].type() == outTypes[i] ||
                   (info.has(SETS_DIM) && results[i].dtype() == outTypes[i].dtype &&
                    results[i].type().rank() == outTypes[i].rank()),
               "kernel for ", info.name, " returned ", results[i].type().str(), ", expected ",
               outTypes[i].str());
  return results;
}

namespace {
// What a graph walk leaves: the live tensors, and the values that hold no tensor because
// computing them fails the run (a fail node's result, and what depends on it), with the message.
struct Walk {
  std::unordered_map<const Value *, TensorPtr> env;
  std::unordered_map<const Value *, std::string> failed;
};
// The graph walk shared by interpret() and interpretAll(): `keepAll` keeps every value.
Walk run(const Graph &g, const std::vector<Tensor> &inputs, bool keepAll);
} // namespace

std::vector<Tensor> interpret(const Graph &g, const std::vector<Tensor> &inputs) {
  Walk w = run(g, inputs, false);
  std::unordered_map<const Value *, TensorPtr> &env = w.env;
  std::vector<Tensor> out;
  for (const Value *o : g.outputs()) {
    if (auto f = w.failed.find(o); f != w.failed.end())
      throw UserError(f->second);
    auto it = env.find(o);
    AICF_CHECK(it != env.end() && it->second, "graph output ", o->name(), " was not computed");
    out.push_back(*it->second);
  }
  return out;
}

std::map<const Value *, Tensor> interpretAll(const Graph &g, const std::vector<Tensor> &inputs) {
  Walk w = run(g, inputs, true);
  for (const Value *o : g.outputs())
    if (auto f = w.failed.find(o); f != w.failed.end())
      throw UserError(f->second);
  std::map<const Value *, Tensor> out;
  for (const auto &[v, t] : w.env)
    out.emplace(v, *t);
  return out;
}

namespace {
Walk run(const Graph &g, const std::vector<Tensor> &inputs, bool keepAll) {
  const auto &gin = g.inputs();
  if (inputs.size() != gin.size())
    throw UserError(
        cat("graph @", g.name(), " takes ", gin.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < gin.size(); ++i)
    if (inputs[i].type() != gin[i]->type())
      throw UserError(cat("input '", gin[i]->name(), "': expected ", gin[i]->type().str(), ", got ",
                          inputs[i].type().str()));

  // Live tensors: inputs are borrowed, weights shared, results owned.
  Walk w;
  std::unordered_map<const Value *, TensorPtr> &env = w.env;
  for (size_t i = 0; i < gin.size(); ++i)
    env[gin[i]] = TensorPtr(&inputs[i], [](const Tensor *) {});
  for (const Value *w : g.weights())
    env[w] = w->data();

  std::vector<Node *> nodes = g.nodes();
  std::unordered_map<const Value *, size_t> lastUse;
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value *v : nodes[k]->operands())
      lastUse[v] = k;

  // Why lazily: a fail node is the side of an If (chosen at run time) that cannot run at the
  // bound shapes, and the run must fail only when that side is taken, as on host plans, whose
  // branch guards skip it otherwise. So a fail node's result is recorded as failed instead of
  // computed; a where whose one-element condition selects its other operand computes as usual
  // (the failed operand's elements are never selected: zeros stand in for them), and any other
  // node reading a failed value fails with it. Only a graph output that failed fails the run.
  // (Evaluating the where's sides on demand instead would reorder the walk for every graph.)
  std::vector<Tensor> placeholders; // the zeros standing in, kept while the node runs
  // Data dims (lengths known only at run time, issue 51): their values as the nodes setting
  // them compute them; a later node's symbolic attributes (a reshape's sym_shape, top_k's sym_k)
  // are evaluated at them.
  std::map<std::string, int64_t> dataDims;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node &node = *nodes[k];
    const std::string *failed = nullptr;
    if (node.op() == Op::Fail)
      failed = &node.s("message");
    std::vector<const Tensor *> ops;
    placeholders.clear();
    placeholders.reserve(node.numOperands());
    for (size_t i = 0; i < node.numOperands() && !failed; ++i) {
      const Value *v = node.operand(i);
      if (auto f = w.failed.find(v); f != w.failed.end()) {
        bool unselected = node.op() == Op::Where && i > 0 && !ops.empty() && ops[0]->numel() == 1 &&
                          (ops[0]->getInt(0) != 0 ? 1u : 2u) != i;
        if (!unselected) {
          failed = &f->second;
          break;
        }
        placeholders.emplace_back(v->type());
        ops.push_back(&placeholders.back());
        continue;
      }
      auto it = env.find(v);
      AICF_CHECK(it != env.end() && it->second, node.where(), " uses a value that is not defined");
      ops.push_back(it->second.get());
    }
    if (failed) {
      std::string message = *failed;
      for (const Value *r : node.results())
        w.failed[r] = message;
      continue;
    }
    std::vector<Tensor> results;
    if (auto bound = boundAttrs(node, dataDims)) {
      // The node's symbolic attributes at the data dims' values (restored after the call).
      Node &mut = const_cast<Node &>(node);
      std::swap(mut.attrs, *bound);
      struct Restore {
        Node &n;
        AttrMap &a;
        ~Restore() { std::swap(n.attrs, a); }
      } restore{mut, *bound};
      results = evalNode(node, ops);
    } else {
      results = evalNode(node, ops);
    }
    if (node.info().has(SETS_DIM)) { // as the runtime checks it (runtime.cpp checkDataDims)
      const int64_t v = results.back().getInt(0), bound = node.i("bound");
      if (v < 0 || v > bound)
        throw UserError(cat(node.where(), ": length ", node.s("dim"), " is ", v,
                            v < 0 ? ", negative" : cat(", above its bound ", bound),
                            v < 0 ? ""
                                  : cat(" (compile with aicfc --max ", node.s("dim"),
                                        "=N for a larger bound, up to what the model "
                                        "allows)")));
      dataDims[node.s("dim")] = v;
    }
    for (size_t r = 0; r < results.size(); ++r)
      env[node.result(r)] = std::make_shared<const Tensor>(std::move(results[r]));
    if (keepAll)
      continue;
    // Free operands whose last use this was (graph outputs stay).
    for (const Value *v : node.operands())
      if (lastUse[v] == k && v->kind() == ValueKind::Result && !g.isOutput(v))
        env.erase(v);
    // Results nobody uses are dropped at once.
    for (const Value *r : node.results())
      if (!lastUse.count(r) && !g.isOutput(r))
        env.erase(r);
  }
  return w;
}
} // namespace

namespace interp {
// fail: the run fails with the node's message. The graph walk above evaluates it lazily (only
// when a graph output needs its value); evaluated on its own (evalNode), it fails at once.
std::vector<Tensor> kernel_Fail(const KernelCtx &ctx) {
  throw UserError(ctx.node.s("message"));
}

// Loop (ONNX Loop's semantics): the body runs while the iteration number is below the trip
// count and the condition holds, its outputs fed back as the next condition and carried values;
// the results are the carried values after the last iteration (the initial ones when none ran).
std::vector<Tensor> kernel_Loop(const KernelCtx &ctx) {
  const Node &n = ctx.node;
  if (!n.body)
    throw UserError(cat(n.where(), ": loop has no body graph"));
  const int64_t trip = ctx.x(0).getInt(0);
  bool cond = ctx.x(1).getInt(0) != 0;
  std::vector<Tensor> in;
  in.push_back(Tensor::fromI64({0}, {}));
  for (size_t k = 1; k < ctx.numIn(); ++k)
    in.push_back(ctx.x(k));
  for (int64_t it = 0; it < trip && cond; ++it) {
    in[0] = Tensor::fromI64({it}, {});
    std::vector<Tensor> out = interpret(*n.body, in);
    cond = out[0].getInt(0) != 0;
    for (size_t k = 0; k < out.size(); ++k)
      in[1 + k] = std::move(out[k]);
  }
  return std::vector<Tensor>(std::make_move_iterator(in.begin() + 2),
                             std::make_move_iterator(in.begin() + 2 + n.numResults()));
}
} // namespace interp

namespace {
// splitmix64 (Steele, Lea, Flood 2014): tiny, and the same sequence on every platform.
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
} // namespace

std::vector<Tensor> randomInputs(const Graph &g, uint64_t seed) {
  uint64_t state = seed;
  std::vector<Tensor> out;
  for (const Value *in : g.inputs()) {
    if (!in->type().isStatic())
      throw UserError(cat("input '", in->name(), "' has a dynamic shape ", in->type().str(),
                          "; bind it before making random inputs"));
    Tensor t(in->type());
    DType dt = t.dtype();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint64_t r = splitmix64(state);
      if (isFloat(dt))
        t.setDouble(i, static_cast<double>(r >> 40) * 0x1.0p-23 - 1.0); // [-1, 1), 24 bits
      else if (dt == DType::Bool)
        t.setInt(i, static_cast<int64_t>(r >> 63));
      else
        t.setInt(i, static_cast<int64_t>(r >> 63)); // 0 or 1: a valid mask and index
    }
    out.push_back(std::move(t));
  }
  return out;
}

} // namespace aicf
