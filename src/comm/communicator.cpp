#include <cpdit/comm/communicator.hpp>
#include <cpdit/core/error.hpp>

#include <cstdlib>
#include <string>

namespace cpdit::comm {

std::chrono::milliseconds default_timeout() {
  const char* text = std::getenv("CPDIT_COMM_TIMEOUT_S");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  double seconds = std::strtod(text, &end);
  // Deadlines count whole milliseconds: less than one would round to no wait at all. The cap keeps
  // deadlines (now + timeout, in nanoseconds) far from overflowing to the past.
  constexpr double kMinSeconds = 0.001, kMaxSeconds = 1e6;
  CPDIT_CHECK(end != text && *end == '\0' && seconds >= kMinSeconds && seconds <= kMaxSeconds, invalid_argument,
              "CPDIT_COMM_TIMEOUT_S must be a number of seconds from ", kMinSeconds, " to ", kMaxSeconds, ", got '",
              text, "'");
  return std::chrono::milliseconds(int64_t(seconds * 1000.0 + 0.5));
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "max"; }

Request::~Request() = default;
Communicator::~Communicator() = default;

}  // namespace cpdit::comm
