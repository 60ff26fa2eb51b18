#pragma once
// Reading a VAE (a diffusers folder or one file): its config and the tensors the decoder binds.
#include <cpdit/nn/load.hpp>
#include <cpdit/parallel/plan.hpp>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace cpdit::models::vae::detail {

struct VaeCheckpoint {
  nlohmann::json config;
  nn::StateDict state;  // only the tensors whose names start with one of the kept prefixes
};

// path: a folder (config.json + weights), an index json or one .safetensors; config_path (if not
// empty) replaces the folder's config.json. A file without one is read as single_file.hpp says: its
// tensors renamed to diffusers' names, its config from their shapes. The config's _class_name must be
// one of `classes`.
VaeCheckpoint read_vae_checkpoint(const std::string& path, const std::string& config_path,
                                  const std::vector<std::string>& classes, const std::vector<std::string>& keep);

// The VAEs compute in f32 (their kernels take f32): bf16 and f16 checkpoints are widened once at
// load. A VAE's weights are small beside its activations (FLUX.1's: 84 M values).
inline nn::LoadOptions f32_weights() { return {DType::f32}; }

// The row split every decoder's plan is: the decoder's input `input` ((B, C, H, W) or
// (B, C, F, H, W) by `dims`) split by rows, its output gathered by rows (parallel/halo.hpp).
parallel::ContextParallelPlan decoder_rows_plan(const char* input, int dims);

// inputs["latents"], or a one-line error naming `model` when the inputs lack it.
Tensor latents_input(const nn::TensorMap& inputs, const char* model);

// The registry's call of a VAE that also encodes: an input `latents` is decoded into `sample`, an
// input `sample` (pixels in [-1, 1]) encoded into `latent`, the posterior's mean. The inputs hold one
// of the two, else a one-line error naming `model`.
nn::TensorMap autoencoder_forward(const nn::TensorMap& inputs, const char* model,
                                  const std::function<Tensor(const Tensor&)>& decode,
                                  const std::function<Tensor(const Tensor&)>& encode);

}  // namespace cpdit::models::vae::detail

namespace cpdit::models::vae {

// A block's one output as Module::forward returns outputs (every VAE block has one).
inline std::vector<Tensor> one(Tensor t) { return {std::move(t)}; }

}  // namespace cpdit::models::vae
