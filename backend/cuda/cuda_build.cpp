// See cuda_build.h. nvcc runs through runCapture (no shell); its ptxas report is parsed line by
// line: "Compiling entry function 'NAME'" / "Function properties for NAME" select the kernel,
// "N bytes stack frame, S bytes spill stores, L bytes spill loads" and "Used R registers, used B
// barriers, M bytes smem, ..." give its figures (absent parts are 0).
#include "backend/cuda/cuda_build.h"

#include "aicf/build_config.h"
#include "support/build_cache.h"
#include "support/diagnostics.h"
#include "support/process.h"

#include <fstream>
#include <regex>
#include <sstream>

namespace aicf {

namespace {
int64_t figure(const std::string &line, const std::regex &re) {
  std::smatch m;
  return std::regex_search(line, m, re) ? std::stoll(m[1].str()) : 0;
}
} // namespace

std::string nvccPath() {
  return AICF_NVCC_PATH;
}

std::string compileCudaSource(const std::string &source, const std::string &cuPath,
                              const std::string &soPath, const CudaBuildOptions &opts) {
  if (nvccPath().empty())
    throw UserError("CUDA target disabled: nvcc not found (configure with the CUDA toolkit at "
                    "CUDAToolkit_ROOT, default /usr/local/cuda)",
                    2);
  {
    std::ofstream f(cuPath, std::ios::binary | std::ios::trunc);
    if (!f)
      throw UserError(cat(cuPath, ": cannot open for writing"));
    f << source;
    f.close();
    if (!f)
      throw UserError(cat(cuPath, ": write failed"));
  }
  std::vector<std::string> argv = {
      nvccPath(), "-std=c++17",         "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
      "-O3",      "-arch=" + opts.arch, "-Xptxas", "-v"};
  std::istringstream extra(opts.extraFlags);
  for (std::string flag; extra >> flag;)
    argv.push_back(flag);
  // The same source and command line give the same library and register report: reused from
  // AICF_BUILD_CACHE (support/build_cache.h).
  return cachedBuild(argv, source, soPath, [&] {
    std::vector<std::string> run = argv;
    run.insert(run.end(), {"-o", soPath, cuPath});
    return runOrThrow(run, "nvcc");
  });
}

std::map<std::string, PtxasFigures> parsePtxasReport(const std::string &output) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex props(R"(Function properties for ([A-Za-z_][A-Za-z0-9_]*))");
  static const std::regex stack(R"((\d+) bytes stack frame)"),
      spillSt(R"((\d+) bytes spill stores)"), spillLd(R"((\d+) bytes spill loads)"),
      regs(R"(Used (\d+) registers)"), bars(R"(used (\d+) barriers)"), smem(R"((\d+) bytes smem)");
  std::map<std::string, PtxasFigures> out;
  std::string current;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry) || std::regex_search(line, m, props)) {
      current = m[1].str();
      out[current].present = true;
      continue;
    }
    if (current.empty())
      continue;
    PtxasFigures &f = out[current];
    if (line.find("bytes stack frame") != std::string::npos) {
      f.stackFrame = figure(line, stack);
      f.spillBytes = figure(line, spillSt) + figure(line, spillLd);
    } else if (std::regex_search(line, regs)) {
      f.registers = figure(line, regs);
      f.barriers = figure(line, bars);
      f.staticShared = figure(line, smem);
    }
  }
  return out;
}

void recordPtxas(Plan &plan, const std::map<std::string, PtxasFigures> &figures,
                 const Target &target) {
  // The limits, all from the hardware description (--hardware FILE.yaml replaces them). A block
  // cannot hold more registers than its SM's register file.
  const int64_t maxRegsPerThread = target.hw.maxRegsPerThread;
  const int64_t maxRegsPerBlock = target.hw.regsPerSm;
  const int64_t maxThreadsPerBlock = target.hw.maxThreadsPerBlock;
  for (PlanStep &st : plan.steps) {
    if (st.kindId.empty())
      continue;
    auto it = figures.find(st.kindId);
    if (it == figures.end() || !it->second.present)
      throw UserError(cat("kernel ", st.kindId, ": ptxas reported no figures for it"));
    st.ptxas = it->second;
    const PtxasFigures &f = st.ptxas;
    std::string where = cat("kernel ", st.kindId, " (", target.name(), "): ");
    if (f.registers > maxRegsPerThread)
      throw UserError(
          cat(where, f.registers, " registers per thread exceed the limit of ", maxRegsPerThread));
    if (st.threads > maxThreadsPerBlock)
      throw UserError(
          cat(where, st.threads, " threads per block exceed the limit of ", maxThreadsPerBlock));
    if (f.registers * st.threads > maxRegsPerBlock)
      throw UserError(cat(where, f.registers, " registers x ", st.threads,
                          " threads = ", f.registers * st.threads,
                          " registers per block exceed the limit of ", maxRegsPerBlock));
    int64_t shared = f.staticShared + st.dynamicSharedBytes;
    if (shared > target.onChipBytes())
      throw UserError(cat(where, shared, " bytes of shared memory per block (", f.staticShared,
                          " static + ", st.dynamicSharedBytes, " dynamic) exceed the limit of ",
                          target.onChipBytes(), " bytes (", target.onChipName(), ")"));
  }
}

} // namespace aicf
