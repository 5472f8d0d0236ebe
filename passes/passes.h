// Constructors of every pass, declared from passes/passes.def (one per file in passes/).
// registry.cpp maps names to these; driver/pipeline.cpp orders them.
#pragma once

#include "passes/pass.h"

#include <memory>

namespace aicf {

#define AICF_PASS(id, name, create, summary) std::unique_ptr<Pass> create();
#include "passes/passes.def"
#undef AICF_PASS

} // namespace aicf
