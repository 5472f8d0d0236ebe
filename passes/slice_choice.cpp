// See slice_choice.h.
#include "passes/slice_choice.h"

#include "passes/explain.h"
#include "support/diagnostics.h"

#include <cstdio>

namespace aicf {

void chooseSlices(SliceDecision &d, const std::vector<int> &counts,
                  const std::function<Price(int)> &price, double margin) {
  d.unsplit = price(1);
  for (int s : counts)
    d.splits.push_back({s, price(s)});
  // The fastest split, when it is clearly faster.
  const SliceDecision::Priced *fastest = nullptr;
  for (const SliceDecision::Priced &p : d.splits)
    if (p.price.us >= 0 && (!fastest || p.price.us < fastest->price.us))
      fastest = &p;
  if (fastest && takeForm(Price(fastest->price.us), Price(d.unsplit.us), margin)) {
    d.chosen = fastest->slices;
    return;
  }
  // Else the split moving the fewest bytes, when it is within the band of equal times.
  const SliceDecision::Priced *leanest = nullptr;
  for (const SliceDecision::Priced &p : d.splits)
    if (takeForm(p.price, d.unsplit, margin) && (!leanest || p.price.bytes < leanest->price.bytes))
      leanest = &p;
  if (leanest)
    d.chosen = leanest->slices;
}

namespace {

std::string priceText(const Price &p) {
  if (p.us < 0)
    return "no fit";
  char line[64];
  std::snprintf(line, sizeof line, "%.3g us %.3g MB", p.us, double(p.bytes) / 1e6);
  return line;
}

} // namespace

std::string slicePrices(const SliceDecision &d) {
  std::string out = "unsplit " + priceText(d.unsplit) + ";";
  for (size_t i = 0; i < d.splits.size(); ++i)
    out += cat(i ? ", " : " ", d.splits[i].slices, ": ", priceText(d.splits[i].price));
  return out;
}

RewriteRecord sliceRecord(const char *pass, std::string pattern, std::vector<std::string> origins,
                          const SliceDecision &d, const std::string &what) {
  RewriteRecord rec;
  rec.pass = pass;
  rec.pattern = std::move(pattern);
  rec.origins = std::move(origins);
  rec.applied = d.chosen > 1;
  std::string priced = slicePrices(d);
  if (rec.applied)
    rec.result =
        cat(d.chosen, " ", what, " + reduce_sum", d.unsplit.us >= 0 ? cat(" (", priced, ")") : "");
  else
    rec.note = cat("unsplit is cheapest (", priced, ")");
  return rec;
}

} // namespace aicf
