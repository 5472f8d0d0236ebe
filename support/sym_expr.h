// Symbolic dim expressions (issue 21): a dim compiled for a range (`--dim seq=1..512@128`) stays
// a symbol through the Graph IR, the Kernel IR, plan.yaml and the runtime. A tensor's dims are
// then integer polynomials in the symbols with integer coefficients ("3*seq", "batch*seq",
// "seq + 1"), which is what shape arithmetic makes of products, sums and constant factors. The
// runtime evaluates the same text (plan.yaml buffer shapes, launch grids), so this file depends on
// the standard library only and is compiled into the runtime too.
//
// Why polynomials and nothing wider: every op the symbolic path supports maps dims to sums and
// products of dims (broadcast, matmul, reshape, concat, split into fixed parts); a floor division
// (a strided window over a symbolic axis) is refused by the op's symbolic shape rule, naming it,
// rather than carried in a form the memory plan could not bound.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aicf {

// A symbolic dim's range: the compiled folder runs every value in [min, max]; the cost model
// plans for `opt`.
struct DimRange {
  std::string name;
  int64_t min = 1, max = 1, opt = 1;
};

class SymExpr {
public:
  using Monomial = std::vector<std::string>; // sorted symbol names, repeated for powers
  SymExpr() = default;
  SymExpr(int64_t c); // NOLINT: a constant converts implicitly, as in shape arithmetic
  static SymExpr symbol(const std::string &name);

  bool isConstant() const;
  // The constant value (0 for none); only meaningful when isConstant().
  int64_t constant() const;
  // The symbol when the expression is exactly one symbol (coefficient 1, no constant).
  std::optional<std::string> asSymbol() const;
  std::vector<std::string> symbols() const; // sorted, each once
  const std::map<Monomial, int64_t> &terms() const { return terms_; }

  // Arithmetic; nullopt on int64 overflow of a coefficient.
  static std::optional<SymExpr> add(const SymExpr &a, const SymExpr &b);
  static std::optional<SymExpr> sub(const SymExpr &a, const SymExpr &b);
  static std::optional<SymExpr> mul(const SymExpr &a, const SymExpr &b);
  // a / d when every coefficient is a multiple of d (d > 0); nullopt otherwise.
  static std::optional<SymExpr> divExact(const SymExpr &a, int64_t d);
  // Whether every coefficient is a multiple of d (d > 0): then a is one for every valuation.
  bool divisibleBy(int64_t d) const;

  // The value at `dims` (each symbol must be bound); nullopt on a missing symbol or overflow.
  std::optional<int64_t> eval(const std::map<std::string, int64_t> &dims) const;
  // Whether the expression never decreases as any symbol grows (no negative coefficient on a
  // non-constant monomial), so that over ranges of non-negative values its maximum is its value
  // at every symbol's maximum.
  bool monotone() const;

  // Canonical text, without spaces (it sits inside IR types and YAML flow lists): terms by
  // descending degree then name, "3*batch*seq+seq+1"; "0" for zero.
  std::string str() const;
  // Parses str()'s form (also "2*seq*seq", "-seq + 4", spaces anywhere); nullopt with `error`
  // set on bad text. Symbols are [A-Za-z_][A-Za-z0-9_]*.
  static std::optional<SymExpr> parse(std::string_view text, std::string *error = nullptr);

  bool operator==(const SymExpr &o) const { return terms_ == o.terms_; }
  bool operator!=(const SymExpr &o) const { return !(*this == o); }
  bool operator<(const SymExpr &o) const { return terms_ < o.terms_; }

private:
  std::map<Monomial, int64_t> terms_; // no zero coefficients; the constant under {}
};

// A launch extent over symbolic dims: ceil(num / div), div >= 1 (a grid axis tiling a symbolic
// extent by a fixed tile). Text: "batch*seq" for div 1, else "ceil(batch*seq/8)".
struct SymExtent {
  SymExpr num;
  int64_t div = 1;
  std::optional<int64_t> eval(const std::map<std::string, int64_t> &dims) const;
  std::string str() const;
  static std::optional<SymExtent> parse(std::string_view text, std::string *error = nullptr);
  bool operator==(const SymExtent &o) const { return num == o.num && div == o.div; }
};

// Whether `name` can be a symbol ([A-Za-z_][A-Za-z0-9_]*).
bool isSymbolName(std::string_view name);

} // namespace aicf
