// Format automata: valid and invalid examples per format (RFC 3339 / 1123 / 5321 / 4291 / 4122
// / 3986 and ajv-formats' documented behaviour), date and time against a port of ajv-formats'
// checks over every value in a range (each string the automaton takes passes ajv-formats v2 and
// v3), the JSON Schema Test Suite's format cases (Debian json-schema-test-suite; skipped when
// absent), unknown names, and one compilation shared by concurrent callers.
#include "grammar/formats.h"
#include "grammar/json_schema.h"
#include "support/grammar_walk.h"
#include "support/json_schema_check.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace dsv4::grammar {
namespace formats_test {  // named: the grammar tests build as one unity translation unit

const Regex& format(const std::string& name) {
  Result<const Regex*> re = format_regex(name);
  EXPECT_TRUE(re.ok()) << name << ": " << re.message();
  static const Regex none;
  return re.ok() ? **re : none;
}

struct FormatCase {
  std::string name;
  std::vector<std::string> valid, invalid;
};

TEST(Formats, ValidAndInvalidExamples) {
  const std::vector<FormatCase> cases = {
      {"date",
       {"1963-06-19", "2020-01-31", "2020-02-29", "2000-02-29", "2021-02-28", "0000-02-29", "9999-12-31"},
       {"2021-02-29", "1900-02-29", "2020-04-31", "2020-13-01", "2020-00-10", "2020-01-00", "2020-1-01", "20200101",
        "1998-01-32", "06/19/1963", "2013-350", "1963-06-1\u09ea", ""}},
      {"time",
       {"08:30:06Z", "08:30:06.283185Z", "08:30:06+00:20", "08:30:06-08:00", "08:30:06z", "23:59:60Z", "23:59:60+00:00",
        "23:59:60.5-00:00", "00:00:00.0001+23:59"},
       {"08:30:06", "24:00:00Z", "08:60:00Z", "08:30:60Z", "22:59:60Z", "23:59:60+01:00", "08:30:06+24:00",
        "08:30:06+00:60", "08:30:06 PST", "01:01:01,1111Z", "8:30:06Z", "08:30:06.Z", "08:30:06+0800", ""}},
      {"date-time",
       {"1963-06-19T08:30:06.283185Z", "1963-06-19T08:30:06Z", "1937-01-01T12:00:27.87+00:20",
        "1990-12-31T15:59:50.123-08:00", "1963-06-19t08:30:06.283185z", "1998-12-31T23:59:60Z"},
       {"1990-02-31T15:59:59.123-08:00", "1990-12-31T15:59:59-24:00", "06/19/1963 08:30:06 PST", "2013-350T01:01:01",
        "1963-06-19", "1963-06-19T08:30:06", "1963-06-19 08:30:06Z", "1963-06-1\u09eaT00:00:00Z"}},
      {"duration",
       {"P4DT12H30M5S", "P4Y", "PT0S", "P0D", "P1M", "PT1M", "PT36H", "P1W", "P2Y3M", "P1Y2M3DT4H5M6S", "PT1H30M",
        "PT1M5S"},
       {"", "P", "PT", "P1YT", "PT1D", "P4DT", "P1D2H", "P2S", "P1Y2W", "P1Y1D", "PT1H1S", "P0.5Y", "4DT12H30M5S",
        "p1d", "P1\u09eaD"}},
      {"email",
       {"joe.bloggs@example.com", "te~st@example.com", "~test@example.com", "test~@example.com",
        "Joe.Bloggs@Example.COM", "a+b/c=d?e^f_g`h{i|j}k~l-m@a-b.c0"},
       {"2962", "te..st@example.com", ".test@example.com", "test.@example.com", "joe@example", "joe@-ex.com",
        "joe@ex-.com", "\"joe bloggs\"@example.com", "joe.bloggs@[127.0.0.1]", "joe@@example.com", "jo e@example.com"}},
      {"hostname",
       {"www.example.com", "a", "example.com.", "1host", "A-B.c", std::string(63, 'a'),
        std::string(63, 'a') + "." + std::string(63, 'b')},
       {"-a-host-name-that-starts-with--", "not_a_valid_host_name", "a-host-name-ending-with-", "", ".", "a..b",
        std::string(64, 'a'), "ex--ample.com", "xn--4gbwdl" /* "--" at 3-4: no A-labels */, "a.-b", "\u09ea"}},
      {"ipv4",
       {"192.168.0.1", "0.0.0.0", "255.255.255.255", "1.2.3.4"},
       {"127.0.0.0.1", "256.256.256.256", "127.0", "0x7f000001", "2130706433", "087.10.0.1", "1.2.3.04", "1.2.3.",
        "1\u09e8\u09e7.1.1.1", " 1.2.3.4"}},
      {"ipv6",
       {"::1", "::", "::abef", "1:d6::42", "1::d6:192.168.0.1", "1:2::192.168.0.1", "::ffff:192.168.0.1",
        "1:2:3:4:5:6:7:8", "1000:1000:1000:1000:1000:1000:255.255.255.255", "FE80::1", "fe80::"},
       {"12345::", "::abcef", "1:1:1:1:1:1:1:1:1:1", "::laptop", ":2:3:4:5:6:7:8", "1:2:3:4:5:6:7:", "1::d6::42",
        "1::2:192.168.256.1", "1::2:192.168.ff.1", "fe80::a%eth1", "100:100:100:100:100:100:255.255.255.255.255",
        "1:2:3:4:5:6:7:8:9", " ::1", "\u09ea::1"}},
      {"uuid",
       {"2EB8AA08-AA98-11EA-B4AA-73B441D16380", "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
        "00000000-0000-0000-0000-000000000000"},
       {"2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08-aa98-11ea-b4aa-73b441d163800",
        "2eb8aa08aa9811eab4aa73b441d16380", "2eb8-aa08-aa98-11ea-b4aa73b44-1d16380",
        "2eb8aa08-aa98-11ea-b4aa-73b441d1638g", "urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380",
        "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}"}},
      {"uri",
       {"http://foo.bar/?baz=qux#quux", "http://foo.com/blah_(wikipedia)_blah#cite-1",
        "http://foo.bar/?q=Test%20URL-encoded%20stuff", "http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com",
        "http://223.255.255.254", "ftp://ftp.is.co.za/rfc/rfc1808.txt", "mailto:John.Doe@example.com",
        "news:comp.infosystems.www.servers.unix", "tel:+1-816-555-1212",
        "urn:oasis:names:specification:docbook:dtd:xml:4.1.2", "HTTP://EXAMPLE.COM/", "http://[::1]/",
        "ldap://[2001:db8::7]/c=GB?objectClass?one", "http://[v1.fe]:8/"},
       {"//foo.bar/?baz=qux#quux", "/abc", "\\\\WINDOWS\\fileshare", "abc", "http:// shouldfail.com", ":// should fail",
        "bar,baz:foo", "http://example.com/%zz", "1http://x", "http://\u00e9.com", "http://[1::2::3]/",
        "http://[::01.2.3.4]/"}},
      {"uri-reference",
       {"http://foo.bar/?baz=qux#quux", "//foo.bar/?baz=qux#quux", "/abc", "abc", "#fragment", "", "a/b:c", "?q",
        "../x", "HTTP://X/%41"},
       {"\\\\WINDOWS\\fileshare", "#frag#ment", "a:b c", "http://example.com/%zz", "1a:b", "a b"}},
      {"iri", {"http://foo.bar/?baz=qux#quux", "urn:x:y"}, {"/abc", "abc"}},
      {"iri-reference", {"//foo.bar/", "abc#x"}, {"a b", "#a#b"}},
      {"uri-template",
       {"http://example.com/dictionary/{term:1}/{term}", "dictionary/{term:1}/{term}", "{+path}/x{?a,b*}", "x", ""},
       {"http://example.com/dictionary/{term:1}/{term", "{}", "{a b}", "a b", "{term:0}", "a'b", "%zz"}},
      {"url",
       {"http://example.com", "https://a-b.example.org:8080/x?y=1#z", "ftp://ftp.example.co/file.txt"},
       {"http://localhost", "mailto:x@example.com", "http://10.0.0.1", "http://a--b.com", "http://example.com:1",
        "http://example.c0m", "https://exa mple.com"}},
      {"idn-email", {"joe.bloggs@example.com"}, {"2962", "joe@example"}},
      {"idn-hostname", {"www.example.com", "a"}, {"-a", "a..b", "xn--4gbwdl"}},
      {"json-pointer",
       {"", "/", "/foo/bar~0/baz~1/%a", "/foo//bar", "/~1.1", "/\u00e9/\t"},
       {"#", "foo", "/foo/bar~", "/~2", "~0", "a/b"}},
      {"json-pointer-uri-fragment", {"#", "#/a/~0b/%41"}, {"", "/a", "#/a b", "#/~2"}},
      {"relative-json-pointer",
       {"1", "0/foo/bar", "2/0/baz/1/zip", "0#", "120/foo/bar", "0/~0"},
       {"/foo/bar", "-1/foo/bar", "0##", "01/a", "01#", "", "+1/foo", "0/~"}},
      {"regex",
       {"([abc])+\\s+$", "^a|b$", "", "(?:x|y){2,}?z", "[^a-z0-9_]*\\.\\d", "a\\\\Z", "\\(\\)\\[\\]\\{\\}"},
       {"^(abc]", "(", "a**", "*a", "[]", "\\1", "(?=a)", "a{", "]", "}", "a\\Z", "^*", "[z-a]", "((a))"}},
      {"byte", {"", "YQ==", "YWI=", "YWJj", "AAAA/+9z"}, {"YQ", "YQ=", "Y===", "YW=j", "a b="}},
      {"iso-time", {"08:30:06Z", "08:30:06", "23:59:59.5"}, {"24:00:00", "08:30", "23:59:60", "08:30:06 Z"}},
      {"iso-date-time", {"1963-06-19T08:30:06Z", "1963-06-19t08:30:06"}, {"1963-06-19", "1963-02-30T08:30:06"}},
  };
  for (const FormatCase& c : cases) {
    const Regex& re = format(c.name);
    for (const std::string& s : c.valid) EXPECT_TRUE(matches_utf8(re, s)) << c.name << " should take \"" << s << "\"";
    for (const std::string& s : c.invalid)
      EXPECT_FALSE(matches_utf8(re, s)) << c.name << " should refuse \"" << s << "\"";
  }
}

// ajv-formats' date check (v2 and v3 alike).
bool ajv_date(int year, int month, int day) {
  static const int kDays[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
  return month >= 1 && month <= 12 && day >= 1 && day <= (month == 2 && leap ? 29 : kDays[month]);
}

TEST(Formats, DateEqualsAjvOverEveryDay) {
  const Regex& re = format("date");
  for (int year : {0, 4, 100, 400, 1900, 1996, 2000, 2023, 2024, 2100, 2400, 9996, 9999}) {
    for (int month = 0; month <= 13; ++month) {
      for (int day = 0; day <= 32; ++day) {
        const std::string s = fmt::format("{:04}-{:02}-{:02}", year, month, day);
        ASSERT_EQ(matches_utf8(re, s), ajv_date(year, month, day)) << s;
      }
    }
  }
}

// ajv-formats' time check with the zone required: v2 (leap second only as 23:59:60) and v3
// (leap second when the time is 23:59:60 in UTC; offsets hh <= 23, mm <= 59).
bool ajv_time(const std::string& s, int version) {
  static const std::regex kTime(R"(^(\d\d):(\d\d):(\d\d(?:\.\d+)?)(z|([+-])(\d\d)(?::?(\d\d))?)?$)", std::regex::icase);
  std::smatch m;
  if (!std::regex_match(s, m, kTime) || !m[4].matched) return false;
  const int hr = std::stoi(m[1]), min = std::stoi(m[2]);
  const double sec = std::stod(m[3]);
  if (version == 2)
    return (hr <= 23 && min <= 59 && static_cast<int>(sec) <= 59) ||
           (hr == 23 && min == 59 && static_cast<int>(sec) == 60);
  const int sign = m[5] == "-" ? -1 : 1;
  const int tz_h = m[6].matched ? std::stoi(m[6]) : 0, tz_m = m[7].matched ? std::stoi(m[7]) : 0;
  if (tz_h > 23 || tz_m > 59) return false;
  if (hr <= 23 && min <= 59 && sec < 60) return true;
  const int utc_min = min - tz_m * sign, utc_hr = hr - tz_h * sign - (utc_min < 0 ? 1 : 0);
  return (utc_hr == 23 || utc_hr == -1) && (utc_min == 59 || utc_min == -1) && sec < 61;
}

TEST(Formats, TimeIsWithinAjvV2AndV3) {
  const Regex& re = format("time");
  const std::vector<std::string> zones = {"Z",      "z",      "+00:00", "-00:00", "-08:00", "+01:30",
                                          "+23:59", "+24:00", "+00:60", "+0130",  "+01",    ""};
  int taken = 0;
  for (int hr = 0; hr <= 25; ++hr) {
    for (int min : {0, 1, 30, 58, 59, 60, 61}) {
      for (int sec : {0, 1, 59, 60, 61}) {
        for (const std::string& frac : {std::string(), std::string(".5")}) {
          for (const std::string& zone : zones) {
            const std::string s = fmt::format("{:02}:{:02}:{:02}{}{}", hr, min, sec, frac, zone);
            const bool ours = matches_utf8(re, s);
            if (ours) {
              ASSERT_TRUE(ajv_time(s, 2) && ajv_time(s, 3)) << s << " is taken, ajv refuses it";
              ++taken;
            } else if (sec < 60 && zone.find(':') != std::string::npos && ajv_time(s, 3)) {
              ADD_FAILURE() << s << ": a valid RFC 3339 time is refused";
            }
          }
        }
      }
    }
  }
  EXPECT_GT(taken, 1000);
}

// A random string of the automaton's language over printable ASCII: a walk that never enters a
// dead state, stops at an accepting state with probability 1/8, and after 60 code points takes
// the shortest way to acceptance (the length queries).
std::string random_member(const Regex& re, std::mt19937& rng) {
  std::string out;
  int32_t s = re.start();
  for (int step = 0;; ++step) {
    if (re.accepting(s) && (step >= 60 || rng() % 8 == 0)) return out;
    std::vector<uint32_t> options;
    for (uint32_t c = 0x20; c < 0x7F; ++c) {
      const int32_t t = re.step(s, c);
      if (t >= 0 && (step < 60 || re.shortest_accepting_length(t) < re.shortest_accepting_length(s)))
        options.push_back(c);
    }
    if (options.empty()) return re.accepting(s) ? out : "<no way on>";
    const uint32_t c = options[rng() % options.size()];
    out += static_cast<char>(c);
    s = re.step(s, c);
  }
}

// Every generated address parses with inet_pton (glibc: RFC 4291 text, dotted quads without
// leading zeros), and every string of address characters that inet_pton takes is in the language.
TEST(Formats, IpAddressesAgreeWithInetPton) {
  std::mt19937 rng(17);
  for (auto [name, family] : {std::pair<std::string, int>{"ipv4", AF_INET}, {"ipv6", AF_INET6}}) {
    const Regex& re = format(name);
    unsigned char buffer[16];
    for (int i = 0; i < 2000; ++i) {
      const std::string s = random_member(re, rng);
      ASSERT_EQ(inet_pton(family, s.c_str(), buffer), 1) << name << " generated \"" << s << "\"";
    }
    const std::string alphabet = family == AF_INET ? "0123456789." : "0129aF:.";
    int taken = 0;
    for (int i = 0; i < 200000; ++i) {
      std::string s;
      const size_t length = 1 + rng() % (family == AF_INET ? 15 : 24);
      for (size_t k = 0; k < length; ++k) s += alphabet[rng() % alphabet.size()];
      const bool valid = inet_pton(family, s.c_str(), buffer) == 1;
      taken += valid;
      ASSERT_EQ(matches_utf8(re, s), valid) << name << " \"" << s << "\"";
    }
    EXPECT_GT(taken, 20) << name;
  }
}

// Every generated date, time and date-time passes the ajv-formats checks above (v2 and v3).
TEST(Formats, GeneratedDatesAndTimesPassAjvChecks) {
  std::mt19937 rng(19);
  for (int i = 0; i < 3000; ++i) {
    const std::string date = random_member(format("date"), rng);
    ASSERT_EQ(date.size(), 10u) << date;
    ASSERT_TRUE(ajv_date(std::stoi(date.substr(0, 4)), std::stoi(date.substr(5, 2)), std::stoi(date.substr(8, 2))))
        << date;
    const std::string time = random_member(format("time"), rng);
    ASSERT_TRUE(ajv_time(time, 2) && ajv_time(time, 3)) << time;
    const std::string date_time = random_member(format("date-time"), rng);
    const size_t t = date_time.find_first_of("Tt");
    ASSERT_EQ(t, 10u) << date_time;
    ASSERT_TRUE(matches_utf8(format("date"), date_time.substr(0, t))) << date_time;
    ASSERT_TRUE(ajv_time(date_time.substr(t + 1), 2) && ajv_time(date_time.substr(t + 1), 3)) << date_time;
  }
}

// ajv-formats v3's full-mode patterns for the formats it defines by a pattern (url without its
// non-ASCII ranges: stricter, so passing it implies passing ajv's), as ECMAScript std::regex.
struct AjvPattern {
  std::string name, pattern;
  bool ignore_case;
};

const std::vector<AjvPattern>& ajv_patterns() {
  static const std::string h16 = "[0-9a-f]{1,4}", dec = R"((?:25[0-5]|2[0-4]\d|[01]?\d\d?))";
  static const std::string ip_literal =
      R"(\[(?:(?:(?:(?:[0-9a-f]{1,4}:){6}|::(?:[0-9a-f]{1,4}:){5}|(?:[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){4}|)"
      R"((?:(?:[0-9a-f]{1,4}:){0,1}[0-9a-f]{1,4})?::(?:[0-9a-f]{1,4}:){3}|(?:(?:[0-9a-f]{1,4}:){0,2}[0-9a-f]{1,4})?)"
      R"(::(?:[0-9a-f]{1,4}:){2}|(?:(?:[0-9a-f]{1,4}:){0,3}[0-9a-f]{1,4})?::[0-9a-f]{1,4}:|)"
      R"((?:(?:[0-9a-f]{1,4}:){0,4}[0-9a-f]{1,4})?::)(?:[0-9a-f]{1,4}:[0-9a-f]{1,4}|(?:)" +
      dec + R"(\.){3})" + dec + R"()|(?:(?:[0-9a-f]{1,4}:){0,5}[0-9a-f]{1,4})?::[0-9a-f]{1,4}|)"
      R"((?:(?:[0-9a-f]{1,4}:){0,6}[0-9a-f]{1,4})?::)|[Vv][0-9a-f]+\.[a-z0-9\-._~!$&'()*+,;=:]+)\])";
  static const std::string pchar = R"((?:[a-z0-9\-._~!$&'"()*+,;=:@]|%[0-9a-f]{2}))";
  static const std::vector<AjvPattern> patterns = {
      {"uri-reference",
       R"(^(?:[a-z][a-z0-9+\-.]*:)?(?:\/?\/(?:(?:[a-z0-9\-._~!$&'()*+,;=:]|%[0-9a-f]{2})*@)?(?:)" + ip_literal +
           "|(?:" + dec + R"(\.){3})" + dec + R"(|(?:[a-z0-9\-._~!$&'"()*+,;=]|%[0-9a-f]{2})*)(?::\d*)?(?:\/)" +
           pchar + R"(*)*|\/(?:)" + pchar + R"(+(?:\/)" + pchar + R"(*)*)?|)" + pchar + R"(+(?:\/)" + pchar +
           R"(*)*)?(?:\?(?:[a-z0-9\-._~!$&'"()*+,;=:@/?]|%[0-9a-f]{2})*)?(?:#(?:[a-z0-9\-._~!$&'"()*+,;=:@/?]|)"
           R"(%[0-9a-f]{2})*)?$)",
       true},
      {"uri-template",
       R"(^(?:(?:[^\x00-\x20"'<>%\\^`{|}]|%[0-9a-f]{2})|\{[+#./;?&=,!@|]?(?:[a-z0-9_]|%[0-9a-f]{2})+)"
       R"((?::[1-9][0-9]{0,3}|\*)?(?:,(?:[a-z0-9_]|%[0-9a-f]{2})+(?::[1-9][0-9]{0,3}|\*)?)*\})*$)",
       true},
      {"url",
       R"(^(?:https?|ftp):\/\/(?:\S+(?::\S*)?@)?(?:(?!(?:10|127)(?:\.\d{1,3}){3})(?!(?:169\.254|192\.168))"
       R"((?:\.\d{1,3}){2})(?!172\.(?:1[6-9]|2\d|3[0-1])(?:\.\d{1,3}){2})(?:[1-9]\d?|1\d\d|2[01]\d|22[0-3]))"
       R"((?:\.(?:1?\d{1,2}|2[0-4]\d|25[0-5])){2}(?:\.(?:[1-9]\d?|1\d\d|2[0-4]\d|25[0-4]))|)"
       R"((?:(?:[a-z0-9]+-)*[a-z0-9]+)(?:\.(?:[a-z0-9]+-)*[a-z0-9]+)*(?:\.(?:[a-z]{2,})))(?::\d{2,5})?(?:\/[^\s]*)?$)",
       true},
      {"json-pointer", R"(^(?:\/(?:[^~/]|~0|~1)*)*$)", false},
      {"json-pointer-uri-fragment", R"(^#(?:\/(?:[a-z0-9_\-.!$&'()*+,;:=@]|%[0-9a-f]{2}|~0|~1)*)*$)", true},
      {"relative-json-pointer", R"(^(?:0|[1-9][0-9]*)(?:#|(?:\/(?:[^~/]|~0|~1)*)*)$)", false},
      {"byte", R"(^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$)", false},
      {"email",
       R"(^[a-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[a-z0-9!#$%&'*+/=?^_`{|}~-]+)*@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+)"
       R"([a-z0-9](?:[a-z0-9-]*[a-z0-9])?$)",
       true},
  };
  return patterns;
}

// Every generated string of the formats ajv-formats defines by a pattern matches that pattern
// (idn-email / iri-reference share email's / uri-reference's automaton); regex's strings compile
// as ECMAScript and carry no "\Z" (ajv-formats' two checks); iso-time's pass ajv's time check with
// the zone optional.
TEST(Formats, GeneratedStringsPassAjvFormatsPatterns) {
  std::mt19937 rng(23);
  for (const AjvPattern& p : ajv_patterns()) {
    const std::regex ajv(p.pattern, p.ignore_case ? std::regex::ECMAScript | std::regex::icase : std::regex::ECMAScript);
    for (const std::string& name : {p.name, p.name == "email" ? std::string("idn-email") : p.name == "uri-reference"
                                                                                                ? std::string("iri-reference")
                                                                                                : p.name}) {
      for (int i = 0; i < 1500; ++i) {
        const std::string s = random_member(format(name), rng);
        ASSERT_TRUE(std::regex_search(s, ajv)) << name << " generated \"" << s << "\", which ajv-formats refuses";
      }
    }
  }
  static const std::regex kZAnchor(R"([^\\]\\Z)");
  for (int i = 0; i < 3000; ++i) {
    const std::string s = random_member(format("regex"), rng);
    ASSERT_FALSE(std::regex_search(s, kZAnchor)) << s;
    try {
      std::regex compiled(s, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      FAIL() << "regex generated \"" << s << "\", which does not compile: " << e.what();
    }
  }
  for (int i = 0; i < 2000; ++i) {
    const std::string s = random_member(format("iso-time"), rng);
    ASSERT_TRUE(ajv_time(s, 3) || ajv_time(s + "Z", 3)) << s;
  }
}

// Through the compiler and the matcher: random walks of {"type": "string", "format": F} end in
// JSON strings in F's language, never in a dead end, for every string format.
TEST(Formats, MatcherWalksEndInTheFormat) {
  std::mt19937 rng(29);
  for (std::string_view name : format_names()) {
    if (format_use(name) != FormatUse::kString) continue;
    const OrderedJson schema = {{"type", "string"}, {"format", std::string(name)}};
    Result<Grammar> g = compile_json_schema(schema);
    ASSERT_TRUE(g.ok()) << name << ": " << g.message();
    int ended = 0;
    for (int i = 0; i < 40; ++i) {
      bool dead_end = false;
      const std::string text = test::random_walk(*g, rng, &dead_end);
      ASSERT_FALSE(dead_end) << name << " after " << text;
      if (text.empty()) continue;
      const nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
      ASSERT_TRUE(v.is_string()) << name << ": " << text;
      EXPECT_TRUE(matches_utf8(format(std::string(name)), v.get<std::string>())) << name << ": " << text;
      ++ended;
    }
    EXPECT_GT(ended, 10) << name;
  }
}

TEST(Formats, UnknownFormatIsAnErrorNamingIt) {
  Result<const Regex*> re = format_regex("credit-card");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.message().find("format \"credit-card\" is not supported"), std::string::npos) << re.message();
  EXPECT_NE(re.message().find("date-time"), std::string::npos) << re.message();
  EXPECT_EQ(format_max_length("hostname"), 253);
  EXPECT_EQ(format_max_length("date"), -1);
  EXPECT_EQ(format_names().size(), 30u);
  EXPECT_EQ(format_use("credit-card"), FormatUse::kUnknown);
  EXPECT_EQ(format_use("uri-reference"), FormatUse::kString);
  EXPECT_EQ(format_use("password"), FormatUse::kAnyString);
  EXPECT_EQ(format_use("int32"), FormatUse::kNumber);
  EXPECT_EQ(format_integer_bits("int32"), 32);
  EXPECT_EQ(format_integer_bits("int64"), 64);
  EXPECT_EQ(format_integer_bits("double"), 0);
  Result<const Regex*> none = format_regex("binary");
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_EQ(*none, nullptr);
}

TEST(Formats, CompiledOnceForConcurrentCallers) {
  std::vector<const Regex*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&seen, t] { seen[t] = *format_regex("ipv6"); });
  }
  for (std::thread& t : threads) t.join();
  for (const Regex* re : seen) EXPECT_EQ(re, seen[0]);
  for (std::string_view name : format_names()) {
    Result<const Regex*> re = format_regex(name);
    ASSERT_TRUE(re.ok()) << name << ": " << re.message();
    if (*re == nullptr) continue;  // constrains no string
    EXPECT_LE((*re)->n_states(), 200) << name;  // small tables: cheap to step, cheap to mask
  }
}

// JSON Schema Test Suite: draft7/optional/format/<name>.json and draft4/6's optional/format.json
// (draft3's "time" is another format). Every invalid string is refused; every valid one is
// taken but for the documented exclusions (formats.cc): IDN A-labels, non-ASCII IRIs and IDNs
// (their ASCII subsets are generated).
bool non_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return true;
  return false;
}
TEST(Formats, JsonSchemaTestSuite) {
  const std::string root = "/usr/share/json-schema-test-suite/tests/";
  const std::set<std::string> excluded = {"xn--4gbwdl.xn--wgbh1c"};
  if (!std::ifstream(root + "draft7/optional/format/date.json"))
    GTEST_SKIP() << root << " not installed (scripts/setup.sh installs json-schema-test-suite)";
  std::vector<std::string> files = {root + "draft4/optional/format.json", root + "draft6/optional/format.json"};
  for (std::string_view name : format_names())
    files.push_back(root + "draft7/optional/format/" + std::string(name) + ".json");
  int checked = 0;
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) continue;  // draft7 has no duration nor uuid
    for (const auto& group : nlohmann::json::parse(in)) {
      const std::string name = group["schema"].value("format", "");
      if (format_use(name) != FormatUse::kString) continue;  // a format outside ours, or no string one
      const Regex& re = format(name);
      for (const auto& test : group["tests"]) {
        if (!test["data"].is_string()) continue;
        const std::string data = test["data"].get<std::string>();
        const bool valid = test["valid"].get<bool>();
        const bool ascii_only = name.rfind("iri", 0) == 0 || name.rfind("idn-", 0) == 0;
        if (valid && (excluded.count(data) || (ascii_only && non_ascii(data)))) {
          EXPECT_FALSE(matches_utf8(re, data)) << name << " " << data << " is listed as excluded";
          continue;
        }
        EXPECT_EQ(matches_utf8(re, data), valid)
            << file << " " << name << ": " << test["description"] << " \"" << data << "\"";
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

}  // namespace formats_test
}  // namespace dsv4::grammar
