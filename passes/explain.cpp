// Printing of the explain log and the coverage summary (see explain.h).
#include "passes/explain.h"

#include <yaml-cpp/yaml.h>

#include <map>
#include <set>

namespace aicf {

int ExplainLog::applied() const {
  int n = 0;
  for (const RewriteRecord &r : records_)
    n += r.applied ? 1 : 0;
  return n;
}

int ExplainLog::rejected() const {
  return static_cast<int>(records_.size()) - applied();
}

static void printOrigins(std::ostream &os, const std::vector<std::string> &origins) {
  os << "    nodes:";
  if (origins.empty())
    os << " (no ONNX origins: hand-written IR)";
  size_t shown = 0;
  for (const std::string &o : origins) {
    if (shown == 12) {
      os << " ... (" << origins.size() << " in all)";
      break;
    }
    os << (shown++ ? ", " : " ") << o;
  }
  os << "\n";
}

void ExplainLog::printText(std::ostream &os) const {
  os << "== rewrites: " << applied() << " applied, " << rejected() << " rejected\n";
  for (const RewriteRecord &r : records_) {
    os << (r.applied ? "[applied]  " : "[rejected] ") << r.pattern;
    if (r.applied && !r.result.empty())
      os << " -> " << r.result;
    os << "   (" << r.pass << ")\n";
    printOrigins(os, r.origins);
    for (const Certificate &c : r.certificates) {
      os << "    property " << propertyName(c.property) << ": "
         << (c.holds() ? "holds" : "does not hold");
      if (!c.rewrite.empty())
        os << "; rewrite " << c.rewrite;
      os << "; " << exactnessName(c.exactness) << "\n";
      for (const Condition &cond : c.conditions)
        os << "      " << (cond.held ? "[ok]   " : "[FAIL] ") << cond.name << ": " << cond.evidence
           << "\n";
    }
    if (!r.applied && !r.note.empty())
      os << "    rejected because: " << r.note << "\n";
  }
}

Coverage computeCoverage(const Graph &g) {
  Coverage c;
  std::set<std::string> all, covered;
  std::map<std::string, std::set<std::string>> plain; // op -> origins
  for (const Node *n : g.nodes()) {
    bool fused =
        n->info().has(SEMANTIC) || n->loc.origins.size() > 1 ||
        (n->info().has(CONTRACT) && n->hasAttr("epilogue") && !n->strs("epilogue").empty());
    for (const std::string &o : n->loc.origins) {
      all.insert(o);
      if (fused)
        covered.insert(o);
    }
  }
  for (const Node *n : g.nodes())
    for (const std::string &o : n->loc.origins)
      if (!covered.count(o))
        plain[n->name()].insert(o);
  c.originalNodes = static_cast<int>(all.size());
  c.inSemantic = static_cast<int>(covered.size());
  for (auto &[op, origins] : plain)
    c.unmatched.emplace_back(op, std::vector<std::string>(origins.begin(), origins.end()));
  return c;
}

void printCoverage(std::ostream &os, const Coverage &c) {
  os << "== coverage: " << c.inSemantic << " of " << c.originalNodes
     << " ONNX nodes (that remain as computation) are inside semantic or fused operators\n";
  for (const auto &[op, origins] : c.unmatched) {
    os << "   unmatched " << op << " (" << origins.size() << "):";
    for (size_t i = 0; i < origins.size() && i < 8; ++i)
      os << (i ? ", " : " ") << origins[i];
    if (origins.size() > 8)
      os << ", ...";
    os << "\n";
  }
}

void ExplainLog::writeYaml(std::ostream &os, const Graph &finalGraph) const {
  YAML::Emitter y;
  y << YAML::BeginMap;
  y << YAML::Key << "schema" << YAML::Value << "aicf-explain/1";
  y << YAML::Key << "graph" << YAML::Value << finalGraph.name();
  y << YAML::Key << "rewrites" << YAML::Value << YAML::BeginSeq;
  for (const RewriteRecord &r : records_) {
    y << YAML::BeginMap;
    y << YAML::Key << "pass" << YAML::Value << r.pass;
    y << YAML::Key << "pattern" << YAML::Value << r.pattern;
    y << YAML::Key << "applied" << YAML::Value << r.applied;
    if (r.applied)
      y << YAML::Key << "result" << YAML::Value << r.result;
    else
      y << YAML::Key << "failed" << YAML::Value << r.note;
    y << YAML::Key << "nodes" << YAML::Value << YAML::Flow << r.origins;
    y << YAML::Key << "certificates" << YAML::Value << YAML::BeginSeq;
    for (const Certificate &c : r.certificates) {
      y << YAML::BeginMap;
      y << YAML::Key << "property" << YAML::Value << propertyName(c.property);
      y << YAML::Key << "holds" << YAML::Value << c.holds();
      y << YAML::Key << "rewrite" << YAML::Value << c.rewrite;
      y << YAML::Key << "exactness" << YAML::Value << exactnessName(c.exactness);
      y << YAML::Key << "conditions" << YAML::Value << YAML::BeginSeq;
      for (const Condition &cond : c.conditions) {
        y << YAML::BeginMap;
        y << YAML::Key << "name" << YAML::Value << cond.name;
        y << YAML::Key << "held" << YAML::Value << cond.held;
        y << YAML::Key << "evidence" << YAML::Value << cond.evidence;
        y << YAML::EndMap;
      }
      y << YAML::EndSeq << YAML::EndMap;
    }
    y << YAML::EndSeq << YAML::EndMap;
  }
  y << YAML::EndSeq;
  Coverage cov = computeCoverage(finalGraph);
  y << YAML::Key << "coverage" << YAML::Value << YAML::BeginMap;
  y << YAML::Key << "onnx_nodes" << YAML::Value << cov.originalNodes;
  y << YAML::Key << "in_semantic_or_fused" << YAML::Value << cov.inSemantic;
  y << YAML::Key << "unmatched" << YAML::Value << YAML::BeginMap;
  for (const auto &[op, origins] : cov.unmatched)
    y << YAML::Key << op << YAML::Value << YAML::Flow << origins;
  y << YAML::EndMap << YAML::EndMap;
  y << YAML::EndMap;
  os << y.c_str() << "\n";
}

} // namespace aicf
