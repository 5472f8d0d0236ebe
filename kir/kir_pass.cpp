// See kir_pass.h. The passes are declared in kir/kernel_passes.def; driver/pipeline.cpp orders
// them.
#include "kir/kir_pass.h"

#include "kir/fuse_mma_tile_epilogue.h"
#include "kir/fuse_reduction_epilogue.h"
#include "kir/name_shared_exprs.h"
#include "kir/split_guarded_loops.h"
#include "kir/unswitch_invariant_selects.h"
#include "kir/version_full_tiles.h"
#include "kir/version_lane_guards.h"
#include "support/diagnostics.h"

namespace aicf::kir {

namespace {

struct KernelPassInfo {
  const char *name;
  const char *summary;
};

constexpr KernelPassInfo kKernelPassInfo[] = {
#define AICF_KERNEL_PASS(id, name, cls, summary) {name, summary},
#include "kir/kernel_passes.def"
#undef AICF_KERNEL_PASS
};

constexpr KernelPassId kAllKernelPasses[] = {
#define AICF_KERNEL_PASS(id, name, cls, summary) KernelPassId::id,
#include "kir/kernel_passes.def"
#undef AICF_KERNEL_PASS
};

} // namespace

const char *kernelPassName(KernelPassId id) {
  return kKernelPassInfo[static_cast<int>(id)].name;
}

const char *kernelPassSummary(KernelPassId id) {
  return kKernelPassInfo[static_cast<int>(id)].summary;
}

namespace {

// FuseReductionEpilogue (fuse_reduction_epilogue.h) as a pass: its outcome per accumulator is
// noted, and annotated in the kernel as a comment before the reduction.
class FuseReductionEpiloguePass : public KernelPass {
public:
  const char *name() const override { return kernelPassName(KernelPassId::FuseReductionEpilogue); }
  const char *summary() const override {
    return kernelPassSummary(KernelPassId::FuseReductionEpilogue);
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
  const char *name() const override { return kernelPassName(KernelPassId::FuseMmaTileEpilogue); }
  const char *summary() const override {
    return kernelPassSummary(KernelPassId::FuseMmaTileEpilogue);
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
  const char *name() const override { return kernelPassName(KernelPassId::VersionFullTiles); }
  const char *summary() const override { return kernelPassSummary(KernelPassId::VersionFullTiles); }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return versionFullTiles(k, notes);
  }
};

class UnswitchInvariantSelectsPass final : public KernelPass {
public:
  const char *name() const override {
    return kernelPassName(KernelPassId::UnswitchInvariantSelects);
  }
  const char *summary() const override {
    return kernelPassSummary(KernelPassId::UnswitchInvariantSelects);
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return unswitchInvariantSelects(k, notes);
  }
};

class VersionLaneGuardsPass final : public KernelPass {
public:
  const char *name() const override { return kernelPassName(KernelPassId::VersionLaneGuards); }
  const char *summary() const override {
    return kernelPassSummary(KernelPassId::VersionLaneGuards);
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return versionLaneGuards(k, notes);
  }
};

class SplitGuardedLoopsPass final : public KernelPass {
public:
  const char *name() const override { return kernelPassName(KernelPassId::SplitGuardedLoops); }
  const char *summary() const override {
    return kernelPassSummary(KernelPassId::SplitGuardedLoops);
  }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return splitGuardedLoops(k, notes);
  }
};

class NameSharedExprsPass final : public KernelPass {
public:
  const char *name() const override { return kernelPassName(KernelPassId::NameSharedExprs); }
  const char *summary() const override { return kernelPassSummary(KernelPassId::NameSharedExprs); }
  bool run(Kernel &k, std::vector<std::string> &notes) override {
    return nameSharedExprs(k, notes);
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

std::unique_ptr<KernelPass> createKernelPass(KernelPassId id) {
  switch (id) {
#define AICF_KERNEL_PASS(id, name, cls, summary)                                                   \
  case KernelPassId::id:                                                                           \
    return std::make_unique<cls>();
#include "kir/kernel_passes.def"
#undef AICF_KERNEL_PASS
  }
  return nullptr;
}

std::unique_ptr<KernelPass> createKernelPass(const std::string &name) {
  for (KernelPassId id : kAllKernelPasses)
    if (name == kernelPassName(id))
      return createKernelPass(id);
  return nullptr;
}

std::vector<std::string> allKernelPassNames() {
  std::vector<std::string> names;
  for (KernelPassId id : kAllKernelPasses)
    names.emplace_back(kernelPassName(id));
  return names;
}

} // namespace aicf::kir
