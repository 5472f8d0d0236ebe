// Every pass, by name, listed explicitly (no static-initialiser registration,
// docs/contributing.md): this list is what --passes, --print-ir-before/after and `aicf-opt --help`
// know about. Adding a pass: one file passes/NAME.cpp defining its constructor, declared in
// passes/passes.h, and one line below. The order here is only the order of listings;
// passes/pipeline.cpp orders the run.
#include "passes/pass.h"

#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

struct PassEntry {
  const char *name; // must equal the pass's name()
  std::unique_ptr<Pass> (*create)();
};

const PassEntry kPasses[] = {
    // Canonicalisation
    {"fold-constants", createFoldConstantsPass},
    {"cse", createCsePass},
    {"simplify", createSimplifyPass},
    {"dce", createDcePass},
    // Pattern detection -> semantic ops
    {"detect-layer-norm", createDetectLayerNormPass},
    {"detect-rms-norm", createDetectRmsNormPass},
    {"detect-softmax", createDetectSoftmaxPass},
    {"detect-gelu", createDetectGeluPass},
    {"detect-silu", createDetectSiluPass},
    {"detect-hard-swish", createDetectHardSwishPass},
    {"detect-attention", createDetectAttentionPass},
    // Fusion and properties
    {"fold-batch-norm", createFoldBatchNormPass},
    {"fuse-epilogue", createFuseEpiloguePass},
    // A codegen choice on the graph: the compile driver runs it with the planner's cost callback
    // after the default pipeline, then annotate-properties again (passes/choose_attention.h)
    {"choose-attention", createChooseAttentionPass},
    // Likewise, for GPU plans: deep contractions with few output tiles in K slices
    // (passes/split_k.h)
    {"split-k", createSplitKPass},
    // (passes/split_chains.h)
    {"split-chains", createSplitChainsPass},
    // ... and sibling contractions of one A as one over their concatenated weights
    // (passes/merge_siblings.h)
    {"merge-siblings", createMergeSiblingsPass},
    {"annotate-properties", createAnnotatePropertiesPass},
    // A host plan's weight layout: the compile driver runs it for host plans (pack_weights.cpp)
    {"pack-weights", createPackWeightsPass},
    {"legalize-f64", createLegalizeF64Pass},
    // GPU plans under --precision: products on tensor cores, weights stored in the precision
    // (assign_precision.cpp); the compile driver runs it
    {"assign-precision", createAssignPrecisionPass},
    // ... and --io-precision: the model's inputs and outputs exchanged in another type
    {"io-precision", createIoPrecisionPass},
    // A host plan's conv layout: the compile driver runs it for host plans (block_channels.cpp)
    {"block-channels", createBlockChannelsPass},
    // ... and a squeeze-and-excitation scale folded into the next pointwise blocked_conv
    // (fold_channel_scale.cpp), after block-channels
    {"fold-channel-scale", createFoldChannelScalePass},
};

} // namespace

std::unique_ptr<Pass> createPass(const std::string &name) {
  for (const PassEntry &e : kPasses)
    if (name == e.name)
      return e.create();
  return nullptr;
}

std::vector<std::string> allPassNames() {
  std::vector<std::string> names;
  for (const PassEntry &e : kPasses)
    names.emplace_back(e.name);
  return names;
}

void checkPassNames(const std::vector<std::string> &names, const char *flag, bool allowAll) {
  std::vector<std::string> known = allPassNames();
  for (const std::string &n : names) {
    if ((allowAll && n == "all") || std::find(known.begin(), known.end(), n) != known.end())
      continue;
    std::string list;
    for (const std::string &k : known)
      list += (list.empty() ? "" : ", ") + k;
    throw UserError(
        cat("unknown pass '", n, "' in ", flag, " (known: ", list, allowAll ? ", or all" : "", ")"),
        1);
  }
}

} // namespace aicf
