// Helpers shared by the unit tests that build a graph from IR text, run it compiled and compare
// with the interpreter: seeded weights (the parser zero-fills them) and the element-wise
// tolerance check |got - want| <= 1e-4 + 1e-4 |want|; the partition tests' names of nodes'
// results and of values, comma-separated.
#pragma once

#include "ir/graph.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace aicf::graph_checks {

inline std::string names(const std::vector<Node *> &nodes) {
  std::string s;
  for (const Node *n : nodes)
    s += (s.empty() ? "" : ",") + n->result(0)->name();
  return s;
}

inline std::string names(const std::vector<Value *> &vals) {
  std::string s;
  for (const Value *v : vals)
    s += (s.empty() ? "" : ",") + v->name();
  return s;
}

// Every weight of `g` set to seeded values in [-0.5, 0.5).
inline void fillWeights(Graph &g, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (Value *w : g.weights()) {
    auto t = std::make_shared<Tensor>(w->type());
    float *d = t->data<float>();
    for (int64_t i = 0; i < t->numel(); ++i)
      d[i] = dist(rng);
    w->setData(t);
  }
}

// Checks |got - want| <= tol + tol |want| element-wise and reports the largest error (after
// `what`, when given).
inline void checkClose(const Tensor &got, const Tensor &want, double tol = 1e-4,
                       const std::string &what = "") {
  REQUIRE(got.numel() == want.numel());
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double err = std::fabs(got.getDouble(i) - want.getDouble(i));
    worst = std::max(worst, err);
    bad += err <= tol + tol * std::fabs(want.getDouble(i)) ? 0 : 1;
  }
  MESSAGE(what, std::string(what.empty() ? "" : ": "), "max abs error ", worst, " (tolerance ", tol,
          " + ", tol, " |want|)");
  CHECK_MESSAGE(bad == 0, bad, " elements of ", what, " outside tolerance");
}

} // namespace aicf::graph_checks
