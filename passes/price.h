// A form's price as the cost model gives it (predicted time, planned bytes), and the one rule by
// which every priced structural choice (fusion rules 7-9, split-k, split-chains, merge-siblings)
// takes a new form over the one it replaces. Here, below the planner in the layering, so that
// passes and the partition decide by the same rule through callbacks.
#pragma once

#include <cstdint>

namespace aicf {

struct Price {
  double us = 0;     // predicted time; < 0 or +inf: no schedule fits
  int64_t bytes = 0; // planned bytes moved (0: not given)
  Price(double t = 0, int64_t b = 0) : us(t), bytes(b) {}
};

// The band of equal times: the host model's error on the measured chains is about 3%. Within it
// the form moving fewer bytes wins (the memory-centric tie-break). For example, on a multi-core
// host every row tile of rule 8's chained form streams the whole weights (each core reads them:
// more bytes than the plain kernels); on one core or a GPU (the weights stay in L2) the chain
// saves the hidden's round trip.
constexpr double kTimeBand = 0.97;

// Whether `form` replaces `base`: `form` is faster than `clearly` x base's time, or within
// kTimeBand of it and moves fewer bytes. A form without a schedule never does.
bool takeForm(const Price &form, const Price &base, double clearly);

} // namespace aicf
