#pragma once
// What every model's config reader shares: fields from a diffusers config.json, and facts inferred
// from a state dict's tensor names and shapes.
#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::nn {

// Sets `field` from j[key] when the key is present and not null (diffusers writes null for
// "default"); a value of the wrong type throws nlohmann's type_error for the caller to name. An
// integer field takes only a whole number it can hold: nlohmann alone truncates 1.5 to 1 and turns
// 1e30 into a negative number.
template <class T>
void read_config_field(const nlohmann::json& j, const char* key, T& field) {
  if (!j.contains(key) || j[key].is_null()) return;
  const nlohmann::json& value = j[key];
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) if (value.is_number()) {
    const bool whole = value.is_number_integer() ||
                       (value.is_number_float() && std::trunc(value.get<double>()) == value.get<double>());
    CPDIT_CHECK(whole, invalid_argument, key, " must be a whole number, got ", value.dump());
    constexpr T lowest = std::numeric_limits<T>::min(), highest = std::numeric_limits<T>::max();
    // A double above 2^53 is no longer exact, and no model size comes near it.
    const bool fits = value.is_number_unsigned() ? value.get<uint64_t>() <= uint64_t(highest)
                      : value.is_number_integer()
                          ? value.get<int64_t>() >= int64_t(lowest)
                          : value.get<double>() >= double(lowest) &&
                                value.get<double>() <= std::min(double(highest), 9007199254740992.0);
    CPDIT_CHECK(fits, invalid_argument, key, " is out of range, got ", value.dump());
  }
  field = value.get<T>();
}

// Sets j[key] to `value`; a float as the shortest decimal that reads back as it (1e-06, not the
// 9.999999974752427e-07 its widening to double would print).
template <class T>
void write_config_field(nlohmann::json& j, const char* key, const T& value) {
  if constexpr (std::is_same_v<T, float>) {
    char text[32];
    const auto end = std::to_chars(text, text + sizeof text, value).ptr;
    j[key] = std::strtod(std::string(text, end).c_str(), nullptr);
  } else {
    j[key] = value;
  }
}

// One field of a config and the slot it fills: {"num_layers", config.num_layers}.
struct ConfigField {
  template <class T>
  ConfigField(const char* key, T& slot)
      : read([key, &slot](const nlohmann::json& j) { read_config_field(j, key, slot); }),
        write([key, &slot](nlohmann::json& j) { write_config_field(j, key, slot); }) {}
  std::function<void(const nlohmann::json&)> read;
  std::function<void(nlohmann::json&)> write;
};

// A config (a struct whose fields() lists every field it reads) as those config.json keys, e.g. for
// `inspect` to show the config a checkpoint is opened with.
template <class Config>
nlohmann::json config_json(Config config) {
  nlohmann::json j = nlohmann::json::object();
  for (const ConfigField& field : config.fields()) field.write(j);
  return j;
}

// Fills every field present in `j` (an object); anything else — not an object, a field of the wrong
// type — is one Error(invalid_argument) naming the `model` config.
void read_config_fields(const nlohmann::json& j, const std::string& model, const std::vector<ConfigField>& fields);

// Each value must be positive, else an Error(invalid_argument) "<model> config: <name> must be positive".
void require_positive(const std::string& model, std::initializer_list<std::pair<const char*, int64_t>> values);

// The shapes of a state dict's tensors by name, for inferring a config; a missing tensor is an error
// saying the checkpoint is not a `model` one.
class WeightShapes {
 public:
  WeightShapes(const StateDict& state, std::string model) : state_(state), model_(std::move(model)) {}
  const Shape& operator()(const std::string& name) const;

 private:
  const StateDict& state_;
  std::string model_;
};

// A config file asking for more blocks than the checkpoint holds (num_layers: 1e9) would build, and
// allocate, every one of them before the loader names the missing weights: refuse it first.
template <class Config>
void check_layer_counts(const std::string& config_file, const Config& config, const Config& checkpoint) {
  auto check = [&config_file](const char* name, int64_t given, int64_t held) {
    CPDIT_CHECK(given <= held, invalid_argument, config_file, ": ", name, " is ", given,
                " but the checkpoint has weights for ", held);
  };
  if constexpr (requires { config.num_layers; }) check("num_layers", config.num_layers, checkpoint.num_layers);
  if constexpr (requires { config.num_single_layers; })
    check("num_single_layers", config.num_single_layers, checkpoint.num_single_layers);
  if constexpr (requires { config.num_hidden_layers; })
    check("num_hidden_layers", config.num_hidden_layers, checkpoint.num_hidden_layers);
}

// A model's config (a struct with infer, from_json and validate): the fields `config_file` gives over
// what the tensors tell, or the tensors alone when there is no file; validated.
template <class Config>
Config read_config(const StateDict& state, const std::optional<std::string>& config_file) {
  if (!config_file) {
    Config inferred = Config::infer(state);
    inferred.validate();
    return inferred;
  }
  Config base;
  bool inferred = true;
  try {
    base = Config::infer(state);
  } catch (const Error&) {
    inferred = false;
    // The config file names everything; the loader reports how the weights differ from it.
  }
  Config config = Config::from_json(io::read_json(*config_file), base);
  config.validate();
  if (inferred) check_layer_counts(*config_file, config, base);
  return config;
}

// 1 + the largest i among "<prefix>.i.*" keys; 0 when there are none.
int64_t count_blocks(const StateDict& state, const std::string& prefix);

// A transformer's config and state dict read from `path` as io::resolve_model finds its
// `transformer`, the keys put in the model's own layout by `to_layout` when it reads other layouts.
template <class Checkpoint>
Checkpoint read_transformer_checkpoint(const std::string& path, const std::optional<std::string>& config_path,
                                       StateDict (*to_layout)(const StateDict&) = nullptr) {
  const io::ModelFiles files = io::resolve_model(path, "transformer", config_path);
  Checkpoint result;
  result.state = read_state_dict(io::Checkpoint::open(files.weights));
  if (to_layout) result.state = to_layout(result.state);
  result.config = read_config<decltype(result.config)>(result.state, files.config);
  return result;
}

}  // namespace cpdit::nn
