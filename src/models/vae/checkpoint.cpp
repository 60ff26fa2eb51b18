#include "models/vae/checkpoint.hpp"

#include "models/vae/single_file.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <filesystem>

namespace cpdit::models::vae::detail {

VaeCheckpoint read_vae_checkpoint(const std::string& path, const std::string& config_path,
                                  const std::vector<std::string>& classes, const std::vector<std::string>& keep) {
  namespace fs = std::filesystem;
  std::string config_file = config_path;
  if (config_file.empty() && fs::is_directory(path)) {
    CPDIT_CHECK(fs::exists(fs::path(path) / "config.json"), invalid_argument, "VAE ", path,
                ": a VAE folder needs its config.json (or give --vae-config)");
    config_file = (fs::path(path) / "config.json").string();
  }
  // A single file's tensors may be in the original release's names; diffusers' from here on.
  const nn::StateDict state = vae_in_diffusers_names(nn::read_state_dict(io::Checkpoint::open(path)));
  VaeCheckpoint out;
  std::string told_by = config_file;
  if (!config_file.empty()) {
    out.config = io::read_json(config_file);
  } else {
    const std::optional<std::string> found = single_file_vae_class(io::Checkpoint::open(path));
    CPDIT_CHECK(found, invalid_argument, "VAE ", path, ": the tensors are no VAE layout known here (FLUX.1's ",
                "ae.safetensors, Wan 2.1's VAE, or either in diffusers' names); give its config.json (--vae-config)");
    out.config = vae_config_from_shapes(*found, state, path);
    told_by = path + " (its tensor names)";
  }
  const std::string name = out.config.is_object() && out.config.contains("_class_name") &&
                                   out.config["_class_name"].is_string()
                               ? out.config["_class_name"].get<std::string>()
                               : "";
  bool known = false;
  std::string expected;
  for (const auto& c : classes) {
    known = known || c == name;
    expected += (expected.empty() ? "" : " or ") + c;
  }
  CPDIT_CHECK(known, invalid_argument, told_by, ": _class_name '", name, "' is not ", expected);
  for (const auto& [key, tensor] : state)
    for (const auto& prefix : keep)
      if (key.rfind(prefix, 0) == 0) {
        out.state.emplace(key, tensor);
        break;
      }
  return out;
}

parallel::ContextParallelPlan decoder_rows_plan(const char* input, int dims) {
  parallel::ModulePlan decoder;
  decoder.inputs[input] = {/*split_dim=*/dims - 2, /*expected_dims=*/dims};
  decoder.gathers[0] = {/*gather_dim=*/dims - 2, /*expected_dims=*/dims};
  return {{"decoder", decoder}};
}

Tensor latents_input(const nn::TensorMap& inputs, const char* model) {
  const auto it = inputs.find("latents");
  CPDIT_CHECK(it != inputs.end(), invalid_argument, model, " decodes an input named `latents`, which the inputs lack");
  return it->second;
}

nn::TensorMap autoencoder_forward(const nn::TensorMap& inputs, const char* model,
                                  const std::function<Tensor(const Tensor&)>& decode,
                                  const std::function<Tensor(const Tensor&)>& encode) {
  const bool decodes = inputs.count("latents") > 0, encodes = inputs.count("sample") > 0;
  CPDIT_CHECK(decodes != encodes, invalid_argument, model, " decodes an input `latents` or encodes an input `sample`; ",
              "the inputs hold ", decodes ? "both" : "neither");
  if (decodes) return {{"sample", decode(inputs.at("latents"))}};
  return {{"latent", encode(inputs.at("sample"))}};
}

}  // namespace cpdit::models::vae::detail
