// Parses the Kernel IR text form that kir::printKernel writes (kir_printer.cpp), so kernels can
// be written by hand, kept as goldens and fed to Kernel IR passes (aicf-opt FILE.kir
// --kir-passes=...). print(parse(text)) == text for everything the printer emits.
// Errors are ParseErrors "FILE:LINE:COL: message" (exit 2), never crashes or hangs, whatever the
// input bytes. The grammar is at the top of kir_parser.cpp.
#pragma once

#include "ir/parser.h"
#include "kir/kir.h"

#include <string>
#include <string_view>
#include <vector>

namespace aicf::kir {

// Parses one or more kernels (as `aicfc --emit kernels` prints them); `firstLine` is the line
// the text starts on in `filename` (a part of a file cut at "// -----"). Each kernel is verified
// (kir::verifyKernel) unless `verify` is false; the first violation is a ParseError at the
// kernel's `kernel` keyword. Kernel::extents is not part of the text: parsed kernels have none.
std::vector<Kernel> parseKernels(std::string_view text, const std::string &filename,
                                 int firstLine = 1, bool verify = true);

// Parses exactly one kernel.
Kernel parseKernel(std::string_view text, const std::string &filename, bool verify = true);

} // namespace aicf::kir
