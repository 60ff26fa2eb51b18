#include "request_fields.hpp"

#include <cpdit/core/error.hpp>

#include <cmath>
#include <limits>

namespace cpdit::app {
namespace {

template <class T>
T whole_field(const nlohmann::json& value, const std::string& where, const std::string& field, double least) {
  CPDIT_CHECK(value.is_number_integer() && value.get<double>() >= least &&
                  value.get<double>() <= double(std::numeric_limits<T>::max()),
              invalid_argument, where, ": ", field, " must be a whole number >= ", least, ", got ", value.dump());
  return value.get<T>();
}

float finite_field(const nlohmann::json& value, const std::string& where, const std::string& field) {
  CPDIT_CHECK(value.is_number() && std::isfinite(value.get<double>()), invalid_argument, where, ": ", field,
              " must be a finite number, got ", value.dump());
  return value.get<float>();
}

std::string text_field(const nlohmann::json& value, const std::string& where, const std::string& field) {
  CPDIT_CHECK(value.is_string(), invalid_argument, where, ": ", field, " must be a string, got ", value.dump());
  return value.get<std::string>();
}

}  // namespace

bool apply_request_field(const std::string& key, const nlohmann::json& value, const std::string& where,
                         pipeline::Request& r) {
  if (key == "prompt") r.prompt = text_field(value, where, key);
  else if (key == "negative_prompt") r.negative_prompt = text_field(value, where, key);
  else if (key == "seed") r.seed = whole_field<uint64_t>(value, where, key, 0);
  else if (key == "steps") r.steps = whole_field<int>(value, where, key, 1);
  else if (key == "width") r.width = whole_field<int64_t>(value, where, key, 1);
  else if (key == "height") r.height = whole_field<int64_t>(value, where, key, 1);
  else if (key == "frames") r.frames = whole_field<int64_t>(value, where, key, 1);
  else if (key == "text_tokens") r.text_tokens = whole_field<int64_t>(value, where, key, 1);
  else if (key == "guidance") r.guidance = finite_field(value, where, key);
  else if (key == "guidance_2") r.guidance_2 = finite_field(value, where, key);
  else if (key == "true_cfg_scale") r.true_cfg_scale = finite_field(value, where, key);
  else if (key == "cfg_scale") r.cfg_scale = finite_field(value, where, key);
  else if (key == "flow_shift") r.scheduler.flow_shift = finite_field(value, where, key);
  else if (key == "scheduler") pipeline::check_scheduler_name(r.scheduler.name = text_field(value, where, key));
  else if (key == "cache") r.cache = nn::parse_step_cache(text_field(value, where, key));
  else return false;
  return true;
}

const std::string& request_field_names() {
  static const std::string names =
      "prompt, negative_prompt, seed, steps, width, height, frames, text_tokens, guidance, guidance_2, "
      "true_cfg_scale, cfg_scale, flow_shift, scheduler, cache";
  return names;
}

}  // namespace cpdit::app
