// .npy (NumPy format 1.0/2.0/3.0) reading and writing, little-endian, C order.
// dtypes: <f4 <f2 <i8 <i4 |i1 |b1. bf16 has no NumPy dtype: it is written as <f4 (exact, since
// bf16 is a subset of f32) and so reads back as f32.
#pragma once

#include "ir/types.h"

#include <string>

namespace aicf {

Tensor readNpy(const std::string &path);                 // UserError "FILE: reason" on bad input
void writeNpy(const std::string &path, const Tensor &t); // UserError when it cannot write

// A tensor read from .npy for a value of dtype `want`: bf16 values come as f32 (see above), so an
// f32 tensor for a bf16 value is narrowed (rounded to nearest even); anything else is returned
// as it is, for the caller to check.
Tensor npyFor(Tensor t, DType want);

} // namespace aicf
