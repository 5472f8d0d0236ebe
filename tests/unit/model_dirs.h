// The testdata models (testdata/models/<name>/: model.onnx, inputs/, outputs/, args.txt) as the
// tests see them: the folders in name order, the aicfc flags each needs (args.txt, e.g.
// "--dim batch=3 --dim seq=40"), and the model imported and run through the default pipeline.
#pragma once

#include "driver/pipeline.h"
#include "frontend/onnx_importer.h"
#include "passes/pass.h"
#include "support/cli_util.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace aicf::testing {

inline std::vector<std::filesystem::path> modelDirs() {
  std::vector<std::filesystem::path> dirs;
  for (const auto &e :
       std::filesystem::directory_iterator(std::filesystem::path(AICF_TESTDATA) / "models"))
    if (std::filesystem::exists(e.path() / "model.onnx"))
      dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// args.txt's --dim / --shape flags; UserError for anything else or a flag without a value.
inline ImportOptions modelImportOptions(const std::filesystem::path &dir) {
  ImportOptions opts;
  std::ifstream f(dir / "args.txt");
  std::string flag, value;
  while (f >> flag) {
    if (!(f >> value))
      throw UserError(cat((dir / "args.txt").string(), ": ", flag, " needs a value"));
    if (flag == "--dim")
      opts.dimParams.insert(parseDimFlag(value));
    else if (flag == "--shape")
      opts.inputShapes.insert(parseShapeFlag(value));
    else
      throw UserError(cat((dir / "args.txt").string(), ": unknown flag ", flag));
  }
  return opts;
}

// The model imported with its flags and rewritten by the default pipeline for `target`.
inline std::unique_ptr<Graph> pipelineGraph(const std::filesystem::path &dir,
                                            const std::string &target = "cpu") {
  std::unique_ptr<Graph> g = importOnnx((dir / "model.onnx").string(), modelImportOptions(dir));
  PassManager pm;
  buildDefaultPipeline(pm);
  PassContext ctx;
  ctx.target = Target::parseSpec(target);
  pm.run(*g, ctx);
  return g;
}

} // namespace aicf::testing
