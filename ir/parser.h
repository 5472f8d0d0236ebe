// Parses the Graph IR text format. Errors are UserErrors of the form
// "FILE:LINE:COL: error message", never crashes or hangs, whatever the input bytes.
#pragma once

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

// A malformed-text error: what() is "FILE:LINE:COL: message"; pos() says where, for tools that
// match diagnostics to lines (aicf-opt --verify-diagnostics).
class ParseError : public UserError {
public:
  ParseError(SourcePos pos, const std::string &message)
      : UserError(pos.str() + ": " + message), pos_(std::move(pos)) {}
  const SourcePos &pos() const { return pos_; }

private:
  SourcePos pos_;
};

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

// One part of a file cut at "// -----" lines; firstLine is the file line the part starts on.
struct SourceChunk {
  std::string_view text;
  int firstLine = 1;
};

// Cuts `text` at lines that are exactly "// -----" (surrounding blanks allowed), dropping parts
// holding only blanks and comments. What parseGraphs and aicf-opt --split-input-file use.
std::vector<SourceChunk> splitInputChunks(std::string_view text);

// Parses one chunk holding exactly one graph, with the file's line numbers.
std::unique_ptr<Graph> parseGraphChunk(const SourceChunk &chunk, const std::string &filename,
                                       bool verify = true);

} // namespace aicf
