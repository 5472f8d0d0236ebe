// Constructors of every pass, one per file in passes/. registry.cpp maps names to these;
// pipeline.cpp orders them.
#pragma once

#include "passes/pass.h"

#include <memory>

namespace aicf {

// Canonicalisation
std::unique_ptr<Pass> createFoldConstantsPass();    // fold-constants
std::unique_ptr<Pass> createCsePass();              // cse
std::unique_ptr<Pass> createSimplifyPass();         // simplify
std::unique_ptr<Pass> createLegalizeF64Pass();      // legalize-f64
std::unique_ptr<Pass> createAssignPrecisionPass();  // assign-precision
std::unique_ptr<Pass> createIoPrecisionPass();      // io-precision
std::unique_ptr<Pass> createPackWeightsPass();      // pack-weights
std::unique_ptr<Pass> createBlockChannelsPass();    // block-channels
std::unique_ptr<Pass> createFoldChannelScalePass(); // fold-channel-scale
std::unique_ptr<Pass> createDcePass();              // dce
// Pattern detection -> semantic ops
std::unique_ptr<Pass> createDetectLayerNormPass(); // detect-layer-norm
std::unique_ptr<Pass> createDetectRmsNormPass();   // detect-rms-norm
std::unique_ptr<Pass> createDetectSoftmaxPass();   // detect-softmax
std::unique_ptr<Pass> createDetectGeluPass();      // detect-gelu
std::unique_ptr<Pass> createDetectSiluPass();      // detect-silu
std::unique_ptr<Pass> createDetectHardSwishPass(); // detect-hard-swish
std::unique_ptr<Pass> createDetectAttentionPass(); // detect-attention
// Fusion and properties
std::unique_ptr<Pass> createFoldBatchNormPass();      // fold-batch-norm
std::unique_ptr<Pass> createFuseEpiloguePass();       // fuse-epilogue
std::unique_ptr<Pass> createChooseAttentionPass();    // choose-attention (no cost callback)
std::unique_ptr<Pass> createSplitKPass();             // split-k (no cost callback)
std::unique_ptr<Pass> createSplitChainsPass();        // split-chains (no cost callback)
std::unique_ptr<Pass> createMergeSiblingsPass();      // merge-siblings (no cost callback)
std::unique_ptr<Pass> createAnnotatePropertiesPass(); // annotate-properties

} // namespace aicf
