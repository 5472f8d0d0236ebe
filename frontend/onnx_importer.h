// ONNX -> Graph IR importer. Loads a ModelProto, runs onnx::checker and shape inference, binds
// dynamic dims, maps each node to registry ops (version-specific semantics), folds shape
// computations to constants and verifies the result.
#pragma once

#include "ir/graph.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace aicf {

struct ImportOptions {
  std::map<std::string, std::vector<int64_t>> inputShapes; // --shape NAME=2x64x256
  std::map<std::string, int64_t> dimParams;                // --dim PARAM=VALUE
};

// Throws UserError (exit code 2) naming the file and node on any problem; an unreadable file
// gives "cannot open FILE" with exit code 1.
std::unique_ptr<Graph> importOnnx(const std::string &path, const ImportOptions &options = {});

} // namespace aicf
