// The C-family expression printer shared by the host C++ printer (host_printer.cpp) and the
// CUDA printer (cuda_printer.cpp): Kernel IR scalar expressions to C++ text with minimal
// parentheses (nested comparisons parenthesised for -Wparentheses), f16/bf16 loads widened to
// float and stores narrowed, literals that round-trip. What differs between the two targets —
// the spelling of math functions, 16-bit float conversions, NaN / Inf literals, and whether a
// local buffer is a per-thread array (its thread index dropped) — is a Dialect.
#pragma once

#include "kir/kir.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace aicf::cexpr {

struct Dialect {
  const char *who;                      // "host printer" / "CUDA printer", for internal errors
  const char *f16Storage, *bf16Storage; // element types of 16-bit float buffers
  const char *nan, *inf, *negInf;       // float literals
  const char *h2f, *bf2f;               // widen a 16-bit element to float
  const char *f2h, *f2bf;               // narrow a float to a 16-bit element (nearest even)
  const char *roundH, *roundBf;         // round a float through f16 / bf16 (casts)
  bool localPerThread;                  // local buffers [threads, ...] print without the thread
  // f32 (`f32` true) and f64 spellings of exp, log, sqrt, tanh, erf, floor, ceil, round, sin,
  // cos; nullptr for other ops.
  const char *(*math)(kir::UnOp op, bool f32);
  const char *absFloat, *absOther; // abs of a float / of another type ("<T>" appended if
  bool absOtherTemplated;          // absOtherTemplated)
  const char *powF32, *powF64, *fmodF32, *fmodF64, *sigmoid;
  // Whether elemRef re-joins the digits of a flattened index (kir.cpp operator+: As[e / 32,
  // e % 32] -> As[e]; a pixel split over a map W wide: [p / W, p % W] -> p W). Off for CUDA:
  // ptxas spilled 4 bytes at 40 registers on the LLaMA block's k7_matmul (sm_90) with the
  // joined shared-memory index and none without it (and 40 on a BERT layer's attention with
  // the pixel form).
  bool joinIndexDigits;
  // A cast of a wider integer to an 8- or 16-bit signed one: a template taking the target type
  // ("<T>" appended), or nullptr for a plain static_cast. It must wrap (ONNX's Abs of int16
  // -32768 is -32768), which the CUDA prelude's aicf_wrap keeps true (see there).
  const char *narrowSigned;
  // Whether a load gathering across a vectorised loop's lanes (Lane below) indexes a buffer of
  // fewer than 2^31 elements with its offset cast to int32 (host: g++ 12 vectorises no gather
  // of 16 floats with 64-bit offsets, "unsupported vector types for emulated gather", so the
  // whole loop ran scalar: a sigmoid read through a transposed conv's phase layout at 5x its
  // prediction).
  bool narrowGathers;
};

// A vectorised loop an expression is printed inside: its variable and the i64 scalars its body
// has declared so far (name -> value). A load whose offset, those inlined, reads the variable
// but is not affine in it (kir::affineIn) gathers.
struct Lane {
  std::string var;
  std::map<std::string, kir::ExprP> defs;
};

// The C++ type of a scalar value (f16 / bf16 values are carried as float).
const char *valueType(DType t);
// The C++ element type of a buffer.
const char *storageType(const Dialect &d, DType t);
std::string floatLiteral(const Dialect &d, float f);
std::string doubleLiteral(const Dialect &d, double v);
std::string intLiteral(int64_t v);

// `lane`: the vectorised loop the expression is inside, if any (Dialect::narrowGathers).
std::string str(const Dialect &d, const kir::ExprP &e, const Lane *lane = nullptr);
inline std::string ex(const Dialect &d, const kir::E &e, const Lane *lane = nullptr) {
  return str(d, e.get(), lane);
}
// The element reference buf[...] (row-major; a per-thread local buffer drops its first index);
// `gatherLane`: a load inside that vectorised loop (Dialect::narrowGathers).
std::string elemRef(const Dialect &d, const kir::BufferP &b, const std::vector<kir::ExprP> &idx,
                    const Lane *gatherLane = nullptr);
// An element reference read as its value type (16-bit floats widened, bools compared).
std::string widen(const Dialect &d, DType t, const std::string &ref);
// `s` (of value type `vt`) as stored into an element of type `t`.
std::string narrowStr(const Dialect &d, DType t, DType vt, const std::string &s);
// The value `v` stored into an element of type `t` (16-bit copies move the bits).
std::string narrow(const Dialect &d, DType t, const kir::ExprP &v, const Lane *lane = nullptr);

// The variables and buffers a kernel body uses (to silence unused warnings precisely); with
// per-thread locals, a local buffer's dropped thread index is not a use.
struct Uses {
  explicit Uses(const Dialect &d) : d_(d) {}
  std::set<std::string> vars;
  std::set<const kir::Buffer *> bufs;
  void expr(const kir::ExprP &e);
  void stmts(const std::vector<kir::StmtP> &ss);
  void stmt(const kir::Stmt &s);

private:
  const Dialect &d_;
};

} // namespace aicf::cexpr
