#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/scheduler_common.hpp>

#include <nlohmann/json.hpp>

namespace cpdit::pipeline {

CPDIT_SEPARATE_ROUNDING std::vector<double> numpy_linspace(double start, double stop, int num) {
  CPDIT_CHECK(num >= 1, invalid_argument, "linspace needs at least one value, got ", num);
  std::vector<double> values(size_t(num), start);
  if (num == 1) return values;
  const double step = (stop - start) / double(num - 1);
  for (int i = 1; i < num; ++i) {
    const double offset = double(i) * step;
    values[size_t(i)] = offset + start;
  }
  values.back() = stop;
  return values;
}

CPDIT_SEPARATE_ROUNDING double shift_line_mu(double base_shift, double max_shift, int64_t base_len,
                                              int64_t max_len, int64_t image_seq_len) {
  const double m = (max_shift - base_shift) / double(max_len - base_len);
  const double m_base = m * double(base_len);
  const double b = base_shift - m_base;
  const double m_seq = double(image_seq_len) * m;
  return m_seq + b;
}

namespace {

// The value at `key`, or null when the key is missing; `accepts` says whether its type fits.
template <class Accepts>
const nlohmann::json* config_value(const nlohmann::json& config, const std::string& key,
                                   const char* expected, Accepts accepts) {
  CPDIT_CHECK(config.is_object(), format, "scheduler config must be a JSON object, got ",
              config.type_name());
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return nullptr;
  CPDIT_CHECK(accepts(*it), format, "scheduler config key \"", key, "\" must be ", expected,
              ", got ", it->dump());
  return &*it;
}

}  // namespace

double config_number(const nlohmann::json& config, const std::string& key, double fallback) {
  auto v = config_value(config, key, "a number", [](auto& j) { return j.is_number(); });
  return v ? v->template get<double>() : fallback;
}

int64_t config_integer(const nlohmann::json& config, const std::string& key, int64_t fallback) {
  auto v = config_value(config, key, "an integer", [](auto& j) { return j.is_number_integer(); });
  return v ? v->template get<int64_t>() : fallback;
}

bool config_flag(const nlohmann::json& config, const std::string& key, bool fallback) {
  auto v = config_value(config, key, "true or false", [](auto& j) { return j.is_boolean(); });
  return v ? v->template get<bool>() : fallback;
}

std::string config_string(const nlohmann::json& config, const std::string& key,
                          const std::string& fallback) {
  auto v = config_value(config, key, "a string", [](auto& j) { return j.is_string(); });
  return v ? v->template get<std::string>() : fallback;
}

void require_scheduler_class(const nlohmann::json& config, const std::string& scheduler) {
  const std::string name = config_string(config, "_class_name", scheduler);
  CPDIT_CHECK(name == scheduler, invalid_argument, "the scheduler config is a ", name, " config, not a ", scheduler,
              " one (give the pipeline's scheduler/scheduler_config.json)");
}

}  // namespace cpdit::pipeline
