// Parses the Graph IR text format. Errors are UserErrors of the form
// "FILE:LINE:COL: error message", never crashes or hangs, whatever the input bytes.
#pragma once

#include "ir/graph.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

// Parses exactly one graph; `filename` is used in diagnostics and node SourcePos.
// The parsed graph is verified (see ir/verifier.h) unless verify is false.
std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string &filename,
                                  bool verify = true);

// Parses a file that may hold several graphs separated by lines "// -----"; line numbers in
// diagnostics are those of the whole file.
std::vector<std::unique_ptr<Graph>> parseGraphs(std::string_view text, const std::string &filename,
                                                bool verify = true);

// Reads and parses a .mcir file (error "cannot open FILE" if unreadable).
std::unique_ptr<Graph> parseGraphFile(const std::string &path, bool verify = true);

} // namespace aicf
