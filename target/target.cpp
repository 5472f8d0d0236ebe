// Target parsing and the --hardware choice (see target.h). The known CUDA archs are the ones
// with a built-in default description: one table, kDefaults, gives both.
#include "target/target.h"

#include "support/diagnostics.h"

#include <string_view>

namespace aicf {

namespace {

struct ArchDefault {
  const char *arch;     // "sm_80"
  const char *hardware; // the built-in description a plan for it uses by default
};

const ArchDefault kDefaults[] = {
    {"sm_80", "a100"}, {"sm_86", "rtx3090"}, {"sm_89", "rtx4090"}, {"sm_90", "h100"}};

const ArchDefault *defaultFor(const std::string &arch) {
  for (const ArchDefault &d : kDefaults)
    if (arch == d.arch)
      return &d;
  return nullptr;
}

std::string unknownTargetMessage(const std::string &spec) {
  std::string known;
  for (const std::string &n : Target::knownNames())
    known += (known.empty() ? "" : ", ") + n;
  return cat("unknown target '", spec, "' (", known, ")");
}

} // namespace

std::string Target::name() const {
  return gpu() ? "cuda:" + arch : "cpu";
}

std::vector<std::string> Target::knownNames() {
  std::vector<std::string> names = {"cpu"};
  for (const ArchDefault &d : kDefaults)
    names.push_back(std::string("cuda:") + d.arch);
  return names;
}

Target Target::parseSpec(const std::string &spec) {
  Target t;
  if (spec == "cpu")
    return t;
  if (spec.rfind("cuda:", 0) == 0 && defaultFor(spec.substr(5))) {
    t.hw.gpu = true;
    t.arch = spec.substr(5);
    return t;
  }
  throw UserError(unknownTargetMessage(spec), 1); // a --target flag value
}

Target Target::parsePlanFor(const std::string &spec) {
  if (spec.rfind("cuda:", 0) != 0)
    throw UserError(cat("--plan-for ", spec, ": expected cuda:sm_XX"), 1);
  return parseSpec(spec);
}

Target Target::parse(const std::string &spec, const std::string &hardwareChoice) {
  Target t = parseSpec(spec);
  t.loadHardware(hardwareChoice);
  return t;
}

Target Target::loaded() const {
  if (hasHardware())
    return *this;
  Target t = *this;
  t.loadHardware();
  return t;
}

Target Target::of(const Hardware &hw) {
  Target t;
  if (hw.gpu)
    t.arch = hw.arch;
  t.hw = hw;
  return t;
}

void Target::loadHardware(const std::string &choice) {
  if (choice.empty()) {
    if (!gpu()) {
      hw = detectHostHardware("/");
      return;
    }
    const ArchDefault *d = defaultFor(arch);
    if (!d) // a Target made by of() for an arch without a built-in description
      throw UserError(
          cat("no built-in hardware description for ", name(), "; pass --hardware FILE.yaml"));
    hw = builtinHardware(d->hardware);
    return;
  }

  auto endsWith = [&](const char *suffix) {
    std::string_view c(choice), s(suffix);
    return c.size() >= s.size() && c.substr(c.size() - s.size()) == s;
  };
  const bool isFile =
      endsWith(".yaml") || endsWith(".yml") || choice.find('/') != std::string::npos;
  Hardware h = isFile ? loadHardwareFile(choice) : builtinHardware(choice);
  if (!gpu() && h.gpu)
    throw UserError(
        cat("--hardware ", choice, ": a GPU description cannot plan for the cpu target"));
  if (gpu() && !h.gpu)
    throw UserError(cat("--hardware ", choice, ": a CPU description cannot plan for ", name()));
  if (gpu() && h.arch != arch)
    throw UserError(
        cat("--hardware ", choice, ": a ", h.arch, " description cannot plan for ", name()));
  hw = std::move(h);
}

} // namespace aicf
