#include "grammar/schema_number.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dsv4::grammar {
namespace {

using Json = OrderedJson;

constexpr int64_t kBeyond = 1000000000000000;  // 10^kMaxDigits: past every generated N
static_assert(kMaxDigits == 15, "kBeyond is 10^kMaxDigits");

// A JSON number's decimal digits (no leading or trailing zeros) and power of ten.
struct Decimal {
  bool negative = false;
  std::string digits;  // empty: zero
  int64_t exponent = 0;
};

Decimal decimal(const Json& v) {
  const std::string t = v.dump();
  Decimal d;
  size_t i = 0;
  d.negative = t[0] == '-';
  if (d.negative) ++i;
  for (; i < t.size() && t[i] != 'e' && t[i] != 'E'; ++i) {
    if (t[i] == '.') continue;
    if (!(d.digits.empty() && t[i] == '0')) d.digits += t[i];
    if (t.find('.') < i) --d.exponent;  // a fraction digit
  }
  if (i < t.size()) d.exponent += std::stoll(t.substr(i + 1));
  if (d.digits.empty()) d.exponent = 0;  // zero
  while (!d.digits.empty() && d.digits.back() == '0') d.digits.pop_back(), ++d.exponent;
  return d;
}

// |d| × 10^shift rounded (up or down), clamped to kBeyond.
int64_t magnitude(const Decimal& d, int64_t shift, bool round_up) {
  if (d.digits.empty()) return 0;
  const int64_t e = d.exponent + shift, n = static_cast<int64_t>(d.digits.size());
  if (n + e > 16) return kBeyond;
  if (e >= 0) {
    int64_t m = std::stoll(d.digits);
    for (int64_t k = 0; k < e; ++k) m *= 10;
    return std::min(m, kBeyond);
  }
  const int64_t keep = n + e;  // digits before the point; the rest are non-zero (no trailing zeros)
  const int64_t whole = keep > 0 ? std::stoll(d.digits.substr(0, static_cast<size_t>(keep))) : 0;
  return std::min(whole + (round_up ? 1 : 0), kBeyond);
}

// v × 10^shift, rounded up (ceiling) or down (floor).
int64_t scaled(const Json& v, int64_t shift, bool ceiling) {
  const Decimal d = decimal(v);
  return d.negative ? -magnitude(d, shift, !ceiling) : magnitude(d, shift, ceiling);
}

Status fail(const std::string& path, const std::string& what) {
  return Status::errorf("schema {}: {}", path.empty() ? "/" : path, what);
}

// fraction_digits and step from multipleOf (absent: step 1, fraction digits from the bounds).
Status apply_multiple(const Json& s, bool integer, NumberRange& r, const std::string& path) {
  const auto it = s.find("multipleOf");
  if (it == s.end()) return Status();
  if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>()))
    return fail(path, "multipleOf must be a finite number above 0");
  const Decimal m = decimal(*it);
  const int64_t k = std::max<int64_t>(0, -m.exponent);
  if (m.digits.size() + static_cast<size_t>(std::max<int64_t>(0, m.exponent)) > 15)
    return fail(path, fmt::format("keyword 'multipleOf' is not supported above 10^15 ({})", it->dump()));
  if (k > kMaxFractionDigits)
    return fail(path, fmt::format("keyword 'multipleOf' is not supported with more than {} fraction digits ({})",
                                  kMaxFractionDigits, it->dump()));
  const int64_t units = magnitude(m, k, false);  // M: multipleOf = M · 10^-k
  int64_t pow = 1;
  for (int64_t q = 0; q < k; ++q) pow *= 10;
  r.fraction_digits = integer ? 0 : static_cast<int32_t>(k);
  r.step = integer ? units / std::gcd(units, pow) : units;
  return Status();
}

// Fraction digits for a number without multipleOf: what the largest finite bound leaves of 15
// digits (one integer digit more than it has), at most kMaxFractionDigits.
int32_t fraction_digits_for(const Json& s) {
  int64_t need = 1;
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (const auto it = s.find(key); it != s.end() && it->is_number()) {
      const Decimal d = decimal(*it);
      need = std::max<int64_t>(need, static_cast<int64_t>(d.digits.size()) + d.exponent + 1);
    }
  return static_cast<int32_t>(std::clamp<int64_t>(kMaxDigits - need, 0, kMaxFractionDigits));
}

}  // namespace

Result<NumberRange> number_range(const Json& s, bool integer, const std::string& path) {
  NumberRange r;
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
    r.bounded |= s.contains(key);
  if (!r.bounded) return r;
  for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
    if (const auto it = s.find(key); it != s.end() && !(it->is_boolean() && key[0] == 'e') &&
                                     !(it->is_number() && std::isfinite(it->get<double>())))
      return fail(path, fmt::format("{} must be a finite number", key));
  if (!integer) r.fraction_digits = fraction_digits_for(s);
  DSV4_RETURN_IF_ERROR(apply_multiple(s, integer, r, path));
  const int64_t all = kBeyond - 1;
  r.min = -all;
  r.max = all;
  const int32_t f = r.fraction_digits;
  auto exclusive = [&](const char* key) { return s.contains(key) && s[key] == Json(true); };  // draft-04
  if (const auto it = s.find("minimum"); it != s.end())
    r.min = std::max(r.min, exclusive("exclusiveMinimum") ? scaled(*it, f, false) + 1 : scaled(*it, f, true));
  if (const auto it = s.find("maximum"); it != s.end())
    r.max = std::min(r.max, exclusive("exclusiveMaximum") ? scaled(*it, f, true) - 1 : scaled(*it, f, false));
  if (const auto it = s.find("exclusiveMinimum"); it != s.end() && it->is_number())
    r.min = std::max(r.min, scaled(*it, f, false) + 1);
  if (const auto it = s.find("exclusiveMaximum"); it != s.end() && it->is_number())
    r.max = std::min(r.max, scaled(*it, f, true) - 1);
  const int64_t first = r.min >= 0 ? (r.min + r.step - 1) / r.step * r.step : -(-r.min / r.step * r.step);
  if (r.min > r.max || first > r.max)
    return fail(path, fmt::format("unsatisfiable: no {} of at most {} digits ({} after the point) meets "
                                  "minimum/maximum/exclusive*/multipleOf",
                                  integer ? "integer" : "number", kMaxDigits, f));
  return r;
}

Status narrow_to_int32(NumberRange& r, const std::string& path) {
  constexpr int64_t kMin = -(int64_t{1} << 31), kMax = (int64_t{1} << 31) - 1;
  if (!r.bounded) {
    r = NumberRange{true, 0, kMin, kMax, 1};
    return Status();
  }
  r.min = std::max(r.min, kMin);
  r.max = std::min(r.max, kMax);
  const int64_t first = r.min >= 0 ? (r.min + r.step - 1) / r.step * r.step : -(-r.min / r.step * r.step);
  if (r.min > r.max || first > r.max)
    return fail(path, "unsatisfiable: no integer of format int32 meets minimum/maximum/exclusive*/multipleOf");
  return Status();
}

}  // namespace dsv4::grammar
