// ONNX -> Graph IR importer. Loads a ModelProto, runs onnx::checker and shape inference, binds
// dynamic dims, maps each node to registry ops (version-specific semantics), folds shape
// computations to constants and verifies the result.
#pragma once

#include "ir/graph.h"
#include "support/cli_util.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace aicf {

// The most bytes of constants one import may compute, by default. Each computed constant is
// also bounded (256 MiB, onnx_ops_constants.cpp), but a model with many of them would otherwise
// hold them all in the compiler's memory (and in weights.bin): 40 Range nodes of 25M elements took
// 8 GB and 100 s to import.
inline constexpr int64_t kComputedConstantBudget = int64_t(1) << 30;

struct ImportOptions {
  std::map<std::string, std::vector<int64_t>> inputShapes; // --shape NAME=2x64x256
  std::map<std::string, int64_t> dimParams;                // --dim PARAM=VALUE
  // --dim PARAM=MIN..MAX@OPT: the dim stays symbolic (TensorType::sym), planned at OPT.
  std::vector<DimRange> dimRanges;
  // --const NAME=FILE.npy / NAME=VALUE: the input becomes a constant of that value (a weight
  // named NAME, folded like an initializer) and is no longer an input of the graph.
  std::map<std::string, ConstFlag> constInputs;
  // --seq NAME=COUNT: a sequence input of COUNT tensors, given as the inputs NAME.0 ...
  // NAME.<COUNT-1> (element shapes from the sequence's type, or --shape NAME.K=...).
  std::map<std::string, int64_t> sequenceLengths;
  // Optional inputs are present (a tensor, or a sequence with --seq) unless named here
  // (--absent NAME): then the graph sees an optional without an element.
  std::set<std::string> absentInputs;
  // The most bytes of constants the import may compute (folded nodes, Range, masks; not the
  // model's own initializers): past it the import stops at the node that would exceed it.
  int64_t computedConstantBudget = kComputedConstantBudget;
  // --max NAME=N: the bound of a data dim (a length known only at run time: NonZero, Compress,
  // NonMaxSuppression, Unique, TopK with a run-time k), by the dim's name or the ONNX output it
  // sizes; below the bound the model gives, it shrinks the buffers reserved for it.
  std::map<std::string, int64_t> dataDimMax;
};

// Throws UserError (exit code 2) naming the file and node on any problem; an unreadable file
// gives "cannot open FILE" with exit code 1.
// `constTypes` (optional) receives the type of each input --const bound.
std::unique_ptr<Graph> importOnnx(const std::string &path, const ImportOptions &options = {},
                                  std::map<std::string, TensorType> *constTypes = nullptr);

} // namespace aicf
