// DSV4_CHECK: invariant checks that stay on in release builds. A failure is a
// bug in dsv4, not bad input: it prints file:line and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace dsv4::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond,
                                      const std::string& msg) {
  std::fprintf(stderr, "%s:%d: DSV4_CHECK(%s) failed%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}
inline std::string check_message() { return {}; }
template <class... Args>
std::string check_message(fmt::format_string<Args...> f, Args&&... args) {
  return fmt::format(f, std::forward<Args>(args)...);
}
}  // namespace dsv4::detail

#define DSV4_CHECK(cond, ...)                                                      \
  do {                                                                             \
    if (__builtin_expect(!(cond), 0))                                              \
      ::dsv4::detail::check_failed(__FILE__, __LINE__, #cond,                      \
                                   ::dsv4::detail::check_message(__VA_ARGS__));   \
  } while (0)
