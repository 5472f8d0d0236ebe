// See kir_pass.h. The registry and the default Kernel IR pipeline are listed here, once.
#include "kir/kir_pass.h"

#include "kir/fuse_mma_tile_epilogue.h"
#include "kir/fuse_reduction_epilogue.h"
#include "kir/version_full_tiles.h"
#include "support/diagnostics.h"

namespace aicf::kir {

namespace {

// FuseReductionEpilogue (fuse_reduction_epilogue.h) as a pass: its outcome per accumulator is
// noted, and annotated in the kernel as a comment before the reduction.
class FuseReductionEpiloguePass : public KernelPass {
public:
  const char *name() const override { return "fuse-reduction-epilogue"; }
  const char *summary() const override {
    return "move an additive epilogue (bias, residual) into the reduction's init";
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    // Only reductions with an epilogue store are noted: the pass runs on every kernel, and a
    // reduction whose result goes straight into its final region has nothing to fuse.
    FuseReductionEpilogueResult r =
        fuseReductionEpilogue(k, /*annotate=*/true, /*onlyWithEpilogue=*/true);
    for (const ReductionEpilogueOutcome &o : r.outcomes)
      notes.push_back(o.text());
    return !r.outcomes.empty(); // annotations change the kernel even when nothing applied
  }
};

// FuseMmaTileEpilogue (fuse_mma_tile_epilogue.h) as a pass: every view mma_tile's reduction is
// a candidate, noted and annotated with its outcome.
class FuseMmaTileEpiloguePass : public KernelPass {
public:
  const char *name() const override { return "fuse-mma-tile-epilogue"; }
  const char *summary() const override {
    return "run a host tile's init and epilogue on the micro-kernel's registers";
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    std::vector<MmaTileEpilogueOutcome> r = fuseMmaTileEpilogue(k);
    for (const MmaTileEpilogueOutcome &o : r)
      notes.push_back(o.text());
    return !r.empty();
  }
};

class VersionFullTilesPass final : public KernelPass {
public:
  const char *name() const override { return "version-full-tiles"; }
  const char *summary() const override {
    return "symbolic grids: full tiles run a copy of the body without the ragged tile's guards";
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return versionFullTiles(k, notes);
  }
};

} // namespace

bool KernelPassManager::run(Kernel &k, std::vector<std::string> *notes) const {
  bool changed = false;
  std::vector<std::string> local;
  for (const std::unique_ptr<KernelPass> &p : passes_) {
    if (!p->run(k, notes ? *notes : local))
      continue;
    changed = true;
    std::vector<std::string> errs = verifyKernel(k);
    if (!errs.empty()) {
      std::string all;
      for (const std::string &e : errs)
        all += "\n  " + e;
      throw InternalError(cat("Kernel IR pass '", p->name(), "' broke kernel ", k.name, ":", all));
    }
  }
  return changed;
}

std::unique_ptr<KernelPass> createKernelPass(const std::string &name) {
  if (name == "fuse-reduction-epilogue")
    return std::make_unique<FuseReductionEpiloguePass>();
  if (name == "fuse-mma-tile-epilogue")
    return std::make_unique<FuseMmaTileEpiloguePass>();
  if (name == "version-full-tiles")
    return std::make_unique<VersionFullTilesPass>();
  return nullptr;
}

std::vector<std::string> allKernelPassNames() {
  return {"fuse-reduction-epilogue", "fuse-mma-tile-epilogue", "version-full-tiles"};
}

bool runDefaultKernelPipeline(Kernel &k, std::vector<std::string> *notes) {
  KernelPassManager pm;
  buildDefaultKernelPipeline(pm);
  return pm.run(k, notes);
}

void buildDefaultKernelPipeline(KernelPassManager &pm) {
  // Contractions are lowered with their additive terms (bias, gemm's beta*C, a residual) as a
  // self-update of the accumulator after the reduction; moving them into the reduction's init
  // saves a pass over the output tile. The pass leaves every other kernel as it is.
  pm.add(createKernelPass("fuse-reduction-epilogue"));
  // Then a host tile's remaining init (the bias FuseReductionEpilogue moved there) and its
  // epilogue (activation, residual, the output's store) go into the mma_tile, which runs them
  // on the micro-kernel's registers instead of as passes over the C tile.
  pm.add(createKernelPass("fuse-mma-tile-epilogue"));
  // Last, so that both versions keep what the passes above did: a kernel over symbolic dims
  // (issue 21) gets a copy of its body for full tiles, without the ragged tile's guards.
  pm.add(createKernelPass("version-full-tiles"));
}

} // namespace aicf::kir
