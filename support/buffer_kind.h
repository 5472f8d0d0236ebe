// Where a plan buffer's memory lives (plan.yaml buffers' `kind`): the caller's input or output
// memory, weights.bin, or the arena. Shared by the compiler's plan (plan/plan.h), which writes the
// kind, and the runtime (runtime/runtime.cpp), which reads it: both compare the enum, and the
// spellings below are the only place the words are written. Header-only, without dependencies,
// so that the runtime links nothing of the compiler (scripts/check_layering.py).
#pragma once

#include "support/enum_names.h"

#include <cstdint>

namespace aicf {

enum class BufferKind : uint8_t { Input, Output, Weight, Arena };
constexpr EnumNames<BufferKind, 4> enumNames(BufferKind) {
  return {{{BufferKind::Input, "input"},
           {BufferKind::Output, "output"},
           {BufferKind::Weight, "weight"},
           {BufferKind::Arena, "arena"}}};
}

} // namespace aicf
