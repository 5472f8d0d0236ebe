// A semantic diff of two output folders (aicf-diff OLD NEW), for reviewers and for CI systems
// that compare generated folders against goldens: a byte diff of kernels.cpp says nothing, so
// the folders are compared as plans. Steps are matched by what they compute (kind and origin
// nodes), not by their symbols; then the difference lists steps added, removed or reordered,
// each matched step's changed fields (knobs, launch shape, predicted bytes and time, recipe,
// precision...), the kernels whose Kernel IR (kernels.kir) changed with the changed lines, the
// weights whose bytes changed (by checksum), and the other manifest fields that changed.
#pragma once

#include <string>
#include <vector>

namespace aicf {

struct FolderDifference {
  // The field's path, matched by --ignore patterns (shell globs): "steps[3].hints.knobs.BM",
  // "steps[3].kernel", "steps.added", "steps.removed", "steps.order", "weights[fc1.weight]",
  // "buffers[%15].offset", "predicted_time_us", "target.hardware", ...
  std::string path;
  std::string text;  // what changed, for people ("hints.knobs.BM: 8 -> 16"), may span lines
  std::string group; // the heading it is printed under (a step: its index, kind, origins)
};

struct FolderDiff {
  std::vector<FolderDifference> differences; // in report order
  std::vector<std::string> notes;            // context lines (step counts), not differences
};

// Compares two output folders (plan.yaml, weights.bin, and kernels.kir where both have it).
// Differences whose path matches one of `ignore` are left out. UserError (exit 2) when a folder
// has no readable plan.yaml.
FolderDiff diffFolders(const std::string &oldDir, const std::string &newDir,
                       const std::vector<std::string> &ignore);

// The report aicf-diff prints.
std::string printFolderDiff(const FolderDiff &d, const std::string &oldDir,
                            const std::string &newDir);

} // namespace aicf
