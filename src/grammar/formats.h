// JSON Schema `format` values as regexes (regex.h): every format of JSON Schema 2020-12 and of
// ajv-formats (v3, "full" mode).
//
// Each language is a subset of what ajv-formats accepts in its "full" mode (v2 and v3) and of
// the RFC grammar it cites, so a generated string validates under both; where the two disagree
// or a check is not regular, the stricter side is taken and the difference documented beside
// the pattern in formats.cc (leap seconds, urn:uuid:, IDN labels, the regex subset, ...).
// A format no validator defines is an annotation (2020-12 without the format-assertion
// vocabulary; ajv with strict off ignores it): FormatUse::kUnknown.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

// What a format name constrains.
enum class FormatUse {
  kUnknown,    // no validator defines it: an annotation, nothing to enforce
  kString,     // strings: format_regex() is its automaton
  kAnyString,  // every string (password, binary)
  kNumber,     // numbers only (int32, int64, float, double; ajv-formats v3): format_integer_bits()
};
FormatUse format_use(std::string_view name);

// The format's automaton, compiled on first use and kept for the process (thread-safe);
// nullptr for a format that constrains no string (kAnyString, kNumber). An unknown format is an
// error naming it and the supported ones.
Result<const Regex*> format_regex(std::string_view name);

// A kNumber format's bound on numbers: 32 (int32: an integer in [-2^31, 2^31 - 1]), 64 (int64:
// an integer, as ajv-formats v3 checks), 0 (float, double: any number).
int format_integer_bits(std::string_view name);

// A bound on the length (code points) that the format needs beyond its automaton, -1 if none:
// hostname's 253 (RFC 1123; a DFA counting both label and name lengths would be too large).
// The schema compiler takes the smaller of this and maxLength.
int64_t format_max_length(std::string_view name);

// The supported format names (every kind but kUnknown).
const std::vector<std::string_view>& format_names();

}  // namespace dsv4::grammar
