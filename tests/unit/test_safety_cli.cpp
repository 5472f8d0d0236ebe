// The tools' exit-code table (docs/safety.md, "Exit codes", issue 15 item 8): runTool maps what a
// tool body throws to 1 (usage: the command line or a path on it), 2 (bad input), 3 (a bug in aicf
// only), and repeated --dim / --shape flags are refused. The CLI goldens
// (testdata/ir/cli/exit_codes.mcir) check the same table end to end.
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <iostream>
#include <new>
#include <sstream>

using namespace aicf;

namespace {

// Runs `body` through runTool; returns (exit code, what it printed on stderr).
std::pair<int, std::string> run(const std::function<int()> &body) {
  std::ostringstream err;
  std::streambuf *old = std::cerr.rdbuf(err.rdbuf());
  int rc = runTool(body);
  std::cerr.rdbuf(old);
  return {rc, err.str()};
}

} // namespace

TEST_CASE("safety cli: runTool maps errors to the exit-code table") {
  CHECK(run([] { return 0; }).first == 0);
  auto [u1, m1] = run([]() -> int { throw UserError("bad flag", 1); });
  CHECK(u1 == 1);
  CHECK(m1 == "error: bad flag\n");
  auto [u2, m2] = run([]() -> int { throw UserError("bad model"); });
  CHECK(u2 == 2);
  CHECK(m2 == "error: bad model\n");
  // A filesystem error on a user's path: exit 1 naming the operation, the path and the reason.
  auto [f, fm] = run([]() -> int {
    throw std::filesystem::filesystem_error("cannot create directories",
                                            std::filesystem::path("/x/file/out"),
                                            std::make_error_code(std::errc::not_a_directory));
  });
  CHECK(f == 1);
  CHECK(fm == "error: cannot create directories '/x/file/out': Not a directory\n");
  auto [io, iom] = run([]() -> int { throw std::ios_base::failure("read error"); });
  CHECK(io == 1);
  CHECK(iom.rfind("error: cannot read or write a file: read error", 0) == 0);
  auto [oom, oomm] = run([]() -> int { throw std::bad_alloc(); });
  CHECK(oom == 2);
  CHECK(oomm.rfind("error: out of memory", 0) == 0);
  // Only bugs exit 3.
  auto [ie, iem] = run([]() -> int { throw InternalError("internal error: check failed"); });
  CHECK(ie == 3);
  CHECK(iem == "internal error: check failed\n");
  auto [se, sem] = run([]() -> int { throw std::out_of_range("map::at"); });
  CHECK(se == 3);
  CHECK(sem == "internal error: map::at\n");
  auto [ue, uem] = run([]() -> int { throw 42; });
  CHECK(ue == 3);
  CHECK(uem == "internal error: unknown exception\n");
}

TEST_CASE("safety cli: a --dim or --shape given twice is refused, agreeing or not") {
  CHECK(parseDimFlags({"batch=2", "seq=8"}) ==
        std::map<std::string, int64_t>{{"batch", 2}, {"seq", 8}});
  CHECK_THROWS_WITH_AS(parseDimFlags({"batch=2", "batch=4"}),
                       "--dim batch given twice (give each dim once)", UserError);
  CHECK_THROWS_WITH_AS(parseDimFlags({"batch=2", "batch=2"}),
                       "--dim batch given twice (give each dim once)", UserError);
  CHECK_THROWS_WITH_AS(parseShapeFlags({"x=2x3", "x=2x3"}),
                       "--shape x given twice (give each input's shape once)", UserError);
  try {
    parseShapeFlags({"x=2xq"});
    FAIL("expected a UserError");
  } catch (const UserError &e) {
    CHECK(e.exitCode() == 1); // a bad flag value is a usage error
  }
}
