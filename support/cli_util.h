// Small helpers shared by the command-line tools: parsing --shape/--dim values and running a
// tool body with the project's error conventions.
#pragma once

#include "support/sym_expr.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace aicf {

// "x=2x64x256" -> ("x", {2,64,256}); "x=" -> ("x", {}) (a scalar). Each dim is a positive decimal
// integer up to kMaxTensorElements (support/checked_math.h); anything else is a UserError with
// exit code 1 (a bad flag value; 0 too: a bound dim is 1 or more).
std::pair<std::string, std::vector<int64_t>> parseShapeFlag(const std::string &text);
// "batch=2" -> ("batch", 2). The value as for parseShapeFlag; UserError (exit code 1) otherwise.
std::pair<std::string, int64_t> parseDimFlag(const std::string &text, const char *flag = "--dim");

// Every --shape / --dim flag, parsed; a name given twice is an error (exit 1), whether or not
// the values agree, so a typo in a long command line cannot silently win or lose.
std::map<std::string, std::vector<int64_t>> parseShapeFlags(const std::vector<std::string> &texts);
// Also for --seq NAME=COUNT (flag names the flag in messages).
std::map<std::string, int64_t> parseDimFlags(const std::vector<std::string> &texts,
                                             const char *flag = "--dim");

// Every --dim flag: NAME=N binds the dim to N (into `fixed`); NAME=MIN..MAX or
// NAME=MIN..MAX@OPT compiles it for the range (into `ranges`, in the flags' order), planned for
// OPT (default MAX). Values as for parseDimFlag, MIN <= OPT <= MAX; a range's NAME must be an
// identifier ([A-Za-z_][A-Za-z0-9_]*: it names the dim in the generated code). UserError (exit
// code 1) otherwise, or for a name given twice.
void parseDimRangeFlags(const std::vector<std::string> &texts,
                        std::map<std::string, int64_t> &fixed, std::vector<DimRange> &ranges);

// One --const flag: NAME=FILE.npy (the value of a tensor) or NAME=VALUE (a number, or true /
// false, for an input of one element). `text` is the flag as given, for messages.
struct ConstFlag {
  std::string name, file, text;
  bool isValue = false;
  double value = 0;
};
// "sr=16000" -> a value; "x=in.npy" (anything that is not a number) -> a file. UserError (exit
// code 1) without a name or a right-hand side, or for a name given twice.
ConstFlag parseConstFlag(const std::string &text);
std::map<std::string, ConstFlag> parseConstFlags(const std::vector<std::string> &texts);

// Runs `body` with the exit-code table (docs/safety.md, "Exit codes"): UserError prints
// "error: <message>" and exits with its code; a filesystem or stream error on the user's paths
// exits 1 naming the path and the OS reason; running out of memory exits 2; InternalError and
// anything unexpected print "internal error: ..." and exit 3. Returns the process exit code.
int runTool(const std::function<int()> &body);

} // namespace aicf
