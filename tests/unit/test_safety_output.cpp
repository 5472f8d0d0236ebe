// Issue 15, items 1 and 10: `aicfc -o OUT` never deletes what aicf did not write
// (support/output_folder.h), and a compiled folder is byte-deterministic, CUDA's libmodel.so
// included. Each refusal is a UserError with exit code 1 that names the folder and leaves it as it
// was; the temporary folder beside OUT is unique and only it is removed on failure.
#include "backend/cuda/cuda_build.h"
#include "driver/compile.h"
#include "model_dirs.h"
#include "support/diagnostics.h"
#include "support/output_folder.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf::test_files;
using namespace aicf;

namespace {

// A fresh scratch folder per test case, removed at its end.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string &name)
      : dir(fs::temp_directory_path() / cat("aicf_safety_output_", ::getpid(), "_", name)) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// The folder's entry names, sorted, comma-separated ("" for an empty or missing folder).
std::string listing(const fs::path &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  std::string s;
  for (const std::string &n : names)
    s += (s.empty() ? "" : ",") + n;
  return s;
}

// Stages a small folder holding `files` and commits it to `out`.
void stage(const fs::path &out, const std::vector<std::string> &files,
           const std::vector<std::string> &inputs = {}) {
  StagedOutputFolder staged(out.string(), inputs);
  for (const std::string &f : files)
    writeAll(staged.dir() / f, "new " + f);
  staged.commit();
}

// The UserError message of `f`, which must throw one with exit code 1.
template <typename F>
std::string refusal(F &&f) {
  try {
    f();
  } catch (const UserError &e) {
    CHECK(e.exitCode() == 1);
    return e.what();
  }
  FAIL("no UserError");
  return "";
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("safety/output: an absent OUT is created, with parents, and marked") {
  Scratch s("absent");
  fs::path out = s.dir / "a" / "b" / "out";
  stage(out, {"plan.yaml", "libmodel.so"});
  CHECK(listing(out) == ".aicf-output,libmodel.so,plan.yaml");
  CHECK(readAll(out / ".aicf-output") ==
        "aicf output folder; safe to replace with aicfc -o\nlibmodel.so\nplan.yaml\n");
  CHECK(listing(out.parent_path()) == "out"); // no temporary folder left beside it
  CHECK((fs::status(out).permissions() & fs::perms::owner_all) == fs::perms::owner_all);
  CHECK((fs::status(out).permissions() & fs::perms::others_read) != fs::perms::none);
}

TEST_CASE("safety/output: an empty folder is used") {
  Scratch s("empty");
  fs::path out = s.dir / "out";
  fs::create_directories(out);
  stage(out, {"plan.yaml"});
  CHECK(listing(out) == ".aicf-output,plan.yaml");
  CHECK(listing(s.dir) == "out");
}

TEST_CASE("safety/output: an aicf folder is replaced whole; the old files are gone") {
  Scratch s("replace");
  fs::path out = s.dir / "out";
  stage(out, {"graph.mcir", "libmodel.so", "plan.yaml", "weights.bin"});
  stage(out, {"graph.mcir"}); // e.g. --emit graph -o OUT over a compiled folder (item 9)
  CHECK(listing(out) == ".aicf-output,graph.mcir");
  CHECK(readAll(out / "graph.mcir") == "new graph.mcir");
  CHECK(readAll(out / ".aicf-output") ==
        "aicf output folder; safe to replace with aicfc -o\ngraph.mcir\n");
  CHECK(listing(s.dir) == "out");
  // A marker that lists a file the user has since deleted is still ours.
  stage(out, {"a.txt", "b.txt"});
  fs::remove(out / "a.txt");
  stage(out, {"c.txt"});
  CHECK(listing(out) == ".aicf-output,c.txt");
}

TEST_CASE("safety/output: without an atomic exchange the old folder goes aside, then away") {
  Scratch s("aside");
  fs::path out = s.dir / "out";
  stage(out, {"libmodel.so", "plan.yaml"});
  detail::forceRenameAside = true;
  stage(out, {"graph.mcir"});
  detail::forceRenameAside = false;
  CHECK(listing(out) == ".aicf-output,graph.mcir");
  CHECK(listing(s.dir) == "out");
}

TEST_CASE("safety/output: a folder with user files is refused and left untouched") {
  Scratch s("user");
  fs::path out = s.dir / "out";
  fs::create_directories(out / "sub");
  writeAll(out / "notes.txt", "mine");
  std::string msg = refusal([&] { stage(out, {"plan.yaml"}); });
  CHECK(msg == cat("output folder ", out.string(),
                   ": the folder is not empty and was not written by aicfc (no .aicf-output "
                   "marker); aicfc replaces only its own output folders: give a new or empty "
                   "folder, or remove this one yourself"));
  CHECK(listing(out) == "notes.txt,sub");
  CHECK(readAll(out / "notes.txt") == "mine");
  CHECK(listing(s.dir) == "out");
}

TEST_CASE("safety/output: a user file dropped into an aicf folder is not deleted") {
  Scratch s("dropped");
  fs::path out = s.dir / "out";
  stage(out, {"plan.yaml", "weights.bin"});
  writeAll(out / "notes.txt", "mine");
  fs::create_directories(out / "results");
  std::string msg = refusal([&] { stage(out, {"plan.yaml"}); });
  CHECK(msg == cat("output folder ", out.string(),
                   ": holds files aicfc did not write (notes.txt, results); move them out or give "
                   "another folder"));
  CHECK(listing(out) == ".aicf-output,notes.txt,plan.yaml,results,weights.bin");
  CHECK(readAll(out / "plan.yaml") == "new plan.yaml");
  // A listed name that is now a folder (not the file aicf wrote) is not ours either.
  Scratch s2("dropped2");
  fs::path out2 = s2.dir / "out";
  stage(out2, {"plan.yaml"});
  fs::remove(out2 / "plan.yaml");
  fs::create_directories(out2 / "plan.yaml");
  CHECK(contains(refusal([&] { stage(out2, {"x"}); }), "did not write (plan.yaml)"));
}

TEST_CASE("safety/output: a marker that is not ours does not make a folder replaceable") {
  Scratch s("badmarker");
  fs::path out = s.dir / "out";
  fs::create_directories(out);
  writeAll(out / ".aicf-output", "my notes\n");
  writeAll(out / "data.txt", "mine");
  CHECK(contains(refusal([&] { stage(out, {"plan.yaml"}); }),
                 ": .aicf-output is not an aicf marker (its first line should be 'aicf output "
                 "folder; safe to replace with aicfc -o')"));
  CHECK(listing(out) == ".aicf-output,data.txt");
}

TEST_CASE("safety/output: the model's folder, the current folder and their parents are refused") {
  Scratch s("model");
  fs::path dir = s.dir / "m";
  fs::create_directories(dir);
  writeAll(dir / "model.onnx", "onnx");
  std::string model = (dir / "model.onnx").string();
  CHECK(refusal([&] { checkOutputFolder(dir.string(), {model}); }) ==
        cat("output folder ", dir.string(), ": contains the model ", model,
            "; give a separate output folder"));
  CHECK(contains(refusal([&] { checkOutputFolder(s.dir.string(), {model}); }),
                 ": contains the model "));
  // The model inside an aicf output folder: still refused (the marker does not list it, and
  // the model check comes first).
  fs::path aicfOut = s.dir / "o";
  stage(aicfOut, {"plan.yaml"});
  writeAll(aicfOut / "model.onnx", "onnx");
  CHECK(contains(refusal([&] { stage(aicfOut, {"x"}, {(aicfOut / "model.onnx").string()}); }),
                 ": contains the model "));
  CHECK(listing(aicfOut) == ".aicf-output,model.onnx,plan.yaml");

  // "-o ." and "-o .." from inside: refused even when the folder is an aicf one.
  fs::path cwd = fs::current_path();
  fs::current_path(aicfOut);
  std::string dot = refusal([&] { stage(".", {"x"}); });
  std::string dotdot = refusal([&] { stage("..", {"x"}); });
  fs::current_path(cwd);
  CHECK(dot == cat("output folder ", aicfOut.string(),
                   ": is the current folder (or contains it); give a separate output folder"));
  CHECK(contains(dotdot, ": is the current folder (or contains it)"));
  CHECK(listing(aicfOut) == ".aicf-output,model.onnx,plan.yaml");
}

TEST_CASE("safety/output: a user folder named OUT.aicf-tmp survives compiles and failures") {
  Scratch s("tmpname");
  fs::path out = s.dir / "out", user = s.dir / "out.aicf-tmp";
  fs::create_directories(user);
  writeAll(user / "keep.txt", "mine");
  stage(out, {"plan.yaml"});
  stage(out, {"plan.yaml"});
  CHECK(listing(user) == "keep.txt");
  // A compile that fails after staging removes only its own temporary folder; OUT stays whole.
  try {
    StagedOutputFolder staged(out.string());
    writeAll(staged.dir() / "plan.yaml", "half");
    CHECK(staged.dir().parent_path() == s.dir);
    CHECK(staged.dir().filename().string().rfind("out.aicf-tmp-", 0) == 0);
    throw UserError("compile failed", 2);
  } catch (const UserError &) {
  }
  CHECK(listing(s.dir) == "out,out.aicf-tmp");
  CHECK(listing(user) == "keep.txt");
  CHECK(listing(out) == ".aicf-output,plan.yaml");
  CHECK(readAll(out / "plan.yaml") == "new plan.yaml");
}

TEST_CASE("safety/output: OUT changed during the compile is checked again before the swap") {
  Scratch s("race");
  fs::path out = s.dir / "out";
  stage(out, {"plan.yaml"});
  StagedOutputFolder staged(out.string());
  writeAll(staged.dir() / "plan.yaml", "newer");
  writeAll(out / "notes.txt", "written meanwhile");
  CHECK(contains(refusal([&] { staged.commit(); }), "did not write (notes.txt)"));
  CHECK(listing(out) == ".aicf-output,notes.txt,plan.yaml");
}

TEST_CASE("safety/output: unusable paths are exit-1 errors naming the path") {
  Scratch s("paths");
  fs::path file = s.dir / "file";
  writeAll(file, "text");
  CHECK(refusal([&] { stage(file, {"x"}); }) ==
        cat("output folder ", file.string(), ": exists and is not a folder"));
  CHECK(readAll(file) == "text");
  CHECK(refusal([&] { stage(file / "sub", {"x"}); }) ==
        cat("output folder ", (file / "sub").string(), ": cannot create ", file.string(),
            ": Not a directory"));
  std::string longName(300, 'x');
  CHECK(refusal([&] { stage(s.dir / longName, {"x"}); }) ==
        cat("output folder ", (s.dir / longName).string(),
            ": cannot inspect it: File name too long"));
  CHECK(contains(refusal([&] { stage("/proc/aicf-out", {"x"}); }),
                 "output folder /proc/aicf-out: cannot create a temporary folder beside it: "));
  fs::create_directory_symlink(s.dir, s.dir / "link");
  CHECK(refusal([&] { stage(s.dir / "link", {"x"}); }) ==
        cat("output folder ", (s.dir / "link").string(),
            ": is a symbolic link; give the folder itself"));
  CHECK(listing(s.dir) == "file,link");
}

TEST_CASE("safety/output: writeArtifacts refuses a user folder before compiling anything") {
  Scratch s("artifacts");
  fs::path out = s.dir / "out";
  fs::create_directories(out);
  writeAll(out / "notes.txt", "mine");
  std::unique_ptr<Graph> g =
      testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13");
  CompileOptions opts;
  CompiledModel m = buildModel(*g, opts);
  CHECK(contains(refusal([&] { writeArtifacts(*g, m, opts, out.string()); }),
                 "the folder is not empty and was not written by aicfc"));
  CHECK(listing(out) == "notes.txt");
  CHECK(listing(s.dir) == "out");
  fs::remove(out / "notes.txt");
  writeArtifacts(*g, m, opts, out.string());
  CHECK(listing(out) == ".aicf-output,kernels.cpp,kernels.kir,libmodel.so,plan.yaml,weights.bin");
  writeArtifacts(*g, m, opts, out.string()); // ours now: replaced
  CHECK(listing(s.dir) == "out");
}

// Item 10: nvcc embedded its temporary file name (tmpxft_<pid>_..._kernels.cudafe1.cpp) in the
// symbol table of libmodel.so, so two builds of one model differed.
TEST_CASE("safety/output: CUDA libmodel.so is byte-identical across compiles and folder names") {
  if (nvccPath().empty()) {
    MESSAGE("nvcc not found: CUDA determinism not checked");
    return;
  }
  NoBuildCache uncached; // both libraries built by nvcc, not one copied
  Scratch s("cuda_det");
  fs::path a = s.dir / "a", b = s.dir / "b_with_a_longer_name";
  for (const fs::path &out : {a, b}) {
    std::unique_ptr<Graph> g =
        testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13", "cuda:sm_90");
    CompileOptions opts;
    opts.target = opts.planFor = Target::parse("cuda:sm_90");
    writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  }
  for (const char *f : {"kernels.cu", "libmodel.so", "weights.bin", "plan.yaml", ".aicf-output"}) {
    CAPTURE(f);
    REQUIRE(fs::exists(a / f));
    CHECK(readAll(a / f) == readAll(b / f));
  }
  CHECK_FALSE(contains(readAll(a / "libmodel.so"), "tmpxft"));
}
