// time_folder: a C++ user of the aicf runtime. Opens a compiled folder, runs it on .npy inputs
// (NAME=FILE.npy; inputs not given are zeros), and prints each output's checksum and the median
// latency of --runs runs. The C API is wrapped in a small RAII class whose errors are exceptions.
//
//   time_folder FOLDER [NAME=FILE.npy...] [--runs N] [--threads N]
#include <aicf_runtime.h>

#include "npy_io.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// One open folder: its tensors' descriptions and the buffers a run reads and writes.
class Model {
public:
  explicit Model(const std::string &dir) : m_(aicf_open(dir.c_str()), aicf_close) {
    if (!m_)
      throw std::runtime_error(aicf_last_error());
  }
  void check(int status) const {
    if (status != 0)
      throw std::runtime_error(aicf_last_error());
  }
  std::vector<aicf_tensor_info> inputs() const { return infos(aicf_num_inputs(m_.get()), true); }
  std::vector<aicf_tensor_info> outputs() const { return infos(aicf_num_outputs(m_.get()), false); }
  aicf_model *get() const { return m_.get(); }

private:
  std::vector<aicf_tensor_info> infos(int n, bool in) const {
    std::vector<aicf_tensor_info> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      check(in ? aicf_input_info(m_.get(), i, &v[i]) : aicf_output_info(m_.get(), i, &v[i]));
    return v;
  }
  std::unique_ptr<aicf_model, void (*)(aicf_model *)> m_;
};

int run(int argc, char **argv) {
  if (argc < 2)
    throw std::invalid_argument("usage: time_folder FOLDER [NAME=FILE.npy...] [--runs N] "
                                "[--threads N]");
  Model model(argv[1]);
  int runs = 20;
  std::vector<std::vector<unsigned char>> inBufs;
  for (const aicf_tensor_info &info : model.inputs())
    inBufs.emplace_back(info.bytes);
  for (int a = 2; a < argc; ++a) {
    std::string arg = argv[a];
    if ((arg == "--runs" || arg == "--threads") && a + 1 < argc) {
      int v = std::atoi(argv[++a]);
      if (arg == "--runs")
        runs = std::max(1, v);
      else
        model.check(aicf_set_num_threads(model.get(), v));
      continue;
    }
    size_t eq = arg.find('=');
    std::vector<aicf_tensor_info> ins = model.inputs();
    auto it = std::find_if(ins.begin(), ins.end(), [&](const aicf_tensor_info &t) {
      return eq != std::string::npos && arg.compare(0, eq, t.name) == 0 && eq == strlen(t.name);
    });
    if (it == ins.end())
      throw std::invalid_argument("not an input of the folder: " + arg);
    size_t i = static_cast<size_t>(it - ins.begin());
    npy_array file{};
    char err[4400];
    if (npy_read(arg.c_str() + eq + 1, &file, err, sizeof err) != 0)
      throw std::runtime_error(err);
    std::unique_ptr<void, void (*)(void *)> keep(file.data, std::free);
    if (std::strcmp(file.dtype, it->dtype) != 0)
      throw std::runtime_error(arg + ": dtype " + file.dtype + ", the input's is " + it->dtype);
    model.check(aicf_set_input_shape(model.get(), static_cast<int>(i), file.rank, file.shape));
    inBufs[i].assign(static_cast<unsigned char *>(file.data),
                     static_cast<unsigned char *>(file.data) + file.bytes);
  }
  // Sizes follow the shapes set; an input left unset keeps its default shape (zeros).
  std::vector<aicf_tensor_info> ins = model.inputs(), outs = model.outputs();
  std::vector<const void *> inPtrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    inBufs[i].resize(ins[i].bytes);
    inPtrs.push_back(inBufs[i].data());
  }
  std::vector<std::vector<unsigned char>> outBufs;
  std::vector<void *> outPtrs;
  for (const aicf_tensor_info &o : outs) {
    outBufs.emplace_back(o.bytes);
    outPtrs.push_back(outBufs.back().data());
  }
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    model.check(aicf_run(model.get(), inPtrs.data(), outPtrs.data()));
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  for (size_t o = 0; o < outs.size(); ++o) {
    double sum = 0;
    if (std::strcmp(outs[o].dtype, "f32") == 0)
      for (size_t e = 0; e < outs[o].bytes / 4; ++e)
        sum += reinterpret_cast<const float *>(outBufs[o].data())[e];
    std::printf("%s %s (%zu bytes): sum %.6g\n", outs[o].name, outs[o].dtype, outs[o].bytes, sum);
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<long>(ms.size() / 2), ms.end());
  std::printf("median latency %.3f ms over %d runs\n", ms[ms.size() / 2], runs);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument &e) {
    std::fprintf(stderr, "time_folder: error: %s\n", e.what());
    return 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "time_folder: error: %s\n", e.what());
    return 2;
  }
}
