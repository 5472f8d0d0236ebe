// Kernel IR passes and their manager (the Kernel IR counterpart of passes/pass.h).
//
// A Kernel IR pass rewrites one kernel in place and says whether it changed it. The manager runs
// the passes in order and verifies the kernel (kir::verifyKernel: structure and the SIMT rule)
// after every pass that changed it, so a pass that breaks the SIMT rule is caught at the pass,
// not in a printer. Each pass's notes (what it applied or rejected, and why) are collected for
// --explain and the printed Kernel IR.
#pragma once

#include "kir/kir.h"

#include <memory>
#include <string>
#include <vector>

namespace aicf::kir {

class KernelPass {
public:
  virtual ~KernelPass() = default;
  virtual const char *name() const = 0;    // "fuse-reduction-epilogue"; used by --kir-passes
  virtual const char *summary() const = 0; // one line, for --help and aicfc --list-passes
  // Rewrites `k`; appends one line per decision to `notes`; returns whether `k` changed.
  virtual bool run(Kernel &k, std::vector<std::string> &notes) = 0;
};

class KernelPassManager {
public:
  void add(std::unique_ptr<KernelPass> p) { passes_.push_back(std::move(p)); }
  const std::vector<std::unique_ptr<KernelPass>> &passes() const { return passes_; }
  // Runs every pass on `k` in order, verifying after each one that changed it. A verifier
  // failure is an InternalError "Kernel IR pass 'NAME' broke kernel K: ...". Returns whether
  // anything changed; `notes`, when given, receives every pass's notes.
  bool run(Kernel &k, std::vector<std::string> *notes = nullptr) const;

private:
  std::vector<std::unique_ptr<KernelPass>> passes_;
};

// Every Kernel IR pass of kir/kernel_passes.def, by its C++ name.
enum class KernelPassId {
#define AICF_KERNEL_PASS(id, name, cls, summary) id,
#include "kir/kernel_passes.def"
#undef AICF_KERNEL_PASS
};

// Every Kernel IR pass by name (kir/kernel_passes.def); null when unknown.
std::unique_ptr<KernelPass> createKernelPass(const std::string &name);
std::unique_ptr<KernelPass> createKernelPass(KernelPassId id);
std::vector<std::string> allKernelPassNames();
// The pass's name and summary, from the table.
const char *kernelPassName(KernelPassId id);
const char *kernelPassSummary(KernelPassId id);

// The Kernel IR pipeline the compile driver runs on every lowered kernel is listed in
// driver/pipeline.cpp with the rest of the compiler (kir::buildDefaultKernelPipeline there).

} // namespace aicf::kir
