// The arithmetic precision of contractions and attention (aicfc --precision; issue 22). The
// policy: matrix products read their operands rounded to the precision and accumulate in f32;
// norm statistics, softmax's max and sum, reductions and every elementwise op stay f32.
//   fp32  SIMT f32 (the default)
//   tf32  tensor cores, operands rounded to tf32 (8-bit exponent, 10-bit mantissa) as the
//         fragments are loaded; weights stay f32 in weights.bin
//   fp16  tensor cores on IEEE binary16 operands; weights stored as f16
//   bf16  tensor cores on bfloat16 operands; weights stored as bf16
//   int8  host plans only, never a flag: a quantized model's integer-domain product
//         (integer_operands) on 8-bit integers, accumulated in i32 (exact), weights stored
//         as int8 (the VNNI micro-kernel, passes/assign_precision.cpp)
// A node computed so carries the attribute precision = "tf32" | "fp16" | "bf16" | "int8"
// (ops.def); passes/assign_precision.cpp sets it.
#pragma once

#include "ir/attributes.h"
#include "ir/types.h"
#include "support/enum_names.h"

#include <optional>
#include <string>
#include <string_view>

namespace aicf {

class Node;

enum class Precision : uint8_t { F32, TF32, F16, BF16, I8 };
constexpr EnumNames<Precision, 5> enumNames(Precision) {
  return {{{Precision::F32, "fp32"},
           {Precision::TF32, "tf32"},
           {Precision::F16, "fp16"},
           {Precision::BF16, "bf16"},
           {Precision::I8, "int8"}}};
}

// "fp32", "tf32", "fp16", "bf16", "int8" (also "f32", "f16" for the attribute's IR spelling).
std::optional<Precision> parsePrecision(std::string_view s);
inline const char *precisionName(Precision p) { // "fp32", ...
  return enumName(p);
}
// The dtype operands are staged and stored in: f32 for fp32 and tf32, else f16 / bf16 / i8.
DType precisionStorage(Precision p);
// Whether products run on tensor cores (tf32, fp16, bf16).
inline bool tensorCores(Precision p) {
  return p != Precision::F32 && p != Precision::I8;
}
// A node's precision (its `precision` attribute; fp32 when absent or empty).
Precision nodePrecision(const Node &n);
// The attributes that carry n's precision to a node a rewrite derives from it (split-k's partial
// matmul, a materialised attention's two matmuls): {precision: ..} or none.
AttrMap precisionAttrs(const Node &n);
// x as the tensor cores read it: rounded to nearest even for fp16 / bf16 (IEEE, like
// __float2half_rn / __float2bfloat16_rn), to nearest with ties away from zero for tf32 (PTX
// cvt.rna.tf32.f32); x itself for fp32 and int8 (whose operands are integers already).
// Products of two such values are exact in f32.
float roundToPrecision(float x, Precision p);
// The smallest relative spacing of the precision's mantissa (unit roundoff, half an ulp at 1):
// 2^-24 fp32 and int8 (exact products and sums), 2^-11 tf32 and fp16, 2^-8 bf16.
double unitRoundoff(Precision p);

} // namespace aicf
