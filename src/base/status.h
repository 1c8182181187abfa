// Error channel for everything the outside world can get wrong (files, configs,
// HTTP bodies, user limits): a Status or a Result<T> whose message names the
// field, the value and the limit. Broken invariants use DSV4_CHECK instead.
#pragma once

#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace dsv4 {

class Status {
 public:
  Status() = default;
  static Status error(std::string message) { return Status(std::move(message)); }
  template <class... Args>
  static Status errorf(fmt::format_string<Args...> f, Args&&... args) {
    return Status(fmt::format(f, std::forward<Args>(args)...));
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  // Prefixes the message with context ("file x: " + message).
  Status with_context(const std::string& ctx) const {
    return ok() ? *this : Status(ctx + ": " + message_);
  }

 private:
  explicit Status(std::string m) : failed_(true), message_(std::move(m)) {}
  bool failed_ = false;
  std::string message_;
};

template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status error) : v_(std::move(error)) {}  // NOLINT: must be an error
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  const std::string& message() const {
    static const std::string empty;
    return ok() ? empty : std::get<1>(v_).message();
  }

 private:
  std::variant<T, Status> v_;
};

inline Status to_status(const Status& s) { return s; }
template <class T>
Status to_status(const Result<T>& r) { return r.status(); }

}  // namespace dsv4

// Propagates a failed Status (or Result) from the enclosing function.
#define DSV4_RETURN_IF_ERROR(expr)                      \
  do {                                                  \
    ::dsv4::Status _dsv4_st = ::dsv4::to_status(expr);  \
    if (!_dsv4_st.ok()) return _dsv4_st;                \
  } while (0)
