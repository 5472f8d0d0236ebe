// The plan (Emit IR, docs/ir-format.md): one instruction per executable step, plus the buffers they
// read and write, serialised as OUT/plan.yaml (schema aicf-plan/1). Field names follow the
// design: kind (logical opcode), kind_id (the kernel symbol in libmodel.so), inputs / outputs
// (buffer ids), attrs, launch, constraints (legality for later rewrites) and hints (optimisation
// metadata that never changes meaning: properties, knobs, predicted bytes / FLOPs, certificates).
#pragma once

#include "ir/precision.h"
#include "ir/types.h"
#include "lower/fusion.h"
#include "passes/pass.h"
#include "plan/attention_choice.h"
#include "plan/chain_split_choice.h"
#include "plan/sibling_merge_choice.h"
#include "plan/split_k_choice.h"
#include "support/buffer_kind.h"
#include "target/target.h"

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace aicf {

struct PlanBuffer {
  std::string id;    // "b0", "b1", ... (stable, in creation order)
  std::string value; // the graph value's name or "%N"
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  // Symbolic dims (issue 21): every dim as an expression (plan.yaml writes these instead of
  // `shape`, the planning-point values); `bytes` is then the size at every dim's maximum, which
  // the memory plan reserves.
  std::vector<SymExpr> sym;
  BufferKind kind = BufferKind::Arena;
  int64_t offset = 0; // arena: offset in the arena; weight: offset in weights.bin
  int64_t bytes = 0;
  std::string aliasOf; // a view: shares this buffer's storage (same offset / pointer)
  int ioIndex = -1;    // input / output position
};

// ptxas' figures for one kernel (nvcc -Xptxas -v), recorded beside the predictions.
struct PtxasFigures {
  bool present = false;
  int64_t registers = 0;    // per thread
  int64_t spillBytes = 0;   // spill stores + spill loads
  int64_t staticShared = 0; // bytes of static __shared__ memory
  int64_t barriers = 0;
  int64_t stackFrame = 0; // bytes
};

// A loop step's body (kind "loop", host plans; a runtime built-in): the body's steps follow the
// loop step, `bodySteps` of them, and run once per iteration; the runtime, not the step order,
// runs them. `state`: the body's input buffers the runtime writes (iteration number, condition,
// carried values; the values it reads from outside alias the step's inputs); `next`: the body's
// outputs (the next condition and carried values), copied into `state` after each iteration.
// The step's inputs are the trip count, the condition, the initial carried values and the outer
// values; its outputs the final carried values.
struct PlanLoop {
  int bodySteps = 0;
  std::vector<std::string> state, next;
};

struct PlanStep {
  std::string kind;   // "attention", "layer_norm", "fused_elementwise", "copy"
  std::string kindId; // the kernel symbol; "" for runtime built-ins (copy)
  std::string recipe;
  // Why the recipe (lower/recipe.h selectRecipe): the certified property that selected it, or,
  // when recipeFallback, the failed certificate condition that sent the group to its family's
  // generic recipe. --explain prints it; plan.yaml `recipe_reason` for fallbacks only.
  std::string recipeReason;
  bool recipeFallback = false;
  bool writesInPlace = false; // the recipe's Recipe::writesInPlace: may write over a dying input
  std::vector<std::string> inputs, outputs; // buffer ids, in the kernel's argument order
  std::map<std::string, std::string> attrs; // typed text (the graph attributes, printed)
  std::vector<int64_t> grid;
  std::vector<SymExtent> symGrid; // a symbolic grid's extents (grid: the planning point's)
  bool dims = false;              // the kernel reads the symbolic dims (one more argument)
  // The data dims the step sets (Plan::dims' setBy are its outputs): it runs alone, never in a
  // dispatch group, since what follows is sized by them.
  std::vector<std::string> setsDims;
  int64_t threads = 1;
  int64_t chunks = 0; // host plans: the pool's chunks for the grid's blocks (cost_model.h)
  int group = -1;     // host plans: the first step of its dispatch group (dispatch_groups.h)
  // Host plans: runs only when the one-element bool buffer `guard` holds `guardWhen` (a branch
  // chosen at run time, plan/branch_guards.h); "" for an unconditional step.
  std::string guard;
  bool guardWhen = true;
  // kind "loop" (host plans; a runtime built-in): see PlanLoop.
  using Loop = PlanLoop;
  std::optional<PlanLoop> loop;
  // kind "fail" (host plans; a runtime built-in, always guarded): running it fails the run with
  // this message (a branch that cannot run at the bound shapes; plan.yaml `fail: {message}`).
  std::optional<std::string> fail;
  int64_t sharedBytes = 0;
  bool inPlace = false; // an output shares an input's storage
  std::vector<std::string> properties;
  std::map<std::string, int64_t> knobs;
  int64_t bytes = 0;                // predicted bytes moved by the kernel (tile re-reads included)
  int64_t lowerBoundBytes = 0;      // compulsory: each param read or written once
  int64_t flops = 0;                // predicted floating-point operations
  std::vector<std::string> origins; // ONNX nodes fused into the step
  PtxasFigures ptxas;               // CUDA targets: what ptxas reported for the kernel
  int64_t dynamicSharedBytes = 0;   // CUDA targets: dynamic shared memory the launcher requests
  // The planner's decision (plan/planner.h): predicted time, GPU occupancy and register
  // estimate (-1 / 0 on the host), the search and the alternatives it weighed.
  double timeUs = 0;
  double oneCoreUs = 0; // host: the time on one core where the plan is priced for several
  // The arithmetic of the step's products (kir::kernelPrecision): fp32 (SIMT, and every step
  // without a product), tf32 / fp16 / bf16 on tensor cores with f32 accumulation, or on the
  // host bf16 / int8 dot products; for those, fp32Us is the predicted time of the same tiles
  // in fp32 (--explain's speedup).
  Precision precision = Precision::F32;
  double fp32Us = 0;
  double occupancy = -1;
  int64_t registers = 0;
  struct Search {
    int candidates = 0, feasible = 0;
    bool isDefault = true;
    double defaultUs = 0; // the recipe defaults' predicted time
    std::string reason;
  } search;
  struct Alternative {
    std::map<std::string, int64_t> knobs;
    double costUs = 0;
    std::string rejected; // the violated constraint; "" for a feasible runner-up
  };
  std::vector<Alternative> alternatives; // runner-ups then rejected candidates
};

// A layout op stored by its producers, folded into its readers or materialised as a kernel
// (lower/fusion.h, rule 0).
struct LayoutFoldRecord {
  std::string op;                       // "transpose"
  std::string node;                     // its location
  std::vector<std::string> reads;       // "matmul operand 0 %15: (d0, d1, d2) -> (...)", per read
  std::vector<std::string> stores;      // stored: "gemm %12: (d0, d1) -> (...)", per operand
  double foldUs = 0, materializeUs = 0; // 0 when not priced
  bool folded = false;
  bool stored = false;
  std::string reason;
  const char *decision() const { return stored ? "store" : folded ? "fold" : "materialize"; }
};

// A graph input bound to a value at compile time (aicfc --const): a constant of the plan, not
// an input of the runtime; `source` is the .npy file or the value as given.
struct BoundInput {
  std::string name;
  TensorType type;
  std::string source;
};

struct Plan {
  Target target;  // what libmodel.so is built for (plan.yaml target.kind and name)
  Target planFor; // whose plan the kernels follow (differs when a GPU plan runs on the host)
  std::string cpuArch = "native";
  // cpu targets: the instruction-set extensions libmodel.so may use (backend/host/host_build.h
  // hostIsaFeatures of cpuArch); the runtime refuses the folder on a CPU without one of them.
  std::vector<std::string> isa;
  std::vector<DimRange> dims; // symbolic dims (--dim NAME=MIN..MAX@OPT), the runtime's order
  // Data dims (lengths known only at run time, issue 51; min 0): dim name -> the buffer whose
  // one i64 element the step writing it sets the dim to (plan.yaml dims' set_by).
  std::map<std::string, std::string> dimSetBy;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanStep> steps;
  std::vector<BoundInput> boundInputs; // aicfc --const
  int64_t weightsBytes = 0;
  int64_t arenaBytes = 0;
  int64_t naiveArenaBytes = 0; // sum of all intermediates, no reuse
  int64_t lowerBoundBytes =
      0;                // compulsory traffic: inputs + weights read once, outputs written once
  std::string layout;   // the kernels' argument sizes, checked against libmodel.so
  std::string hardware; // the description planned for ("a100-sxm4-80gb", "host")
  std::string hardwareSummary; // its one-line summary (figures and source)
  Schedule schedule = Schedule::Cost;
  // aicfc --precision (ir/precision.h): the policy the products were planned under; each step
  // records what its own kernel runs (PlanStep::precision).
  Precision precision = Precision::F32;
  double predictedTimeUs = 0;        // sum of the kernels' predicted times
  std::vector<RematDecision> remat;  // store-or-recompute decisions of the fusion (fusion.h)
  std::vector<LayoutChoice> layouts; // the layout chosen for each candidate value
                                     // (block-channels) and the conversions back
  std::vector<LayoutFoldRecord> layoutFolds;   // fold-or-materialise decisions of the fusion
  std::vector<AttentionDecision> attention;    // streaming or materialised (attention_choice.h)
  std::vector<SplitKDecision> splitK;          // contractions priced in K slices (split_k.h)
  std::vector<ChainSplitDecision> splitChains; // chains priced in hidden slices (split_chains.h)
  std::vector<SiblingMergeDecision> mergeSiblings; // sibling contractions (merge_siblings.h)

  const PlanBuffer *buffer(const std::string &id) const;
  void writeYaml(std::ostream &os) const;
};

// "k0:4096,1024;k1:..." — each step's kernel symbol with its argument byte sizes. libmodel.so
// exports the same string (aicf_layout), so the runtime refuses a plan that was edited to
// describe buffers the kernels were not compiled for.
std::string layoutString(const Plan &p);

// t's size in bytes at every symbolic dim's maximum (t.bytes() for a static type); UserError
// when a dim is not monotone in the dims (its maximum then is not at theirs).
int64_t maxBytes(const TensorType &t, const std::vector<DimRange> &dims);

} // namespace aicf
