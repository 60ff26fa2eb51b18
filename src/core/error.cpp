#include <cpdit/core/error.hpp>

namespace cpdit {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid argument";
    case ErrorKind::io: return "i/o";
    case ErrorKind::format: return "format";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::comm: return "communication";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::interrupted: return "interrupted";
    case ErrorKind::internal: return "internal";
  }
  return "unknown";
}

}  // namespace cpdit
