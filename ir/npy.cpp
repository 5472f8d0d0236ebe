// .npy reading and writing (NumPy format versions 1.0, 2.0 and 3.0): a magic string, a version,
// a little-endian header length, an ASCII (v3: UTF-8) Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a multiple
// of 64 bytes and ended by '\n', then the raw C-order data.
//
// bf16 has no NumPy dtype: it is written as '<f4' (every bf16 value is exactly an fp32 value, so
// nothing is lost) and reads back as f32. Reading accepts exactly the dtypes written; anything
// else (big-endian, Fortran order, other dtypes, wrong sizes) is a UserError "FILE: reason".
#include "ir/npy.h"

#include "support/diagnostics.h"
#include "support/half.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

namespace aicf {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

// A value of the header dict: a string, a bool, or a tuple/list of integers.
struct HeaderValue {
  enum Kind { Str, Bool, Ints } kind = Str;
  std::string s;
  bool b = false;
  std::vector<int64_t> ints;
};

// Parses the header's Python dict literal (just the subset NumPy writes).
class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string &path) : t_(text), path_(path) {}

  std::map<std::string, HeaderValue> parseDict() {
    std::map<std::string, HeaderValue> out;
    expect('{');
    while (true) {
      skipSpace();
      if (peek() == '}') {
        ++i_;
        break;
      }
      std::string key = parseString();
      expect(':');
      out[key] = parseValue();
      skipSpace();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
    return out;
  }

private:
  [[noreturn]] void fail(const std::string &why) const {
    throw UserError(cat(path_, ": bad .npy header (", why, "): ", t_));
  }
  char peek() const { return i_ < t_.size() ? t_[i_] : '\0'; }
  void skipSpace() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_])))
      ++i_;
  }
  void expect(char c) {
    skipSpace();
    if (peek() != c)
      fail(cat("expected '", c, "'"));
    ++i_;
  }
  std::string parseString() {
    skipSpace();
    char q = peek();
    if (q != '\'' && q != '"')
      fail("expected a string");
    size_t end = t_.find(q, i_ + 1);
    if (end == std::string_view::npos)
      fail("unterminated string");
    std::string s(t_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return s;
  }
  HeaderValue parseValue() {
    skipSpace();
    HeaderValue v;
    char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Str;
      v.s = parseString();
    } else if (t_.substr(i_, 4) == "True") {
      v.kind = HeaderValue::Bool;
      v.b = true;
      i_ += 4;
    } else if (t_.substr(i_, 5) == "False") {
      v.kind = HeaderValue::Bool;
      i_ += 5;
    } else if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      v.kind = HeaderValue::Ints;
      ++i_;
      while (true) {
        skipSpace();
        if (peek() == close) {
          ++i_;
          break;
        }
        if (!std::isdigit(static_cast<unsigned char>(peek())))
          fail("expected a non-negative integer");
        int64_t n = 0;
        while (std::isdigit(static_cast<unsigned char>(peek()))) {
          if (n > (INT64_MAX - 9) / 10)
            fail("dimension too large");
          n = n * 10 + (t_[i_++] - '0');
        }
        if (peek() == 'L') // Python 2 long suffix
          ++i_;
        v.ints.push_back(n);
        skipSpace();
        if (peek() == ',')
          ++i_;
        else if (peek() != close)
          fail(cat("expected ',' or '", close, "'"));
      }
    } else {
      fail("unexpected value");
    }
    return v;
  }

  std::string_view t_;
  const std::string &path_;
  size_t i_ = 0;
};

// The .npy element type of each dtype (bf16 has none: written as '<f4', see the file comment).
const char *descrOf(DType t) {
  switch (t) {
  case DType::F64: return "<f8";
  case DType::F32: return "<f4";
  case DType::BF16: return "<f4";
  case DType::F16: return "<f2";
  case DType::I64: return "<i8";
  case DType::I32: return "<i4";
  case DType::I16: return "<i2";
  case DType::I8: return "|i1";
  case DType::U64: return "<u8";
  case DType::U32: return "<u4";
  case DType::U16: return "<u2";
  case DType::U8: return "|u1";
  case DType::Bool: return "|b1";
  }
  return "?";
}

DType dtypeOfDescr(const std::string &descr, const std::string &path) {
  if (descr.size() == 3) {
    char order = descr[0];
    std::string kind = descr.substr(1);
    bool oneByte = kind.back() == '1';
    if (order == '>' && !oneByte)
      throw UserError(cat(path, ": big-endian data ('", descr, "') is not supported"));
    if (order == '<' || order == '=' || (oneByte && (order == '|' || order == '>')))
      for (DType t : kAllDTypes)
        if (t != DType::BF16 && kind == descrOf(t) + 1)
          return t;
  }
  std::string known;
  for (DType t : kAllDTypes)
    if (t != DType::BF16)
      known += cat(known.empty() ? "" : " ", descrOf(t));
  throw UserError(cat(path, ": unsupported dtype '", descr, "' (supported: ", known, ")"));
}

uint32_t readLE(const std::string &b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t k = 0; k < n; ++k)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(b[at + k])) << (8 * k);
  return v;
}

} // namespace

Tensor readNpy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    throw UserError(cat(path, ": cannot open"), 1);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad())
    throw UserError(cat(path, ": read error"), 1);
  if (bytes.size() < kMagicLen || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    throw UserError(cat(path, ": not a .npy file (bad magic)"));
  if (bytes.size() < 10)
    throw UserError(cat(path, ": truncated header"));
  int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  size_t lenBytes;
  if (major == 1)
    lenBytes = 2;
  else if (major == 2 || major == 3)
    lenBytes = 4;
  else
    throw UserError(cat(path, ": unsupported .npy version ", major, ".", minor));
  if (bytes.size() < 8 + lenBytes)
    throw UserError(cat(path, ": truncated header"));
  size_t headerLen = readLE(bytes, 8, lenBytes);
  size_t dataStart = 8 + lenBytes + headerLen;
  if (bytes.size() < dataStart)
    throw UserError(cat(path, ": truncated header (", headerLen, " bytes announced, ",
                        bytes.size() - 8 - lenBytes, " present)"));
  std::string_view header(bytes.data() + 8 + lenBytes, headerLen);
  auto dict = HeaderParser(header, path).parseDict();

  auto get = [&](const char *key, HeaderValue::Kind kind) -> const HeaderValue & {
    auto it = dict.find(key);
    if (it == dict.end())
      throw UserError(cat(path, ": .npy header lacks '", key, "'"));
    if (it->second.kind != kind)
      throw UserError(cat(path, ": .npy header entry '", key, "' has the wrong type"));
    return it->second;
  };
  DType dtype = dtypeOfDescr(get("descr", HeaderValue::Str).s, path);
  if (get("fortran_order", HeaderValue::Bool).b)
    throw UserError(cat(path, ": Fortran-order arrays are not supported (save a C-order copy)"));
  std::vector<int64_t> shape = get("shape", HeaderValue::Ints).ints;

  TensorType type(dtype, shape);
  size_t es = dtypeSize(dtype);
  size_t want = es;
  for (int64_t d : shape) {
    if (d != 0 && want > SIZE_MAX / static_cast<size_t>(d))
      throw UserError(cat(path, ": shape ", shapeStr(shape), " is too large"));
    want *= static_cast<size_t>(d);
  }
  size_t have = bytes.size() - dataStart;
  if (have < want)
    throw UserError(
        cat(path, ": truncated data: ", type.str(), " needs ", want, " bytes, found ", have));
  if (have > want)
    throw UserError(
        cat(path, ": wrong size: ", type.str(), " needs ", want, " bytes, found ", have));
  std::vector<uint8_t> data(bytes.begin() + static_cast<std::ptrdiff_t>(dataStart), bytes.end());
  if (dtype == DType::Bool)
    for (uint8_t &b : data)
      b = b ? 1 : 0;
  return Tensor(type, std::move(data));
}

void writeNpy(const std::string &path, const Tensor &t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += cat(i ? ", " : "", t.shape()[i]);
  if (t.shape().size() == 1)
    shape += ",";
  shape += ")";
  std::string dict =
      cat("{'descr': '", descrOf(t.dtype()), "', 'fortran_order': False, 'shape': ", shape, ", }");
  // Version 1.0 unless the header needs more than 65535 bytes.
  size_t lenBytes = dict.size() + 1 + 10 + 63 > 65535 ? 4 : 2;
  size_t prefix = kMagicLen + 2 + lenBytes;
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';

  std::string out(kMagic, kMagicLen);
  out += static_cast<char>(lenBytes == 2 ? 1 : 2);
  out += '\0';
  for (size_t k = 0; k < lenBytes; ++k)
    out += static_cast<char>((dict.size() >> (8 * k)) & 0xff);
  out += dict;

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw UserError(cat(path, ": cannot write"), 1);
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (t.dtype() == DType::BF16) {
    std::vector<float> wide(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      wide[i] = bf16ToFloat(t.data<uint16_t>()[i]);
    f.write(reinterpret_cast<const char *>(wide.data()),
            static_cast<std::streamsize>(wide.size() * 4));
  } else {
    f.write(reinterpret_cast<const char *>(t.raw()), static_cast<std::streamsize>(t.byteSize()));
  }
  if (!f.flush())
    throw UserError(cat(path, ": cannot write"), 1);
}

Tensor npyFor(Tensor t, DType want) {
  if (want != DType::BF16 || t.dtype() != DType::F32)
    return t;
  Tensor b(TensorType(DType::BF16, t.shape()));
  for (int64_t k = 0; k < t.numel(); ++k)
    b.setDouble(k, t.getDouble(k));
  return b;
}

} // namespace aicf
