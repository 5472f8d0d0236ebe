// VersionFullTiles: a Kernel-IR pass for kernels over symbolic dims (issue 21). A grid axis that
// tiles a symbolic extent M by BM (Kernel::symGrid: ceil(M / BM)) has a ragged last tile only,
// yet the kernel guards every row of every tile (`mt * BM + i < M`) and passes the micro-kernel
// a runtime row count (`min(BM, M - mt * BM)`), since no tile is known full at compile time. The
// guards inside the element loops keep them from vectorising, and the runtime count from the
// micro-kernel's fixed-height path: mlp_dyn's chained MLP ran 2.3x slower than its static twin.
//
//   body                 ==>   if (mt * BM + BM <= M) { body, under mt * BM + BM <= M }
//                              else { body }
//
// Under the assumption, a guard `mt * BM + x < M` with x provably in [0, BM) (its variables'
// ranges from the enclosing loops, the thread count and constants) holds, and so does a
// conjunction of such guards with anything (the other conjuncts stay); `min(BM, M - mt * BM)`
// is BM. Nothing else changes, so the full-tile version computes exactly what the body computes
// on a full tile, with the code of a static tile. Applied once per axis, outermost first.
#pragma once

#include "kir/kir.h"

#include <string>
#include <vector>

namespace aicf::kir {

// Versions k's body for its full tiles; one note per versioned axis. Whether k changed.
bool versionFullTiles(Kernel &k, std::vector<std::string> &notes);

} // namespace aicf::kir
