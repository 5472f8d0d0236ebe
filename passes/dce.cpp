// dce: dead-code elimination. Removes pure nodes none of whose results is used (by a node or as
// a graph output) and weights nobody uses, so later passes and the memory planner never see
// dead values. Rewrites (fusion, pattern replacement) leave such leftovers behind; removing them
// in one place keeps every rewrite simple. Graph inputs are the interface and stay.
#include "passes/pass.h"

namespace aicf {

namespace {

class DcePass : public NamedPass<PassId::Dce> {
public:
  bool run(Graph &g, PassContext &) override { return g.removeDeadCode() > 0; }
};

} // namespace

std::unique_ptr<Pass> createDcePass() {
  return std::make_unique<DcePass>();
}

} // namespace aicf
