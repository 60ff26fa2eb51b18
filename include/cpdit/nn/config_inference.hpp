#pragma once
// What every model's config reader shares: fields from a diffusers config.json, and facts inferred
// from a state dict's tensor names and shapes.
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace cpdit::nn {

// Sets `field` from j[key] when the key is present and not null (diffusers writes null for
// "default"); a value of the wrong type throws nlohmann's type_error for the caller to name.
template <class T>
void read_config_field(const nlohmann::json& j, const char* key, T& field) {
  if (j.contains(key) && !j[key].is_null()) field = j[key].get<T>();
}

// The shape of state[name]; a missing tensor is an error saying the checkpoint is not a `model`.
const Shape& weight_shape(const StateDict& state, const std::string& name, const std::string& model);

// 1 + the largest i among "<prefix>.i.*" keys; 0 when there are none.
int64_t count_blocks(const StateDict& state, const std::string& prefix);

}  // namespace cpdit::nn
