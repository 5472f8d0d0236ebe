// The runtime's loader against tampered folders (issue 15): one folder is compiled, then each
// test copies it, edits one number or name in plan.yaml (or weights.bin), and expects aicf_open
// to fail with the exact message, never a crash or an out-of-bounds access. The edits are those
// whose bound checks used to overflow (a weight offset near INT64_MAX passed `offset + bytes >
// total`; shape products wrapped) plus every other number the loader reads. The unit tests also
// run under ASan + UBSan, which catch any overflow left. Also: the ISA a folder needs
// (target.isa) is checked against the CPU at open, and thread counts are range-checked.
#include "backend/host/host_build.h"
#include "driver/compile.h"
#include "model_dirs.h"
#include "runtime/aicf_runtime.h"
#include "support/diagnostics.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

namespace fs = std::filesystem;
using namespace aicf::test_files;
using namespace aicf;

namespace {

fs::path scratch() {
  return scratchDir("aicf_safety_runtime_");
}

fs::path compileFolder(const std::string &name, const std::string &cpuArch = "native") {
  fs::path out = scratch() / name;
  if (!fs::exists(out / "plan.yaml")) {
    std::unique_ptr<Graph> g =
        testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13");
    CompileOptions opts;
    opts.cpuArch = cpuArch;
    opts.chains =
        FusePolicy::Store; // the hidden activation keeps a buffer the tampering cases address
    writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  }
  return out;
}

// The mlp_op13 folder every tampering starts from (compiled once).
const fs::path &good() {
  static fs::path p = compileFolder("good");
  return p;
}

// A copy of the good folder named `name` whose plan.yaml has `from` replaced by `to` (once).
fs::path tampered(const std::string &name, const std::string &from, const std::string &to) {
  fs::path p = scratch() / name;
  fs::remove_all(p);
  fs::copy(good(), p);
  std::string plan = readAll(p / "plan.yaml");
  size_t at = plan.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "plan.yaml has no '", from, "'");
  plan.replace(at, from.size(), to);
  writeAll(p / "plan.yaml", plan);
  return p;
}

// aicf_open's error for folder p (CHECKs that it fails).
std::string openError(const fs::path &p) {
  aicf_model *m = aicf_open(p.string().c_str());
  CHECK(m == nullptr);
  aicf_close(m);
  return aicf_last_error();
}

std::string planError(const fs::path &p, const std::string &msg) {
  return (p / "plan.yaml").string() + ": " + msg;
}

} // namespace

TEST_CASE("safety runtime: the untampered folder opens") {
  aicf_model *m = aicf_open(good().string().c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  aicf_close(m);
}

TEST_CASE("safety runtime: buffer offsets are checked without overflow") {
  // b7 (fc2.weight packed in panels, 32768 bytes) sits at offset 36224 of the 68992-byte
  // weights.bin.
  const std::string b7 = "bytes: 32768, offset: 36224";
  fs::path p = tampered("huge_offset", b7, "bytes: 32768, offset: 9223372036854775000");
  CHECK(openError(p) == planError(p, "buffer b7 lies outside weights.bin"));
  p = tampered("max_offset", b7, "bytes: 32768, offset: 9223372036854775807");
  CHECK(openError(p) == planError(p, "buffer b7 lies outside weights.bin"));
  p = tampered("past_end", b7, "bytes: 32768, offset: 36288"); // 36288 + 32768 = 69056 > 68992
  CHECK(openError(p) == planError(p, "buffer b7 lies outside weights.bin"));
  p = tampered("over_int64", b7, "bytes: 32768, offset: 9223372036854775808");
  CHECK(openError(p) == planError(p, "buffer b7: offset must be a 64-bit integer"));
  p = tampered("neg_offset", b7, "bytes: 32768, offset: -64");
  CHECK(openError(p) == planError(p, "buffer b7: offset -64 must be >= 0"));
  p = tampered("unaligned", b7, "bytes: 32768, offset: 36220");
  CHECK(openError(p) == planError(p, "buffer b7: offset 36220 is not a multiple of 64"));
  p = tampered("not_a_number", b7, "bytes: 32768, offset: lots");
  CHECK(openError(p) == planError(p, "buffer b7: offset must be a 64-bit integer"));
  // b10 (an intermediate, 2048 bytes) at 4096 of the 6144-byte arena.
  p = tampered("arena_offset", "bytes: 2048, offset: 4096", "bytes: 2048, offset: 4608");
  CHECK(openError(p) == planError(p, "buffer b10 lies outside the arena"));
  p = tampered("arena_huge", "bytes: 2048, offset: 4096",
               "bytes: 2048, offset: 9223372036854775744");
  CHECK(openError(p) == planError(p, "buffer b10 lies outside the arena"));
}

TEST_CASE("safety runtime: shapes, element counts and byte counts are checked") {
  const std::string b9 = "shape: [8, 128], bytes: 4096";
  fs::path p = tampered("dims_overflow", b9, "shape: [1099511627776, 1099511627776], bytes: 4096");
  CHECK(openError(p) ==
        planError(p, "buffer b9: shape [1099511627776, 1099511627776] has too many elements"));
  p = tampered("bytes_overflow", b9, "shape: [1099511627776, 2097152], bytes: 4096");
  CHECK(openError(p) ==
        planError(p, "buffer b9: shape [1099511627776, 2097152] has too many bytes"));
  p = tampered("huge_dim", b9, "shape: [8, 1099511627777], bytes: 4096");
  CHECK(openError(p) ==
        planError(p, "buffer b9: dimension 1099511627777 must be <= 1099511627776"));
  p = tampered("neg_dim", b9, "shape: [8, -128], bytes: 4096");
  CHECK(openError(p) == planError(p, "buffer b9: dimension -128 must be >= 0"));
  p = tampered("rank9", b9, "shape: [1, 1, 1, 1, 1, 1, 1, 8, 128], bytes: 4096");
  CHECK(openError(p) == planError(p, "buffer b9: rank 9 exceeds 8"));
  p = tampered("shape_bytes", b9, "shape: [8, 129], bytes: 4096");
  CHECK(openError(p) ==
        planError(p, "buffer b9: 4096 bytes do not match its shape [8, 129] of f32 (4128 bytes)"));
  p = tampered("neg_bytes", b9, "shape: [8, 128], bytes: -4096");
  CHECK(openError(p) == planError(p, "buffer b9: bytes -4096 must be >= 0"));
  p = tampered("no_bytes", b9, "shape: [8, 128]");
  CHECK(openError(p) == planError(p, "buffer b9: missing 'bytes'"));
  // Consistent shape and bytes, but not what the kernels were compiled for.
  p = tampered("layout", b9, "shape: [8, 129], bytes: 4128");
  CHECK(openError(p) == planError(p, "the steps of plan.yaml do not match the kernels in " +
                                         (p / "libmodel.so").string() +
                                         " (was the plan edited?): plan.yaml calls "
                                         "k0_gemm:32768,2048,512,4128, the library expects "
                                         "k0_gemm:32768,2048,512,4096"));
}

TEST_CASE("safety runtime: block sizes, indices and step buffers are checked") {
  fs::path p = tampered("neg_weights", "bytes: 68992", "bytes: -1");
  CHECK(openError(p) == planError(p, "weights: bytes -1 must be >= 0"));
  p = tampered("huge_arena", "arena: {bytes: 6144", "arena: {bytes: 9223372036854775807");
  CHECK(openError(p) ==
        planError(p, "arena: bytes 9223372036854775807 exceed the 6144 bytes its buffers use"));
  p = tampered("io_index", "bytes: 2048, index: 0", "bytes: 2048, index: 100000");
  CHECK(openError(p) == planError(p, "buffer b0: index 100000 must be <= 4096"));
  p = tampered("unknown_buffer", "inputs: [b6, b0, b1]", "inputs: [b6, b99, b1]");
  CHECK(openError(p) == planError(p, "step k0_gemm uses unknown buffer b99"));
  p = tampered("writes_input", "outputs: [b9]", "outputs: [b0]");
  CHECK(openError(p) == planError(p, "step k0_gemm writes input buffer b0"));
  p = tampered("steps_map", "steps:\n", "steps: 3\nold_steps:\n");
  CHECK(openError(p) == planError(p, "steps must be a list"));
}

TEST_CASE("safety runtime: weights.bin must be exactly the plan's size") {
  std::string w = readAll(good() / "weights.bin");
  REQUIRE(w.size() == 68992);
  fs::path p = tampered("short_weights", "schema", "schema");
  writeAll(p / "weights.bin", w.substr(0, 1000));
  CHECK(openError(p) == (p / "weights.bin").string() +
                            ": 1000 bytes, plan.yaml says 68992 (truncated or wrong file)");
  writeAll(p / "weights.bin", w + "x");
  CHECK(openError(p) == (p / "weights.bin").string() +
                            ": 68993 bytes, plan.yaml says 68992 (truncated or wrong file)");
  fs::remove(p / "weights.bin");
  fs::create_directory(p / "weights.bin");
  CHECK(openError(p) == (p / "weights.bin").string() + ": not a regular file");
}

#if defined(__x86_64__) // the ISA names and levels are x86's
TEST_CASE("safety runtime: the ISA a folder needs is checked against this CPU") {
  // The names aicfc records for the x86-64 levels; "native" is this machine's, which opens.
  using V = std::vector<std::string>;
  CHECK(hostIsaFeatures("x86-64") == V{});
  CHECK(hostIsaFeatures("x86-64-v2") == V{"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"});
  CHECK(hostIsaFeatures("x86-64-v3") == V{"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "lzcnt",
                                          "movbe", "bmi", "bmi2", "avx", "f16c", "fma", "avx2"});
  CHECK_THROWS_WITH_AS(hostIsaFeatures("bogus"),
                       doctest::Contains("--cpu-arch bogus: c++ does not accept -march=bogus"),
                       UserError);
  std::string plan = readAll(good() / "plan.yaml");
  CHECK(plan.find("cpu_arch: native, isa: [") != std::string::npos);

  // An extension no x86 CPU has both of: Intel lacks sse4a, AMD lacks avx512fp16.
  std::string lacking = !__builtin_cpu_supports("sse4a") ? "sse4a" : "avx512fp16";
  bool hasBoth = __builtin_cpu_supports("avx512fp16") && __builtin_cpu_supports("sse4a");
  REQUIRE_MESSAGE(!hasBoth, "this CPU has both sse4a and avx512fp16");
  fs::path p = tampered("isa_lacking", "isa: [", "isa: [" + lacking + ", ");
  CHECK(openError(p) == "folder " + p.string() + " needs " + lacking +
                            ", which this CPU lacks (compiled with --cpu-arch native; recompile "
                            "it with a --cpu-arch this CPU supports, e.g. x86-64-v2)");
  p = tampered("isa_unknown", "isa: [", "isa: [frobnicate, ");
  CHECK(openError(p) == planError(p, "target.isa: unknown instruction-set extension 'frobnicate'"));
  p = tampered("isa_scalar", "isa: [", "isa: avx, old_isa: [");
  CHECK(openError(p) == planError(p, "target.isa must be a list"));

  // A folder from before the list was recorded opens unchecked.
  size_t at = plan.find(", isa: [");
  size_t end = plan.find("]", at);
  p = tampered("isa_absent", plan.substr(at, end + 1 - at), "");
  aicf_model *m = aicf_open(p.string().c_str());
  CHECK_MESSAGE(m != nullptr, aicf_last_error());
  aicf_close(m);
}

TEST_CASE("safety runtime: a portable --cpu-arch folder records its smaller ISA list and runs") {
  fs::path p = compileFolder("v2", "x86-64-v2");
  std::string plan = readAll(p / "plan.yaml");
  CHECK(plan.find("cpu_arch: x86-64-v2, isa: [sse3, ssse3, sse4.1, sse4.2, popcnt], hardware:") !=
        std::string::npos);
  aicf_model *m = aicf_open(p.string().c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  std::vector<float> in(8 * 64, 0.5f), out(8 * 10, 0.0f);
  const void *ins[] = {in.data()};
  void *outs[] = {out.data()};
  CHECK(aicf_run(m, ins, outs) == 0);
  aicf_close(m);
}
#endif

TEST_CASE("safety runtime: thread counts outside 1..AICF_MAX_THREADS are refused") {
  aicf_model *m = aicf_open(good().string().c_str());
  REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
  for (int n : {0, -1, AICF_MAX_THREADS + 1, 100000}) {
    CAPTURE(n);
    CHECK(aicf_set_num_threads(m, n) == 1);
    CHECK(std::string(aicf_last_error()) ==
          cat("aicf_set_num_threads: ", n, " threads; expected 1 to 1024"));
  }
  CHECK(aicf_set_num_threads(m, 2) == 0);
  CHECK(aicf_set_num_threads(nullptr, 2) == 1);
  aicf_close(m);
}

TEST_CASE("safety runtime: AICF_NUM_THREADS is bounded like aicf_set_num_threads") {
  // The environment's default thread count: a bad value fails aicf_open (not clamped, not
  // ignored), so a deployment's typo is seen at once.
  struct Restore {
    ~Restore() { ::unsetenv("AICF_NUM_THREADS"); }
  } restore;
  for (const char *bad : {"0", "-3", "1025", "99999999999999999999", "4x", "two", " 2"}) {
    CAPTURE(bad);
    ::setenv("AICF_NUM_THREADS", bad, 1);
    CHECK(openError(good()) ==
          cat("AICF_NUM_THREADS='", bad, "': expected a whole number from 1 to 1024"));
  }
  for (const char *ok : {"1", "2", "1024", ""}) {
    CAPTURE(ok);
    ::setenv("AICF_NUM_THREADS", ok, 1);
    aicf_model *m = aicf_open(good().string().c_str());
    REQUIRE_MESSAGE(m != nullptr, aicf_last_error());
    aicf_close(m);
  }
}

// Dispatch groups (launch.group): steps that run together must be consecutive, name their first
// step, and share no memory one of them writes; an edited plan that breaks this would race.
TEST_CASE("safety runtime: dispatch groups are checked") {
  // Adds `g` (", group: N") to the launch of step `kind` in plan text `plan`.
  auto addGroup = [](std::string &plan, const std::string &kind, const std::string &g) {
    size_t at = plan.find("kind_id: " + kind);
    REQUIRE(at != std::string::npos);
    at = plan.find("chunks: 1}", at);
    REQUIRE(at != std::string::npos);
    plan.insert(at + std::string("chunks: 1").size(), g);
  };
  auto grouped = [&](const std::string &name, const std::string &g0, const std::string &g1) {
    fs::path p = tampered(name, "kind_id: k0_gemm", "kind_id: k0_gemm");
    std::string plan = readAll(p / "plan.yaml");
    addGroup(plan, "k0_gemm", g0);
    addGroup(plan, "k1_gemm", g1);
    writeAll(p / "plan.yaml", plan);
    return p;
  };
  // k1 reads what k0 writes.
  fs::path p = grouped("group_conflict", ", group: 0", ", group: 0");
  CHECK(openError(p) == planError(p, "step k1_gemm: launch.group 0: it shares memory with step "
                                     "k0_gemm of its group, which one of them writes"));
  p = grouped("group_not_first", "", ", group: 0");
  CHECK(openError(p) == planError(p, "step k1_gemm: launch.group 0 does not name the first of "
                                     "consecutive steps of its group"));
  p = grouped("group_of_one", "", ", group: 1");
  CHECK(openError(p) == planError(p, "step k1_gemm: launch.group 1 has one step"));
  p = grouped("group_ahead", ", group: 1", "");
  CHECK(openError(p) == planError(p, "step k0_gemm: launch: group 1 must be <= 0"));
}
