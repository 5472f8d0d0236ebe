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

// Checks |got - want| <= 1e-4 + 1e-4 |want| element-wise and reports the largest error.
inline void checkClose(const Tensor &got, const Tensor &want) {
  REQUIRE(got.numel() == want.numel());
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double err = std::fabs(got.getDouble(i) - want.getDouble(i));
    worst = std::max(worst, err);
    bad += err <= 1e-4 + 1e-4 * std::fabs(want.getDouble(i)) ? 0 : 1;
  }
  MESSAGE("max abs error ", worst);
  CHECK_MESSAGE(bad == 0, bad, " elements outside tolerance");
}

} // namespace aicf::graph_checks
