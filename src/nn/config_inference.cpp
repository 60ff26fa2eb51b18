#include <cpdit/core/error.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <algorithm>

namespace cpdit::nn {

const Shape& weight_shape(const StateDict& state, const std::string& name, const std::string& model) {
  auto it = state.find(name);
  CPDIT_CHECK(it != state.end(), invalid_argument, "cannot infer the config: the weights have no '", name,
              "' (is this a ", model, " checkpoint?)");
  return it->second.shape();
}

int64_t count_blocks(const StateDict& state, const std::string& prefix) {
  const std::string head = prefix + ".";
  int64_t count = 0;
  for (const auto& [name, tensor] : state) {
    if (name.rfind(head, 0) != 0) continue;
    const size_t end = name.find('.', head.size());
    count = std::max<int64_t>(count, std::stoll(name.substr(head.size(), end - head.size())) + 1);
  }
  return count;
}

}  // namespace cpdit::nn
