#pragma once

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include <glog/logging.h>

namespace ember {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kIOError,
  kOutOfRange,
  kFailedPrecondition,
  kResourceExhausted,
  kDataLoss,
  kCancelled,
  kUnimplemented,
  kInternal,
  // A wait ran out of time: a peer did not answer within a timeout.
  kDeadlineExceeded,
  // A peer or service is gone: a rank left or aborted its communicator.
  kUnavailable,
};

// Returns a short name such as "InvalidArgument".
const char* StatusCodeName(StatusCode code);

namespace internal {
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace internal

// The outcome of an operation that can fail because of the world: a user's
// input, a file, a flag value, the disk, a device. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }

#define EMBER_STATUS_FACTORY(Name)                                 \
  template <typename... Args>                                      \
  static Status Name(const Args&... args) {                        \
    return Status(StatusCode::k##Name, internal::StrCat(args...)); \
  }
  EMBER_STATUS_FACTORY(InvalidArgument)
  EMBER_STATUS_FACTORY(NotFound)
  EMBER_STATUS_FACTORY(AlreadyExists)
  EMBER_STATUS_FACTORY(IOError)
  EMBER_STATUS_FACTORY(OutOfRange)
  EMBER_STATUS_FACTORY(FailedPrecondition)
  EMBER_STATUS_FACTORY(ResourceExhausted)
  EMBER_STATUS_FACTORY(DataLoss)
  EMBER_STATUS_FACTORY(Cancelled)
  EMBER_STATUS_FACTORY(Unimplemented)
  EMBER_STATUS_FACTORY(Internal)
  EMBER_STATUS_FACTORY(DeadlineExceeded)
  EMBER_STATUS_FACTORY(Unavailable)
#undef EMBER_STATUS_FACTORY

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is `context` + ": " + message.
  Status WithContext(const std::string& context) const;

  // Ignores the status on purpose; for best-effort cleanup paths.
  void IgnoreError() const {}

  bool operator==(const Status& other) const {
    return code_ == other.code_ && message_ == other.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

std::ostream& operator<<(std::ostream& out, const Status& status);

// Either a value of type T or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(const T& value) : state_(value) {}  // NOLINT: implicit by design
  Result(T&& value) : state_(std::move(value)) {}  // NOLINT
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    CHECK(!std::get<Status>(state_).ok())
        << "Result<T> must not be built from an ok Status";
  }
  template <typename U,
            typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                        !std::is_same_v<std::decay_t<U>, T> &&
                                        !std::is_same_v<std::decay_t<U>, Status>>>
  Result(U&& value) : state_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return std::holds_alternative<T>(state_); }
  Status status() const {
    return ok() ? Status::OK() : std::get<Status>(state_);
  }

  // REQUIRES: ok().
  T& value() & {
    CHECK(ok()) << "Result::value() on error: " << status();
    return std::get<T>(state_);
  }
  const T& value() const& {
    CHECK(ok()) << "Result::value() on error: " << status();
    return std::get<T>(state_);
  }
  T&& value() && {
    CHECK(ok()) << "Result::value() on error: " << status();
    return std::get<T>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> state_;
};

}  // namespace ember

#define EMBER_CONCAT_INNER(a, b) a##b
#define EMBER_CONCAT(a, b) EMBER_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` (a Status) is not ok.
#define EMBER_RETURN_IF_ERROR(expr)                   \
  do {                                                \
    ::ember::Status ember_status_ = (expr);           \
    if (!ember_status_.ok()) return ember_status_;    \
  } while (0)

// `lhs = value of rexpr` (a Result<T>), or returns its Status if not ok.
// `lhs` may declare a variable: EMBER_ASSIGN_OR_RETURN(auto x, F());
#define EMBER_ASSIGN_OR_RETURN(lhs, rexpr) \
  EMBER_ASSIGN_OR_RETURN_IMPL(EMBER_CONCAT(ember_result_, __LINE__), lhs, rexpr)
#define EMBER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
