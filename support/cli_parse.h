// Command-line parsing shared by the three tools, so they follow one exit-code table
// (docs/safety.md, "Exit codes"): a command line CLI11 refuses is a usage error, exit 1, printed as
// "error: ..." like every other error; --help and --version exit 0. Header-only because only
// the tools link CLI11.
#pragma once

#include "support/enum_names.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>
#include <optional>
#include <string>

namespace aicf {

// Each repeatable option takes exactly one value per occurrence (`--dim a=1 --dim b=2`), so a
// positional after it (`--dim batch=8 model.onnx`) is never swallowed as a second value.
inline void oneValuePerOccurrence(CLI::App &app) {
  for (CLI::Option *o : app.get_options())
    if (!o->get_positional() && o->get_items_expected_max() > 1)
      o->allow_extra_args(false);
}

// Parses argv; returns the exit code when the tool should stop now (help, version: 0; any parse
// error: 1 with "error: <what>"), nothing when it should run.
inline std::optional<int> parseCommandLine(CLI::App &app, int argc, char **argv) {
  oneValuePerOccurrence(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return app.exit(e); // --help, --version
    std::cerr << "error: " << e.what() << " (run with --help for the flags)\n";
    return 1;
  }
  return std::nullopt;
}

// An integer flag in [lo, hi], with a message that says so ("--bench: -5 is not an integer in
// 0..2147483647") instead of CLI11's floating-point range text.
inline CLI::Validator intInRange(long long lo, long long hi) {
  std::string range = std::to_string(lo) + ".." + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range](std::string &text) -> std::string {
        long long v = 0;
        size_t used = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception &) {
          used = 0;
        }
        if (used == 0 || used != text.size() || v < lo || v > hi)
          return text + " is not an integer in " + range;
        return "";
      },
      "INT in " + range);
}

// A flag whose value is one of enum E's spellings (support/enum_names.h), read into `value` as
// the enum: CLI11 refuses any other word here, at the edge, with the message its IsMember
// gives ("--attention: fast not in {cost,streaming,materialized}"), and the help shows the
// set and the default as for a checked string ("TEXT:{cost,fuse,store}=cost"). The names table
// is E's own (enumNames(E)); the value holds no spelling past this point.
template <typename E>
CLI::Option *addEnumOption(CLI::App &app, const std::string &name, E &value,
                           const std::string &help) {
  std::string set = enumNameSet<E>();
  CLI::Option *o = app.add_option(name, value, help)
                       ->type_name("TEXT")
                       ->transform(CLI::Validator(
                           [set](std::string &text) -> std::string {
                             std::optional<E> e = parseEnum<E>(text);
                             if (!e)
                               return text + " not in " + set;
                             // CLI11 stores an enum from its underlying integer.
                             text = std::to_string(static_cast<long long>(*e));
                             return "";
                           },
                           set));
  for (const EnumName<E> &n : enumNames(E{}))
    if (n.value == value)
      o->default_str(n.name); // a default outside the table (none chosen) is not shown
  return o;
}

} // namespace aicf
