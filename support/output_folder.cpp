// See output_folder.h. The checks run twice: before the compile (nothing is written when OUT is
// refused) and again just before the swap (OUT may have changed during a long compile). The swap
// of an existing aicf folder uses renameat2(RENAME_EXCHANGE), so OUT names a complete folder at
// every instant; on a filesystem without it, the old folder is first renamed aside.
#include "support/output_folder.h"

#include "support/diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iostream>
#include <random>
#include <set>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace aicf {

bool detail::forceRenameAside = false;

namespace {

constexpr uintmax_t kMaxMarkerBytes = 64 * 1024;

// OUT as the user named it, absolute and without a trailing '/': "-o ." is the current folder.
fs::path normalizeOut(const std::string &outDir) {
  if (outDir.empty())
    throw UserError("-o: empty output folder name", 1);
  fs::path out = fs::absolute(outDir).lexically_normal();
  if (out.filename().empty() && out.has_relative_path())
    out = out.parent_path();
  return out;
}

[[noreturn]] void refuse(const fs::path &out, const std::string &why) {
  throw UserError(cat("output folder ", out.string(), ": ", why), 1);
}

[[noreturn]] void fsError(const fs::path &out, const std::string &what, const std::error_code &ec) {
  throw UserError(cat("output folder ", out.string(), ": ", what, ": ", ec.message()), 1);
}

// Whether `inner` is `outer` or lies inside it (both canonical).
bool within(const fs::path &inner, const fs::path &outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// The file names a valid marker lists; UserError if the marker is missing or not ours.
std::set<std::string> readMarker(const fs::path &out) {
  fs::path marker = out / kOutputMarker;
  std::error_code ec;
  fs::file_status st = fs::symlink_status(marker, ec);
  if (!fs::is_regular_file(st))
    refuse(out, cat("the folder is not empty and was not written by aicfc (no ", kOutputMarker,
                    " marker); aicfc replaces only its own output folders: give a new or empty "
                    "folder, or remove this one yourself"));
  uintmax_t size = fs::file_size(marker, ec);
  std::ifstream f(marker, std::ios::binary);
  std::string header;
  if (ec || size > kMaxMarkerBytes || !f || !std::getline(f, header) ||
      header != kOutputMarkerHeader)
    refuse(out, cat(kOutputMarker, " is not an aicf marker (its first line should be '",
                    kOutputMarkerHeader, "'); remove the folder yourself to reuse its name"));
  std::set<std::string> files;
  for (std::string line; std::getline(f, line);)
    if (!line.empty() && line != kOutputMarker && line.find('/') == std::string::npos &&
        line != "." && line != "..")
      files.insert(line);
  return files;
}

// What OUT is now. The refusals of output_folder.h throw; otherwise returns whether OUT exists
// and, for an aicf folder, the files its marker lists (all of OUT's entries but the marker).
struct OutState {
  bool exists = false;
  bool aicf = false; // an aicf output folder (else absent or empty)
  std::set<std::string> files;
};

OutState inspect(const fs::path &out, const std::vector<std::string> &inputs) {
  OutState s;
  std::error_code ec;
  fs::file_status st = fs::symlink_status(out, ec);
  if (ec && st.type() != fs::file_type::not_found)
    fsError(out, "cannot inspect it", ec);
  if (st.type() == fs::file_type::not_found)
    return s;
  s.exists = true;
  if (fs::is_symlink(st))
    refuse(out, "is a symbolic link; give the folder itself");
  if (!fs::is_directory(st))
    refuse(out, "exists and is not a folder");
  fs::path canon = fs::canonical(out, ec);
  if (ec)
    fsError(out, "cannot resolve it", ec);
  fs::path cwd = fs::current_path(ec);
  if (!ec && within(fs::canonical(cwd, ec), canon))
    refuse(out, "is the current folder (or contains it); give a separate output folder");
  for (const std::string &in : inputs) {
    fs::path p = fs::weakly_canonical(fs::absolute(in), ec);
    if (!ec && within(p, canon))
      refuse(out, cat("contains the model ", in, "; give a separate output folder"));
  }
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(out, ec), end; !ec && it != end; it.increment(ec))
    entries.push_back(*it);
  if (ec)
    fsError(out, "cannot list it", ec);
  if (entries.empty())
    return s;
  s.files = readMarker(out);
  s.aicf = true;
  // A file someone added to an old output folder is not ours to delete: refuse, naming it.
  std::vector<std::string> foreign;
  for (const fs::directory_entry &e : entries) {
    std::string name = e.path().filename().string();
    if (name == kOutputMarker)
      continue;
    if (!s.files.count(name) || !fs::is_regular_file(e.symlink_status(ec)))
      foreign.push_back(name);
  }
  std::sort(foreign.begin(), foreign.end());
  if (!foreign.empty()) {
    std::string list;
    for (size_t i = 0; i < foreign.size() && i < 5; ++i)
      list += (i ? ", " : "") + foreign[i];
    if (foreign.size() > 5)
      list += cat(" and ", foreign.size() - 5, " more");
    refuse(out, cat("holds files aicfc did not write (", list,
                    "); move them out or give another folder"));
  }
  return s;
}

// A new folder named `out` + suffix + 6 random characters, created here (exclusively: mkdir fails
// on an existing name, so this never adopts a folder someone else made).
fs::path makeUniqueDir(const fs::path &out, const std::string &suffix) {
  static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  std::mt19937 gen(rd());
  std::uniform_int_distribution<int> pick(0, sizeof(chars) - 2);
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = out.filename().string() + suffix;
    for (int i = 0; i < 6; ++i)
      name += chars[pick(gen)];
    fs::path p = out.parent_path() / name;
    if (::mkdir(p.c_str(), 0777) == 0)
      return p;
    if (errno != EEXIST)
      fsError(out, "cannot create a temporary folder beside it",
              std::error_code(errno, std::generic_category()));
  }
  refuse(out, cat("cannot find a free name for a temporary folder beside it"));
}

// Deletes the old output folder `old` (swapped out of OUT): only the marker and the files it
// listed, then the folder if that left it empty. Anything else stays, with a warning.
void removeOld(const fs::path &old, const std::set<std::string> &files) {
  std::error_code ec;
  std::vector<fs::path> victims;
  for (fs::directory_iterator it(old, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if ((name == kOutputMarker || files.count(name)) && fs::is_regular_file(it->symlink_status(ec)))
      victims.push_back(it->path());
  }
  for (const fs::path &p : victims)
    fs::remove(p, ec);
  if (!fs::remove(old, ec))
    warn(cat("kept the previous output folder as ", old.string(),
             ": it holds files aicfc did not write"));
}

} // namespace

std::set<std::string> outputFolderFiles(const std::string &outDir) {
  return readMarker(outDir);
}

void checkOutputFolder(const std::string &outDir, const std::vector<std::string> &inputs) {
  inspect(normalizeOut(outDir), inputs);
}

StagedOutputFolder::StagedOutputFolder(const std::string &outDir,
                                       const std::vector<std::string> &inputs)
    : out_(normalizeOut(outDir)) {
  inspect(out_, inputs);
  std::error_code ec;
  fs::create_directories(out_.parent_path(), ec);
  if (ec)
    fsError(out_, cat("cannot create ", out_.parent_path().string()), ec);
  tmp_ = makeUniqueDir(out_, ".aicf-tmp-");
}

StagedOutputFolder::~StagedOutputFolder() {
  if (committed_ || tmp_.empty())
    return;
  std::error_code ec;
  fs::remove_all(tmp_, ec); // created by makeUniqueDir: ours, with only what we wrote
}

void StagedOutputFolder::commit() {
  AICF_CHECK(!committed_, "output folder committed twice");
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(tmp_)) {
    AICF_CHECK(e.is_regular_file(), "output folder: ", e.path().string(), " is not a file");
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  std::string marker = cat(kOutputMarkerHeader, "\n");
  for (const std::string &n : names)
    marker += n + "\n";
  {
    std::ofstream f(tmp_ / kOutputMarker, std::ios::binary);
    if (!f || !f.write(marker.data(), static_cast<std::streamsize>(marker.size())) || !f.flush())
      refuse(out_, cat("cannot write ", (tmp_ / kOutputMarker).string()));
  }

  OutState s = inspect(out_, {});
  std::error_code ec;
  if (!s.aicf) {
    // Absent or empty: rename(2) replaces an empty folder, and fails if a file appeared in it.
    if (::rename(tmp_.c_str(), out_.c_str()) != 0)
      fsError(out_, "cannot move the new folder into place",
              std::error_code(errno, std::generic_category()));
    committed_ = true;
    return;
  }
  fs::path old;
  if (!detail::forceRenameAside &&
      ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, out_.c_str(), RENAME_EXCHANGE) == 0) {
    old = tmp_; // the swap left the old folder under the temporary name
  } else if (detail::forceRenameAside || errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
    // No atomic exchange here: the old folder goes aside (onto an empty folder made for it),
    // the new one takes its name, and on failure the old one comes back.
    old = makeUniqueDir(out_, ".aicf-old-");
    if (::rename(out_.c_str(), old.c_str()) != 0) {
      int err = errno;
      fs::remove(old, ec);
      fsError(out_, "cannot move the old folder aside",
              std::error_code(err, std::generic_category()));
    }
    if (::rename(tmp_.c_str(), out_.c_str()) != 0) {
      int err = errno;
      ::rename(old.c_str(), out_.c_str());
      fsError(out_, "cannot move the new folder into place",
              std::error_code(err, std::generic_category()));
    }
  } else {
    fsError(out_, "cannot swap the new folder in", std::error_code(errno, std::generic_category()));
  }
  committed_ = true;
  removeOld(old, s.files);
}

} // namespace aicf
