#include "text/split_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"

namespace dsv4 {
namespace {

// Unicode White_Space (Oniguruma's \s), as class contents.
constexpr const char* kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";

}  // namespace

std::string rewrite_whitespace_classes(const std::string& p) {
  std::string out;
  bool in_class = false;
  size_t class_start = 0;  // index in p just after '[' or '[^'
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;  // other escapes (and \S in a class: PCRE2_UCP's \S) pass through
        out += e;
      }
      ++i;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:name:]
        const size_t end = p.find(":]", i + 2);
        if (end != std::string::npos) {
          out.append(p, i, end + 2 - i);
          i = end + 1;
          continue;
        }
      }
      if (c == ']' && i != class_start) in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      class_start = i + 1;
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out += "[^";
        ++i;
        class_start = i + 1;
        continue;
      }
    }
    out += c;
  }
  return out;
}

struct SplitRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

SplitRegex::SplitRegex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SplitRegex::SplitRegex(SplitRegex&&) noexcept = default;
SplitRegex& SplitRegex::operator=(SplitRegex&&) noexcept = default;
SplitRegex::~SplitRegex() = default;

Result<SplitRegex> SplitRegex::compile(const std::string& pattern, bool literal) {
  const std::string source = literal ? pattern : rewrite_whitespace_classes(pattern);
  // Matches must start and end on character boundaries: split() resumes at a
  // match end with PCRE2_NO_UTF_CHECK, so \C is refused at compile time.
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C;
  if (literal) options = PCRE2_UTF | PCRE2_LITERAL;
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                   options, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Status::errorf("regex \"{}\": {} at offset {}", pattern,
                          reinterpret_cast<const char*>(msg), offset);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if unsupported
  auto impl = std::make_unique<Impl>();
  impl->code = code;
  return SplitRegex(std::move(impl));
}

SplitRegex::Scratch::Scratch() : data_(pcre2_match_data_create(1, nullptr)) {
  DSV4_CHECK(data_ != nullptr, "pcre2_match_data_create failed");
}
SplitRegex::Scratch::~Scratch() { pcre2_match_data_free(static_cast<pcre2_match_data*>(data_)); }

void SplitRegex::split(std::string_view text, Span in, std::vector<Span>& out,
                       Scratch& scratch) const {
  auto* md = static_cast<pcre2_match_data*>(scratch.data());
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + in.begin);
  const PCRE2_SIZE n = in.size;
  PCRE2_SIZE pos = 0, gap = 0;
  while (pos < n) {
    // rc 0: a match whose groups did not fit the 1-pair vector; pair 0 is still set.
    const int rc = pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;  // no match (or a match limit): the rest is one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const PCRE2_SIZE b = ov[0], e = ov[1];
    if (e == b) {  // empty match: skip one character
      pos = b + 1;
      while (pos < n && (subject[pos] & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (b > gap) out.push_back({in.begin + static_cast<uint32_t>(gap), static_cast<uint32_t>(b - gap)});
    out.push_back({in.begin + static_cast<uint32_t>(b), static_cast<uint32_t>(e - b)});
    pos = gap = e;
  }
  if (n > gap) out.push_back({in.begin + static_cast<uint32_t>(gap), static_cast<uint32_t>(n - gap)});
}

}  // namespace dsv4
