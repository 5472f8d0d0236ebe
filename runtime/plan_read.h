// The runtime's primitives for reading plan.yaml (runtime/runtime.cpp's loader): the errors it
// throws, and accessors that name the missing or malformed key rather than yaml-cpp's "bad
// conversion". Every number the kernels rely on comes from plan.yaml, which a user can edit: each
// is read through these, range-checked, and combined only with overflow-checked arithmetic (a
// check like `offset + bytes > total` is itself undefined for a huge offset and would let it
// through). Internal to the runtime; the keys are support/plan_schema.h's.
#pragma once

#include "support/sym_expr.h"

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace aicf::rt {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An error about the machine rather than plan.yaml: reported without the plan's path.
struct MachineError : Error {
  using Error::Error;
};

template <typename... Args>
std::string cat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

constexpr int64_t kInt64Max = INT64_MAX;
// Largest dimension plan.yaml may give; the element count is checked separately.
constexpr int64_t kMaxDim = int64_t(1) << 40;
// Input and output positions beyond this are refused (a plan with more is not one of ours).
constexpr int64_t kMaxIoIndex = 4096;

// Bytes per element of a dtype ("f32": 4); -1 for an unknown one.
int64_t dtypeBytes(const std::string &dt);

// map[key]; Error "<what>: missing '<key>'" (or "<what> must be a map").
YAML::Node need(const YAML::Node &map, const char *key, const std::string &what);
std::string readString(const YAML::Node &map, const char *key, const std::string &what);
// A 64-bit integer in [lo, hi]; the errors name `what`.
int64_t toInt(const YAML::Node &n, const std::string &what, int64_t lo, int64_t hi);
int64_t readInt(const YAML::Node &map, const char *key, const std::string &what, int64_t lo,
                int64_t hi);
// Returns a handle (a copy), never a reference: callers pass temporaries.
YAML::Node needSequence(const YAML::Node &n, const std::string &what);

// [offset, offset + bytes) lies inside [0, total), written so that nothing can overflow.
bool inside(int64_t offset, int64_t bytes, int64_t total);
std::string shapeText(const std::vector<int64_t> &shape);

// A buffer's shape; with `dims`, entries may be expressions in them ("batch", "3*seq"), returned
// in *sym (every dim; the shape then holds each at the dims' maxima).
std::vector<int64_t> readShape(const YAML::Node &map, const std::string &what,
                               const std::vector<DimRange> *dims = nullptr,
                               std::vector<SymExpr> *sym = nullptr);

} // namespace aicf::rt
