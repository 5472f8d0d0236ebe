// The stages of buildModel (driver/compile.cpp defines them, each with the reason it sits where
// it does); driver/pipeline.cpp lists them in order. Internal to the driver.
#pragma once

#include "driver/compile.h"
#include "kir/kir_pass.h"

namespace aicf::stages {

// Target passes: graph passes on a copy of the graph, which replaces it when they changed it.
void legalizeF64(CompileState &s);
void ioPrecision(CompileState &s);
void blockChannels(CompileState &s);
void foldChannelScale(CompileState &s);
void separableResize(CompileState &s);
void mergeSiblings(CompileState &s);
void splitChains(CompileState &s);
void assignPrecision(CompileState &s);
void packWeights(CompileState &s);
// Kernel groups, and the rewrites priced on them.
void partition(CompileState &s);
void chooseAttention(CompileState &s);
void splitK(CompileState &s);
// Kernel IR.
void describePlan(CompileState &s);
void valueBuffers(CompileState &s);
void plan(CompileState &s);
void verifyKernelIr(CompileState &s);
void runKernelPass(CompileState &s, kir::KernelPassId id);
void certifyShapeGeneric(CompileState &s);
// Planning.
void planSteps(CompileState &s);
void checkCandidateRank(CompileState &s);
void branchGuards(CompileState &s);
void memoryPlan(CompileState &s);
void dispatchGroups(CompileState &s);
void loopBodies(CompileState &s);
// Backend.
void printSource(CompileState &s);

} // namespace aicf::stages
