// Lowering dispatch (see lower.h): picks the recipe for a kernel group from the registry
// (lower/recipe.h) by its anchor's op facts and certified memory properties, and builds the
// kernel with it; groupParams creates the kernel's global params shared by all recipes.
#include "lower/lower.h"

#include "lower/per_image.h"

#include "lower/recipe.h"
#include "lower/recipes.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

// The failed condition of `a`'s certificate for `p`, as "property fails: condition: evidence";
// "" when the property holds or was not checked.
std::string failedCondition(const Node &a, MemProperty p) {
  for (const Certificate &c : a.certificates)
    if (c.property == p && !c.holds()) {
      const Condition *bad = c.firstFailed();
      return cat(propertyName(p), " fails: ",
                 bad ? cat(bad->name, ": ", bad->evidence) : std::string("no condition held"));
    }
  return "";
}

bool checked(const Node &a, MemProperty p) {
  for (const Certificate &c : a.certificates)
    if (c.property == p)
      return true;
  return false;
}

} // namespace

RecipeSelection selectRecipe(const KernelGroup &g) {
  const Node *a = g.anchor;
  std::string failed; // the first failed certificate condition among the recipes that lower a
  for (const Recipe *r : recipeRegistry()) {
    if (!r->lowersGroup(g))
      continue;
    std::optional<MemProperty> p = r->requiredProperty();
    std::string why;
    if (!p)
      why = a ? cat("op facts (", a->name(), ")") : std::string("elementwise group");
    else if (a->props.has(*p))
      why = cat(propertyName(*p), " holds");
    else if (!checked(*a, *p)) // annotate-properties did not run on this graph: op facts only
      why = cat(propertyName(*p), " not checked (annotate-properties did not run)");
    if (why.empty()) {
      if (failed.empty())
        failed = failedCondition(*a, *p);
      continue;
    }
    if (!failed.empty()) // an earlier, specialised recipe's property failed
      return {r, cat("generic form: ", failed), true};
    return {r, why, false};
  }
  // A required property failed and no later recipe lowers the anchor without it: the family's
  // generic lowering, with the condition that sent it there.
  for (const Recipe *r : recipeRegistry())
    if (r->lowersGroup(g) && r->genericFallback())
      return {r, cat("generic form: ", failed), true};
  if (!failed.empty())
    throw UserError(
        cat(a->where(), ": ", a->name(), ": ", failed, ", and no generic recipe lowers this op"));
  throw UserError(cat(a->where(), ": ", a->name(), ": no lowering recipe handles this op"));
}

std::string recipeFor(const KernelGroup &g) {
  return selectRecipe(g).recipe->name();
}

bool groupIsSymbolic(const KernelGroup &g) {
  auto symbolic = [](const Value *v) { return v->type().isSymbolic(); };
  if (std::any_of(g.inputs.begin(), g.inputs.end(), symbolic) ||
      std::any_of(g.outputs.begin(), g.outputs.end(), symbolic))
    return true;
  for (const Node *n : g.nodes)
    if (std::any_of(n->results().begin(), n->results().end(), symbolic))
      return true;
  return false;
}

kir::Kernel buildKernel(const Recipe &r, const KernelGroup &g, const std::string &name,
                        const Knobs &knobs) {
  bool symbolic = groupIsSymbolic(g);
  // A recipe without a symbolic form still takes a symbolic batch one image at a time.
  std::optional<SymExpr> batch;
  if (symbolic && !r.symbolicDims(g) && (batch = perImageBatch(g))) {
    kir::Kernel k = buildPerImage(r, g, name, knobs, *batch);
    k.dims = g.dims;
    return k;
  }
  if (symbolic && !r.symbolicDims(g))
    throw UserError(cat(g.anchor ? g.anchor->where() : cat("group ", g.id), ": the ", r.name(),
                        " recipe does not lower symbolic dims yet (", g.kind, " over ",
                        (g.outputs.empty() ? std::string("?") : g.outputs[0]->type().str()),
                        "): bind the dims with --dim NAME=N"));
  kir::Kernel k = r.build(g, name, knobs);
  if (symbolic)
    k.dims = g.dims;
  return k;
}

kir::Kernel lowerGroup(const KernelGroup &g, const std::string &name, const Knobs &knobs) {
  return buildKernel(*selectRecipe(g).recipe, g, name, knobs);
}

kir::Kernel startKernel(const KernelGroup &g, const std::string &name, const std::string &recipe,
                        std::map<const Value *, kir::BufferP> &byValue) {
  kir::Kernel k;
  k.name = name;
  k.recipe = recipe;
  k.params = groupParams(g, byValue);
  return k;
}

std::vector<kir::BufferP> groupParams(const KernelGroup &g,
                                      std::map<const Value *, kir::BufferP> &byValue) {
  std::vector<kir::BufferP> params;
  auto addParam = [&](const Value *v, kir::Role role) {
    AICF_CHECK(v->type().isStatic(), "group ", g.id, ": %", v->name(), " has a dynamic shape ",
               v->type().str());
    AICF_CHECK(!byValue.count(v), "group ", g.id, ": %", v->name(), " is a param twice");
    // An output stored through a layout op (KernelGroup::storeThrough) is written into the
    // layout op's result: the param is that buffer.
    const KernelGroup::StoreThrough *st = role == kir::Role::Out ? g.storedThrough(v) : nullptr;
    const Value *buf = st ? st->into : v;
    auto b = std::make_shared<kir::Buffer>();
    b->name = cat("p", params.size());
    b->dtype = buf->type().dtype;
    b->shape = buf->type().shape;
    b->sym = buf->type().sym;
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
