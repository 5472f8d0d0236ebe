// Element types, tensor types and constant tensor data of the Graph IR.
//
// A TensorType is a dtype plus a shape. Dims bound at compile time (--dim NAME=N, --shape) are
// plain values. A dim compiled for a range (--dim NAME=MIN..MAX@OPT, issue 21) is symbolic:
// `sym` then holds every dim as an expression in the symbols (support/sym_expr.h) and `shape`
// holds the same dims at the planning point (each symbol at its OPT value), which is what the
// passes, the cost model and the schedule search reason about; code generation and the plan
// read `sym` wherever a size reaches the generated code. A dim of kDynamicDim with an optional
// name is kept only so the importer can report what is unbound.
#pragma once

#include "support/checked_math.h"
#include "support/sym_expr.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

// Element types. f16 / bf16 are computed in f32 (widened by their loads, rounded on store); f64
// is computed in double. Integers compute in int64 (uint64 in uint64) and wrap to their width.
enum class DType : uint8_t { F32, F16, BF16, I64, I32, I8, Bool, U8, I16, U16, U32, U64, F64 };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                       DType::I32, DType::I16, DType::I8,   DType::U64, DType::U32,
                                       DType::U16, DType::U8,  DType::Bool};

const char *dtypeName(DType t);                         // "f32", "bf16", "u8", "bool", ...
std::optional<DType> parseDType(std::string_view name); // inverse of dtypeName
size_t dtypeSize(DType t);                              // bytes per element
bool isFloat(DType t);                                  // f64, f32, f16, bf16
bool isInteger(DType t);                                // i8..i64, u8..u64 (not bool)
bool isUnsigned(DType t);                               // u8, u16, u32, u64

inline constexpr int64_t kDynamicDim = -1;

// float -> int64 truncating toward zero; NaN gives 0, out-of-range values saturate (the
// interpreter's float -> integer conversion, and Tensor::setDouble's).
int64_t truncToInt64(double v);

// The size limits (kMaxTensorElements, kMaxTotalBytes) are in support/checked_math.h.

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;        // kDynamicDim for an unbound dim
  std::vector<std::string> dimNames; // empty, or one per dim ("" when the dim has no name)
  std::vector<SymExpr> sym;          // empty (static), or every dim symbolically (see above)

  TensorType() = default;
  TensorType(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool isStatic() const;
  int64_t numel() const; // product of dims; requires isStatic() and no overflow
  int64_t bytes() const; // numel() * element size; requires the same
  std::string dimName(size_t i) const { return i < dimNames.size() ? dimNames[i] : ""; }
  bool isSymbolic() const { return !sym.empty(); }
  // Dim i as an expression: sym[i], or the static value.
  SymExpr symDim(size_t i) const { return sym.empty() ? SymExpr(shape[i]) : sym[i]; }
  // Drops `sym` when no dim depends on a symbol.
  void normalizeSym();
  std::string str() const; // "f32[2,64,256]", "i64[]", "f32[?batch,64]", "f32[3*seq,64]"

  bool operator==(const TensorType &o) const;
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

std::string shapeStr(const std::vector<int64_t> &shape); // "[2,64,256]"

// Why a static type is over the size limits, or "" when it is within them:
// "f32[65536,65536] has 4294967296 elements, above the limit of 2147483647 per tensor".
std::string tensorSizeProblem(const TensorType &t);
// The first 0 dim of a static type as "dim 1 is 0", or "" when it has none (empty tensors are
// not supported by code generation).
std::string emptyDimProblem(const TensorType &t);

// Row-major strides (in elements) of a static shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape);

// Constant tensor data: a static type and its bytes, row-major, little-endian.
// f16/bf16 are stored as their 16-bit patterns, bool as one byte (0 or 1).
class Tensor {
public:
  Tensor() = default;
  explicit Tensor(TensorType type); // zero-filled
  Tensor(TensorType type, std::vector<uint8_t> bytes);

  const TensorType &type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const std::vector<int64_t> &shape() const { return type_.shape; }
  int64_t numel() const { return type_.numel(); }
  size_t byteSize() const { return bytes_.size(); }
  const uint8_t *raw() const { return bytes_.data(); }
  uint8_t *raw() { return bytes_.data(); }
  const std::vector<uint8_t> &bytes() const { return bytes_; }

  template <typename T>
  const T *data() const {
    return reinterpret_cast<const T *>(bytes_.data());
  }
  template <typename T>
  T *data() {
    return reinterpret_cast<T *>(bytes_.data());
  }

  // Element i converted to double / int64 whatever the dtype (for folding and printing).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  void setDouble(int64_t i, double v); // converts to the dtype (rounds for f16/bf16)
  void setInt(int64_t i, int64_t v);

  // Convenience constructors.
  static Tensor scalarF32(float v);
  static Tensor fromI64(const std::vector<int64_t> &values, std::vector<int64_t> shape);
  static Tensor fromF32(const std::vector<float> &values, std::vector<int64_t> shape);

  std::vector<int64_t> toInts() const;   // all elements as int64
  std::vector<double> toDoubles() const; // all elements as double

  bool operator==(const Tensor &o) const { return type_ == o.type_ && bytes_ == o.bytes_; }

private:
  TensorType type_;
  std::vector<uint8_t> bytes_;
};

using TensorPtr = std::shared_ptr<const Tensor>;

} // namespace aicf
