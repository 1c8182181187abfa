// JSON Schema `format` values as regexes (regex.h), for the formats OpenAI's strict mode lists
// (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid) and uri.
//
// Each language is a subset of what ajv-formats accepts in its "full" mode (v2 and v3) and of
// the RFC grammar it cites, so a generated string validates under both; where the two disagree
// or a check is not regular, the stricter side is taken and the difference documented beside
// the pattern in formats.cc (leap seconds, urn:uuid:, IDN labels, ...).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/regex.h"

namespace dsv4::grammar {

// The format's automaton, compiled on first use and kept for the process (thread-safe). An
// unknown format is an error naming it and the supported ones.
Result<const Regex*> format_regex(std::string_view name);

// A bound on the length (code points) that the format needs beyond its automaton, -1 if none:
// hostname's 253 (RFC 1123; a DFA counting both label and name lengths would be too large).
// The schema compiler takes the smaller of this and maxLength.
int64_t format_max_length(std::string_view name);

// The supported format names.
const std::vector<std::string_view>& format_names();

}  // namespace dsv4::grammar
