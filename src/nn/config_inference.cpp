#include <cpdit/core/error.hpp>
#include <cpdit/nn/config_inference.hpp>

#include <algorithm>

namespace cpdit::nn {

void read_config_fields(const nlohmann::json& j, const std::string& model, const std::vector<ConfigField>& fields) {
  CPDIT_CHECK(j.is_object(), invalid_argument, "a ", model, " config must be a JSON object");
  try {
    for (const ConfigField& field : fields) field.read(j);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorKind::invalid_argument, model, " config has a field of the wrong type: ", e.what());
  } catch (const Error& e) {
    fail(ErrorKind::invalid_argument, model, " config: ", e.what());
  }
}

void require_positive(const std::string& model, std::initializer_list<std::pair<const char*, int64_t>> values) {
  for (const auto& [name, value] : values)
    CPDIT_CHECK(value > 0, invalid_argument, model, " config: ", name, " must be positive, got ", value);
}

const Shape& WeightShapes::operator()(const std::string& name) const {
  auto it = state_.find(name);
  CPDIT_CHECK(it != state_.end(), invalid_argument, "cannot infer the config: the weights have no '", name,
              "' (is this a ", model_, " checkpoint?)");
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
