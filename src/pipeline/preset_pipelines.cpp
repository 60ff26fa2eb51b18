#include <cpdit/core/error.hpp>
#include <cpdit/models/text/checkpoint.hpp>
#include <cpdit/models/vae/share.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/pipeline/preset_pipelines.hpp>
#include <cpdit/pipeline/presets.hpp>
#include <cpdit/tokenizers/builtin.hpp>

#include <cmath>

namespace cpdit::pipeline {

namespace {

bool is_flux_preset(const std::string& name) { return name.rfind("flux-", 0) == 0; }
bool is_ltx_preset(const std::string& name) { return name.rfind("ltx-", 0) == 0; }

// One layer of T5 v1.1 (UMT5: its relative bias in every layer) writing `width` features.
models::LoadedModel random_t5(int64_t width, bool umt5, uint64_t seed, const nn::LoadOptions& load) {
  models::text::T5Config config;
  config.vocab_size = tokenizers::kBuiltinSentencePieceVocabSize;
  config.d_model = width;
  config.d_kv = 16;
  config.num_heads = 2;
  config.d_ff = 64;
  config.num_layers = 1;
  config.bias_in_every_layer = umt5;
  config.validate();
  models::text::T5EncoderModel shape_only(config);
  return models::share_weights(umt5 ? "UMT5EncoderModel" : "T5EncoderModel",
                               models::text::T5Checkpoint{config, random_state_dict(shape_only, seed)},
                               models::text::load_t5, load);
}

// One Qwen2.5-VL language-model layer writing `width` features, its heads laid out as the released 7B's
// (grouped-query: 7 query heads per key/value head) where the width allows.
models::LoadedModel random_qwen2(int64_t width, uint64_t seed, const nn::LoadOptions& load) {
  models::text::Qwen2_5_VLTextConfig config;
  config.vocab_size = tokenizers::kBuiltinQwen2VocabSize;
  config.hidden_size = width;
  config.num_attention_heads = width % 28 == 0 ? 28 : 2;
  config.num_key_value_heads = width % 28 == 0 ? 4 : 1;
  config.intermediate_size = 64;
  config.num_hidden_layers = 1;
  config.validate();
  models::text::Qwen2_5_VLTextModel shape_only(config);
  return models::share_weights("Qwen2_5_VLForConditionalGeneration",
                               models::text::Qwen2_5_VLCheckpoint{config, random_state_dict(shape_only, seed)},
                               models::text::load_qwen2_5_vl, load);
}

// One CLIP text layer whose pooled output has `width` features.
models::LoadedModel random_clip(int64_t width, uint64_t seed, const nn::LoadOptions& load) {
  models::text::ClipTextConfig config;
  config.vocab_size = tokenizers::kBuiltinClipVocabSize;
  config.hidden_size = width;
  config.num_attention_heads = width % 64 == 0 ? width / 64 : 2;
  config.intermediate_size = 64;
  config.num_hidden_layers = 1;
  config.eos_token_id = 2;  // the legacy rule: the argmax of the ids, and the built-in eos is the largest id
  config.validate();
  models::text::CLIPTextModel shape_only(config);
  return models::share_weights("CLIPTextModel",
                               models::text::ClipTextCheckpoint{config, random_state_dict(shape_only, seed)},
                               models::text::load_clip_text, load);
}

// LTX-Video 0.9.1's decoder layout at narrow widths, with latents_mean/std spread as the released
// VAE's are (means near 0, deviations near 1) and diffusers' timestep_scale_multiplier 1000.
models::LoadedModel ltx_preset_vae(int64_t latent_channels, uint64_t seed) {
  const models::vae::LtxVaeConfig config = models::vae::LtxVaeConfig::from_json(
      {{"latent_channels", latent_channels}, {"decoder_block_out_channels", {8, 16, 32}},
       {"decoder_layers_per_block", {1, 1, 1, 1}}, {"decoder_spatio_temporal_scaling", {true, true, true}},
       {"upsample_residual", {true, true, true}}, {"upsample_factor", {2, 2, 2}}, {"timestep_conditioning", true},
       {"patch_size", 4}});
  auto vae = std::make_unique<models::vae::AutoencoderKLLTXVideo>(config);
  nn::StateDict state = random_state_dict(*vae, seed);
  std::vector<float> mean, std;
  for (int64_t c = 0; c < latent_channels; ++c) {
    mean.push_back(float(0.1 * std::sin(double(c) + 1.0)));
    std.push_back(float(1.0 + 0.3 * std::cos(double(c) + 1.0)));
  }
  state["latents_mean"] = Tensor::from_vector(mean, {latent_channels});
  state["latents_std"] = Tensor::from_vector(std, {latent_channels});
  state["decoder.timestep_scale_multiplier"] =
      Tensor::full(state.at("decoder.timestep_scale_multiplier").shape(), 1000.0);
  nn::load_state_dict(*vae, state);
  return models::vae::share_vae(std::move(vae));
}

}  // namespace

TextComponents preset_text_components(const std::string& name, uint64_t seed) {
  check_preset(name);
  TextComponents c;
  if (name.rfind("qwen-", 0) == 0) {
    // Qwen-Image: tokenizer/text_encoder are Qwen2.5-VL's.
    c.pipeline_class = "QwenImagePipeline";
    c.tokenizer = [](const std::string&) { return tokenizers::builtin_qwen2_tokenizer(); };
    const int64_t width = qwenimage_preset_config(name).joint_attention_dim;
    c.encoder = [=](const std::string&, const nn::LoadOptions& load) { return random_qwen2(width, seed ^ 0x9e2ull, load); };
    return c;
  }
  const bool flux = is_flux_preset(name);
  // The widths the transformer reads.
  const bool ltx = is_ltx_preset(name);
  const int64_t text_width = flux  ? flux_preset_config(name).joint_attention_dim
                             : ltx ? ltx_preset_config(name).caption_channels
                                   : wan_preset_config(name).text_dim;
  const int64_t pooled_width = flux ? flux_preset_config(name).pooled_projection_dim : 0;
  c.pipeline_class = flux                              ? "FluxPipeline"
                     : ltx                             ? "LTXPipeline"
                     : name.rfind("skyreels-", 0) == 0 ? "SkyReelsV2DiffusionForcingPipeline"
                                                       : "WanPipeline";
  // FLUX.1: tokenizer/text_encoder are CLIP, tokenizer_2/text_encoder_2 T5; Wan and SkyReels-V2:
  // tokenizer/text_encoder UMT5; LTX-Video: tokenizer/text_encoder T5.
  c.tokenizer = [flux](const std::string& component) {
    return flux && component == "tokenizer" ? tokenizers::builtin_clip_tokenizer()
                                            : tokenizers::builtin_sentencepiece_tokenizer();
  };
  c.encoder = [=](const std::string& component, const nn::LoadOptions& load) {
    if (flux && component == "text_encoder") return random_clip(pooled_width, seed ^ 0xc11full, load);
    return random_t5(text_width, !flux && !ltx, seed ^ 0x75ull, load);
  };
  return c;
}

models::LoadedModel preset_vae(const std::string& name, uint64_t seed) {
  check_preset(name);
  if (is_flux_preset(name)) {
    const models::vae::KLConfig config = models::vae::KLConfig::from_json(
        {{"latent_channels", 16}, {"block_out_channels", {16, 32, 32, 32}}, {"layers_per_block", 1},
         {"norm_num_groups", 8}, {"use_quant_conv", false}, {"use_post_quant_conv", false},
         {"scaling_factor", 0.3611}, {"shift_factor", 0.1159}});
    auto vae = std::make_unique<models::vae::AutoencoderKL>(config);
    nn::load_state_dict(*vae, random_state_dict(*vae, seed));
    return models::vae::share_vae(std::move(vae));
  }
  if (is_ltx_preset(name)) return ltx_preset_vae(ltx_preset_config(name).in_channels, seed);
  // Per-channel statistics of the latents, spread as Wan 2.1's are (means near 0, deviations near 2).
  std::vector<double> mean, std;
  for (int c = 0; c < 16; ++c) {
    mean.push_back(0.5 * std::sin(c + 1.0));
    std.push_back(2.0 + std::cos(c + 1.0));
  }
  const models::vae::WanVaeConfig config = models::vae::WanVaeConfig::from_json(
      {{"base_dim", 8}, {"z_dim", 16}, {"num_res_blocks", 1}, {"latents_mean", mean}, {"latents_std", std}});
  auto vae = std::make_unique<models::vae::AutoencoderKLWan>(config);
  nn::load_state_dict(*vae, random_state_dict(*vae, seed));
  return models::vae::share_vae(std::move(vae));
}

}  // namespace cpdit::pipeline
