//===- Status.h - Errors that record where they were raised ---------------===//
//
// Every runtime call that can fail returns a Status. An error carries a
// message in the user's words (which plan file, buffer, instruction) plus the
// runtime source file and line that raised it, for bug reports.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <utility>

namespace cleave::runtime {

class Status {
public:
  Status() = default;
  static Status error(std::string message, const char *file, int line) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    s.file_ = file;
    s.line_ = line;
    return s;
  }

  bool ok() const { return !failed_; }
  const std::string &message() const { return message_; }
  /// "runtime/Plan.cpp:123", where the error was raised.
  std::string origin() const {
    return failed_ ? std::string(file_) + ":" + std::to_string(line_) : "";
  }
  /// Prefixes the message with context, e.g. the file being loaded.
  Status &prepend(const std::string &context) {
    if (failed_)
      message_ = context + ": " + message_;
    return *this;
  }

private:
  bool failed_ = false;
  std::string message_;
  const char *file_ = "";
  int line_ = 0;
};

namespace detail {
template <typename... Args> std::string concat(Args &&...args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
} // namespace detail

/// Runs `body`, turning an exception that escapes it (a bug, or memory
/// exhausted) into an error naming `where`: the runtime's entry points return
/// statuses, never throw.
template <typename Body> Status catchExceptions(const std::string &where, Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return Status::error(where + ": out of memory", __FILE__, __LINE__);
  } catch (const std::exception &e) {
    return Status::error(where + ": internal error: " + e.what(), __FILE__, __LINE__);
  } catch (...) {
    return Status::error(where + ": internal error: unknown exception", __FILE__, __LINE__);
  }
}

} // namespace cleave::runtime

/// Builds an error Status from the streamed arguments: CLEAVE_ERROR("buffer ", id, " is missing").
#define CLEAVE_ERROR(...)                                                      \
  ::cleave::runtime::Status::error(                                            \
      ::cleave::runtime::detail::concat(__VA_ARGS__), __FILE__, __LINE__)

#define CLEAVE_RETURN_IF_ERROR(expr)                                           \
  do {                                                                         \
    ::cleave::runtime::Status cleaveStatus_ = (expr);                          \
    if (!cleaveStatus_.ok())                                                   \
      return cleaveStatus_;                                                    \
  } while (0)
