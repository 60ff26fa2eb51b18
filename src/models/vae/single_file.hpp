#pragma once
// A VAE from one .safetensors file with no config.json, as users download them: FLUX.1's ae.safetensors
// in the original (BFL / LDM) names, Wan 2.1's (and Qwen-Image's) VAE in its original names, or either
// in diffusers' names. The tensors are renamed to diffusers' names — the correspondences diffusers'
// single-file conversion uses — and the config is read from their shapes; what shapes do not tell is
// the release's (FLUX.1: 32 norm groups, scaling 0.3611, shift 0.1159; Wan 2.1: the latents' mean and std).
#include <cpdit/nn/load.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace cpdit::io {
class Checkpoint;
}

namespace cpdit::models::vae::detail {

// "AutoencoderKL" or "AutoencoderKLWan" when the tensors are one of the layouts above, else nullopt.
std::optional<std::string> single_file_vae_class(const io::Checkpoint& checkpoint);

// The tensors in diffusers' names (those already in them kept as they are).
nn::StateDict vae_in_diffusers_names(const nn::StateDict& state);

// The diffusers config.json of `class_name` a state in diffusers' names was made with; refused in one
// line naming `source` when the shapes are not of a release whose other values are known.
nlohmann::json vae_config_from_shapes(const std::string& class_name, const nn::StateDict& state,
                                      const std::string& source);

}  // namespace cpdit::models::vae::detail
