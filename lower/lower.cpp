// Lowering dispatch (see lower.h): picks the recipe for a kernel group from its anchor op and
// builds the kernel with it; groupParams creates the kernel's global params shared by all
// recipes. The table below is the only place that maps ops to recipes.
#include "lower/lower.h"

#include "lower/recipes.h"
#include "support/diagnostics.h"

namespace aicf {

std::string recipeFor(const KernelGroup &g) {
  if (!g.anchor)
    return "pointwise";
  const Node &a = *g.anchor;
  switch (a.op()) {
  case Op::ReduceSum:
  case Op::ReduceMean:
  case Op::ReduceMax:
  case Op::ReduceMin:
  case Op::ReduceProd:
  case Op::ReduceL1:
  case Op::ReduceL2:
  case Op::ReduceSumSquare:
  case Op::ReduceLogSumExp:
  case Op::ArgMax:
  case Op::ArgMin:
  case Op::GlobalAvgPool:
  case Op::GlobalMaxPool:
  case Op::InstanceNorm: // per-(n, c) statistics: the block reduction machinery
    return "reduction";
  case Op::MaxPool:
  case Op::AvgPool: return "pooling";
  case Op::Softmax:
  case Op::LogSoftmax:
  case Op::LayerNorm:
  case Op::RmsNorm: return "online_norm";
  case Op::Attention: return "streaming_attention";
  case Op::MatMul:
  case Op::Gemm: return "tiled_contraction";
  case Op::Conv: return a.i("group") == 1 ? "tiled_contraction" : "direct_conv";
  case Op::ConvTranspose: return "direct_conv";
  case Op::BatchNorm: // inference batch norm is a per-channel affine map
    return "pointwise";
  case Op::Transpose:
  case Op::Concat:
  case Op::Split:
  case Op::Slice:
  case Op::Gather:
  case Op::Expand:
  case Op::Tile:
  case Op::Pad:
  case Op::Resize: return "data_movement";
  default: break;
  }
  throw UserError(cat(a.where(), ": ", a.name(), ": no lowering recipe handles this op"));
}

kir::Kernel lowerGroup(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  std::string recipe = recipeFor(g);
  kir::Kernel k;
  if (recipe == "pointwise")
    k = recipePointwise(g, name, knobs);
  else if (recipe == "reduction")
    k = recipeReduction(g, name, knobs);
  else if (recipe == "pooling")
    k = recipePooling(g, name, knobs);
  else if (recipe == "data_movement")
    k = recipeDataMovement(g, name, knobs);
  else if (recipe == "online_norm")
    k = recipeOnlineNorm(g, name, knobs);
  else if (recipe == "streaming_attention")
    k = recipeStreamingAttention(g, name, knobs);
  else if (recipe == "tiled_contraction")
    k = recipeTiledContraction(g, name, knobs);
  else if (recipe == "direct_conv")
    k = recipeDirectConv(g, name, knobs);
  else
    throw InternalError(cat("recipeFor returned unknown recipe '", recipe, "'"));
  if (k.recipe.empty())
    k.recipe = recipe;
  return k;
}

std::vector<kir::BufferP> groupParams(const KernelGroup &g,
                                      std::map<const Value *, kir::BufferP> &byValue) {
  std::vector<kir::BufferP> params;
  auto addParam = [&](const Value *v, kir::Role role) {
    AICF_CHECK(v->type().isStatic(), "group ", g.id, ": %", v->name(), " has a dynamic shape ",
               v->type().str());
    AICF_CHECK(!byValue.count(v), "group ", g.id, ": %", v->name(), " is a param twice");
    auto b = std::make_shared<kir::Buffer>();
    b->name = cat("p", params.size());
    b->dtype = v->type().dtype;
    b->shape = v->type().shape;
    b->scope = kir::Scope::Global;
    b->role = role;
    byValue[v] = b;
    params.push_back(b);
  };
  for (const Value *v : g.inputs)
    addParam(v, kir::Role::In);
  for (const Value *v : g.outputs)
    addParam(v, kir::Role::Out);
  return params;
}

} // namespace aicf
