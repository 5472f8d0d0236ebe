// The output folder of `aicfc -o OUT`: aicf never deletes what it did not write.
//
// Every folder aicf writes holds a marker file, .aicf-output: a fixed first line and then the
// names of the files aicf wrote there, one per line, sorted (no dates, no paths: the folder stays
// byte-deterministic). OUT may be
//   - absent: it is created (missing parents too);
//   - an empty folder: it is replaced by the new one;
//   - an aicf output folder (a valid marker, and nothing in it but the files the marker lists):
//     it is replaced atomically (the new folder is built beside it, then the two are swapped with
//     one rename; only the listed files of the old one are then deleted).
// Anything else is refused with a UserError (exit 1) naming the path, and nothing is touched: a
// regular file, a symbolic link, a non-empty folder without the marker, an aicf folder into which
// someone put other files (named in the message), the current folder or one containing it, a
// folder containing the model.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace aicf {

inline constexpr const char *kOutputMarker = ".aicf-output";
inline constexpr const char *kOutputMarkerHeader =
    "aicf output folder; safe to replace with aicfc -o";

// Checks that `outDir` may receive an output folder (the rules above); `inputs` (the model file)
// must not lie inside it. Throws UserError (exit 1) otherwise; touches nothing.
void checkOutputFolder(const std::string &outDir, const std::vector<std::string> &inputs = {});

// The files an aicf output folder's marker lists (the folder's own files besides the marker).
// UserError (exit 1) when OUT has no valid marker: it is not an aicfc output folder.
std::set<std::string> outputFolderFiles(const std::string &outDir);

// An output folder being written: files go to dir(), a fresh folder OUT.aicf-tmp-XXXXXX that this
// object created beside OUT (same parent, so the final rename is atomic). commit() writes the
// marker and puts the folder in place of OUT. Without a commit (an error on the way) the destructor
// deletes the temporary folder, and only it: OUT is untouched.
class StagedOutputFolder {
public:
  // Checks OUT (checkOutputFolder) and creates the temporary folder (and OUT's missing parents).
  explicit StagedOutputFolder(const std::string &outDir,
                              const std::vector<std::string> &inputs = {});
  ~StagedOutputFolder();
  StagedOutputFolder(const StagedOutputFolder &) = delete;
  StagedOutputFolder &operator=(const StagedOutputFolder &) = delete;

  const std::filesystem::path &dir() const { return tmp_; }
  const std::filesystem::path &out() const { return out_; }
  // Lists dir()'s files in the marker, checks OUT again (it may have changed during the compile)
  // and swaps the new folder in.
  void commit();

private:
  std::filesystem::path out_, tmp_;
  bool committed_ = false;
};

namespace detail {
// Tests only: swap an aicf folder in by renaming the old one aside, as on a filesystem without
// renameat2(RENAME_EXCHANGE).
extern bool forceRenameAside;
} // namespace detail

} // namespace aicf
