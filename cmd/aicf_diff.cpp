// aicf-diff OLD NEW: a semantic diff of two aicfc output folders (plan/plan_diff.h): steps
// added, removed or reordered; per step the changed knobs, launch shapes, predicted bytes and
// times, and the changed lines of its Kernel IR; changed weights by checksum. Exit status 0
// when the folders agree, 1 when they differ, 2 when one cannot be read (as diff(1)).
#include "aicf/build_config.h"
#include "plan/plan_diff.h"
#include "support/cli_parse.h"
#include "support/cli_util.h"

#include <CLI/CLI.hpp>

#include <iostream>

using namespace aicf;

int main(int argc, char **argv) {
  CLI::App app{"aicf-diff: what changed between two aicfc output folders"};
  app.set_version_flag("--version", std::string("aicf-diff ") + AICF_VERSION);
  std::string oldDir, newDir;
  std::vector<std::string> ignore;
  bool quiet = false;
  app.add_option("old", oldDir, "the reference folder (a golden)")->required();
  app.add_option("new", newDir, "the folder to compare with it")->required();
  app.add_option("--ignore", ignore,
                 "leave out differences whose field path matches this pattern (* and ? "
                 "wildcards), e.g. 'steps[*].hints.predicted.*', 'weights[*]', "
                 "'target.hardware' (repeatable)");
  app.add_flag("-q,--quiet", quiet, "print nothing; the exit status says whether they differ");
  if (std::optional<int> rc = parseCommandLine(app, argc, argv))
    return *rc == 0 ? 0 : 2;
  return runTool([&] {
    FolderDiff d = diffFolders(oldDir, newDir, ignore);
    if (!quiet)
      std::cout << printFolderDiff(d, oldDir, newDir);
    return d.differences.empty() ? 0 : 1;
  });
}
