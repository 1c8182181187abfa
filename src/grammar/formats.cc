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

// RFC 3986 relative-ref (the uri-reference without a scheme): "//" authority path-abempty, an
// absolute path, a path whose first segment has no ':' (path-noscheme), or empty; then query and
// fragment as uri. ajv-formats' uri-reference takes each (its pattern is a superset).
std::string relative_ref_pattern() {
  const std::string pct = "%[0-9a-f]{2}";
  const std::string pchar = "(?:[a-z0-9\\-._~!$&'()*+,;=:@]|" + pct + ")";
  const std::string pchar_nc = "(?:[a-z0-9\\-._~!$&'()*+,;=@]|" + pct + ")";
  const std::string userinfo = "(?:(?:[a-z0-9\\-._~!$&'()*+,;=:]|" + pct + ")*@)?";
  const std::string host = "(?:" + ip_literal_pattern() + "|(?:[a-z0-9\\-._~!$&'()*+,;=]|" + pct + ")*)";
  const std::string abempty = "(?:/" + pchar + "*)*";
  const std::string part = "(?://" + userinfo + host + "(?::\\d*)?" + abempty + "|/(?:" + pchar + "+" + abempty +
                           ")?|" + pchar_nc + "+" + abempty + ")?";
  const std::string tail =
      "(?:\\?(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|" + pct + ")*)?(?:#(?:[a-z0-9\\-._~!$&'()*+,;=:@/?]|" + pct + ")*)?";
  return part + tail;
}

// uri-reference (RFC 3986 URI-reference): a uri or a relative reference.
std::string uri_reference_pattern() { return "(?:" + uri_pattern() + "|" + relative_ref_pattern() + ")"; }

// url (ajv-formats, deprecated there): http, https or ftp, a host name of letter-digit labels
// joined by single hyphens with a top-level label of 2+ letters (IP hosts, userinfo and
// non-ASCII labels, which ajv also takes, left out), a port of 2-5 digits, a path of URI
// characters.
std::string url_pattern() {
  const std::string label = "[a-z0-9]+(?:-[a-z0-9]+)*";
  return "(?:https?|ftp)://" + label + "(?:\\." + label + ")*\\.[a-z]{2,}(?::[0-9]{2,5})?" +
         "(?:/(?:[a-z0-9\\-._~!$&'()*+,;=:@/?#]|%[0-9a-f]{2})*)?";
}

// RFC 6570 URI template, level 4 without the reserved operators "=,!@|" and dotted variable
// names: literals (RFC 6570's set, ASCII) and expressions {op var[:prefix|*],...}. Every such
// string passes ajv-formats' uri-template.
std::string uri_template_pattern() {
  const std::string var = "(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\\*)?";
  return "(?:[a-z0-9\\-._~!$&()*+,;=:@/?#\\[\\]]|%[0-9a-f]{2}|\\{[+#./;?&]?" + var + "(?:," + var + ")*\\})*";
}

// RFC 6901 JSON Pointer, exact: "/"-separated tokens, '~' only as ~0 or ~1.
std::string json_pointer_pattern() { return "(?:/(?:[^~/]|~[01])*)*"; }

// json-pointer-uri-fragment (ajv-formats), exact: a JSON Pointer as a URI fragment.
std::string json_pointer_fragment_pattern() {
  return "#(?:/(?:[a-z0-9_\\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~[01])*)*";
}

// Relative JSON Pointer (draft-bhutton-relative-json-pointer-00) without the index adjustment
// ("0+1"), as ajv-formats: a non-negative integer, then '#' or a JSON Pointer.
std::string relative_json_pointer_pattern() { return "(?:0|[1-9][0-9]*)(?:#|" + json_pointer_pattern() + ")"; }

// regex: a subset that is a valid ECMA-262 pattern both with and without the u flag (ajv-formats
// compiles it without; the JSON Schema suite reads ECMA-262), which ajv's \Z check never refuses:
// literal letters, digits and non-syntax punctuation, identity escapes of the syntax characters,
// \d \D \w \W \s \S \n \r \t, '.', classes of letters, digits, '_', ' ', the ranges a-z A-Z 0-9
// and escapes; quantifiers * + ? {n} {n,} (n < 100; lazy too) on atoms and groups; ^ and $ unquantified;
// '|'; groups ( ) and (?: ) one level deep. No backreferences, lookaround or \b.
std::string regex_pattern() {
  const std::string literal = "[a-zA-Z0-9 _,:;=!@#%&'<>/~\\-]";
  const std::string escape = "\\\\[\\^$\\\\.*+?()\\[\\]{}|/dDwWsSnrt]";
  const std::string klass = "\\[\\^?(?:[a-zA-Z0-9_ ]|a-z|A-Z|0-9|\\\\[dDwWsS\\\\\\].])+\\]";
  const std::string atom = "(?:" + literal + "|" + escape + "|\\.|" + klass + ")";
  const std::string quantifier = R"((?:(?:[*+?]|\{[0-9]{1,2},?\})\??))";
  const std::string inner = "(?:" + atom + quantifier + "?|\\^|\\$)*";
  const std::string group = "\\((?:\\?:)?" + inner + "(?:\\|" + inner + ")*\\)" + quantifier + "?";
  const std::string outer = "(?:" + atom + quantifier + "?|" + group + "|\\^|\\$)*";
  return outer + "(?:\\|" + outer + ")*";
}

// byte (ajv-formats, OpenAPI): base64 in groups of 4 with '=' padding, exact.
std::string byte_pattern() { return "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"; }

std::string date_time_pattern() { return date_pattern() + "[tT]" + time_pattern(); }

// iso-time / iso-date-time (ajv-formats v3): time with the offset optional; without one, a
// time of day with no leap second.
std::string iso_time_pattern() {
  return "(?:" + time_pattern() + R"(|(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?))";
}
std::string iso_date_time_pattern() { return date_pattern() + "[tT]" + iso_time_pattern(); }

struct FormatEntry {
  std::string_view name;
  std::string (*pattern)();  // nullptr: every string (FormatUse::kAnyString, kNumber)
  bool ignore_case;  // ajv-formats' /i
  int64_t max_length;
  FormatUse use;
};

constexpr FormatUse kStr = FormatUse::kString;

// Every pattern is anchored whole: ^(...)$. iri / iri-reference take the ASCII uri grammars (a
// URI is an IRI); idn-email / idn-hostname the ASCII ones (RFC 6531 / 5890 extend them).
constexpr std::array<FormatEntry, 30> kFormats = {{
    {"date-time", date_time_pattern, false, -1, kStr},
    {"time", time_pattern, false, -1, kStr},
    {"date", date_pattern, false, -1, kStr},
    {"duration", duration_pattern, false, -1, kStr},
    {"email", email_pattern, true, -1, kStr},
    {"hostname", hostname_pattern, true, 253, kStr},
    {"ipv4", ipv4_pattern, false, -1, kStr},
    {"ipv6", ipv6_pattern, true, -1, kStr},
    {"uuid", uuid_pattern, true, -1, kStr},
    {"uri", uri_pattern, true, -1, kStr},
    {"uri-reference", uri_reference_pattern, true, -1, kStr},
    {"iri", uri_pattern, true, -1, kStr},
    {"iri-reference", uri_reference_pattern, true, -1, kStr},
    {"uri-template", uri_template_pattern, true, -1, kStr},
    {"url", url_pattern, true, -1, kStr},
    {"idn-email", email_pattern, true, -1, kStr},
    {"idn-hostname", hostname_pattern, true, 253, kStr},
    {"json-pointer", json_pointer_pattern, false, -1, kStr},
    {"json-pointer-uri-fragment", json_pointer_fragment_pattern, true, -1, kStr},
    {"relative-json-pointer", relative_json_pointer_pattern, false, -1, kStr},
    {"regex", regex_pattern, false, -1, kStr},
    {"byte", byte_pattern, false, -1, kStr},
    {"iso-time", iso_time_pattern, false, -1, kStr},
    {"iso-date-time", iso_date_time_pattern, false, -1, kStr},
    {"password", nullptr, false, -1, FormatUse::kAnyString},
    {"binary", nullptr, false, -1, FormatUse::kAnyString},
    {"int32", nullptr, false, -1, FormatUse::kNumber},
    {"int64", nullptr, false, -1, FormatUse::kNumber},
    {"float", nullptr, false, -1, FormatUse::kNumber},
    {"double", nullptr, false, -1, FormatUse::kNumber},
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

FormatUse format_use(std::string_view name) {
  const format_patterns::FormatEntry* entry = format_patterns::find_format(name);
  return entry == nullptr ? FormatUse::kUnknown : entry->use;
}

int format_integer_bits(std::string_view name) {
  return name == "int32" ? 32 : name == "int64" ? 64 : 0;
}

Result<const Regex*> format_regex(std::string_view name) {
  const format_patterns::FormatEntry* entry = format_patterns::find_format(name);
  if (entry == nullptr) {
    std::string known;
    for (std::string_view n : format_names()) known += (known.empty() ? "" : ", ") + std::string(n);
    return Status::errorf("format \"{}\" is not supported (supported: {})", name, known);
  }
  if (entry->pattern == nullptr) return static_cast<const Regex*>(nullptr);
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
