// The reference interpreter's driver (interpreter.h): evaluates nodes through the kernel table of
// interp/kernels.cpp, walks a graph in order keeping one tensor per live value and dropping each
// intermediate after its last use, and makes seeded random inputs.
#include "interp/interpreter.h"

#include "interp/kernels.h"
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
  for (size_t i = 0; i < results.size(); ++i)
    AICF_CHECK(results[i].type() == outTypes[i], "kernel for ", info.name, " returned ",
               results[i].type().str(), ", expected ", outTypes[i].str());
  return results;
}

namespace {
// The graph walk shared by interpret() and interpretAll(): `keepAll` keeps every value.
std::unordered_map<const Value *, TensorPtr> run(const Graph &g, const std::vector<Tensor> &inputs,
                                                 bool keepAll);
} // namespace

std::vector<Tensor> interpret(const Graph &g, const std::vector<Tensor> &inputs) {
  std::unordered_map<const Value *, TensorPtr> env = run(g, inputs, false);
  std::vector<Tensor> out;
  for (const Value *o : g.outputs()) {
    auto it = env.find(o);
    AICF_CHECK(it != env.end() && it->second, "graph output ", o->name(), " was not computed");
    out.push_back(*it->second);
  }
  return out;
}

std::map<const Value *, Tensor> interpretAll(const Graph &g, const std::vector<Tensor> &inputs) {
  std::unordered_map<const Value *, TensorPtr> env = run(g, inputs, true);
  std::map<const Value *, Tensor> out;
  for (const auto &[v, t] : env)
    out.emplace(v, *t);
  return out;
}

namespace {
std::unordered_map<const Value *, TensorPtr> run(const Graph &g, const std::vector<Tensor> &inputs,
                                                 bool keepAll) {
  const auto &gin = g.inputs();
  if (inputs.size() != gin.size())
    throw UserError(
        cat("graph @", g.name(), " takes ", gin.size(), " inputs, got ", inputs.size()));
  for (size_t i = 0; i < gin.size(); ++i)
    if (inputs[i].type() != gin[i]->type())
      throw UserError(cat("input '", gin[i]->name(), "': expected ", gin[i]->type().str(), ", got ",
                          inputs[i].type().str()));

  // Live tensors: inputs are borrowed, weights shared, results owned.
  std::unordered_map<const Value *, TensorPtr> env;
  for (size_t i = 0; i < gin.size(); ++i)
    env[gin[i]] = TensorPtr(&inputs[i], [](const Tensor *) {});
  for (const Value *w : g.weights())
    env[w] = w->data();

  std::vector<Node *> nodes = g.nodes();
  std::unordered_map<const Value *, size_t> lastUse;
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const Value *v : nodes[k]->operands())
      lastUse[v] = k;

  for (size_t k = 0; k < nodes.size(); ++k) {
    const Node &node = *nodes[k];
    std::vector<const Tensor *> ops;
    for (const Value *v : node.operands()) {
      auto it = env.find(v);
      AICF_CHECK(it != env.end() && it->second, node.where(), " uses a value that is not defined");
      ops.push_back(it->second.get());
    }
    std::vector<Tensor> results = evalNode(node, ops);
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
  return env;
}
} // namespace

namespace interp {
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
