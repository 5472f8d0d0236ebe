// Tests of .npy reading and writing (ir/npy.h): round trips for every dtype, byte-exact
// agreement with the files NumPy writes, the other format versions, and a clear "FILE: reason"
// error for each kind of bad file.
#include "ir/npy.h"

#include "support/diagnostics.h"
#include "support/half.h"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace aicf;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
    path = fs::temp_directory_path() / cat("aicf_test_npy_", tick);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string &name) const { return (path / name).string(); }
};

std::string readBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// A .npy file as NumPy writes it: version `major`, header dict padded to 64 bytes with '\n'.
std::string npyFile(const std::string &dict, const std::string &data, int major = 1) {
  size_t lenBytes = major == 1 ? 2 : 4;
  std::string h = dict;
  size_t prefix = 8 + lenBytes;
  while ((prefix + h.size() + 1) % 64 != 0)
    h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t k = 0; k < lenBytes; ++k)
    out += static_cast<char>((h.size() >> (8 * k)) & 0xff);
  return out + h + data;
}

std::string f32Bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

Tensor sample(DType dt) {
  Tensor t(TensorType(dt, {2, 3}));
  double vals[] = {-2.5, 0, 1, 3.25, -7, 100};
  for (int64_t i = 0; i < 6; ++i) {
    if (dt == DType::Bool)
      t.setInt(i, i % 2);
    else
      t.setDouble(i, vals[i]);
  }
  return t;
}

void expectNpyError(const std::string &path, const std::string &reason) {
  INFO("file " << path << ", expecting '" << reason << "'");
  CHECK_THROWS_WITH_AS(readNpy(path), doctest::Contains((path + ": " + reason).c_str()), UserError);
}

} // namespace

TEST_CASE("npy: round trip for every dtype and shape") {
  TempDir dir;
  for (DType dt : kAllDTypes) {
    INFO("dtype " << dtypeName(dt));
    Tensor t = sample(dt);
    std::string p = dir.file(cat("t_", dtypeName(dt), ".npy"));
    writeNpy(p, t);
    Tensor back = readNpy(p);
    if (dt == DType::BF16) { // written as exact f32
      CHECK(back.dtype() == DType::F32);
      CHECK(back.shape() == t.shape());
      for (int64_t i = 0; i < t.numel(); ++i)
        CHECK(back.getDouble(i) == t.getDouble(i));
    } else {
      CHECK(back == t);
    }
  }
  // scalars, 1-d, empty and high-rank shapes
  for (std::vector<int64_t> shape :
       std::vector<std::vector<int64_t>>{{}, {5}, {0, 3}, {1, 2, 1, 2, 1}}) {
    Tensor t(TensorType(DType::I32, shape));
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setInt(i, i * 7 - 3);
    std::string p = dir.file("shape.npy");
    writeNpy(p, t);
    CHECK(readNpy(p) == t);
  }
}

TEST_CASE("npy: files match NumPy's byte for byte") {
  TempDir dir;
  Tensor t = Tensor::fromF32({0, 1, 2, 3, 4, 5}, {2, 3});
  std::string p = dir.file("a.npy");
  writeNpy(p, t);
  std::string want = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             f32Bytes({0, 1, 2, 3, 4, 5}));
  CHECK(readBytes(p) == want);
  CHECK(readBytes(p).size() == 128 + 24);
  // 1-d shapes are written "(5,)"; scalars "()"
  writeNpy(p, Tensor::fromI64({1, 2, 3, 4, 5}, {5}));
  CHECK(readBytes(p).find("'shape': (5,), }") != std::string::npos);
  CHECK(readBytes(p).find("'descr': '<i8'") != std::string::npos);
  writeNpy(p, Tensor::scalarF32(1.5f));
  CHECK(readBytes(p).find("'shape': (), }") != std::string::npos);
  Tensor b(TensorType(DType::Bool, {1}));
  writeNpy(p, b);
  CHECK(readBytes(p).find("'descr': '|b1'") != std::string::npos);
}

TEST_CASE("npy: reads versions 2 and 3, other key orders and Python 2 longs") {
  TempDir dir;
  std::string p = dir.file("v.npy");
  writeBytes(p, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                        f32Bytes({1, 2, 3}), 2));
  CHECK(readNpy(p) == Tensor::fromF32({1, 2, 3}, {3}));
  writeBytes(p, npyFile("{'shape': (1L, 2L), 'fortran_order': False, 'descr': '<f4'}",
                        f32Bytes({4, 5}), 3));
  CHECK(readNpy(p) == Tensor::fromF32({4, 5}, {1, 2}));
  // f16 data and i1 / b1 spellings
  uint16_t h[2] = {0x3c00, 0xc000}; // 1, -2
  writeBytes(p, npyFile("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }",
                        std::string(reinterpret_cast<char *>(h), 4)));
  Tensor f16 = readNpy(p);
  CHECK(f16.dtype() == DType::F16);
  CHECK(f16.getDouble(1) == -2.0);
  writeBytes(p, npyFile("{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }",
                        std::string("\xff\x05", 2)));
  CHECK(readNpy(p).toInts() == std::vector<int64_t>{-1, 5});
  writeBytes(p, npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                        std::string("\x01\x00\x01", 3)));
  CHECK(readNpy(p).toInts() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("npy: bad files are user errors naming the file and the reason") {
  TempDir dir;
  std::string p = dir.file("bad.npy");
  std::string good = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             f32Bytes({0, 1, 2, 3, 4, 5}));

  writeBytes(p, good.substr(0, good.size() - 3));
  expectNpyError(p, "truncated data");
  writeBytes(p, good + "xx");
  expectNpyError(p, "wrong size");
  writeBytes(p, good.substr(0, 40));
  expectNpyError(p, "truncated header");
  writeBytes(p, good.substr(0, 9));
  expectNpyError(p, "truncated header");
  writeBytes(p, "PK\x03\x04 this is a zip");
  expectNpyError(p, "not a .npy file (bad magic)");
  writeBytes(p, "");
  expectNpyError(p, "not a .npy file (bad magic)");
  std::string v9 = good;
  v9[6] = 9;
  writeBytes(p, v9);
  expectNpyError(p, "unsupported .npy version 9.0");
  writeBytes(p, npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                        f32Bytes({0, 1, 2, 3, 4, 5})));
  expectNpyError(p, "Fortran-order arrays are not supported");
  writeBytes(p, npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }",
                        f32Bytes({0, 1, 2, 3, 4, 5})));
  expectNpyError(p, "big-endian data ('>f4') is not supported");
  for (const char *descr : {"<c8", "<c16", "<f16", "|V4", "O"}) {
    writeBytes(p, npyFile(cat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (1,), }"),
                          std::string(16, '\0')));
    expectNpyError(p, cat("unsupported dtype '", descr, "'"));
  }
  writeBytes(p, npyFile("{'descr': '<f4', 'fortran_order': False}", ""));
  expectNpyError(p, ".npy header lacks 'shape'");
  writeBytes(p, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""));
  expectNpyError(p, "bad .npy header");
  writeBytes(p, npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", ""));
  expectNpyError(p, "bad .npy header");
  writeBytes(p, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", ""));
  expectNpyError(p, "bad .npy header");

  std::string missing = dir.file("does_not_exist.npy");
  CHECK_THROWS_WITH_AS(readNpy(missing), doctest::Contains((missing + ": cannot open").c_str()),
                       UserError);
  CHECK_THROWS_WITH_AS(writeNpy(dir.file("no/such/dir/x.npy"), Tensor::scalarF32(1)),
                       doctest::Contains("cannot write"), UserError);
}
