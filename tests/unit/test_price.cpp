// The rule every priced structural choice decides by (passes/price.h) and the slice choice built
// on it (passes/slice_choice.h): a form replaces the one it would replace when it is clearly
// faster, or within the band of equal times and moving fewer bytes.
#include "passes/price.h"
#include "passes/slice_choice.h"

#include <doctest/doctest.h>

#include <map>

using namespace aicf;

TEST_CASE("takeForm: clearly faster, or as fast within the band and fewer bytes") {
  Price base(100, 1000);
  CHECK(takeForm({89, 2000}, base, 0.9));       // clearly faster, whatever the bytes
  CHECK_FALSE(takeForm({91, 1000}, base, 0.9)); // not clearly faster, same bytes
  CHECK(takeForm({102, 900}, base, 0.9));       // 2% slower (in the 3% band), fewer bytes
  CHECK_FALSE(takeForm({104, 900}, base, 0.9)); // outside the band
  CHECK_FALSE(takeForm({99, 0}, base, 0.9));    // bytes not given: no tie-break
  CHECK_FALSE(takeForm({-1, 10}, base, 0.9));   // no schedule fits the form
  CHECK(takeForm({500, 10}, Price(-1), 0.9));   // none fits the base
}

TEST_CASE("chooseSlices: the fastest split when clearly faster, else the leanest in the band") {
  auto run = [](std::map<int, Price> prices, double margin) {
    SliceDecision d;
    std::vector<int> counts;
    for (const auto &[s, p] : prices)
      if (s > 1)
        counts.push_back(s);
    chooseSlices(
        d, counts, [&](int s) { return prices.at(s); }, margin);
    REQUIRE(d.splits.size() == counts.size());
    return d;
  };
  // 4 slices are clearly faster: taken though 2 move fewer bytes.
  CHECK(run({{1, {100, 1000}}, {2, {95, 700}}, {4, {80, 900}}}, 0.9).chosen == 4);
  // None clearly faster: the leanest split within the band (2 slices, 1% slower, fewer bytes).
  SliceDecision d = run({{1, {100, 1000}}, {2, {101, 700}}, {4, {99, 800}}}, 0.9);
  CHECK(d.chosen == 2);
  CHECK(slicePrices(d) == "unsplit 100 us 0.001 MB; 2: 101 us 0.0007 MB, 4: 99 us 0.0008 MB");
  // Within the band but more bytes: not split.
  CHECK(run({{1, {100, 1000}}, {2, {98, 1100}}}, 0.9).chosen == 1);
  // Fewer bytes but slower than the band: not split.
  CHECK(run({{1, {100, 1000}}, {2, {110, 500}}}, 0.9).chosen == 1);
  // The unsplit form fits no schedule: the fastest split that does.
  CHECK(run({{1, {-1, 0}}, {2, {-1, 0}}, {4, {50, 900}}, {8, {60, 800}}}, 0.9).chosen == 4);
}
