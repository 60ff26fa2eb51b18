#pragma once
// The one exception family of cpdit. Library code throws cpdit::Error; the command line turns it
// into one line on stderr and exit code 2.
#include <sstream>
#include <stdexcept>
#include <string>

namespace cpdit {

enum class ErrorKind {
  invalid_argument,  // a caller passed something impossible (shape, degree, option)
  io,                // the operating system refused (open, mmap, write, rename)
  format,            // a file is malformed (safetensors, JSON)
  unsupported,       // valid, but this backend / mode / dtype cannot serve it
  comm,              // a peer failed or a communication operation failed
  timeout,           // a blocking operation waited longer than allowed
  interrupted,       // the user asked the run to stop (Ctrl-C)
  internal,          // a broken invariant inside cpdit
};

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Throws Error(kind, parts...) when cond is false. The message parts are only formatted on failure.
#define CPDIT_CHECK(cond, kind, ...)                                               \
  do {                                                                             \
    if (!(cond)) throw ::cpdit::Error(::cpdit::ErrorKind::kind, ::cpdit::detail::concat(__VA_ARGS__)); \
  } while (0)

template <class... Parts>
[[noreturn]] void fail(ErrorKind kind, const Parts&... parts) {
  throw Error(kind, detail::concat(parts...));
}

}  // namespace cpdit
