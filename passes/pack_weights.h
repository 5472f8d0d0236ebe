// What pack-weights packs (passes/pack_weights.cpp), for the passes that prepare its input:
// assign-precision marks bf16 on a host plan only the products whose weight gets packed panels,
// the one B form the host's bf16 micro-kernel reads.
#pragma once

namespace aicf {

class Node;

// Whether n is a product whose constant B operand pack-weights lays out in column panels (f32,
// or bf16 in k pairs).
bool packedWeightProduct(const Node &n);

} // namespace aicf
