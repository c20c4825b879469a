// Expected<T>: a value or a located, lower-case error message. Library code returns these;
// only the CLI turns an error into `error: ...` and a non-zero exit.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace met {

struct Error {
  std::string message;  // "file:line: what is wrong", lower-case, no trailing period
};

// Builds an Error; reads as `return fail("kernels/x.toml:3: unknown key 'y'")`.
inline Error fail(std::string message) { return Error{std::move(message)}; }

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}
  Expected(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Error error) : error_(std::move(error)), ok_(false) {}
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace met

// MET_TRY(var, expr): binds the value of an Expected or returns its error from the caller.
#define MET_TRY_CONCAT_(a, b) a##b
#define MET_TRY_NAME_(line) MET_TRY_CONCAT_(met_try_, line)
#define MET_TRY(var, expr)                                    \
  auto MET_TRY_NAME_(__LINE__) = (expr);                      \
  if (!MET_TRY_NAME_(__LINE__)) return MET_TRY_NAME_(__LINE__).error(); \
  var = std::move(MET_TRY_NAME_(__LINE__)).value()
// MET_CHECK(expr): returns the error of an Expected<void> from the caller.
#define MET_CHECK(expr)                                       \
  do {                                                        \
    auto met_check_result_ = (expr);                          \
    if (!met_check_result_) return met_check_result_.error(); \
  } while (0)
