// .npy (NumPy format 1.0/2.0/3.0) reading and writing, little-endian, C order.
// dtypes: <f4 <f2 <i8 <i4 |i1 |b1 (and bf16 written as <u2 with the shape preserved).
#pragma once

#include "ir/types.h"

#include <string>

namespace aicf {

Tensor readNpy(const std::string &path);                 // UserError "FILE: reason" on bad input
void writeNpy(const std::string &path, const Tensor &t); // UserError when it cannot write

} // namespace aicf
