// Symbolic dim expressions: canonical integer polynomials (see sym_expr.h).
#include "support/sym_expr.h"

#include <algorithm>
#include <cctype>

namespace aicf {

namespace {

std::optional<int64_t> addI(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}
std::optional<int64_t> mulI(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

} // namespace

bool isSymbolName(std::string_view name) {
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

SymExpr::SymExpr(int64_t c) {
  if (c != 0)
    terms_[{}] = c;
}

SymExpr SymExpr::symbol(const std::string &name) {
  SymExpr e;
  e.terms_[{name}] = 1;
  return e;
}

bool SymExpr::isConstant() const {
  return terms_.empty() || (terms_.size() == 1 && terms_.begin()->first.empty());
}

int64_t SymExpr::constant() const {
  auto it = terms_.find({});
  return it == terms_.end() ? 0 : it->second;
}

std::optional<std::string> SymExpr::asSymbol() const {
  if (terms_.size() == 1 && terms_.begin()->first.size() == 1 && terms_.begin()->second == 1)
    return terms_.begin()->first[0];
  return std::nullopt;
}

std::vector<std::string> SymExpr::symbols() const {
  std::vector<std::string> out;
  for (const auto &[mono, c] : terms_)
    out.insert(out.end(), mono.begin(), mono.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::optional<SymExpr> SymExpr::add(const SymExpr &a, const SymExpr &b) {
  SymExpr r = a;
  for (const auto &[mono, c] : b.terms_) {
    auto s = addI(r.terms_[mono], c);
    if (!s)
      return std::nullopt;
    if (*s == 0)
      r.terms_.erase(mono);
    else
      r.terms_[mono] = *s;
  }
  return r;
}

std::optional<SymExpr> SymExpr::sub(const SymExpr &a, const SymExpr &b) {
  SymExpr neg;
  for (const auto &[mono, c] : b.terms_) {
    auto n = mulI(c, -1);
    if (!n)
      return std::nullopt;
    neg.terms_[mono] = *n;
  }
  return add(a, neg);
}

std::optional<SymExpr> SymExpr::mul(const SymExpr &a, const SymExpr &b) {
  SymExpr r;
  for (const auto &[ma, ca] : a.terms_)
    for (const auto &[mb, cb] : b.terms_) {
      Monomial m = ma;
      m.insert(m.end(), mb.begin(), mb.end());
      std::sort(m.begin(), m.end());
      auto p = mulI(ca, cb);
      if (!p)
        return std::nullopt;
      SymExpr t;
      t.terms_[m] = *p;
      auto s = add(r, t);
      if (!s)
        return std::nullopt;
      r = std::move(*s);
    }
  return r;
}

bool SymExpr::divisibleBy(int64_t d) const {
  if (d <= 0)
    return false;
  return std::all_of(terms_.begin(), terms_.end(),
                     [d](const auto &t) { return t.second % d == 0; });
}

std::optional<SymExpr> SymExpr::divExact(const SymExpr &a, int64_t d) {
  if (!a.divisibleBy(d))
    return std::nullopt;
  SymExpr r = a;
  for (auto &[mono, c] : r.terms_)
    c /= d;
  return r;
}

std::optional<int64_t> SymExpr::eval(const std::map<std::string, int64_t> &dims) const {
  int64_t sum = 0;
  for (const auto &[mono, c] : terms_) {
    std::optional<int64_t> p = c;
    for (const std::string &s : mono) {
      auto it = dims.find(s);
      if (it == dims.end())
        return std::nullopt;
      p = mulI(*p, it->second);
      if (!p)
        return std::nullopt;
    }
    auto s = addI(sum, *p);
    if (!s)
      return std::nullopt;
    sum = *s;
  }
  return sum;
}

bool SymExpr::monotone() const {
  return std::all_of(terms_.begin(), terms_.end(),
                     [](const auto &t) { return t.first.empty() || t.second >= 0; });
}

std::string SymExpr::str() const {
  if (terms_.empty())
    return "0";
  std::vector<std::pair<Monomial, int64_t>> order(terms_.begin(), terms_.end());
  std::stable_sort(order.begin(), order.end(),
                   [](const auto &x, const auto &y) { return x.first.size() > y.first.size(); });
  std::string s;
  for (size_t i = 0; i < order.size(); ++i) {
    const auto &[mono, c] = order[i];
    // The magnitude as text (no negation: INT64_MIN has no positive int64).
    std::string num = c < 0 ? std::to_string(c).substr(1) : std::to_string(c);
    if (i == 0)
      s += c < 0 ? "-" : "";
    else
      s += c < 0 ? "-" : "+";
    std::string body;
    for (const std::string &sym : mono)
      body += (body.empty() ? "" : "*") + sym;
    if (mono.empty())
      s += num;
    else if (num == "1")
      s += body;
    else
      s += num + "*" + body;
  }
  return s;
}

std::optional<SymExpr> SymExpr::parse(std::string_view text, std::string *error) {
  auto fail = [&](const std::string &why) -> std::optional<SymExpr> {
    if (error)
      *error = why;
    return std::nullopt;
  };
  size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
      ++i;
  };
  SymExpr sum;
  bool first = true;
  for (;;) {
    skip();
    int64_t sign = 1;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      sign = text[i] == '-' ? -1 : 1;
      ++i;
      skip();
    } else if (!first) {
      break;
    }
    first = false;
    SymExpr term = sign;
    for (bool more = true; more;) {
      skip();
      if (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        int64_t v = 0;
        while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
          auto m = mulI(v, 10);
          auto a = m ? addI(*m, text[i] - '0') : std::nullopt;
          if (!a)
            return fail("a number overflows int64");
          v = *a;
          ++i;
        }
        auto p = mul(term, v);
        if (!p)
          return fail("a coefficient overflows int64");
        term = *p;
      } else if (i < text.size() &&
                 (std::isalpha(static_cast<unsigned char>(text[i])) || text[i] == '_')) {
        size_t b = i;
        while (i < text.size() &&
               (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
          ++i;
        auto p = mul(term, symbol(std::string(text.substr(b, i - b))));
        if (!p)
          return fail("a coefficient overflows int64");
        term = *p;
      } else {
        return fail(i < text.size() ? "unexpected '" + std::string(1, text[i]) + "'"
                                    : "missing a number or symbol at the end");
      }
      skip();
      more = i < text.size() && text[i] == '*';
      if (more)
        ++i;
    }
    auto s = add(sum, term);
    if (!s)
      return fail("a coefficient overflows int64");
    sum = *s;
  }
  if (i != text.size())
    return fail("unexpected '" + std::string(1, text[i]) + "'");
  return sum;
}

std::optional<int64_t> SymExtent::eval(const std::map<std::string, int64_t> &dims) const {
  auto v = num.eval(dims);
  if (!v || div < 1 || *v < 0)
    return std::nullopt;
  return *v / div + (*v % div != 0);
}

std::string SymExtent::str() const {
  return div == 1 ? num.str() : "ceil(" + num.str() + "/" + std::to_string(div) + ")";
}

std::optional<SymExtent> SymExtent::parse(std::string_view text, std::string *error) {
  SymExtent e;
  if (text.rfind("ceil(", 0) != 0) {
    auto n = SymExpr::parse(text, error);
    if (!n)
      return std::nullopt;
    e.num = *n;
    return e;
  }
  size_t slash = text.rfind('/');
  if (slash == std::string_view::npos || text.back() != ')') {
    if (error)
      *error = "expected ceil(EXPR/INT)";
    return std::nullopt;
  }
  auto n = SymExpr::parse(text.substr(5, slash - 5), error);
  auto d = SymExpr::parse(text.substr(slash + 1, text.size() - slash - 2), error);
  if (!n || !d)
    return std::nullopt;
  if (!d->isConstant() || d->constant() < 1) {
    if (error)
      *error = "the divisor of ceil(EXPR/INT) must be a positive integer";
    return std::nullopt;
  }
  e.num = *n;
  e.div = d->constant();
  return e;
}

} // namespace aicf
