// Numeric keywords -> NumberRange (json_schema.h): minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (2020-12's numbers, or draft-04's booleans beside minimum/maximum) and
// multipleOf, as exact integer bounds on N, the value scaled by 10^fraction_digits.
//
// Exactness: a bound b (a double) is read as its shortest decimal text; N / 10^f >= b as
// decimals implies double(N / 10^f) >= b (rounding is monotone), and two decimals of at most 15
// significant digits round to distinct doubles, so strict bounds hold after parsing too.
// multipleOf M·10^-k: integers take N ≡ 0 mod M / gcd(M, 10^k); numbers take fraction_digits
// k (k <= kMaxFractionDigits) and step M. Without multipleOf a number takes up to 6 fraction
// digits, fewer where a bound needs more integer digits (15 digits in all).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "grammar/json_schema.h"

namespace dsv4::grammar {

constexpr int32_t kMaxFractionDigits = 6;

// The range of s's numeric keywords (bounded false: none); errors name the keyword and path.
Result<NumberRange> number_range(const OrderedJson& s, bool integer, const std::string& path);

// An integer range r narrowed to [-2^31, 2^31 - 1] (format int32); errors when nothing is left.
Status narrow_to_int32(NumberRange& r, const std::string& path);

}  // namespace dsv4::grammar
