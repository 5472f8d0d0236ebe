// plan.yaml's schema (support/plan_schema.def), declared once for its writer and its readers:
// the key names as constants (plan_key::<section>::<key>, e.g. plan_key::step::kind_id), so a
// misspelt or removed field fails to compile in every reader, and the table itself as data
// (kPlanFields, planField), which the runtime checks plan.yaml's keys against and the round-trip
// test re-emits plans from. Header-only and without dependencies: the runtime includes it too
// (scripts/check_layering.py). support/plan_yaml.h walks a loaded plan.yaml by this table.
#pragma once

#include <cstddef>
#include <cstring>

namespace aicf {

// The format's name and version, plan.yaml's first field.
inline constexpr char kPlanSchema[] = "aicf-plan/1";

// How a field's value is written (support/plan_schema.def explains each).
enum class PlanType { Str, Quoted, Int, Num, Bool, List, Lines, Dict, Flow, Block, Flows, Blocks };
enum class PlanPresence { Always, Optional };

struct PlanField {
  const char *section; // the map holding the key: "plan" (the top level), "step", ...
  const char *key;
  PlanType type;
  const char *child; // the section of a Flow / Block / Flows / Blocks value, else "_"
  PlanPresence presence;
  const char *doc;
};

inline constexpr PlanField kPlanFields[] = {
#define AICF_PLAN_FIELD(section, key, type, child, presence, doc)                                  \
  {#section, #key, PlanType::type, #child, PlanPresence::presence, doc},
#include "support/plan_schema.def"
#undef AICF_PLAN_FIELD
};

inline constexpr size_t kNumPlanFields = sizeof(kPlanFields) / sizeof(kPlanFields[0]);

// The field `key` of `section`, or nullptr when the schema has no such field.
inline const PlanField *planField(const char *section, const char *key) {
  for (const PlanField &f : kPlanFields)
    if (std::strcmp(f.section, section) == 0 && std::strcmp(f.key, key) == 0)
      return &f;
  return nullptr;
}

// plan_key::<section>::<key>: the key's name ("kind_id"); plan_key::plan holds the top level's.
namespace plan_key {
#define AICF_PLAN_FIELD(section, key, type, child, presence, doc)                                  \
  namespace section {                                                                              \
  inline constexpr char key[] = #key;                                                              \
  }
#include "support/plan_schema.def"
#undef AICF_PLAN_FIELD
} // namespace plan_key

} // namespace aicf
