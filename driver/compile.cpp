// See compile.h. The order of the steps is the partition's group order (a valid execution
// order); buffers are created in a fixed order (inputs, weights, outputs, intermediates, views)
// so ids and offsets are deterministic.
#include "driver/compile.h"

#include "backend/cuda/cuda_build.h"
#include "backend/cuda/cuda_printer.h"
#include "backend/host/host_build.h"
#include "backend/host/host_printer.h"
#include "lower/fusion.h"
#include "lower/lower.h"
#include "plan/attention_choice.h"
#include "plan/cost_model.h"
#include "plan/memory_plan.h"
#include "plan/planner.h"
#include "support/diagnostics.h"
#include "support/output_folder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace fs = std::filesystem;

namespace aicf {

namespace {

std::string valueLabel(const Value *v) {
  return v->name().empty() ? cat("%", v->id()) : v->name();
}

std::string symbolFor(int index, const std::string &kind) {
  std::string s = cat("k", index, "_");
  for (char c : kind)
    s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

// What the planner's search depends on, for a group: its kind, each node's op, attributes,
// properties and result types, how the nodes read each other and the group's inputs (by
// position, with their types, kinds and the value of scalar weights, which recipes inline), and
// which results are outputs. Value and node names are left out: the layers of a model give
// equal keys. Two groups with one key get one search (the kernel itself is still lowered from
// each group, so a key that missed a difference could only cost a schedule, never a result).
std::string planKey(const KernelGroup &grp) {
  std::unordered_map<const Value *, std::string> local;
  std::string k = grp.kind;
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    const Value *v = grp.inputs[i];
    local[v] = cat("i", i);
    k += cat("|i", i, ":", v->type().str(), ":", static_cast<int>(v->kind()));
    if (v->isWeight() && v->data() && v->data()->numel() == 1)
      k += cat("=", formatFloat(v->data()->getDouble(0)));
  }
  for (size_t j = 0; j < grp.nodes.size(); ++j) {
    const Node *n = grp.nodes[j];
    k += cat("|", n->name(), n == grp.anchor ? "*" : "", "(");
    for (const Value *o : n->operands()) {
      auto it = local.find(o);
      k += (it == local.end() ? cat("?", o->id()) : it->second) + ",";
    }
    k += ")";
    for (const auto &[key, val] : n->attrs)
      k += cat(key, "=", formatAttr(val), ";");
    for (MemProperty pr : n->props.list())
      k += cat(propertyName(pr), ";");
    for (size_t r = 0; r < n->results().size(); ++r) {
      const Value *v = n->result(r);
      local.emplace(v, cat("n", j, ".", r));
      k += cat("->", v->type().str());
    }
  }
  for (const Value *v : grp.outputs) {
    auto it = local.find(v);
    k += "|o:" + (it == local.end() ? cat("?", v->id()) : it->second);
  }
  return k;
}

} // namespace

CompiledModel buildModel(const Graph &input, const CompileOptions &opts) {
  const Target target = opts.target.loaded(), planFor = opts.planFor.loaded();
  const Hardware &hw = planFor.hw;
  FusionOptions fo;
  fo.rematCost = rematCostFor(hw);
  Partition part = partitionGraph(input, fo);
  PlannerOptions po;
  po.planFor = planFor;
  po.schedule = opts.schedule;
  po.rank = opts.rank;
  CompiledModel m;
  Plan &p = m.plan;

  // Streaming or materialised attention (plan/attention_choice.h): materialised ones are
  // rewritten on a copy of the graph, which is then partitioned again.
  std::vector<int> materialize;
  for (const KernelGroup &grp : part.groups) {
    if (!grp.anchor || grp.anchor->op() != Op::Attention)
      continue;
    PlannerOptions best = po;
    best.rank = 0; // a structural choice: made on each alternative's best schedules
    AttentionDecision d = chooseAttention(grp, hw, best);
    d.nodeIndex = input.nodeIndex(grp.anchor);
    if (opts.attention == "streaming" && d.streamingUs >= 0)
      d.materialized = false;
    else if (opts.attention == "materialized" && d.materializedUs >= 0)
      d.materialized = true;
    if (d.materialized)
      materialize.push_back(d.nodeIndex);
    p.attention.push_back(std::move(d));
  }
  if (!materialize.empty()) {
    m.graph = input.clone();
    std::sort(materialize.rbegin(), materialize.rend()); // later nodes first: indices stay valid
    for (int idx : materialize)
      materializeAttention(*m.graph, idx);
    part = partitionGraph(*m.graph, fo);
  }
  const Graph &g = m.graph ? *m.graph : input;
  p.target = target;
  p.planFor = planFor;
  p.cpuArch = opts.cpuArch;
  if (!target.gpu())
    p.isa = hostIsaFeatures(opts.cpuArch);
  p.hardware = hw.name;
  p.hardwareSummary = hw.summary();
  p.schedule = opts.schedule;
  p.remat = part.remat;

  std::map<const Value *, int> bufOf; // value -> buffer index
  auto add = [&](const Value *v, BufferKind kind, const TensorType &t, std::string label) {
    PlanBuffer b;
    b.id = cat("b", p.buffers.size());
    b.value = std::move(label);
    b.dtype = t.dtype;
    b.shape = t.shape;
    b.kind = kind;
    b.bytes = t.bytes();
    p.buffers.push_back(b);
    int idx = static_cast<int>(p.buffers.size()) - 1;
    if (v)
      bufOf[v] = idx;
    return idx;
  };

  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value *in = g.inputs()[i];
    p.buffers[add(in, BufferKind::Input, in->type(), in->name())].ioIndex = static_cast<int>(i);
    p.lowerBoundBytes += in->type().bytes();
  }
  int64_t woff = 0;
  for (const Value *w : g.weights()) {
    int b = add(w, BufferKind::Weight, w->type(), w->name());
    p.buffers[b].offset = woff;
    woff += alignUp(w->type().bytes(), 64);
    p.lowerBoundBytes += w->type().bytes();
    // Each weight is within the per-tensor limit, so checking the running total keeps it in int64.
    if (woff > kMaxTotalBytes)
      throw UserError(cat("the weights need more than ", kMaxTotalBytes,
                          " bytes (1 TiB), the limit for weights.bin"));
  }
  p.weightsBytes = woff;

  // Graph outputs: the producing kernel writes straight into the caller's buffer when the
  // output's storage is a node result not claimed by another output; otherwise a copy step.
  std::vector<std::pair<const Value *, int>> copies; // (source value, output buffer)
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const Value *y = g.outputs()[k];
    const Value *s = storageOf(y);
    p.lowerBoundBytes += y->type().bytes();
    if (s->kind() == ValueKind::Result && !bufOf.count(s)) {
      int b = add(s, BufferKind::Output, y->type(), y->name());
      p.buffers[b].ioIndex = static_cast<int>(k);
      if (y != s)
        bufOf[y] = b;
      continue;
    }
    int b = add(nullptr, BufferKind::Output, y->type(), y->name());
    p.buffers[b].ioIndex = static_cast<int>(k);
    copies.emplace_back(y, b);
  }
  // Intermediates and views.
  for (const KernelGroup &grp : part.groups)
    for (const Value *v : grp.outputs)
      if (!bufOf.count(v))
        add(v, BufferKind::Arena, v->type(), valueLabel(v));
  std::function<int(const Value *)> bufferFor = [&](const Value *v) -> int {
    auto it = bufOf.find(v);
    if (it != bufOf.end())
      return it->second;
    const Value *s = storageOf(v);
    AICF_CHECK(s != v, "value ", valueLabel(v), " has no buffer");
    int src = bufferFor(s);
    int b = add(v, BufferKind::Arena, v->type(), valueLabel(v));
    p.buffers[b].kind =
        p.buffers[src].kind == BufferKind::Output ? BufferKind::Arena : p.buffers[src].kind;
    p.buffers[b].aliasOf =
        p.buffers[src].aliasOf.empty() ? p.buffers[src].id : p.buffers[src].aliasOf;
    return b;
  };

  // Steps.
  std::vector<Lifetime> life;
  std::unordered_map<std::string, int> index; // buffer id -> position (filled below)
  auto touch = [&](int b, int step, bool def) {
    const PlanBuffer &pb = p.buffers[b];
    int owner = b;
    if (!pb.aliasOf.empty())
      owner = index.at(pb.aliasOf);
    if (life.size() < p.buffers.size())
      life.resize(p.buffers.size(), Lifetime{1 << 30, -1});
    Lifetime &l = life[owner];
    if (def)
      l.def = std::min(l.def, step);
    l.lastUse = std::max(l.lastUse, step);
  };
  // Identical kernels are emitted once: a step whose Kernel IR (its name aside) matches an
  // earlier step's calls that step's symbol (the layers of a transformer share their kernels),
  // and groups with equal plan keys share one schedule search.
  std::unordered_map<std::string, PlanDecision> searched; // planKey -> decision
  std::unordered_map<std::string, std::string> emitted;   // kernel text -> symbol
  for (size_t s = 0; s < part.groups.size(); ++s) {
    const KernelGroup &grp = part.groups[s];
    std::string name = symbolFor(static_cast<int>(s), grp.kind);
    PlanDecision dec;
    kir::Kernel k;
    std::string key = planKey(grp);
    auto hit = searched.find(key);
    if (hit != searched.end()) {
      Knobs kn;
      kn.planFor = po.planFor;
      kn.values = hit->second.chosen.knobs;
      k = lowerGroup(grp, name, kn);
      if (k.knobs == hit->second.chosen.knobs)
        dec = hit->second;
      else // the recipe filled the knobs in differently: search this group on its own
        k = planKernel(grp, name, hw, po, &dec);
    } else {
      k = planKernel(grp, name, hw, po, &dec);
      searched.emplace(std::move(key), dec);
    }
    k.name.clear();
    std::string text = kir::printKernel(k);
    auto [same, fresh] = emitted.emplace(std::move(text), name);
    k.name = same->second;
    PlanStep st;
    st.kind = grp.kind;
    st.kindId = k.name;
    st.recipe = k.recipe;
    st.recipeReason = dec.recipeReason;
    st.recipeFallback = dec.recipeFallback;
    for (const Value *v : grp.inputs)
      st.inputs.push_back(p.buffers[bufferFor(v)].id);
    for (const Value *v : grp.outputs)
      st.outputs.push_back(p.buffers[bufferFor(v)].id);
    if (grp.anchor) {
      for (const auto &[key, val] : grp.anchor->attrs)
        st.attrs[key] = formatAttr(val);
      for (MemProperty pr : grp.anchor->props.list())
        st.properties.push_back(propertyName(pr));
    }
    for (const auto &[axis, extent] : k.grid)
      st.grid.push_back(extent);
    st.threads = k.threads;
    for (const kir::BufferP &b : k.allocs)
      if (b->scope == kir::Scope::Shared)
        st.sharedBytes += b->numel() * static_cast<int64_t>(dtypeSize(b->dtype));
    if (target.gpu())
      st.dynamicSharedBytes = cudaDynamicSharedBytes(k, target.hw);
    st.knobs = k.knobs;
    const KernelCost &cost = dec.chosen.cost;
    st.lowerBoundBytes = cost.lowerBoundBytes;
    st.bytes = cost.bytes;
    st.flops = cost.flops;
    st.timeUs = cost.timeUs;
    if (hw.gpu) {
      st.occupancy = cost.occupancy.fraction;
      st.registers = cost.registers;
    }
    st.search.candidates = dec.considered;
    st.search.feasible = dec.feasible;
    st.search.isDefault = dec.isDefault;
    st.search.defaultUs = dec.defaults.cost.timeUs;
    st.search.reason = dec.reason;
    for (const auto *list : {&dec.runnersUp, &dec.rejected})
      for (const Candidate &c : *list)
        st.alternatives.push_back({c.knobs, c.cost.timeUs, c.rejected});
    p.predictedTimeUs += cost.timeUs;
    std::unordered_set<std::string> seenOrigins;
    for (const Node *n : grp.nodes)
      for (const std::string &o : n->loc.origins)
        if (seenOrigins.insert(o).second)
          st.origins.push_back(o);
    p.steps.push_back(std::move(st));
    if (fresh)
      m.kernels.push_back(std::move(k));
  }
  // --candidate-rank past every kernel's feasible schedules would silently plan the same as a
  // smaller rank: refuse it (a kernel with fewer candidates than the rank takes its last one).
  if (opts.schedule != "default" && opts.rank > 0 && !p.steps.empty()) {
    int most = 0;
    for (const PlanStep &st : p.steps)
      most = std::max(most, st.search.feasible);
    if (opts.rank >= most)
      throw UserError(cat("--candidate-rank ", opts.rank, ": no kernel has that many feasible ",
                          "schedules (the most is ", most, ": ranks 0..", most - 1, ")"),
                      1);
  }
  for (const auto &[src, outBuf] : copies) {
    PlanStep st;
    st.kind = "copy";
    st.recipe = "runtime";
    st.inputs.push_back(p.buffers[bufferFor(src)].id);
    st.outputs.push_back(p.buffers[outBuf].id);
    st.bytes = st.lowerBoundBytes = 2 * src->type().bytes();
    p.steps.push_back(std::move(st));
  }
  life.resize(p.buffers.size(), Lifetime{1 << 30, -1});
  for (size_t i = 0; i < p.buffers.size(); ++i)
    index[p.buffers[i].id] = static_cast<int>(i);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    for (const std::string &id : p.steps[s].inputs)
      touch(index[id], static_cast<int>(s), false);
    for (const std::string &id : p.steps[s].outputs)
      touch(index[id], static_cast<int>(s), true);
  }

  // In place: a pointwise step may write its output over a same-typed arena input that dies
  // at this step (each element is read before it is written, at the same index).
  std::vector<int> shareWith(p.buffers.size(), -1);
  for (size_t s = 0; s < part.groups.size(); ++s) {
    PlanStep &st = p.steps[s];
    if (st.recipe != "pointwise" || st.outputs.size() != 1)
      continue;
    int o = index[st.outputs[0]];
    const PlanBuffer &ob = p.buffers[o];
    if (ob.kind != BufferKind::Arena || !ob.aliasOf.empty())
      continue;
    for (const std::string &id : st.inputs) {
      int i = index[id];
      const PlanBuffer &ib = p.buffers[i];
      if (ib.kind == BufferKind::Arena && ib.aliasOf.empty() && ib.dtype == ob.dtype &&
          ib.shape == ob.shape && life[i].lastUse == static_cast<int>(s) &&
          life[i].def < static_cast<int>(s) &&
          std::count(st.inputs.begin(), st.inputs.end(), id) == 1) {
        shareWith[o] = i;
        st.inPlace = true;
        break;
      }
    }
  }
  planArena(p, life, shareWith);
  for (PlanBuffer &b : p.buffers)
    if (!b.aliasOf.empty() && b.kind == BufferKind::Arena)
      b.offset = p.buffers[index.at(b.aliasOf)].offset;
  p.layout = layoutString(p);

  if (target.gpu()) {
    m.source = printCudaSource(m.kernels, target);
    m.source += "\n// ---- model entry points (aicf runtime ABI) ----\n";
    m.source += "extern \"C\" const char *aicf_layout(void) { return \"" + p.layout + "\"; }\n";
    return m;
  }
  m.source = printHostSource(m.kernels);
  m.source += "\n// ---- model entry points (aicf runtime ABI) ----\n#include <omp.h>\n";
  m.source += "extern \"C\" const char *aicf_layout(void) { return \"" + p.layout + "\"; }\n";
  m.source += "extern \"C\" void aicf_set_num_threads(int n) { omp_set_num_threads(n); }\n";
  return m;
}

Plan compileCudaModel(const CompiledModel &m, const std::string &dir, std::string *ptxasReport) {
  AICF_CHECK(m.plan.target.gpu(), "compileCudaModel: target ", m.plan.target.name());
  CudaBuildOptions cb;
  cb.arch = m.plan.target.arch;
  // No symbol table: it holds nvcc's temporary file name (tmpxft_<pid>_..._kernels.cudafe1.cpp),
  // which made two builds of one model differ. The runtime finds its symbols in .dynsym.
  cb.extraFlags = "-Xlinker -s";
  fs::path d(dir);
  std::string report =
      compileCudaSource(m.source, (d / "kernels.cu").string(), (d / "libmodel.so").string(), cb);
  Plan plan = m.plan;
  recordPtxas(plan, parsePtxasReport(report), plan.target);
  if (ptxasReport)
    *ptxasReport = report;
  return plan;
}

std::vector<uint8_t> packWeights(const Graph &g, const Plan &plan) {
  std::vector<uint8_t> out(static_cast<size_t>(plan.weightsBytes), 0);
  std::unordered_map<std::string, const PlanBuffer *> byValue; // the last one, as before
  for (const PlanBuffer &pb : plan.buffers)
    if (pb.kind == BufferKind::Weight)
      byValue[pb.value] = &pb;
  for (const Value *w : g.weights()) {
    auto it = byValue.find(w->name());
    const PlanBuffer *b = it == byValue.end() ? nullptr : it->second;
    AICF_CHECK(b != nullptr, "weight ", w->name(), " is not in the plan");
    const Tensor &t = *w->data();
    std::copy(t.bytes().begin(), t.bytes().end(), out.begin() + b->offset);
  }
  return out;
}

namespace {
void writeFile(const fs::path &p, const std::string &data) {
  std::ofstream f(p, std::ios::binary);
  if (!f || !f.write(data.data(), static_cast<std::streamsize>(data.size())) || !f.flush())
    throw UserError(cat("cannot write ", p.string()), 1);
}
} // namespace

void writeArtifacts(
    const Graph &g, const CompiledModel &m, const CompileOptions &opts, const std::string &outDir,
    const std::map<std::string, std::string> &extraFiles,
    const std::function<void(const Plan &, std::map<std::string, std::string> &)> &finalize) {
  // A std::filesystem failure here is about a path the user named (-o): exit 1, naming it.
  try {
    StagedOutputFolder staged(outDir); // refuses an OUT that is not ours to replace
    const fs::path &tmp = staged.dir();
    Plan plan = m.plan;
    if (m.plan.target.gpu()) {
      plan = compileCudaModel(m, tmp.string()); // kernels.cu, libmodel.so, ptxas figures
    } else {
      HostBuildOptions hb;
      hb.cpuArch = opts.cpuArch;
      hb.extraFlags = "-s"; // no symbol table: the .so's bytes do not depend on the folder name
      compileHostSource(m.source, (tmp / "kernels.cpp").string(), (tmp / "libmodel.so").string(),
                        hb);
    }
    std::map<std::string, std::string> files = extraFiles;
    if (finalize)
      finalize(plan, files);
    std::vector<uint8_t> weights = packWeights(m.graph ? *m.graph : g, plan);
    writeFile(tmp / "weights.bin", std::string(weights.begin(), weights.end()));
    std::ostringstream yaml;
    plan.writeYaml(yaml);
    writeFile(tmp / "plan.yaml", yaml.str());
    for (const auto &[name, text] : files)
      writeFile(tmp / name, text);
    staged.commit();
  } catch (const fs::filesystem_error &e) {
    throw UserError(
        cat("output folder ", outDir, ": ", e.path1().string(), ": ", e.code().message()), 1);
  }
}

} // namespace aicf

namespace aicf {

void printPlanReport(std::ostream &os, const Plan &p) {
  os << "== plan: " << p.steps.size() << " steps for " << p.target.name();
  if (p.planFor.name() != p.target.name())
    os << " (the " << p.planFor.name() << " plan, emulated)";
  os << "\n   hardware: " << p.hardwareSummary
     << "\n   schedule: " << (p.schedule == "cost" ? "chosen by the cost model" : "recipe defaults")
     << "\n";
  bool gpu = false;
  for (const PlanStep &st : p.steps)
    gpu = gpu || st.occupancy >= 0;
  char line[320];
  std::snprintf(line, sizeof line, "%-4s %-20s %-28s %-20s %12s %12s %6s %12s %10s%s\n", "step",
                "kind", "kernel", "recipe", "bytes", "lower bound", "ratio", "flops", "pred us",
                gpu ? "  occupancy regs" : "");
  os << line;
  int64_t bytes = 0, lower = 0, flops = 0;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const PlanStep &st = p.steps[s];
    std::string occ;
    if (st.occupancy >= 0)
      occ = cat("  ", std::to_string(static_cast<int>(std::lround(100 * st.occupancy))), "%",
                std::string(7, ' '), st.registers);
    std::snprintf(line, sizeof line,
                  "%-4zu %-20s %-28s %-20s %12lld %12lld %6.2f %12lld %10.2f%s\n", s,
                  st.kind.c_str(), st.kindId.empty() ? "(runtime copy)" : st.kindId.c_str(),
                  st.recipe.c_str(), static_cast<long long>(st.bytes),
                  static_cast<long long>(st.lowerBoundBytes),
                  st.lowerBoundBytes ? double(st.bytes) / double(st.lowerBoundBytes) : 1.0,
                  static_cast<long long>(st.flops), st.timeUs, occ.c_str());
    os << line;
    bytes += st.bytes;
    lower += st.lowerBoundBytes;
    flops += st.flops;
  }
  os << "   total: " << bytes << " bytes moved by the kernels (" << lower
     << " if each kernel touched its buffers once); model lower bound " << p.lowerBoundBytes
     << " bytes (inputs + weights read once, outputs written once); " << flops << " FLOPs\n";
  os << "   arena: " << p.arenaBytes << " bytes planned vs " << p.naiveArenaBytes
     << " bytes for all intermediates without reuse; weights.bin " << p.weightsBytes << " bytes\n";
  std::snprintf(line, sizeof line, "   predicted time: %.2f us (sum of the kernels)\n",
                p.predictedTimeUs);
  os << line;
  for (const AttentionDecision &d : p.attention) {
    auto us = [&](double v, const std::string &why) {
      if (v >= 0) {
        std::snprintf(line, sizeof line, "%.3g us", v);
        return std::string(line);
      }
      return why;
    };
    os << "   attention " << d.node << ": " << (d.materialized ? "materialised" : "streaming")
       << " (streaming " << us(d.streamingUs, d.streamingWhy) << "; materialised "
       << us(d.materializedUs, "not offered: " + d.materializedWhy) << ")\n";
  }
  for (const RematDecision &d : p.remat) {
    std::string vals;
    for (const std::string &v : d.values)
      vals += (vals.empty() ? "" : ", ") + v;
    std::snprintf(line, sizeof line, "%.3g us vs store + reload %.3g us", d.recomputeUs, d.storeUs);
    os << "   " << (d.recomputed ? "recomputed" : "stored") << " " << vals << " (read by "
       << d.consumers << " kernels): recompute " << line << "\n";
  }
  // Why each kernel's knobs: the search, the decision and what it weighed.
  os << "== schedules (cost model; times in us)\n";
  auto knobText = [](const std::map<std::string, int64_t> &knobs) {
    std::string t;
    for (const auto &[k, v] : knobs)
      t += cat(t.empty() ? "" : " ", k, "=", v);
    return t.empty() ? std::string("(none)") : t;
  };
  std::map<std::string, int> callers; // kernel symbol -> steps calling it
  for (const PlanStep &st : p.steps)
    if (!st.kindId.empty())
      ++callers[st.kindId];
  std::set<std::string> shown;
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const PlanStep &st = p.steps[s];
    if (st.kindId.empty() || !shown.insert(st.kindId).second)
      continue; // a shared kernel: one search, shown once
    std::snprintf(line, sizeof line, "%.3g", st.timeUs);
    os << st.kindId << ": " << knobText(st.knobs) << " -> " << line << " us";
    if (callers[st.kindId] > 1)
      os << " (" << callers[st.kindId] << " steps)";
    if (st.ptxas.present)
      os << "; ptxas " << st.ptxas.registers << " registers (estimated " << st.registers << ")";
    os << "\n    " << st.search.candidates << " candidates, " << st.search.feasible << " fit; "
       << (st.search.isDefault ? "the recipe defaults" : "defaults would take ");
    if (!st.search.isDefault) {
      std::snprintf(line, sizeof line, "%.3g us", st.search.defaultUs);
      os << line;
    }
    os << "; " << st.search.reason << "\n";
    for (const PlanStep::Alternative &a : st.alternatives) {
      std::snprintf(line, sizeof line, "%.3g", a.costUs);
      os << "    " << (a.rejected.empty() ? "runner-up " : "rejected  ") << knobText(a.knobs)
         << ": " << line << " us" << (a.rejected.empty() ? "" : " — " + a.rejected) << "\n";
    }
    if (!st.recipeReason.empty())
      os << "    recipe " << st.recipe << ": " << st.recipeReason << "\n";
  }
}

} // namespace aicf
