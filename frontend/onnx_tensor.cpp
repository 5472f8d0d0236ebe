// ONNX tensors and types -> Graph IR (see onnx_tensor.h). External data is the one place where a
// model names files on disk, so every location is resolved and checked before anything is read.
#include "frontend/onnx_tensor.h"

#include "support/diagnostics.h"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace aicf {

using onnx::TensorProto;

std::optional<DType> dtypeFromOnnx(int32_t elemType) {
  switch (elemType) {
  case TensorProto::FLOAT: return DType::F32;
  case TensorProto::FLOAT16: return DType::F16;
  case TensorProto::BFLOAT16: return DType::BF16;
  case TensorProto::INT64: return DType::I64;
  case TensorProto::INT32: return DType::I32;
  case TensorProto::INT8: return DType::I8;
  case TensorProto::BOOL: return DType::Bool;
  case TensorProto::DOUBLE: return DType::F64;
  case TensorProto::INT16: return DType::I16;
  case TensorProto::UINT8: return DType::U8;
  case TensorProto::UINT16: return DType::U16;
  case TensorProto::UINT32: return DType::U32;
  case TensorProto::UINT64: return DType::U64;
  default: return std::nullopt;
  }
}

int32_t dtypeToOnnx(DType t) {
  switch (t) {
  case DType::F32: return TensorProto::FLOAT;
  case DType::F16: return TensorProto::FLOAT16;
  case DType::BF16: return TensorProto::BFLOAT16;
  case DType::I64: return TensorProto::INT64;
  case DType::I32: return TensorProto::INT32;
  case DType::I8: return TensorProto::INT8;
  case DType::Bool: return TensorProto::BOOL;
  case DType::F64: return TensorProto::DOUBLE;
  case DType::I16: return TensorProto::INT16;
  case DType::U8: return TensorProto::UINT8;
  case DType::U16: return TensorProto::UINT16;
  case DType::U32: return TensorProto::UINT32;
  case DType::U64: return TensorProto::UINT64;
  }
  return TensorProto::UNDEFINED;
}

std::string onnxDTypeName(int32_t elemType) {
  if (TensorProto::DataType_IsValid(elemType)) {
    std::string n = TensorProto::DataType_Name(static_cast<TensorProto::DataType>(elemType));
    for (char &c : n)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return n;
  }
  return cat("type #", elemType);
}

bool hasExternalData(const TensorProto &t) {
  return t.has_data_location() && t.data_location() == TensorProto::EXTERNAL;
}

std::string resolveExternalLocation(const std::string &location, const std::string &modelDir) {
  if (location.empty())
    throw UserError("external data has no location");
  if (location.find('\0') != std::string::npos)
    throw UserError("external data location contains a NUL character");
  fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    throw UserError(cat("external data location '", location,
                        "' is an absolute path (it must be relative to the model's folder)"));
  for (const fs::path &part : rel)
    if (part == "..")
      throw UserError(cat("external data location '", location,
                          "' leaves the model's folder ('..' is not allowed)"));
  std::error_code ec;
  fs::path dir = fs::canonical(modelDir.empty() ? fs::path(".") : fs::path(modelDir), ec);
  if (ec)
    throw UserError(cat("cannot open the model's folder '", modelDir, "'"));
  fs::path real = fs::canonical(dir / rel, ec);
  if (ec)
    throw UserError(cat("cannot open external data file '", (dir / rel).string(), "'"));
  // A symlink (of the file or of a folder on the way) may point anywhere: compare the fully
  // resolved path with the resolved model folder, component by component.
  auto [d, r] = std::mismatch(dir.begin(), dir.end(), real.begin(), real.end());
  if (d != dir.end())
    throw UserError(cat("external data location '", location, "' resolves to '", real.string(),
                        "', outside the model's folder"));
  if (!fs::is_regular_file(real, ec))
    throw UserError(cat("external data location '", location, "' is not a regular file"));
  return real.string();
}

namespace {

bool parseNonNegative(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  auto res = std::from_chars(s.data(), s.data() + s.size(), out);
  return res.ec == std::errc() && res.ptr == s.data() + s.size() && out >= 0;
}

std::vector<uint8_t> readExternal(const TensorProto &t, int64_t need, const std::string &modelDir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location")
      location = e.value();
    else if (e.key() == "offset" && !parseNonNegative(e.value(), offset))
      throw UserError(cat("external data offset '", e.value(), "' is not a byte offset"));
    else if (e.key() == "length" && !parseNonNegative(e.value(), length))
      throw UserError(cat("external data length '", e.value(), "' is not a byte count"));
  }
  std::string path = resolveExternalLocation(location, modelDir);
  std::error_code ec;
  auto fileSize = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec)
    throw UserError(cat("cannot open external data file '", path, "'"));
  int64_t len = length >= 0 ? length : need;
  if (offset > fileSize || len > fileSize - offset)
    throw UserError(cat("external data range [", offset, ", ", offset, " + ", len,
                        ") is beyond the end of '", location, "' (", fileSize, " bytes)"));
  if (len != need)
    throw UserError(
        cat("external data length ", len, " does not match the tensor's ", need, " bytes"));
  std::vector<uint8_t> bytes(static_cast<size_t>(need));
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw UserError(cat("cannot open external data file '", path, "'"));
  f.seekg(offset);
  if (need > 0 && !f.read(reinterpret_cast<char *>(bytes.data()), need))
    throw UserError(cat("cannot read ", need, " bytes at offset ", offset, " of '", location, "'"));
  return bytes;
}

template <typename Field>
void requireCount(const Field &field, int64_t numel, const char *name) {
  if (static_cast<int64_t>(field.size()) != numel)
    throw UserError(cat("has ", field.size(), " values in ", name, ", expected ", numel));
}

} // namespace

Tensor tensorFromOnnx(const TensorProto &t, const std::string &modelDir) {
  auto dtype = dtypeFromOnnx(t.data_type());
  if (!dtype)
    throw UserError(cat("has unsupported dtype ", onnxDTypeName(t.data_type()),
                        " (supported: ", kSupportedOnnxTypes, ")"));
  if (t.has_segment())
    throw UserError("is a segmented tensor, which is not supported");
  std::vector<int64_t> shape;
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0)
      throw UserError(cat("has a negative dim ", d));
    shape.push_back(d);
  }
  TensorType type(*dtype, shape);
  if (std::string p = tensorSizeProblem(type); !p.empty())
    throw UserError("is " + p);
  numel = type.numel();
  const int64_t need = numel * static_cast<int64_t>(dtypeSize(*dtype));
  if (hasExternalData(t))
    return Tensor(type, readExternal(t, need, modelDir));
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != need)
      throw UserError(cat("has ", t.raw_data().size(), " bytes of raw_data, expected ", need));
    const auto *p = reinterpret_cast<const uint8_t *>(t.raw_data().data());
    Tensor out(type, std::vector<uint8_t>(p, p + need));
    if (*dtype == DType::Bool) // normalise: any non-zero byte is true
      for (int64_t i = 0; i < numel; ++i)
        out.data<uint8_t>()[i] = out.data<uint8_t>()[i] ? 1 : 0;
    return out;
  }
  // The typed fields' counts are checked before the tensor is allocated: the dims alone may ask
  // for gigabytes that the file does not hold.
  switch (*dtype) {
  case DType::F32: requireCount(t.float_data(), numel, "float_data"); break;
  case DType::F64: requireCount(t.double_data(), numel, "double_data"); break;
  case DType::I64: requireCount(t.int64_data(), numel, "int64_data"); break;
  case DType::U32:
  case DType::U64: requireCount(t.uint64_data(), numel, "uint64_data"); break;
  default: requireCount(t.int32_data(), numel, "int32_data"); break;
  }
  Tensor out(type);
  switch (*dtype) {
  case DType::F32:
    if (numel)
      std::memcpy(out.raw(), t.float_data().data(), static_cast<size_t>(need));
    break;
  case DType::F64:
    if (numel)
      std::memcpy(out.raw(), t.double_data().data(), static_cast<size_t>(need));
    break;
  case DType::I64:
    if (numel)
      std::memcpy(out.raw(), t.int64_data().data(), static_cast<size_t>(need));
    break;
  case DType::U64:
    if (numel)
      std::memcpy(out.raw(), t.uint64_data().data(), static_cast<size_t>(need));
    break;
  case DType::U32:
    for (int64_t i = 0; i < numel; ++i)
      out.data<uint32_t>()[i] = static_cast<uint32_t>(t.uint64_data(static_cast<int>(i)));
    break;
  case DType::F16:
  case DType::BF16: // 16-bit patterns, one per int32
    for (int64_t i = 0; i < numel; ++i)
      out.data<uint16_t>()[i] = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
    break;
  case DType::I32:
  case DType::I16:
  case DType::I8:
  case DType::U16:
  case DType::U8:
  case DType::Bool:
    for (int64_t i = 0; i < numel; ++i)
      out.setInt(i, t.int32_data(static_cast<int>(i)));
    break;
  }
  return out;
}

TensorType typeFromOnnx(const onnx::TypeProto &t) {
  if (!t.has_tensor_type())
    throw UserError("is not a tensor (sequences, maps and optionals are not supported)");
  const auto &tt = t.tensor_type();
  auto dtype = dtypeFromOnnx(tt.elem_type());
  if (!dtype)
    throw UserError(cat("has unsupported dtype ", onnxDTypeName(tt.elem_type()),
                        " (supported: ", kSupportedOnnxTypes, ")"));
  TensorType out(*dtype, {});
  bool named = false;
  for (const auto &d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0) {
      out.shape.push_back(d.dim_value());
      out.dimNames.push_back("");
    } else {
      // A dim_param names a dim shared by every dim of that name; "?" and "" (exporters'
      // spelling of "unknown", as a negative dim_value is) name none: each such dim is its own.
      bool anonymous = !d.has_dim_param() || d.dim_param().empty() || d.dim_param() == "?";
      out.shape.push_back(kDynamicDim);
      out.dimNames.push_back(anonymous ? "" : d.dim_param());
      named = named || !anonymous;
    }
  }
  if (!named)
    out.dimNames.clear();
  return out;
}

} // namespace aicf
