#pragma once
// The models cpdit can run, keyed by the class name a checkpoint gives itself: `_class_name` in a
// diffusers config.json, `architectures[0]` in a transformers one, else the registered class that
// recognises its tensor names. Every model kind (transformer, text encoder, VAE) is opened the same
// way: the entry reads the weights once and hands back a LoadedModel that makes per-rank replicas
// sharing them. Commands and pipelines never name a model family to open one.
#include <cpdit/io/model_files.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/nn/model.hpp>

#include <nlohmann/json.hpp>

#include <any>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::nn {
struct KeyLayout;
}

namespace cpdit::models {

// One loaded copy of a model's weights, and what pipelines need to know about it.
struct LoadedModel {
  std::string class_name;  // e.g. "WanTransformer3DModel"
  int64_t heads = 0;       // attention heads, for choosing a Ulysses degree
  // The family's config struct (e.g. flux::FluxConfig); a pipeline any_casts it to the type of the
  // class it runs.
  std::any config;
  // A model bound to the loaded weights (shared, not copied): one per rank.
  std::function<std::unique_ptr<nn::Model>()> replica;
  // The original release's names of its tensors, where they differ from diffusers' (FLUX.1, Wan), for
  // the files that use them (LoRA adapters); null where none are known.
  const nn::KeyLayout* original_names = nullptr;
};

struct ModelEntry {
  using Recognises = std::function<bool(const io::Checkpoint&)>;
  using Open = std::function<LoadedModel(const std::string& weights, const std::optional<std::string>& config,
                                         const nn::LoadOptions& load)>;
  using ReadConfig =
      std::function<nlohmann::json(const std::string& weights, const std::optional<std::string>& config)>;

  ModelEntry(std::string class_name, Recognises recognises, Open open, ReadConfig read_config = {})
      : class_name(std::move(class_name)),
        recognises(std::move(recognises)),
        open(std::move(open)),
        read_config(std::move(read_config)) {}

  std::string class_name;
  // By tensor names, for a checkpoint without a config that names its class.
  Recognises recognises;
  // weights: a .safetensors file or index json; config: its config.json, when there is one.
  Open open;
  // The config `open` builds the model with, as the config.json keys it reads, from the same weights
  // and config but without building the model (for `inspect`); empty where a class does not tell it.
  ReadConfig read_config;
};

// The registered classes, comma-separated, for error messages.
std::string known_classes();

// The entry of `class_name`; a class nobody registered is refused naming the known ones.
const ModelEntry& model_entry(const std::string& class_name);

// A class name and where it was read.
struct ModelClass {
  std::string name;
  std::string told_by;  // e.g. "config.json _class_name", "tensor names"
};

// The class the model's config.json declares, registered or not; else the registered class that
// recognises the tensors; nullopt when neither tells.
std::optional<ModelClass> checkpoint_class(const io::ModelFiles& files);

// The config the model of `files` is opened with (its class's read_config), as config.json keys;
// nullopt when no registered class with a read_config is told. Throws as opening it would (e.g. a
// config that the tensors cannot size and no config.json gives).
std::optional<nlohmann::json> checkpoint_config(const io::ModelFiles& files);

// Opens the model at `path` (any layout io::resolve_model knows; `component` of a diffusers pipeline
// folder) with the entry of its class; `config` overrides its config.json. A class that is unknown,
// or that nothing tells, is a one-line error naming the known classes.
LoadedModel open_model(const std::string& path, const std::optional<std::string>& config,
                       const nn::LoadOptions& load, const std::string& component = "transformer");

// The class open_model would open `path` as, refused as it would be, without reading the weights.
std::string model_class(const std::string& path, const std::optional<std::string>& config,
                        const std::string& component = "transformer");

// How many models open_model has opened in this process: how a caller (or a test) tells that a
// resident pipeline opened its files once.
int64_t models_opened();

// A LoadedModel over a family's checkpoint (a struct with `config` and `state`) and its loader
// (checkpoint, options) -> unique_ptr<model>: the weights are converted to `options`' dtypes once,
// here, and every replica shares them.
// The attention heads a family's config declares (diffusers' and CLIP's name); a family whose config
// names them otherwise (T5: num_heads) overloads this beside its config.
template <class Config>
int64_t attention_heads(const Config& config) {
  return config.num_attention_heads;
}

template <class Checkpoint, class Load>
LoadedModel share_weights(std::string class_name, Checkpoint checkpoint, Load load, const nn::LoadOptions& options) {
  auto shared = std::make_shared<Checkpoint>(std::move(checkpoint));
  shared->state = nn::parameters_of(*load(*shared, options));
  LoadedModel model;
  model.class_name = std::move(class_name);
  model.heads = attention_heads(shared->config);
  model.config = shared->config;
  model.replica = [shared, load, options]() -> std::unique_ptr<nn::Model> { return load(*shared, options); };
  return model;
}

}  // namespace cpdit::models
