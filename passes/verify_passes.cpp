// See verify_passes.h. Outputs are compared by position: passes never reorder graph outputs.
#include "passes/verify_passes.h"

#include "interp/interpreter.h"
#include "support/diagnostics.h"

#include <cmath>
#include <optional>
#include <string>

namespace aicf {

class PassVerifier {
public:
  PassVerifier(const Graph &g, PassVerifierOptions opts) : opts_(opts) {
    inputs_ = randomInputs(g, opts_.seed);
    for (Value *in : g.inputs())
      inputNames_.push_back(in->name());
    try {
      reference_ = interpret(g, inputs_);
    } catch (const UserError &e) {
      // Random inputs may take the side of a branch that cannot run at these shapes (a fail
      // node): then every rewritten graph must fail the same way.
      bool fails = false;
      for (const Node *n : g.nodes())
        fails = fails || n->op() == Op::Fail;
      if (!fails)
        throw;
      failure_ = e.what();
    }
  }

  void check(const Pass &pass, const Graph &g) {
    std::vector<Tensor> inputs;
    for (Value *in : g.inputs()) {
      size_t k = 0;
      while (k < inputNames_.size() && inputNames_[k] != in->name())
        ++k;
      if (k == inputNames_.size())
        throw InternalError(cat("pass '", pass.name(), "' added graph input ", in->name()));
      inputs.push_back(inputs_[k]);
    }
    if (failure_) {
      try {
        interpret(g, inputs);
      } catch (const UserError &e) {
        if (e.what() == *failure_)
          return;
        throw UserError(cat("--verify-passes: pass '", pass.name(), "' changed the run's error '",
                            *failure_, "' to '", e.what(), "'"));
      }
      throw UserError(cat("--verify-passes: pass '", pass.name(), "' made the run that failed ('",
                          *failure_, "') succeed"));
    }
    std::vector<Tensor> got = interpret(g, inputs);
    if (got.size() != reference_.size())
      throw UserError(
          cat("--verify-passes: pass '", pass.name(), "' changed the number of outputs"));
    for (size_t o = 0; o < got.size(); ++o) {
      const Tensor &a = got[o], &b = reference_[o];
      std::string name = g.outputs()[o]->name();
      if (a.type() != b.type())
        throw UserError(cat("--verify-passes: pass '", pass.name(), "' changed output '", name,
                            "' from ", b.type().str(), " to ", a.type().str()));
      double worst = 0;
      int64_t worstAt = -1;
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = a.getDouble(i), y = b.getDouble(i);
        if (std::isnan(x) && std::isnan(y))
          continue;
        double err = std::fabs(x - y);
        bool ok = err <= opts_.atol + opts_.rtol * std::fabs(y) || (x == y);
        if (!ok && (worstAt < 0 || err > worst || std::isnan(err))) {
          worst = err;
          worstAt = i;
        }
      }
      if (worstAt >= 0)
        throw UserError(cat("--verify-passes: pass '", pass.name(), "' changed output '", name,
                            "': max error ", worst, " at element ", worstAt, " (got ",
                            a.getDouble(worstAt), ", expected ", b.getDouble(worstAt),
                            "; tolerance ", opts_.atol, " + ", opts_.rtol, "*|expected|)"));
    }
    // The graph now computes the same outputs; keep the reference as it was (no drift).
  }

private:
  PassVerifierOptions opts_;
  std::vector<Tensor> inputs_;
  std::vector<std::string> inputNames_;
  std::vector<Tensor> reference_;
  std::optional<std::string> failure_; // the reference run's error (a fail node's message)
};

std::shared_ptr<PassVerifier> installPassVerifier(const Graph &g, PassManagerOptions &opts,
                                                  PassVerifierOptions vopts) {
  auto verifier = std::make_shared<PassVerifier>(g, vopts);
  auto previous = opts.afterChangedPass;
  opts.afterChangedPass = [verifier, previous](const Pass &p, const Graph &after) {
    if (previous)
      previous(p, after);
    verifier->check(p, after);
  };
  return verifier;
}

} // namespace aicf
