// ONNX tensors and types -> Graph IR: element types, TensorProto data (raw_data, the typed
// fields, and external data read relative to the model's folder, refusing any location or byte
// range that leaves it) and TypeProto shapes.
//
// The functions here throw UserError with a message that does not name the model or the tensor;
// the importer adds both ("model.onnx: initializer 'w': <message>").
#pragma once

#include "ir/types.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>

namespace aicf {

// ONNX TensorProto::DataType -> our dtype; nullopt for the types the IR does not have.
std::optional<DType> dtypeFromOnnx(int32_t elemType);
int32_t dtypeToOnnx(DType t);
// "float", "double", "uint8", "string", ... (ONNX's spelling, for diagnostics).
std::string onnxDTypeName(int32_t elemType);
// The ONNX element types aicf maps to a DType, for error messages.
inline constexpr const char *kSupportedOnnxTypes =
    "double, float, float16, bfloat16, int64, int32, int16, int8, uint64, uint32, uint16, uint8, "
    "bool";

// The absolute path of an external-data location, after checking that it stays inside
// `modelDir`: no absolute path, no "..", and no symlink that resolves outside the folder.
std::string resolveExternalLocation(const std::string &location, const std::string &modelDir);

// True when the tensor keeps its bytes in an external file.
bool hasExternalData(const onnx::TensorProto &t);

// Converts a TensorProto to a constant tensor. External data is read from files under
// `modelDir` (see resolveExternalLocation); its offset and length must lie inside the file.
Tensor tensorFromOnnx(const onnx::TensorProto &t, const std::string &modelDir);

// Element type and shape of a tensor TypeProto. Dims without a value are kDynamicDim and keep
// their dim_param (or "") in dimNames. Throws UserError for non-tensor or unsupported types.
TensorType typeFromOnnx(const onnx::TypeProto &t);

} // namespace aicf
