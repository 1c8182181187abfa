#include "grammar/formats.h"

#include <array>
#include <mutex>
#include <optional>
#include <string>

#include <fmt/format.h>

namespace dsv4::grammar {

// Named, not anonymous: the grammar sources build as one unity translation unit.
namespace format_patterns {

// RFC 3339 full-date, exact: day of month by month, 29 February only in leap years (divisible
// by 4, and by 400 when divisible by 100: the last two digits, or the first two when the last
// two are 00). ajv-formats checks the same with numbers.
std::string date_pattern() {
  const std::string leap_year = R"((?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00))";
  return R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30))"
         R"(|02-(?:0[1-9]|1\d|2[0-8]))|)" +
         leap_year + "-02-29)";
}

// RFC 3339 full-time with its offset required (ajv-formats' date-time and time are strict
// about the zone): hour 00-23, minute and second 00-59, a fraction of any length, Z or z or
// +hh:mm / -hh:mm with hh <= 23, mm <= 59 (RFC 3339's colon required; ajv also takes +hhmm and
// +hh, which are left out). Leap second: only 23:59:60 with Z, +00:00 or -00:00 (ajv-formats v2
// takes 23:59:60 at any offset, v3 any time that is 23:59:60 in UTC, e.g. 15:59:60-08:00; only
// these satisfy both).
std::string time_pattern() {
  const std::string offset = R"((?:[zZ]|[+-](?:[01]\d|2[0-3]):[0-5]\d))";
  return R"((?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?)" + offset + R"(|23:59:60(?:\.\d+)?(?:[zZ]|[+-]00:00)))";
}

// RFC 3339 appendix A (ISO 8601 durations), exact: year, month, day in order with no gaps
// (P1Y1D is not a duration there, although ajv's pattern takes it), the time part after T
// likewise, or weeks alone. No fractions (as both).
std::string duration_pattern() {
  const std::string second = R"(\d+S)", minute = R"(\d+M(?:\d+S)?)", hour = R"(\d+H(?:\d+M(?:\d+S)?)?)";
  const std::string time = "T(?:" + hour + "|" + minute + "|" + second + ")";
  const std::string day = R"(\d+D)", month = R"(\d+M(?:\d+D)?)", year = R"(\d+Y(?:\d+M(?:\d+D)?)?)";
  return "P(?:(?:" + day + "|" + month + "|" + year + ")(?:" + time + R"()?|)" + time + R"(|\d+W))";
}

// ajv-formats' full email pattern (case-insensitive): dot-atoms of the RFC 5322 atext before
// '@', a domain of at least two labels after it. Quoted local parts and address literals
// ([127.0.0.1]), valid under RFC 5321, are left out as ajv leaves them out.
std::string email_pattern() {
  const std::string atext = R"([a-z0-9!#$%&'*+/=?^_`{|}~-])";
  const std::string label = R"([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)";
  return atext + "+(?:\\." + atext + "+)*@(?:" + label + "\\.)+" + label;
}

// RFC 1123 host names (ajv-formats full, case-insensitive): labels of 1-63 letters, digits and
// hyphens, not starting or ending with a hyphen, an optional final dot. Stricter than ajv: no
// "--" in a label's 3rd and 4th characters (RFC 5891 reserves it for A-labels, "xn--", whose
// punycode no regular language checks; the JSON Schema suite rejects such labels). The total of
// 253 characters is format_max_length()'s, not the automaton's.
std::string hostname_pattern() {
  const std::string a = "[a-z0-9]", h = "[a-z0-9-]";
  const std::string label = "(?:" + a + "(?:" + a + "|" + h + a + "|" + h + h + a + "|" + h + "(?:" + a + h + "|-" + a +
                            ")" + h + "{0,58}" + a + ")?)";
  return label + "(?:\\." + label + ")*\\.?";
}

// Dotted quad with no leading zeros (ajv-formats v2 takes "01", v3 and the JSON Schema suite
// do not).
std::string ipv4_pattern() {
  const std::string octet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  return "(?:" + octet + "\\.){3}" + octet;
}

// RFC 4291 section 2.2 text form, as RFC 3986's IPv6address ABNF writes it out (either case):
// eight groups of 1-4 hex digits, one "::" for a run of zero groups, an embedded dotted quad
// (dec-octets without leading zeros) in place of the last two; no zone id. Every such string
// passes ajv-formats' ipv6 pattern.
std::string ipv6_pattern() {
  const std::string h16 = "[0-9a-f]{1,4}", octet = R"((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  const std::string ls32 = fmt::format(R"((?:{0}:{0}|(?:{1}\.){{3}}{1}))", h16, octet);
  // n groups "h16:"; up to max_groups of them then h16, or nothing.
  auto groups = [&](int n) { return fmt::format("(?:{}:){{{}}}", h16, n); };
  auto head = [&](int max_groups) { return fmt::format("(?:(?:{0}:){{0,{1}}}{0})?", h16, max_groups); };
  std::string p = fmt::format("(?:{0}{1}|::{2}{1}|(?:{3})?::{4}{1}", groups(6), ls32, groups(5), h16, groups(4));
  for (int k = 1; k <= 3; ++k) p += fmt::format("|{}::{}{}", head(k), groups(4 - k), ls32);
  return p + fmt::format("|{}::{}|{}::{}|{}::)", head(4), ls32, head(5), h16, head(6));
}

// RFC 4122 string form, either case; ajv's optional "urn:uuid:" prefix is left out (a URN, not
// the uuid format of the JSON Schema suite).
std::string uuid_pattern() { return "[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}"; }

// RFC 3986's IP-literal: "[" IPv6address or IPvFuture "]".
std::string ip_literal_pattern() { return "\\[(?:" + ipv6_pattern() + "|v[0-9a-f]+\\.[a-z0-9\\-._~!$&'()*+,;=:]+)\\]"; }

// uri, an approximation of RFC 3986's URI (absolute, with scheme): a subset of ajv-formats' full
// pattern: scheme ':' then "//" authority path-abempty, or an absolute or rootless path; then an
// optional query and fragment. ASCII only, as ajv (IRIs are iri). Not generated although valid:
// an empty path after the scheme ("urn:", as ajv).
std::string uri_pattern() {
  const std::string pct = "%[0-9a-f]{2}";
  const std::string pchar = "(?:[a-z0-9\\-._~!$&'()*+,;=:@]|" + pct + ")";
  const std::string userinfo = "(?:(?:[a-z0-9\\-._~!$&'()*+,;=:]|" + pct + ")*@)?";
  const std::string host = "(?:" + ip_literal_pattern() + "|(?:[a-z0-9\\-._~!$&'()*+,;=]|" + pct + ")*)";
  const std::string abempty = "(?:/" + pchar + "*)*";
  const std::string hier = "(?://" + userinfo + host + "(?::\\d*)?" + abempty + "|/(?:" + pchar + "+" + abempty +
                           ")?|" + pchar + "+" + abempty + ")";
  const std::string tail =
      "(?:\\?(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|" + pct + ")*)?(?:#(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|" + pct + ")*)?";
  return "[a-z][a-z0-9+\\-.]*:" + hier + tail;
}

struct FormatEntry {
  std::string_view name;
  std::string (*pattern)();
  bool ignore_case;  // ajv-formats' /i
  int64_t max_length;
};

std::string date_time_pattern() { return date_pattern() + "[tT]" + time_pattern(); }

// Every pattern is anchored whole: ^(...)$.
constexpr std::array<FormatEntry, 10> kFormats = {{
    {"date-time", date_time_pattern, false, -1},
    {"time", time_pattern, false, -1},
    {"date", date_pattern, false, -1},
    {"duration", duration_pattern, false, -1},
    {"email", email_pattern, true, -1},
    {"hostname", hostname_pattern, true, 253},
    {"ipv4", ipv4_pattern, false, -1},
    {"ipv6", ipv6_pattern, true, -1},
    {"uuid", uuid_pattern, true, -1},
    {"uri", uri_pattern, true, -1},
}};

const FormatEntry* find_format(std::string_view name) {
  for (const FormatEntry& f : kFormats) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

struct CompiledFormat {
  std::once_flag once;
  std::optional<Result<Regex>> regex;
};

}  // namespace format_patterns

const std::vector<std::string_view>& format_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const format_patterns::FormatEntry& f : format_patterns::kFormats) out.push_back(f.name);
    return out;
  }();
  return names;
}

Result<const Regex*> format_regex(std::string_view name) {
  const format_patterns::FormatEntry* entry = format_patterns::find_format(name);
  if (entry == nullptr) {
    std::string known;
    for (std::string_view n : format_names()) known += (known.empty() ? "" : ", ") + std::string(n);
    return Status::errorf("format \"{}\" is not supported (supported: {})", name, known);
  }
  static std::array<format_patterns::CompiledFormat, format_patterns::kFormats.size()> compiled;
  format_patterns::CompiledFormat& slot = compiled[static_cast<size_t>(entry - format_patterns::kFormats.data())];
  std::call_once(slot.once, [&] { slot.regex = compile_regex("^(?:" + entry->pattern() + ")$", entry->ignore_case); });
  if (!slot.regex->ok()) return slot.regex->status().with_context(fmt::format("format \"{}\"", name));
  return &slot.regex->value();
}

int64_t format_max_length(std::string_view name) {
  const format_patterns::FormatEntry* entry = format_patterns::find_format(name);
  return entry == nullptr ? -1 : entry->max_length;
}

}  // namespace dsv4::grammar
