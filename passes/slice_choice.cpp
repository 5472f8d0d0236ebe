// See slice_choice.h.
#include "passes/slice_choice.h"

#include "passes/explain.h"
#include "support/diagnostics.h"

namespace aicf {

void chooseSlices(SliceDecision &d, const std::vector<int> &counts,
                  const std::function<double(int)> &price, double margin) {
  d.unsplitUs = price(1);
  double best = d.unsplitUs;
  for (int s : counts) {
    double us = price(s);
    d.splits.emplace_back(s, us);
    if (us >= 0 && (best < 0 || us < best)) {
      best = us;
      if (d.unsplitUs < 0 || us < margin * d.unsplitUs)
        d.chosen = s;
    }
  }
}

RewriteRecord sliceRecord(const char *pass, std::string pattern, std::vector<std::string> origins,
                          const SliceDecision &d, const std::string &what) {
  RewriteRecord rec;
  rec.pass = pass;
  rec.pattern = std::move(pattern);
  rec.origins = std::move(origins);
  rec.applied = d.chosen > 1;
  std::string priced;
  for (const auto &[s, us] : d.splits)
    priced += cat(priced.empty() ? "" : ", ", s, ": ", us < 0 ? "no fit" : cat(us, " us"));
  if (rec.applied)
    rec.result = cat(d.chosen, " ", what, " + reduce_sum",
                     d.unsplitUs >= 0 ? cat(" (unsplit ", d.unsplitUs, " us; ", priced, ")") : "");
  else
    rec.note = cat("unsplit is cheapest (", d.unsplitUs, " us; ", priced, ")");
  return rec;
}

} // namespace aicf
