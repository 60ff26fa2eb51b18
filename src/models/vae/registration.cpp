// The VAEs in the model registry: AutoencoderKL, AutoencoderKLWan with AutoencoderKLQwenImage
// (the same architecture), and AutoencoderKLLTXVideo. A VAE is told by its config.json, or a single
// file of FLUX.1's or Wan 2.1's by its tensor names (single_file.hpp: then AutoencoderKL or
// AutoencoderKLWan, its config read from the shapes). Its forward decodes `latents` into `sample`; AutoencoderKL's and
// AutoencoderKLWan's also encode `sample` into `latent`.
#include "models/entries.hpp"
#include "models/vae/checkpoint.hpp"
#include "models/vae/single_file.hpp"

#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/models/vae/share.hpp>

namespace cpdit::models::vae {
namespace {

// The first model's parameters are shared by every replica.
template <class Vae>
LoadedModel share_vae_model(std::string class_name, std::unique_ptr<Vae> first) {
  auto state = std::make_shared<nn::StateDict>(nn::parameters_of(*first));
  LoadedModel model;
  model.class_name = std::move(class_name);
  model.heads = 1;  // the mid-block attention: one head, so a parallel decode runs on the ring
  model.config = first->config();
  model.replica = [state, config = first->config()]() -> std::unique_ptr<nn::Model> {
    auto m = std::make_unique<Vae>(config);
    nn::load_state_dict(*m, *state);
    return m;
  };
  return model;
}

}  // namespace

LoadedModel share_vae(std::unique_ptr<AutoencoderKL> vae) { return share_vae_model("AutoencoderKL", std::move(vae)); }
LoadedModel share_vae(std::unique_ptr<AutoencoderKLWan> vae, std::string class_name) {
  return share_vae_model(std::move(class_name), std::move(vae));
}
LoadedModel share_vae(std::unique_ptr<AutoencoderKLLTXVideo> vae) {
  return share_vae_model("AutoencoderKLLTXVideo", std::move(vae));
}

namespace {

// load(path, config_path) -> the first model. `single_file`: the class a single file of these tensor
// names is opened as.
template <class Load>
ModelEntry entry(const std::string& class_name, Load load, bool single_file = false) {
  return {
      class_name,
      [class_name, single_file](const io::Checkpoint& checkpoint) {
        return single_file && detail::single_file_vae_class(checkpoint) == class_name;
      },
      [class_name, load](const std::string& path, const std::optional<std::string>& config, const nn::LoadOptions&) {
        return share_vae_model(class_name, load(path, config.value_or("")));
      },
      [class_name](const std::string& path, const std::optional<std::string>& config) {
        return detail::read_vae_checkpoint(path, config.value_or(""), {class_name}, {}).config;
      }};
}

}  // namespace

ModelEntry autoencoder_kl_registry_entry() { return entry("AutoencoderKL", load_autoencoder_kl, true); }
ModelEntry autoencoder_kl_wan_registry_entry() { return entry("AutoencoderKLWan", load_autoencoder_kl_wan, true); }
ModelEntry autoencoder_kl_qwenimage_registry_entry() {
  return entry("AutoencoderKLQwenImage", load_autoencoder_kl_wan);
}
ModelEntry autoencoder_kl_ltx_registry_entry() { return entry("AutoencoderKLLTXVideo", load_autoencoder_kl_ltx); }

}  // namespace cpdit::models::vae
