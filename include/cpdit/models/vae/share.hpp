#pragma once
// A VAE built in memory (a preset's, with seeded random weights) as the model registry hands models
// out: its parameters are shared by every replica.
#include <cpdit/models/registry.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <memory>
#include <string>

namespace cpdit::models::vae {

LoadedModel share_vae(std::unique_ptr<AutoencoderKL> vae);
LoadedModel share_vae(std::unique_ptr<AutoencoderKLWan> vae, std::string class_name = "AutoencoderKLWan");
LoadedModel share_vae(std::unique_ptr<AutoencoderKLLTXVideo> vae);

}  // namespace cpdit::models::vae
