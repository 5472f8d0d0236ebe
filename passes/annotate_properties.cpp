// annotate-properties: runs every memory-property checker (passes/property_checks.h) on every
// node and attaches the properties that hold, with their certificates, to the node. The
// lowering reads these properties to pick recipes (one-pass norm, streaming attention, tiled
// contraction, inline recompute); --explain and the manifest print the certificates.
// Semantic ops, contractions and norms are also recorded in the explain log (elementwise ops
// only when a check fails), so the report stays readable.
#include "passes/explain.h"
#include "passes/passes.h"
#include "passes/property_checks.h"
#include "support/diagnostics.h"

namespace aicf {

namespace {

class AnnotateProperties : public NamedPass<PassId::AnnotateProperties> {
public:
  bool run(Graph &g, PassContext &ctx) override {
    const Target target = ctx.target.loaded();
    bool changed = false;
    for (Node *n : g.nodes()) {
      PropertySet props;
      std::vector<Certificate> certs;
      for (const PropertyChecker &pc : propertyCheckers()) {
        std::optional<Certificate> cert = pc.check(g, *n, target);
        if (!cert)
          continue;
        if (cert->holds())
          props.add(pc.property);
        certs.push_back(std::move(*cert));
      }
      bool important = n->info().has(SEMANTIC) || n->info().has(CONTRACT);
      bool anyFailed = false;
      for (const Certificate &c : certs) {
        anyFailed = anyFailed || !c.holds();
        important = important || c.norm.has_value(); // norms that are ONNX ops (mean_variance_norm)
      }
      if (ctx.explain && !certs.empty() && (important || anyFailed)) {
        RewriteRecord rec;
        rec.pass = name();
        rec.pattern = cat("properties of ", n->name(), " ", n->result()->type().str());
        rec.origins = n->loc.origins;
        rec.certificates = certs;
        rec.applied = !props.empty();
        std::string list;
        for (MemProperty p : props.list())
          list += (list.empty() ? "" : ", ") + std::string(propertyName(p));
        rec.result = "props [" + list + "]";
        for (const Certificate &c : certs)
          if (const Condition *bad = c.firstFailed(); bad && rec.note.empty())
            rec.note = cat(propertyName(c.property), ": ", bad->name, ": ", bad->evidence);
        ctx.explain->add(std::move(rec));
      }
      if (!(props == n->props)) {
        n->props = props;
        changed = true;
      }
      n->certificates = std::move(certs);
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createAnnotatePropertiesPass() {
  return std::make_unique<AnnotateProperties>();
}

} // namespace aicf
