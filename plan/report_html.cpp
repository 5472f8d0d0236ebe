// See report_html.h. Everything is drawn here, in C++, as static SVG: the page needs no script,
// renders the same in any browser, and its bytes depend only on the folder's texts.
#include "plan/report_html.h"

#include "ir/parser.h"
#include "support/diagnostics.h"
#include "support/output_folder.h"
#include "support/plan_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace aicf {

namespace {

std::string esc(const std::string &s) {
  std::string o;
  for (char c : s) {
    switch (c) {
    case '&': o += "&amp;"; break;
    case '<': o += "&lt;"; break;
    case '>': o += "&gt;"; break;
    case '"': o += "&quot;"; break;
    default: o += c;
    }
  }
  return o;
}

std::string num(double v, const char *fmt = "%.4g") {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::string text(const YAML::Node &n) {
  if (!n)
    return "";
  if (n.IsScalar())
    return n.Scalar();
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

double number(const YAML::Node &n, double fallback = -1) {
  try {
    return n ? n.as<double>() : fallback;
  } catch (const YAML::Exception &) {
    return fallback;
  }
}

// Step s's colour: hues spread by the golden angle, so neighbouring steps differ.
std::string colour(int s, int light = 78) {
  return "hsl(" + num(std::fmod(s * 137.508, 360.0), "%.1f") + ",65%," + std::to_string(light) +
         "%)";
}

struct Step {
  int index;
  YAML::Node node;
  std::string kind, symbol, recipe, precision;
  double bytes = -1, lowerBound = -1, flops = -1, timeUs = -1, measuredUs = -1;
};

// The graph, nodes in layers (a node one layer below its deepest producer), coloured by the
// step whose origins include the node's.
void drawGraph(std::ostream &os, const Graph &g, const std::map<std::string, int> &stepOf) {
  std::vector<Node *> nodes = g.nodes();
  std::map<const Node *, int> layer;
  int layers = 0;
  for (const Node *n : nodes) {
    int l = 0;
    for (const Value *v : n->operands())
      if (v && v->def() && layer.count(v->def()))
        l = std::max(l, layer[v->def()] + 1);
    layer[n] = l + 1; // layer 0: the graph's inputs
    layers = std::max(layers, l + 2);
  }
  std::vector<std::vector<const Node *>> rows(static_cast<size_t>(layers));
  for (const Node *n : nodes)
    rows[static_cast<size_t>(layer[n])].push_back(n);
  const int bw = 176, bh = 40, gapX = 18, rowH = 74, pad = 20;
  size_t widest = g.inputs().size();
  for (const auto &r : rows)
    widest = std::max(widest, r.size());
  int width = pad * 2 + static_cast<int>(widest) * (bw + gapX);
  int height = pad * 2 + layers * rowH;
  std::map<const Value *, std::pair<int, int>> bottom; // value -> where its edges start
  std::ostringstream boxes, edges;
  auto xOf = [&](size_t i, size_t count) {
    int rowWidth = static_cast<int>(count) * (bw + gapX) - gapX;
    return (width - rowWidth) / 2 + static_cast<int>(i) * (bw + gapX);
  };
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *v = g.inputs()[i];
    int x = xOf(i, g.inputs().size()), y = pad;
    boxes << "<g><title>input " << esc(v->name()) << ": " << esc(v->type().str())
          << "</title><rect x='" << x << "' y='" << y << "' width='" << bw << "' height='" << bh
          << "' rx='18' class='io'/><text x='" << x + bw / 2 << "' y='" << y + 25
          << "' text-anchor='middle'>" << esc(v->name()) << "</text></g>\n";
    bottom[v] = {x + bw / 2, y + bh};
  }
  for (size_t l = 1; l < rows.size(); ++l)
    for (size_t i = 0; i < rows[l].size(); ++i) {
      const Node *n = rows[l][i];
      int x = xOf(i, rows[l].size()), y = pad + static_cast<int>(l) * rowH;
      int step = -1;
      for (const std::string &o : n->loc.origins)
        if (auto it = stepOf.find(o); it != stepOf.end()) {
          step = it->second;
          break;
        }
      std::string result = n->numResults() ? n->result()->name() : "";
      std::string type = n->numResults() ? n->result()->type().str() : "";
      boxes << "<g><title>" << esc(n->name()) << " %" << esc(result) << " : " << esc(type) << "\n"
            << esc(n->loc.str())
            << (step >= 0 ? "\nstep " + std::to_string(step) : "\nno kernel of its own (folded)")
            << "</title><rect x='" << x << "' y='" << y << "' width='" << bw << "' height='" << bh
            << "' rx='4' style='fill:" << (step >= 0 ? colour(step) : "#eeeeee") << "'"
            << (step >= 0 ? "" : " class='folded'") << "/><text x='" << x + bw / 2 << "' y='"
            << y + 17 << "' text-anchor='middle' class='op'>" << esc(n->name())
            << "</text><text x='" << x + bw / 2 << "' y='" << y + 32
            << "' text-anchor='middle' class='sub'>"
            << (step >= 0 ? "step " + std::to_string(step) + " · " : "") << esc(type.substr(0, 22))
            << "</text></g>\n";
      for (const Value *v : n->operands())
        if (auto it = bottom.find(v); it != bottom.end())
          edges << "<path d='M" << it->second.first << "," << it->second.second << " C"
                << it->second.first << "," << it->second.second + 24 << " " << x + bw / 2 << ","
                << y - 24 << " " << x + bw / 2 << "," << y << "' class='edge'/>\n";
      for (const Value *r : n->results())
        bottom[r] = {x + bw / 2, y + bh};
    }
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
     << "' class='graph'>\n"
     << edges.str() << boxes.str() << "</svg>\n";
}

// Log-log roofline: attainable FLOP/s = min(peak, intensity x bandwidth); each step at its
// arithmetic intensity (flops / predicted bytes) and achieved rate (flops / time).
void drawRoofline(std::ostream &os, const std::vector<Step> &steps, double peak, double bw,
                  double cacheBw) {
  const int W = 720, H = 420, L = 70, R = 20, T = 20, B = 50;
  double xMin = 1e9, xMax = 0, yMin = 1e30, yMax = peak;
  for (const Step &s : steps) {
    if (s.flops <= 0 || s.bytes <= 0)
      continue;
    double ai = s.flops / s.bytes;
    xMin = std::min(xMin, ai), xMax = std::max(xMax, ai);
    for (double t : {s.timeUs, s.measuredUs})
      if (t > 0) {
        double rate = s.flops / (t * 1e-6);
        yMin = std::min(yMin, rate), yMax = std::max(yMax, rate);
      }
  }
  if (xMax <= 0 || peak <= 0 || bw <= 0) {
    os << "<p>No step has arithmetic to place on a roofline.</p>\n";
    return;
  }
  double lx0 = std::floor(std::log10(std::min(xMin, peak / bw)) - 0.5);
  double lx1 = std::ceil(std::log10(std::max(xMax, peak / bw)) + 0.5);
  double ly0 = std::floor(std::log10(yMin) - 0.5), ly1 = std::ceil(std::log10(yMax) + 0.2);
  auto px = [&](double v) { return L + (std::log10(v) - lx0) / (lx1 - lx0) * (W - L - R); };
  auto py = [&](double v) { return H - B - (std::log10(v) - ly0) / (ly1 - ly0) * (H - T - B); };
  os << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
     << "' class='roofline'>\n<rect x='" << L << "' y='" << T << "' width='" << W - L - R
     << "' height='" << H - T - B << "' class='plot'/>\n";
  for (double e = lx0; e <= lx1; e += 1)
    os << "<line x1='" << num(px(std::pow(10, e)), "%.1f") << "' y1='" << T << "' x2='"
       << num(px(std::pow(10, e)), "%.1f") << "' y2='" << H - B << "' class='grid'/><text x='"
       << num(px(std::pow(10, e)), "%.1f") << "' y='" << H - B + 16 << "' text-anchor='middle'>1e"
       << num(e, "%.0f") << "</text>\n";
  for (double e = ly0; e <= ly1; e += 1)
    os << "<line x1='" << L << "' y1='" << num(py(std::pow(10, e)), "%.1f") << "' x2='" << W - R
       << "' y2='" << num(py(std::pow(10, e)), "%.1f") << "' class='grid'/><text x='" << L - 6
       << "' y='" << num(py(std::pow(10, e)) + 4, "%.1f") << "' text-anchor='end'>1e"
       << num(e, "%.0f") << "</text>\n";
  os << "<text x='" << (L + W - R) / 2 << "' y='" << H - 12
     << "' text-anchor='middle'>arithmetic intensity (flop / byte moved, predicted)</text>\n"
     << "<text x='16' y='" << (T + H - B) / 2 << "' transform='rotate(-90 16 " << (T + H - B) / 2
     << ")' text-anchor='middle'>flop / s</text>\n";
  double knee = peak / bw, a0 = std::pow(10, lx0), a1 = std::pow(10, lx1);
  os << "<polyline points='" << num(px(a0), "%.1f") << "," << num(py(a0 * bw), "%.1f") << " "
     << num(px(knee), "%.1f") << "," << num(py(peak), "%.1f") << " " << num(px(a1), "%.1f") << ","
     << num(py(peak), "%.1f") << "' class='roof'><title>peak " << num(peak) << " flop/s, bandwidth "
     << num(bw) << " B/s</title></polyline>\n";
  if (cacheBw > bw) {
    double cknee = peak / cacheBw;
    os << "<polyline points='" << num(px(a0), "%.1f") << "," << num(py(a0 * cacheBw), "%.1f") << " "
       << num(px(cknee), "%.1f") << "," << num(py(peak), "%.1f")
       << "' class='roof cache'><title>last-level cache bandwidth " << num(cacheBw)
       << " B/s</title></polyline>\n";
  }
  for (const Step &s : steps) {
    if (s.flops <= 0 || s.bytes <= 0)
      continue;
    double x = px(s.flops / s.bytes);
    if (s.timeUs > 0) {
      double y = py(s.flops / (s.timeUs * 1e-6));
      os << "<g><title>step " << s.index << " " << esc(s.symbol) << ": predicted " << num(s.timeUs)
         << " us, " << num(s.flops / s.bytes) << " flop/B</title><circle cx='" << num(x, "%.1f")
         << "' cy='" << num(y, "%.1f") << "' r='6' style='fill:" << colour(s.index, 55)
         << "'/><text x='" << num(x + 8, "%.1f") << "' y='" << num(y - 6, "%.1f")
         << "' class='sub'>" << s.index << "</text></g>\n";
    }
    if (s.measuredUs > 0) {
      double y = py(s.flops / (s.measuredUs * 1e-6));
      os << "<g><title>step " << s.index << " " << esc(s.symbol) << ": measured "
         << num(s.measuredUs) << " us</title><path d='M" << num(x, "%.1f") << ","
         << num(y - 7, "%.1f") << " l6,11 h-12 z' style='fill:" << colour(s.index, 35)
         << "'/></g>\n";
    }
  }
  os << "</svg>\n<p class='legend'>● predicted &nbsp; ▲ measured (<code>aicf-run OUT --profile "
        "--report</code>) &nbsp; solid: the DRAM roofline of the hardware planned for"
     << (cacheBw > bw ? "; dashed: its last-level cache (steps above the DRAM line keep their "
                        "data on chip)"
                      : "")
     << "</p>\n";
}

const char *kStyle = R"(<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:6px 0} td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:10px;background:#6a9fd8;vertical-align:middle}
.lb{display:inline-block;height:10px;background:#2f5f8f;vertical-align:middle}
.swatch{display:inline-block;width:12px;height:12px;border:1px solid #888;vertical-align:middle;margin-right:4px}
.graphbox{overflow:auto;max-height:900px;border:1px solid #ddd}
svg text{font:11px system-ui,sans-serif} svg .op{font-weight:600;font-size:12px} svg .sub{fill:#333;font-size:10px}
rect.io{fill:#fff;stroke:#444} svg rect{stroke:#555;stroke-width:1} rect.folded{stroke-dasharray:3 2}
path.edge{fill:none;stroke:#8a8a8a;stroke-width:1.2}
rect.plot{fill:#fcfcfc;stroke:#bbb} line.grid{stroke:#e6e6e6} polyline.roof{fill:none;stroke:#c0392b;stroke-width:2} polyline.cache{stroke:#e67e22;stroke-dasharray:6 4}
.ok{color:#1e7e34;font-weight:600} .no{color:#b02a37;font-weight:600} .muted{color:#777}
details{margin:4px 0} summary{cursor:pointer} code{background:#f4f4f4;padding:0 3px}
</style>
)";

} // namespace

namespace {

namespace pk = plan_key; // plan.yaml's keys (support/plan_schema.def)

// plan.yaml's steps with their predictions and measured times; stepOf: origin node -> step.
std::vector<Step> readSteps(const YAML::Node &plan, const std::vector<double> &measuredUs,
                            std::map<std::string, int> &stepOf) {
  std::vector<Step> steps;
  for (size_t i = 0; i < plan[pk::plan::steps].size(); ++i) {
    YAML::Node n = plan[pk::plan::steps][i];
    Step s;
    s.index = static_cast<int>(i);
    s.node = n;
    s.kind = text(n[pk::step::kind]);
    s.symbol = text(n[pk::step::kind_id]);
    YAML::Node h = n[pk::step::hints];
    if (h) {
      YAML::Node predicted = h[pk::hints::predicted];
      s.recipe = text(h[pk::hints::recipe]);
      s.precision = text(h[pk::hints::precision]);
      s.bytes = number(predicted[pk::predicted::bytes]);
      s.lowerBound = number(predicted[pk::predicted::lower_bound_bytes]);
      s.flops = number(predicted[pk::predicted::flops]);
      s.timeUs = number(predicted[pk::predicted::time_us]);
      for (const auto &o : h[pk::hints::origins])
        stepOf.emplace(o.Scalar(), s.index);
    }
    if (i < measuredUs.size())
      s.measuredUs = measuredUs[i];
    steps.push_back(s);
  }
  return steps;
}

// Each searched step's choice and its ranked alternatives.
void writeAlternatives(std::ostream &os, const std::vector<Step> &steps) {
  for (const Step &s : steps) {
    YAML::Node h = s.node[pk::step::hints];
    if (!h || !h[pk::hints::search])
      continue;
    YAML::Node search = h[pk::hints::search];
    os << "<details><summary><span class='swatch' style='background:" << colour(s.index)
       << "'></span>step " << s.index << " <code>" << esc(s.symbol)
       << "</code>: " << esc(text(search[pk::search::candidates])) << " candidates, "
       << esc(text(search[pk::search::feasible])) << " feasible</summary>\n<p>"
       << esc(text(search[pk::search::reason])) << "</p>\n<table><tr><th>rank</th><th>knobs</th>"
       << "<th>predicted us</th><th>why not</th></tr>\n<tr><td>chosen</td><td>"
       << esc(text(h[pk::hints::knobs])) << "</td><td class='n'>" << num(s.timeUs)
       << "</td><td></td></tr>\n";
    int rank = 1;
    for (const auto &a : h[pk::hints::alternatives])
      os << "<tr><td>" << rank++ << "</td><td>" << esc(text(a[pk::alternative::knobs]))
         << "</td><td class='n'>" << esc(text(a[pk::alternative::cost_us])) << "</td><td>"
         << esc(text(a[pk::alternative::rejected])) << "</td></tr>\n";
    os << "</table></details>\n";
  }
}

} // namespace

std::string renderReportHtml(const ReportSources &src, const std::vector<double> &measuredUs) {
  YAML::Node plan = YAML::Load(src.planYaml);
  YAML::Node explain = src.explainYaml.empty() ? YAML::Node() : YAML::Load(src.explainYaml);
  std::map<std::string, int> stepOf;
  std::vector<Step> steps = readSteps(plan, measuredUs, stepOf);
  YAML::Node target = plan[pk::plan::target];

  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>aicf report: "
     << esc(src.title) << "</title>\n"
     << kStyle << "</head><body>\n";
  os << "<h1>aicf report: " << esc(src.title) << "</h1>\n<p class='muted'>"
     << esc(text(target[pk::target::name])) << " plan";
  if (text(target[pk::target::plan_for]) != text(target[pk::target::name]))
    os << " (the " << esc(text(target[pk::target::plan_for])) << " plan, emulated)";
  os << " · " << esc(text(plan[pk::plan::hardware])) << " · schedule "
     << esc(text(target[pk::target::schedule])) << " · precision "
     << esc(text(target[pk::target::precision])) << "</p>\n";
  double totalBytes = 0, totalLb = 0, totalUs = 0, totalMeasured = 0;
  for (const Step &s : steps) {
    totalBytes += std::max(0.0, s.bytes), totalLb += std::max(0.0, s.lowerBound);
    totalUs += std::max(0.0, s.timeUs), totalMeasured += std::max(0.0, s.measuredUs);
  }
  os << "<p>" << steps.size() << " steps; predicted " << num(totalUs) << " us";
  if (totalMeasured > 0)
    os << ", measured " << num(totalMeasured) << " us";
  os << "; bytes moved " << num(totalBytes, "%.0f") << " against a compulsory "
     << num(totalLb, "%.0f") << " (" << (totalLb > 0 ? num(totalBytes / totalLb, "%.2f") : "-")
     << "x); arena " << esc(text(plan[pk::plan::arena][pk::arena::bytes])) << " bytes, weights "
     << esc(text(plan[pk::plan::weights][pk::weights::bytes])) << " bytes.</p>\n";

  // Kernels: bytes against the bound, time.
  os << "<h2>Kernels: predicted bytes against the compulsory bound</h2>\n<table><tr><th>step</th>"
        "<th>kernel</th><th>recipe</th><th>precision</th><th>knobs</th><th>launch</th><th>bytes"
        "</th><th>lower bound</th><th>bytes / bound</th><th>flops</th><th>predicted us</th>"
     << (measuredUs.empty() ? "" : "<th>measured us</th>") << "</tr>\n";
  double maxBytes = 1;
  for (const Step &s : steps)
    maxBytes = std::max(maxBytes, s.bytes);
  for (const Step &s : steps) {
    os << "<tr><td><span class='swatch' style='background:" << colour(s.index) << "'></span>"
       << s.index << "</td><td><code>" << esc(s.symbol) << "</code> " << esc(s.kind) << "</td><td>"
       << esc(s.recipe) << "</td><td>" << esc(s.precision) << "</td><td>"
       << esc(text(s.node[pk::step::hints][pk::hints::knobs])) << "</td><td>"
       << esc(text(s.node[pk::step::launch])) << "</td><td class='n'>"
       << (s.bytes >= 0 ? num(s.bytes, "%.0f") : "-") << "</td><td class='n'>"
       << (s.lowerBound >= 0 ? num(s.lowerBound, "%.0f") : "-") << "</td><td>";
    if (s.bytes > 0 && s.lowerBound >= 0)
      os << "<span class='lb' style='width:" << num(160 * s.lowerBound / maxBytes, "%.1f")
         << "px'></span><span class='bar' style='width:"
         << num(160 * (s.bytes - s.lowerBound) / maxBytes, "%.1f") << "px'></span> "
         << (s.lowerBound > 0 ? num(s.bytes / s.lowerBound, "%.2f") + "x" : "");
    os << "</td><td class='n'>" << (s.flops >= 0 ? num(s.flops, "%.0f") : "-")
       << "</td><td class='n'>" << (s.timeUs >= 0 ? num(s.timeUs) : "-") << "</td>";
    if (!measuredUs.empty())
      os << "<td class='n'>" << (s.measuredUs >= 0 ? num(s.measuredUs) : "-") << "</td>";
    os << "</tr>\n";
  }
  os << "</table>\n";

  os << "<h2>Roofline</h2>\n";
  YAML::Node roofline = plan[pk::plan::roofline];
  drawRoofline(os, steps, number(roofline[pk::roofline::flops_per_s], 0),
               number(roofline[pk::roofline::bytes_per_s], 0),
               number(roofline[pk::roofline::cache_bytes_per_s], 0));

  // The graph.
  os << "<h2>Graph: nodes coloured by the kernel that computes them</h2>\n";
  if (!src.graphText.empty()) {
    try {
      std::unique_ptr<Graph> g = parseGraph(src.graphText, "graph.mcir", false);
      os << "<div class='graphbox'>\n";
      drawGraph(os, *g, stepOf);
      os << "</div>\n<p class='legend'>Dashed grey: folded into its readers (no kernel of its "
            "own). Hover a node for its type and origins.</p>\n";
    } catch (const std::exception &e) {
      os << "<p>graph.mcir could not be drawn: " << esc(e.what()) << "</p>\n";
    }
  } else {
    os << "<p class='muted'>No graph.mcir in this folder.</p>\n";
  }

  // Rewrites and certificates.
  os << "<h2>Rewrites and their certificates</h2>\n";
  if (!explain || !explain["rewrites"] || explain["rewrites"].size() == 0)
    os << "<p class='muted'>No rewrite was tried"
       << (src.explainYaml.empty() ? " (compile with --explain)" : "") << ".</p>\n";
  for (const auto &r : explain["rewrites"]) {
    bool applied = text(r["applied"]) == "true";
    os << "<details" << (applied ? " open" : "") << "><summary><b>" << esc(text(r["pass"]))
       << "</b>: " << esc(text(r["pattern"])) << " — <span class='" << (applied ? "ok" : "no")
       << "'>" << (applied ? "applied" : "not applied") << "</span>";
    if (r["result"])
      os << " → <code>" << esc(text(r["result"])) << "</code>";
    os << "</summary>\n<p class='muted'>nodes: " << esc(text(r["nodes"])) << "</p>\n";
    if (r["reason"])
      os << "<p>" << esc(text(r["reason"])) << "</p>\n";
    for (const auto &c : r["certificates"]) {
      bool holds = text(c["holds"]) == "true";
      os << "<p>certificate <b>" << esc(text(c["property"])) << "</b>: <span class='"
         << (holds ? "ok" : "no") << "'>" << (holds ? "holds" : "does not hold") << "</span>";
      if (c["rewrite"])
        os << " · " << esc(text(c["rewrite"]));
      if (c["exactness"])
        os << " · " << esc(text(c["exactness"]));
      os << "</p>\n<table><tr><th>condition</th><th>held</th><th>evidence</th></tr>\n";
      for (const auto &k : c["conditions"]) {
        bool held = text(k["held"]) == "true";
        os << "<tr><td>" << esc(text(k["name"])) << "</td><td class='" << (held ? "ok" : "no")
           << "'>" << (held ? "yes" : "no") << "</td><td>" << esc(text(k["evidence"]))
           << "</td></tr>\n";
      }
      os << "</table>\n";
    }
    os << "</details>\n";
  }

  // Ranked alternatives.
  os << "<h2>Schedules: the choice and its ranked alternatives</h2>\n";
  writeAlternatives(os, steps);
  os << "</body></html>\n";
  return os.str();
}

namespace {
std::string readText(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
} // namespace

void rewriteReportHtml(const std::string &dir, const std::vector<double> &measuredUs) {
  fs::path d(dir);
  // The page is one of aicfc's files (so a later aicfc -o still replaces the folder).
  if (!outputFolderFiles(dir).count("report.html") || !fs::exists(d / "explain.yaml"))
    throw UserError(
        cat("--report: ", dir, " has no report.html of aicfc's: compile it with --explain first"),
        1);
  ReportSources src;
  src.planYaml = readText(d / "plan.yaml");
  src.explainYaml = readText(d / "explain.yaml");
  src.graphText = readText(d / "graph.mcir");
  std::string html;
  try {
    src.title = YAML::Load(src.explainYaml)["graph"].as<std::string>("model");
    html = renderReportHtml(src, measuredUs);
  } catch (const YAML::Exception &e) { // an edited plan.yaml / explain.yaml
    throw UserError(cat("--report: ", dir, ": malformed plan.yaml or explain.yaml: ", e.what()), 2);
  }
  fs::path tmp = d / "report.html.tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f || !f.write(html.data(), static_cast<std::streamsize>(html.size())) || !f.flush())
      throw UserError(cat("cannot write ", tmp.string()), 1);
  }
  fs::rename(tmp, d / "report.html");
}

} // namespace aicf
