#pragma once
// The transformers the command line can run, found by the checkpoint's config.json `_class_name`
// (diffusers' class name), else by its tensor names. Each model kind registers itself from its own
// file (model_flux.cpp, model_wan.cpp), so commands never name a model.
#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/nn/model.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace cpdit::app {

// One loaded copy of a transformer's weights.
struct LoadedTransformer {
  std::string class_name;
  int64_t heads = 0;  // attention heads, for choosing a Ulysses degree
  // A model bound to the loaded weights (they are shared, not copied): one per rank.
  std::function<std::unique_ptr<nn::Model>()> replica;
};

struct TransformerKind {
  std::string class_name;                                       // e.g. "WanTransformer3DModel"
  std::function<bool(const io::Checkpoint&)> recognises;        // by tensor names, when there is no config
  // path: folder, index json or .safetensors; config: a config.json overriding the folder's.
  std::function<LoadedTransformer(const std::string& path, const std::optional<std::string>& config,
                                  const nn::LoadOptions& load)>
      open;
};

bool register_transformer(TransformerKind kind);

// The kind named by `_class_name` in `config` (else in the folder's config.json), or else the one
// that recognises the tensors. Unknown classes are refused with the list of known ones.
LoadedTransformer open_transformer(const std::string& path, const std::optional<std::string>& config,
                                   const nn::LoadOptions& load);

}  // namespace cpdit::app
