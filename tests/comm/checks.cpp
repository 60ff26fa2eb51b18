#include "checks.hpp"

namespace cpdit::comm::testing {

const std::vector<Check>& contract_checks() {
  static const std::vector<Check> checks = [] {
    std::vector<Check> all;
    add_p2p_checks(all);
    add_collective_checks(all);
    add_group_checks(all);
    add_tensor_checks(all);
    return all;
  }();
  return checks;
}

void expect_error(const std::function<void()>& fn, ErrorKind kind, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    std::string message = e.what();
    if (e.kind() != kind)
      throw std::runtime_error(detail::concat("expected a ", error_kind_name(kind), " error, got ",
                                              error_kind_name(e.kind()), ": ", message));
    for (const auto& part : parts)
      if (message.find(part) == std::string::npos)
        throw std::runtime_error(detail::concat("error message lacks '", part, "': ", message));
    return;
  }
  throw std::runtime_error(detail::concat("expected a ", error_kind_name(kind), " error, got none"));
}

}  // namespace cpdit::comm::testing
