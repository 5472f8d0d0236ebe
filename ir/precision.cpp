#include "ir/precision.h"

#include "ir/graph.h"
#include "support/half.h"

namespace aicf {

std::optional<Precision> parsePrecision(std::string_view s) {
  if (s == "f32") // the IR's spellings of fp32 and fp16
    return Precision::F32;
  if (s == "f16")
    return Precision::F16;
  return parseEnum<Precision>(s);
}

DType precisionStorage(Precision p) {
  switch (p) {
  case Precision::F16: return DType::F16;
  case Precision::BF16: return DType::BF16;
  case Precision::I8: return DType::I8;
  default: return DType::F32;
  }
}

Precision nodePrecision(const Node &n) {
  const AttrSpec *spec = n.info().findAttr("precision");
  if (!spec)
    return Precision::F32;
  const std::string &s = n.s("precision");
  if (s.empty())
    return Precision::F32;
  return parsePrecision(s).value_or(Precision::F32);
}

AttrMap precisionAttrs(const Node &n) {
  Precision p = nodePrecision(n);
  if (p == Precision::F32)
    return {};
  return {{"precision", std::string(precisionName(p))}};
}

float roundToPrecision(float x, Precision p) {
  switch (p) {
  case Precision::F32:
  case Precision::I8: return x;
  case Precision::F16: return f16ToFloat(floatToF16(x));
  case Precision::BF16: return bf16ToFloat(floatToBf16(x));
  case Precision::TF32: {
    uint32_t u = floatToBits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) // inf, NaN: as they are
      return x;
    return bitsToFloat((u + 0x1000u) & 0xffffe000u); // half an ulp of the magnitude, truncate
  }
  }
  return x;
}

double unitRoundoff(Precision p) {
  switch (p) {
  case Precision::F32:
  case Precision::I8: return 0x1p-24;
  case Precision::TF32:
  case Precision::F16: return 0x1p-11;
  case Precision::BF16: return 0x1p-8;
  }
  return 0x1p-24;
}

} // namespace aicf
