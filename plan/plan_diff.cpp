// See plan_diff.h. Both plans are read with yaml-cpp and flattened into path -> value lines, so
// every field of the manifest is compared without a list of fields to keep up to date; steps
// are matched by their kind and origin nodes (stable across schedules, unlike kN_ symbols).
#include "plan/plan_diff.h"

#include "support/buffer_kind.h"
#include "support/diagnostics.h"
#include "support/plan_schema.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace aicf {

namespace {

namespace pk = plan_key; // plan.yaml's keys (support/plan_schema.def)

YAML::Node loadPlan(const std::string &dir) {
  std::string path = (fs::path(dir) / "plan.yaml").string();
  if (!fs::is_regular_file(path))
    throw UserError(cat(dir, ": not an aicf output folder (no plan.yaml)"), 2);
  try {
    YAML::Node n = YAML::LoadFile(path);
    if (!n.IsMap() || !n[pk::plan::schema] || n[pk::plan::schema].as<std::string>() != kPlanSchema)
      throw UserError(cat(path, ": not an ", kPlanSchema, " manifest"), 2);
    return n;
  } catch (const YAML::Exception &e) {
    throw UserError(cat(path, ": ", e.what()), 2);
  }
}

std::string scalarText(const YAML::Node &n) {
  if (n.IsScalar())
    return n.Scalar();
  if (n.IsNull())
    return "null";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

bool allScalars(const YAML::Node &n) {
  for (const auto &e : n)
    if (!e.IsScalar())
      return false;
  return true;
}

// Fields as (path, value) in document order. A sequence of scalars is one value ("[1, 2]"); a
// sequence of maps with a name / value field is indexed by it and flattened further; any other
// sequence's entries are one value each (an alternative schedule is one line, not ten). An
// empty sequence has no field: a list that empties shows its entries removed.
using Fields = std::vector<std::pair<std::string, std::string>>;
void flatten(const YAML::Node &n, const std::string &path, Fields &out) {
  if (n.IsMap()) {
    for (const auto &kv : n)
      flatten(kv.second, path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar(), out);
  } else if (n.IsSequence() && n.size() == 0) {
    return;
  } else if (n.IsSequence() && !allScalars(n)) {
    for (size_t i = 0; i < n.size(); ++i) {
      const YAML::Node &e = n[i];
      if (e.IsMap() && (e["name"] || e["value"]))
        flatten(e, cat(path, "[", (e["name"] ? e["name"] : e["value"]).Scalar(), "]"), out);
      else
        out.push_back({cat(path, "[", i, "]"), scalarText(e)});
    }
  } else {
    out.push_back({path, scalarText(n)});
  }
}

// Differences between two field lists, in the new list's order, then removed fields.
void diffFields(const Fields &a, const Fields &b, const std::string &prefix,
                const std::string &group, std::vector<FolderDifference> &out) {
  std::map<std::string, std::string> old(a.begin(), a.end());
  std::set<std::string> seen;
  for (const auto &[path, value] : b) {
    seen.insert(path);
    auto it = old.find(path);
    if (it == old.end())
      out.push_back({prefix + path, cat(path, ": (none) -> ", value), group});
    else if (it->second != value)
      out.push_back({prefix + path, cat(path, ": ", it->second, " -> ", value), group});
  }
  for (const auto &[path, value] : a)
    if (!seen.count(path))
      out.push_back({prefix + path, cat(path, ": ", value, " -> (none)"), group});
}

// What a step computes: its kind and origin nodes; the n-th step with the same ones gets #n.
std::vector<std::string> stepKeys(const YAML::Node &steps) {
  std::vector<std::string> keys;
  std::map<std::string, int> count;
  for (const auto &s : steps) {
    std::string key = s[pk::step::kind] ? s[pk::step::kind].Scalar() : "?";
    const YAML::Node origins =
        s[pk::step::hints] ? s[pk::step::hints][pk::hints::origins] : YAML::Node();
    key += " (" + (origins && origins.IsSequence() ? scalarText(origins).substr(1) : "");
    if (key.back() == ']')
      key.back() = ')';
    else
      key += ")";
    int n = count[key]++;
    keys.push_back(n ? cat(key, " #", n + 1) : key);
  }
  return keys;
}

// Longest common subsequence of two sequences, as index pairs.
template <typename T>
std::vector<std::pair<size_t, size_t>> lcs(const std::vector<T> &a, const std::vector<T> &b) {
  std::vector<std::vector<uint32_t>> t(a.size() + 1, std::vector<uint32_t>(b.size() + 1, 0));
  for (size_t i = a.size(); i-- > 0;)
    for (size_t j = b.size(); j-- > 0;)
      t[i][j] = a[i] == b[j] ? t[i + 1][j + 1] + 1 : std::max(t[i + 1][j], t[i][j + 1]);
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j])
      pairs.push_back({i++, j++});
    else if (t[i + 1][j] >= t[i][j + 1])
      ++i;
    else
      ++j;
  }
  return pairs;
}

// kernels.kir split per kernel symbol; the header's own symbol is replaced by @_ so a kernel
// renumbered by an added step compares equal to itself.
std::map<std::string, std::vector<std::string>> readKernels(const std::string &dir) {
  std::map<std::string, std::vector<std::string>> kernels;
  std::ifstream f(fs::path(dir) / "kernels.kir");
  std::string line, current;
  while (std::getline(f, line)) {
    if (line.rfind("kernel @", 0) == 0) {
      size_t end = line.find(' ', 8);
      current = line.substr(8, end == std::string::npos ? std::string::npos : end - 8);
      line = "kernel @_" + (end == std::string::npos ? "" : line.substr(end));
    }
    if (!current.empty())
      kernels[current].push_back(line);
  }
  return kernels;
}

std::string lineDiff(const std::vector<std::string> &a, const std::vector<std::string> &b,
                     size_t *changed) {
  std::vector<std::pair<size_t, size_t>> same = lcs(a, b);
  std::ostringstream os;
  size_t i = 0, j = 0, shown = 0, total = 0;
  auto emit = [&](char sign, size_t line, const std::string &text) {
    ++total;
    if (shown++ < 40)
      os << "\n    " << sign << " " << line + 1 << ": " << text;
  };
  same.push_back({a.size(), b.size()});
  for (const auto &[si, sj] : same) {
    for (; i < si; ++i)
      emit('-', i, a[i]);
    for (; j < sj; ++j)
      emit('+', j, b[j]);
    ++i, ++j;
  }
  if (total > shown)
    os << "\n    ... " << total - shown << " more changed lines";
  *changed = total;
  return os.str();
}

uint64_t checksum(std::ifstream &f, uint64_t offset, uint64_t bytes) {
  uint64_t h = 1469598103934665603ull; // FNV-1a
  f.clear();
  f.seekg(static_cast<std::streamoff>(offset));
  std::vector<char> buf(1 << 16);
  while (bytes > 0 && f) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, buf.size()));
    f.read(buf.data(), static_cast<std::streamsize>(n));
    for (std::streamsize k = 0; k < f.gcount(); ++k)
      h = (h ^ static_cast<unsigned char>(buf[static_cast<size_t>(k)])) * 1099511628211ull;
    bytes -= n;
  }
  return h;
}

// weight name -> (bytes, checksum of its bytes in weights.bin).
std::map<std::string, std::pair<uint64_t, uint64_t>> weightSums(const std::string &dir,
                                                                const YAML::Node &plan) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> sums;
  std::ifstream f(fs::path(dir) / "weights.bin", std::ios::binary);
  for (const auto &b : plan[pk::plan::buffers]) {
    if (!b[pk::buffer::kind] || b[pk::buffer::kind].Scalar() != enumName(BufferKind::Weight) ||
        !b[pk::buffer::offset])
      continue;
    uint64_t bytes = b[pk::buffer::bytes].as<uint64_t>();
    uint64_t offset = b[pk::buffer::offset].as<uint64_t>();
    sums[b[pk::buffer::value].Scalar()] = {bytes, f ? checksum(f, offset, bytes) : 0};
  }
  return sums;
}

std::string hex(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

// Shell-style match where only * (any run, '.' and '[' included) and ? are special, so a
// pattern like steps[*].hints.predicted.* means what it reads as.
bool globMatch(const char *p, const char *s) {
  if (*p == '\0')
    return *s == '\0';
  if (*p == '*')
    return globMatch(p + 1, s) || (*s && globMatch(p, s + 1));
  return *s && (*p == '?' || *p == *s) && globMatch(p + 1, s + 1);
}

} // namespace

namespace {
FolderDiff diffPlans(const std::string &oldDir, const std::string &newDir,
                     const std::vector<std::string> &ignore) {
  YAML::Node a = loadPlan(oldDir), b = loadPlan(newDir);
  FolderDiff d;
  std::vector<FolderDifference> &out = d.differences;

  // The manifest outside steps and buffers (target, inputs, outputs, arena, predictions...).
  Fields fa, fb;
  for (const auto &[plan, fields] : {std::pair{&a, &fa}, std::pair{&b, &fb}})
    for (const auto &kv : *plan)
      if (kv.first.Scalar() != pk::plan::steps && kv.first.Scalar() != pk::plan::buffers)
        flatten(kv.second, kv.first.Scalar(), *fields);
  diffFields(fa, fb, "", "", out);

  // Steps: matched by what they compute; the rest added or removed; the matched ones' order.
  YAML::Node sa = a[pk::plan::steps], sb = b[pk::plan::steps];
  std::vector<std::string> ka = stepKeys(sa), kb = stepKeys(sb);
  d.notes.push_back(
      cat("steps: ", ka.size(), " -> ", kb.size(), " (matched by kind and origin nodes)"));
  std::map<std::string, size_t> ia, ib;
  for (size_t i = 0; i < ka.size(); ++i)
    ia[ka[i]] = i;
  for (size_t j = 0; j < kb.size(); ++j)
    ib[kb[j]] = j;
  std::vector<std::string> commonA, commonB;
  for (const std::string &k : ka)
    if (ib.count(k))
      commonA.push_back(k);
  for (const std::string &k : kb)
    if (ia.count(k))
      commonB.push_back(k);
  for (size_t i = 0; i < ka.size(); ++i)
    if (!ib.count(ka[i]))
      out.push_back({"steps.removed", cat("removed step ", i, ": ", ka[i]), ""});
  for (size_t j = 0; j < kb.size(); ++j)
    if (!ia.count(kb[j]))
      out.push_back({"steps.added", cat("added step ", j, ": ", kb[j]), ""});
  if (commonA != commonB) {
    std::vector<std::pair<size_t, size_t>> kept = lcs(commonA, commonB);
    std::set<size_t> stay;
    for (const auto &p : kept)
      stay.insert(p.second);
    for (size_t j = 0; j < commonB.size(); ++j)
      if (!stay.count(j))
        out.push_back(
            {"steps.order",
             cat("moved: ", commonB[j], ": step ", ia[commonB[j]], " -> ", ib[commonB[j]]), ""});
  }
  std::map<std::string, std::vector<std::string>> kirA = readKernels(oldDir),
                                                  kirB = readKernels(newDir);
  for (size_t j = 0; j < kb.size(); ++j) {
    auto it = ia.find(kb[j]);
    if (it == ia.end())
      continue;
    const YAML::Node &stepA = sa[it->second], &stepB = sb[j];
    std::string symA = stepA[pk::step::kind_id] ? stepA[pk::step::kind_id].Scalar() : "";
    std::string symB = stepB[pk::step::kind_id] ? stepB[pk::step::kind_id].Scalar() : "";
    std::string group = cat("steps[", j, "] ", kb[j], symB.empty() ? "" : " " + symB);
    Fields fsa, fsb;
    flatten(stepA, "", fsa);
    flatten(stepB, "", fsb);
    diffFields(fsa, fsb, cat("steps[", j, "]."), group, out);
    if (kirA.count(symA) && kirB.count(symB) && kirA[symA] != kirB[symB]) {
      size_t changed = 0;
      std::string lines = lineDiff(kirA[symA], kirB[symB], &changed);
      out.push_back(
          {cat("steps[", j, "].kernel"),
           cat("Kernel IR of ", symA, " -> ", symB, ": ", changed, " changed lines", lines),
           group});
    }
  }

  // Buffers by value (offsets, sizes, layout), then weights by the checksum of their bytes.
  Fields ba, bb;
  for (const auto &[plan, fields] : {std::pair{&a, &ba}, std::pair{&b, &bb}})
    for (const auto &buf : (*plan)[pk::plan::buffers])
      flatten(buf,
              cat(pk::plan::buffers, "[",
                  buf[pk::buffer::value] ? buf[pk::buffer::value].Scalar() : "?", "]"),
              *fields);
  diffFields(ba, bb, "", "", out);
  auto wa = weightSums(oldDir, a), wb = weightSums(newDir, b);
  for (const auto &[name, sum] : wb) {
    auto it = wa.find(name);
    if (it == wa.end())
      out.push_back({cat("weights[", name, "]"),
                     cat("weight ", name, ": added (", sum.first, " bytes)"), ""});
    else if (it->second != sum)
      out.push_back(
          {cat("weights[", name, "]"),
           cat("weight ", name, ": checksum ", hex(it->second.second), " (", it->second.first,
               " bytes) -> ", hex(sum.second), " (", sum.first, " bytes)"),
           ""});
  }
  for (const auto &[name, sum] : wa)
    if (!wb.count(name))
      out.push_back({cat("weights[", name, "]"),
                     cat("weight ", name, ": removed (", sum.first, " bytes)"), ""});

  std::vector<FolderDifference> kept;
  for (FolderDifference &f : out) {
    bool drop = false;
    for (const std::string &p : ignore)
      drop = drop || globMatch(p.c_str(), f.path.c_str());
    if (!drop)
      kept.push_back(std::move(f));
  }
  out = std::move(kept);
  return d;
}
} // namespace

FolderDiff diffFolders(const std::string &oldDir, const std::string &newDir,
                       const std::vector<std::string> &ignore) {
  try {
    return diffPlans(oldDir, newDir, ignore);
  } catch (const YAML::Exception &e) { // a field of the wrong type in an edited plan.yaml
    throw UserError(cat(oldDir, " / ", newDir, ": malformed plan.yaml: ", e.what()), 2);
  }
}

std::string printFolderDiff(const FolderDiff &d, const std::string &oldDir,
                            const std::string &newDir) {
  std::ostringstream os;
  os << "aicf-diff " << oldDir << " " << newDir << ": ";
  if (d.differences.empty()) {
    os << "no differences\n";
    return os.str();
  }
  os << d.differences.size() << (d.differences.size() == 1 ? " difference\n" : " differences\n");
  for (const std::string &n : d.notes)
    os << n << "\n";
  std::string group;
  for (const FolderDifference &f : d.differences) {
    if (f.group != group && !f.group.empty())
      os << f.group << ":\n";
    group = f.group;
    os << (f.group.empty() ? "" : "  ") << f.text << "   [" << f.path << "]\n";
  }
  return os.str();
}

} // namespace aicf
