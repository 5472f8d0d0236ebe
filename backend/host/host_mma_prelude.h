// The host micro-kernels' source (the prelude of every host kernels.cpp after the small helpers
// host_printer.cpp writes): the register-blocked mma_tile micro-kernel and the loops that walk a
// thread tile, its column panels and row blocks with it (kir.h mma_tile; docs/algorithms.md).
// Kept apart from the printer: it is C++ text the generated file compiles, not printing logic.
#pragma once

namespace aicf {

// Opens the prelude's anonymous namespace: includes and the small helpers (host_prelude.cpp).
extern const char *const kHostPrelude;
// The micro-kernel's vector types, block-offset tables and k loops (f32, bf16 pairs, int8
// quads): printed right after kHostPrelude.
extern const char *const kHostMmaPrelude;
// The register blocks, row blocks and column panels over those k loops; ends the prelude's
// anonymous namespace (host_mma_blocks_prelude.cpp).
extern const char *const kHostMmaBlocksPrelude;
extern const char *const kHostAmxPrelude;

} // namespace aicf
