// Every pass by name, from passes/passes.def (no static-initialiser registration): what
// --passes, --print-ir-before/after and `aicf-opt --help` know about. The order is the table's,
// only the order of listings; driver/pipeline.cpp orders the run.
#include "passes/pass.h"

#include "passes/passes.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace aicf {

namespace {

struct PassEntry {
  const char *name;
  std::unique_ptr<Pass> (*create)();
};

const PassEntry kPasses[] = {
#define AICF_PASS(id, name, create, summary) {name, create},
#include "passes/passes.def"
#undef AICF_PASS
};

} // namespace

std::unique_ptr<Pass> createPass(const std::string &name) {
  for (const PassEntry &e : kPasses)
    if (name == e.name)
      return e.create();
  return nullptr;
}

std::vector<std::string> allPassNames() {
  std::vector<std::string> names;
  for (const PassEntry &e : kPasses)
    names.emplace_back(e.name);
  return names;
}

void checkPassNames(const std::vector<std::string> &names, const char *flag, bool allowAll) {
  std::vector<std::string> known = allPassNames();
  for (const std::string &n : names) {
    if ((allowAll && n == "all") || std::find(known.begin(), known.end(), n) != known.end())
      continue;
    std::string list;
    for (const std::string &k : known)
      list += (list.empty() ? "" : ", ") + k;
    throw UserError(
        cat("unknown pass '", n, "' in ", flag, " (known: ", list, allowAll ? ", or all" : "", ")"),
        1);
  }
}

} // namespace aicf
