// Status and Result<T>: how input and environment problems travel up to the user.
// Messages name the file, key, tensor or field and the expected and found values; broken internal
// invariants use REWIND_CHECK (check.h) instead. No exceptions cross a module boundary.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>

namespace rwd {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status status;
    status.message_ = std::move(message);
    status.failed_ = true;
    return status;
  }
  template <typename... Args>
  static Status errorf(fmt::format_string<Args...> format, Args&&... args) {
    return error(fmt::format(format, std::forward<Args>(args)...));
  }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return message_; }

  // Adds context in front of the message, e.g. the file being read.
  Status with_context(const std::string& context) const {
    if (!failed_) return *this;
    return error(context + ": " + message_);
  }

 private:
  std::string message_;
  bool failed_ = false;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): returned by value
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace rwd

// Returns the Status of `expr` from the enclosing function when it failed.
#define REWIND_RETURN_IF_ERROR(expr)                \
  do {                                              \
    ::rwd::Status rewind_status_ = (expr);       \
    if (!rewind_status_.is_ok()) return rewind_status_; \
  } while (0)

#define REWIND_CONCAT_INNER(a, b) a##b
#define REWIND_CONCAT(a, b) REWIND_CONCAT_INNER(a, b)

// `REWIND_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its Status.
#define REWIND_ASSIGN_OR_RETURN(lhs, expr) \
  REWIND_ASSIGN_OR_RETURN_IMPL(REWIND_CONCAT(rewind_result_, __LINE__), lhs, expr)
#define REWIND_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.is_ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
