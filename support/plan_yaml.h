// A loaded plan.yaml walked by its schema (support/plan_schema.h): checkPlanKeys finds the keys
// the schema does not know (the runtime refuses them, naming the file and the key), and
// emitPlanBySchema writes a loaded plan back with only the schema's styles, which gives the
// writer's bytes when writer and schema agree (the round trip of tests/unit/test_plan_schema.cpp).
// Header-only over yaml-cpp, which the runtime links anyway; nothing of the compiler.
#pragma once

#include "support/plan_schema.h"

#include <yaml-cpp/yaml.h>

#include <string>

namespace aicf {

namespace plan_yaml_detail {

inline bool isMapType(PlanType t) {
  return t == PlanType::Flow || t == PlanType::Block;
}
inline bool isMapsType(PlanType t) {
  return t == PlanType::Flows || t == PlanType::Blocks;
}

inline std::string join(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

} // namespace plan_yaml_detail

// The first problem with the keys of `map` (a map of section `section`, found at `path`) and of
// the maps below it: "steps[3].hints: unknown key 'foo'", or with requireAll a missing field the
// schema says is always there. A value of another shape than the schema's is not looked into
// (its reader says what it expected). "" when there is none.
inline std::string checkPlanKeys(const YAML::Node &map, const char *section,
                                 const std::string &path, bool requireAll) {
  using namespace plan_yaml_detail;
  if (!map.IsMap())
    return "";
  for (const auto &kv : map) {
    std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
    const PlanField *f = planField(section, key.c_str());
    if (!f)
      return (path.empty() ? std::string("plan") : path) + ": unknown key '" + key + "'";
    std::string at = join(path, key), why;
    if (isMapType(f->type))
      why = checkPlanKeys(kv.second, f->child, at, requireAll);
    else if (isMapsType(f->type) && kv.second.IsSequence())
      for (size_t i = 0; i < kv.second.size() && why.empty(); ++i)
        why = checkPlanKeys(kv.second[i], f->child, at + "[" + std::to_string(i) + "]", requireAll);
    if (!why.empty())
      return why;
  }
  if (requireAll)
    for (const PlanField &f : kPlanFields)
      if (f.presence == PlanPresence::Always && std::strcmp(f.section, section) == 0 && !map[f.key])
        return (path.empty() ? std::string("plan") : path) + ": missing '" + f.key + "'";
  return "";
}

inline std::string checkPlanKeys(const YAML::Node &plan, bool requireAll = false) {
  return checkPlanKeys(plan, "plan", "", requireAll);
}

// Writes `map` (section `section` of a loaded plan.yaml) field by field in the file's order, each
// in the style the schema gives it, ignoring the styles the file was read with. Throws
// YAML::Exception for a key the schema does not know or a value of another shape.
inline void emitPlanSection(YAML::Emitter &y, const YAML::Node &map, const char *section) {
  using namespace plan_yaml_detail;
  auto scalar = [](const YAML::Node &n) -> const std::string & {
    if (!n.IsScalar())
      throw YAML::Exception(n.Mark(), "a scalar was expected");
    return n.Scalar();
  };
  y << YAML::BeginMap;
  for (const auto &kv : map) {
    const std::string &key = scalar(kv.first);
    const PlanField *f = planField(section, key.c_str());
    if (!f)
      throw YAML::Exception(kv.first.Mark(), "unknown key '" + key + "' in " + section);
    y << YAML::Key << key << YAML::Value;
    const YAML::Node &v = kv.second;
    switch (f->type) {
    case PlanType::Str:
    case PlanType::Int:
    case PlanType::Num:
    case PlanType::Bool: y << scalar(v); break;
    case PlanType::Quoted: y << YAML::DoubleQuoted << scalar(v); break;
    case PlanType::List:
    case PlanType::Lines:
      y << (f->type == PlanType::List ? YAML::Flow : YAML::Block) << YAML::BeginSeq;
      for (const YAML::Node &e : v)
        y << scalar(e);
      y << YAML::EndSeq;
      break;
    case PlanType::Dict:
      y << YAML::Flow << YAML::BeginMap;
      for (const auto &e : v)
        y << YAML::Key << scalar(e.first) << YAML::Value << scalar(e.second);
      y << YAML::EndMap;
      break;
    case PlanType::Flow:
    case PlanType::Block:
      y << (f->type == PlanType::Flow ? YAML::Flow : YAML::Block);
      emitPlanSection(y, v, f->child);
      break;
    case PlanType::Flows:
    case PlanType::Blocks:
      y << YAML::BeginSeq;
      for (const YAML::Node &e : v) {
        y << (f->type == PlanType::Flows ? YAML::Flow : YAML::Block);
        emitPlanSection(y, e, f->child);
      }
      y << YAML::EndSeq;
      break;
    }
  }
  y << YAML::EndMap;
}

// A loaded plan.yaml written back by the schema alone, as the writer ends the file.
inline std::string emitPlanBySchema(const YAML::Node &plan) {
  YAML::Emitter y;
  emitPlanSection(y, plan, "plan");
  return std::string(y.c_str()) + "\n";
}

} // namespace aicf
