#include "ir/types.h"

#include "support/checked_math.h"
#include "support/diagnostics.h"
#include "support/half.h"

#include <algorithm>
#include <cmath>

namespace aicf {

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32: return "f32";
  case DType::F16: return "f16";
  case DType::BF16: return "bf16";
  case DType::I64: return "i64";
  case DType::I32: return "i32";
  case DType::I8: return "i8";
  case DType::Bool: return "bool";
  case DType::U8: return "u8";
  case DType::I16: return "i16";
  case DType::U16: return "u16";
  case DType::U32: return "u32";
  case DType::U64: return "u64";
  case DType::F64: return "f64";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType t : kAllDTypes)
    if (name == dtypeName(t))
      return t;
  return std::nullopt;
}

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32: return 4;
  case DType::F16: return 2;
  case DType::BF16: return 2;
  case DType::I64: return 8;
  case DType::I32: return 4;
  case DType::I8: return 1;
  case DType::Bool: return 1;
  case DType::U8: return 1;
  case DType::I16: return 2;
  case DType::U16: return 2;
  case DType::U32: return 4;
  case DType::U64: return 8;
  case DType::F64: return 8;
  }
  return 0;
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
bool isInteger(DType t) {
  return t == DType::I64 || t == DType::I32 || t == DType::I16 || t == DType::I8 || isUnsigned(t);
}
bool isUnsigned(DType t) {
  return t == DType::U8 || t == DType::U16 || t == DType::U32 || t == DType::U64;
}

bool TensorType::isStatic() const {
  for (int64_t d : shape)
    if (d < 0)
      return false;
  return true;
}

int64_t TensorType::numel() const {
  for (int64_t d : shape)
    AICF_CHECK(d >= 0, "numel of a dynamic shape ", str());
  auto n = checkedProduct(shape);
  AICF_CHECK(n, "numel of ", str(), " overflows int64 (the size limits were not checked)");
  return *n;
}

int64_t TensorType::bytes() const {
  auto b = checkedMul(numel(), static_cast<int64_t>(dtypeSize(dtype)));
  AICF_CHECK(b, "byte size of ", str(), " overflows int64 (the size limits were not checked)");
  return *b;
}

std::string tensorSizeProblem(const TensorType &t) {
  // Dynamic dims count as 1: the static ones alone may already be over the limit.
  std::vector<int64_t> known;
  for (int64_t d : t.shape)
    known.push_back(std::max<int64_t>(d, 1));
  auto n = checkedProduct(known);
  if (!n)
    return cat(t.str(), " has more than 2^63 elements, above the limit of ", kMaxTensorElements,
               " per tensor");
  if (*n > kMaxTensorElements)
    return cat(t.str(), " has ", *n, " elements, above the limit of ", kMaxTensorElements,
               " per tensor");
  return "";
}

std::string emptyDimProblem(const TensorType &t) {
  for (size_t i = 0; i < t.shape.size(); ++i)
    if (t.shape[i] == 0)
      return cat("dim ", i, " is 0");
  return "";
}

std::string TensorType::str() const {
  std::string s = dtypeName(dtype);
  s += '[';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ',';
    if (shape[i] < 0)
      s += "?" + dimName(i);
    else if (!sym.empty())
      s += sym[i].str();
    else
      s += std::to_string(shape[i]);
  }
  s += ']';
  return s;
}

void TensorType::normalizeSym() {
  for (const SymExpr &e : sym)
    if (!e.isConstant())
      return;
  sym.clear();
}

bool TensorType::operator==(const TensorType &o) const {
  if (dtype != o.dtype || shape != o.shape)
    return false;
  if (sym != o.sym && !(sym.empty() && o.sym.empty())) {
    for (size_t i = 0; i < shape.size(); ++i)
      if (symDim(i) != o.symDim(i))
        return false;
  }
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] < 0 && dimName(i) != o.dimName(i))
      return false;
  return true;
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    st[i] = st[i + 1] * shape[i + 1];
  return st;
}

Tensor::Tensor(TensorType type) : type_(std::move(type)) {
  bytes_.assign(static_cast<size_t>(type_.bytes()), 0);
}

Tensor::Tensor(TensorType type, std::vector<uint8_t> bytes)
    : type_(std::move(type)), bytes_(std::move(bytes)) {
  AICF_CHECK(static_cast<int64_t>(bytes_.size()) == type_.bytes(), "tensor ", type_.str(),
             " needs ", type_.bytes(), " bytes, got ", bytes_.size());
}

int64_t truncToInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9223372036854775808.0)
    return INT64_MAX;
  if (v <= -9223372036854775808.0)
    return INT64_MIN;
  return static_cast<int64_t>(v);
}

double Tensor::getDouble(int64_t i) const {
  switch (dtype()) {
  case DType::F32: return data<float>()[i];
  case DType::F16: return f16ToFloat(data<uint16_t>()[i]);
  case DType::BF16: return bf16ToFloat(data<uint16_t>()[i]);
  case DType::I64: return static_cast<double>(data<int64_t>()[i]);
  case DType::I32: return data<int32_t>()[i];
  case DType::I8: return data<int8_t>()[i];
  case DType::Bool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  case DType::U8: return data<uint8_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::U16: return data<uint16_t>()[i];
  case DType::U32: return data<uint32_t>()[i];
  case DType::U64: return static_cast<double>(data<uint64_t>()[i]);
  case DType::F64: return data<double>()[i];
  }
  return 0;
}

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype()) {
  case DType::I64: return data<int64_t>()[i];
  case DType::I32: return data<int32_t>()[i];
  case DType::I8: return data<int8_t>()[i];
  case DType::Bool: return data<uint8_t>()[i] ? 1 : 0;
  case DType::U8: return data<uint8_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::U16: return data<uint16_t>()[i];
  case DType::U32: return data<uint32_t>()[i];
  case DType::U64: return static_cast<int64_t>(data<uint64_t>()[i]); // the bits, wrapped
  default: return static_cast<int64_t>(getDouble(i));
  }
}

void Tensor::setDouble(int64_t i, double v) {
  switch (dtype()) {
  case DType::F32: data<float>()[i] = static_cast<float>(v); return;
  case DType::F16: data<uint16_t>()[i] = floatToF16(static_cast<float>(v)); return;
  case DType::BF16: data<uint16_t>()[i] = floatToBf16(static_cast<float>(v)); return;
  case DType::I64: data<int64_t>()[i] = static_cast<int64_t>(v); return;
  case DType::I32: data<int32_t>()[i] = static_cast<int32_t>(v); return;
  case DType::I8: data<int8_t>()[i] = static_cast<int8_t>(v); return;
  case DType::Bool: data<uint8_t>()[i] = v != 0.0 ? 1 : 0; return;
  case DType::F64: data<double>()[i] = v; return;
  case DType::U64: // from 2^63 up directly (saturating), below through int64 (wrapping)
    if (std::isnan(v))
      data<uint64_t>()[i] = 0;
    else if (v >= 9223372036854775808.0)
      data<uint64_t>()[i] = v >= 18446744073709551615.0 ? UINT64_MAX : static_cast<uint64_t>(v);
    else
      data<uint64_t>()[i] = static_cast<uint64_t>(truncToInt64(v));
    return;
  default: setInt(i, truncToInt64(v)); return;
  }
}

void Tensor::setInt(int64_t i, int64_t v) {
  switch (dtype()) {
  case DType::I64: data<int64_t>()[i] = v; return;
  case DType::I32: data<int32_t>()[i] = static_cast<int32_t>(v); return;
  case DType::I8: data<int8_t>()[i] = static_cast<int8_t>(v); return;
  case DType::Bool: data<uint8_t>()[i] = v != 0 ? 1 : 0; return;
  case DType::U8: data<uint8_t>()[i] = static_cast<uint8_t>(v); return;
  case DType::I16: data<int16_t>()[i] = static_cast<int16_t>(v); return;
  case DType::U16: data<uint16_t>()[i] = static_cast<uint16_t>(v); return;
  case DType::U32: data<uint32_t>()[i] = static_cast<uint32_t>(v); return;
  case DType::U64: data<uint64_t>()[i] = static_cast<uint64_t>(v); return;
  default: setDouble(i, static_cast<double>(v)); return;
  }
}

Tensor Tensor::scalarF32(float v) {
  return fromF32({v}, {});
}

Tensor Tensor::fromI64(const std::vector<int64_t> &values, std::vector<int64_t> shape) {
  Tensor t(TensorType(DType::I64, std::move(shape)));
  AICF_CHECK(t.numel() == static_cast<int64_t>(values.size()), "fromI64 size mismatch");
  if (!values.empty())
    std::memcpy(t.raw(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::fromF32(const std::vector<float> &values, std::vector<int64_t> shape) {
  Tensor t(TensorType(DType::F32, std::move(shape)));
  AICF_CHECK(t.numel() == static_cast<int64_t>(values.size()), "fromF32 size mismatch");
  if (!values.empty())
    std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    v[i] = getInt(i);
  return v;
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    v[i] = getDouble(i);
  return v;
}

} // namespace aicf
