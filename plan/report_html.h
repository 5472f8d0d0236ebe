// report.html: one self-contained page (inline SVG and CSS, no script, no network) explaining a
// compiled folder to a person: the graph with each kernel's nodes coloured alike, every rewrite
// the passes tried with its certificate and conditions, per-kernel predicted bytes against the
// compulsory lower bound, a roofline of the steps (predicted, and measured when aicf-run
// --profile --report adds timings) and each kernel's ranked alternative schedules. aicfc
// --explain writes it beside explain.yaml; it is rendered from the folder's own texts, so the
// page shows exactly what plan.yaml and explain.yaml say, and is byte-deterministic.
#pragma once

#include <string>
#include <vector>

namespace aicf {

struct ReportSources {
  std::string planYaml;    // plan.yaml
  std::string explainYaml; // explain.yaml ("" when absent)
  std::string graphText;   // graph.mcir ("" when absent)
  std::string title;       // the model, for the heading
};

// measuredUs: one measured time per plan step (aicf-run --profile), or empty.
std::string renderReportHtml(const ReportSources &src, const std::vector<double> &measuredUs);

// Rewrites DIR/report.html from DIR's plan.yaml, explain.yaml and graph.mcir with measured step
// times. UserError when DIR was not compiled with --explain (its marker must list report.html,
// so the folder stays one aicfc may replace).
void rewriteReportHtml(const std::string &dir, const std::vector<double> &measuredUs);

} // namespace aicf
