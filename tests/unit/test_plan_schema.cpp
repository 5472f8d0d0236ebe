// plan.yaml declared once (support/plan_schema.def): every plan the writer produces, for every
// testdata model on the host and on cuda:sm_90, is written, loaded back with yaml-cpp, checked
// against the schema (no unknown key, every always-present field there) and written again from
// the loaded document by the schema alone (support/plan_yaml.h), byte for byte. The runtime's own
// in-memory form keeps only what running needs, so the round trip goes through the schema rather
// than through it; the runtime's loader refuses the keys the schema does not know. A plan with
// every optional field set covers the fields no testdata model reaches, and every field of the
// schema must appear in some plan written here (a field the writer no longer writes is stale).
#include "driver/compile.h"
#include "model_dirs.h"
#include "plan/plan.h"
#include "runtime/aicf_runtime.h"
#include "support/plan_schema.h"
#include "support/plan_yaml.h"
#include "tests/unit/test_files.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace aicf;
using namespace aicf::test_files;

namespace {

std::string written(const Plan &p) {
  std::ostringstream os;
  p.writeYaml(os);
  return os.str();
}

// The (section, key) pairs of a loaded plan, found as checkPlanKeys walks it.
void collect(const YAML::Node &map, const char *section,
             std::set<std::pair<std::string, std::string>> &seen) {
  if (!map.IsMap())
    return;
  for (const auto &kv : map) {
    const PlanField *f = planField(section, kv.first.Scalar().c_str());
    if (!f)
      continue;
    seen.insert({f->section, f->key});
    if (f->type == PlanType::Flow || f->type == PlanType::Block)
      collect(kv.second, f->child, seen);
    else if ((f->type == PlanType::Flows || f->type == PlanType::Blocks) && kv.second.IsSequence())
      for (const YAML::Node &e : kv.second)
        collect(e, f->child, seen);
  }
}

// write -> load -> check keys -> write by the schema alone: the same bytes.
void roundTrip(const std::string &text, std::set<std::pair<std::string, std::string>> &seen) {
  YAML::Node loaded = YAML::Load(text);
  CHECK_MESSAGE(checkPlanKeys(loaded, /*requireAll=*/true) == "", checkPlanKeys(loaded, true));
  std::string again = emitPlanBySchema(loaded);
  if (again != text) { // the first differing line, rather than two whole plans
    std::istringstream a(text), b(again);
    std::string la, lb;
    while (std::getline(a, la) && std::getline(b, lb) && la == lb) {
    }
    std::string first = "the first differing line; writer: " + la + "\nschema: " + lb;
    FAIL_CHECK(first);
  }
  collect(loaded, "plan", seen);
}

std::vector<fs::path> testdataModels() {
  std::vector<fs::path> dirs = testing::modelDirs();
  for (const char *group : {"layout", "recipes"})
    for (const auto &e : fs::directory_iterator(fs::path(AICF_TESTDATA) / group))
      if (fs::exists(e.path() / "model.onnx"))
        dirs.push_back(e.path());
  return dirs;
}

// mlp_op13's host plan with every optional field the testdata models leave out set (the plan
// would not run: it is for the writer and the schema only).
Plan everyField() {
  std::unique_ptr<Graph> g =
      testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13");
  CompileOptions opts;
  Plan p = buildModel(*g, opts).plan;
  p.dims.push_back(DimRange{"len", 0, 8, 4});
  p.dimSetBy["len"] = p.buffers.front().id;
  p.boundInputs.push_back(BoundInput{"c", TensorType(DType::F32, {2}), "c.npy"});
  AttentionDecision streaming, materialized;
  streaming.node = materialized.node = "/attn";
  streaming.streamingUs = 1.5;
  streaming.materializedWhy = "not exact";
  materialized.materialized = true;
  materialized.streamingWhy = "no schedule fits";
  materialized.materializedUs = 2.5;
  p.attention = {streaming, materialized};
  SliceDecision slices;
  slices.node = "/mm";
  slices.unsplit = Price(3.0, 4096);
  slices.splits = {{2, Price(2.0, 2048)}, {4, Price(-1, 0)}};
  slices.chosen = 2;
  p.splitK = {slices};
  p.splitChains = {slices};
  SiblingMergeDecision merge;
  merge.nodes = {"/a", "/b"};
  merge.merged = "f32[2,64,512]";
  merge.separate = Price(2.0, 100);
  merge.together = Price(1.0, 80);
  merge.chosen = true;
  p.mergeSiblings = {merge};
  for (RematDecision::Kind k :
       {RematDecision::Kind::Elementwise, RematDecision::Kind::RowNorm, RematDecision::Kind::Chain,
        RematDecision::Kind::NormEpilogue, RematDecision::Kind::ConvChain}) {
    RematDecision d;
    d.kind = k;
    d.what = k == RematDecision::Kind::Elementwise ? "" : "layer_norm /ln";
    d.values = {"%3"};
    d.consumers = 2;
    p.remat.push_back(d);
  }
  LayoutFoldRecord stored, folded;
  stored.op = folded.op = "transpose";
  stored.node = folded.node = "/t";
  stored.stored = true;
  stored.stores = {"gemm %12: (d0, d1) -> (d1, d0)"};
  folded.folded = true;
  folded.foldUs = 1.0;
  folded.materializeUs = 2.0;
  folded.reads = {"matmul operand 0 %15: (d0, d1) -> (d1, d0)"};
  p.layoutFolds = {stored, folded};
  p.buffers.back().aliasOf = p.buffers.front().id;
  PlanStep &s = p.steps.front();
  s.dims = true;
  s.dynamicSharedBytes = 1024;
  s.group = 0;
  s.guard = p.buffers.front().id;
  s.guardWhen = false;
  s.fail = "cannot run";
  s.loop = PlanLoop{2, {"b1"}, {"b2"}};
  s.recipeFallback = true;
  s.recipeReason = "rows: not contiguous";
  s.fp32Us = 3.0;
  s.occupancy = 0.5;
  s.registers = 64;
  s.ptxas.present = true;
  s.ptxas.registers = 64;
  return p;
}

} // namespace

TEST_CASE("plan schema: every testdata plan round-trips through the schema, byte for byte") {
  std::set<std::pair<std::string, std::string>> seen;
  for (const fs::path &dir : testdataModels())
    for (const char *target : {"cpu", "cuda:sm_90"}) {
      CAPTURE(dir.filename().string());
      CAPTURE(target);
      std::unique_ptr<Graph> g = testing::pipelineGraph(dir, target);
      CompileOptions opts;
      opts.target = opts.planFor = Target::parse(target);
      roundTrip(written(buildModel(*g, opts).plan), seen);
    }
  roundTrip(written(everyField()), seen);
  // Every field of the schema is written by some plan above: none is stale.
  for (const PlanField &f : kPlanFields) {
    CAPTURE(f.section);
    CHECK_MESSAGE(seen.count({f.section, f.key}) == 1, "never written: ", f.key);
  }
}

TEST_CASE("plan schema: the table names each field once, and every child section exists") {
  std::set<std::pair<std::string, std::string>> fields;
  std::set<std::string> sections;
  for (const PlanField &f : kPlanFields) {
    CHECK_MESSAGE(fields.insert({f.section, f.key}).second, f.section, ".", f.key, " twice");
    sections.insert(f.section);
  }
  for (const PlanField &f : kPlanFields) {
    bool container = f.type == PlanType::Flow || f.type == PlanType::Block ||
                     f.type == PlanType::Flows || f.type == PlanType::Blocks;
    CAPTURE(f.key);
    CHECK((container ? sections.count(f.child) == 1 : std::string(f.child) == "_"));
  }
  CHECK(std::string(plan_key::step::kind_id) == "kind_id");
  CHECK(planField("hints", "recipe_reason")->type == PlanType::Quoted);
  CHECK(planField("step", "no_such_key") == nullptr);
}

TEST_CASE("plan schema: the runtime refuses a key the schema does not know, naming it") {
  fs::path out = scratchDir("aicf_plan_schema_") / "unknown_key";
  fs::remove_all(out);
  {
    std::unique_ptr<Graph> g =
        testing::pipelineGraph(fs::path(AICF_TESTDATA) / "models" / "mlp_op13");
    CompileOptions opts;
    writeArtifacts(*g, buildModel(*g, opts), opts, out.string());
  }
  std::string plan = readAll(out / "plan.yaml");
  aicf_model *good = aicf_open(out.string().c_str());
  REQUIRE_MESSAGE(good != nullptr, aicf_last_error());
  aicf_close(good);
  size_t at = plan.find("      recipe: ");
  REQUIRE(at != std::string::npos);
  plan.insert(at, "      recipe_resaon: typo\n");
  writeAll(out / "plan.yaml", plan);
  aicf_model *m = aicf_open(out.string().c_str());
  CHECK(m == nullptr);
  aicf_close(m);
  std::string err = aicf_last_error();
  CHECK_MESSAGE(
      err.find("plan.yaml: steps[0].hints: unknown key 'recipe_resaon'") != std::string::npos, err);
}
