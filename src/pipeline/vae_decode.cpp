#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/parallel/config.hpp>
#include <cpdit/pipeline/random.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <algorithm>
#include <functional>
#include <cmath>
#include <memory>

namespace cpdit::pipeline {

Tensor unscale_kl_latents(const Tensor& latents, const models::vae::KLConfig& config) {
  CPDIT_CHECK(latents.defined() && latents.dim() == 4 && latents.size(1) == config.latent_channels, invalid_argument,
              "AutoencoderKL latents must be unpacked (B, ", config.latent_channels, ", h, w), got ",
              latents.defined() ? latents.describe() : "undefined");
  // One rounding per op, as the pipeline's two tensor ops do it.
  const Tensor scaled = kernels::mul(latents.to(DType::f32), Tensor::full({1}, 1.0 / config.scaling_factor));
  return kernels::add(scaled, Tensor::full({1}, config.shift_factor));
}

namespace {

// Wan latents (B, z_dim, F, h, w) and a config with a mean and a std per channel; `verb` for errors.
void check_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config, const char* verb) {
  const int64_t c = config.z_dim;
  CPDIT_CHECK(latents.defined() && latents.dim() == 5 && latents.size(1) == c, invalid_argument,
              "AutoencoderKLWan latents must be (B, ", c, ", F, h, w), got ",
              latents.defined() ? latents.describe() : "undefined");
  CPDIT_CHECK(int64_t(config.latents_mean.size()) == c && int64_t(config.latents_std.size()) == c, invalid_argument,
              "the VAE config needs latents_mean and latents_std of ", c, " values to ", verb, " latents");
}

}  // namespace

Tensor normalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config) {
  check_wan_latents(latents, config, "normalise");
  const int64_t c = config.z_dim;
  // The config's values as the pipeline's f32 tensors, and the reciprocal of the standard deviation
  // taken in f32 (x + (-m) is x - m exactly).
  std::vector<float> negative_mean, inverse_std;
  for (double m : config.latents_mean) negative_mean.push_back(-float(m));
  for (double s : config.latents_std) inverse_std.push_back(1.0f / float(s));
  const Tensor centred = kernels::add(latents.to(DType::f32), Tensor::from_vector(negative_mean, {c, 1, 1, 1}));
  return kernels::mul(centred, Tensor::from_vector(inverse_std, {c, 1, 1, 1}));
}

Tensor denormalize_wan_latents(const Tensor& latents, const models::vae::WanVaeConfig& config) {
  check_wan_latents(latents, config, "denormalise");
  const int64_t c = config.z_dim;
  std::vector<float> mean(config.latents_mean.begin(), config.latents_mean.end());
  std::vector<float> std(config.latents_std.begin(), config.latents_std.end());
  const Tensor scaled = kernels::mul(latents.to(DType::f32), Tensor::from_vector(std, {c, 1, 1, 1}));
  return kernels::add(scaled, Tensor::from_vector(mean, {c, 1, 1, 1}));
}

Tensor vae_latents(const std::any& vae_config, const Tensor& latents) {
  if (const auto* kl = std::any_cast<models::vae::KLConfig>(&vae_config)) return unscale_kl_latents(latents, *kl);
  if (const auto* wan = std::any_cast<models::vae::WanVaeConfig>(&vae_config))
    return denormalize_wan_latents(latents, *wan);
  fail(ErrorKind::unsupported,
       "this model is not a VAE cpdit decodes (AutoencoderKL, AutoencoderKLWan, AutoencoderKLQwenImage)");
}

namespace {

// What LTXPipeline hands its VAE: the latents denormalised by the VAE's buffers and, for a
// timestep-conditioned decoder, mixed with noise and given the decode timestep.
nn::TensorMap ltx_vae_inputs(const models::vae::AutoencoderKLLTXVideo& vae, const Tensor& latents,
                             const DecodeTimestep& d) {
  if (!vae.config().timestep_conditioning) return {{"latents", vae.prepare_latents(latents)}};
  CPDIT_CHECK(std::isfinite(d.timestep) && std::isfinite(d.noise_scale.value_or(0.0f)), invalid_argument,
              "the decode timestep and noise scale must be finite");
  const Tensor noise = d.noise.defined() ? d.noise : randn(latents.shape(), d.seed ^ 0xdec0deull);
  return {{"latents", vae.prepare_latents(latents, noise, d.noise_scale.value_or(d.timestep))},
          {"timestep", Tensor::full({latents.size(0)}, d.timestep)}};
}

}  // namespace

void check_vae_split(const models::LoadedModel& vae, models::vae::VideoSplit split) {
  CPDIT_CHECK(split != models::vae::VideoSplit::frames || std::any_cast<models::vae::WanVaeConfig>(&vae.config),
              invalid_argument, "a frame split is for Wan's video VAE (AutoencoderKLWan); this model is ",
              vae.class_name, ": split by rows");
}

namespace {

// `vae`'s decoder over the ranks of `world`, on what `inputs` makes of `latents` for the rank's replica.
Tensor run_decoder(const models::LoadedModel& vae, const Tensor& latents, comm::Communicator& world,
                   models::vae::VideoSplit split, const std::function<nn::TensorMap(const nn::Model&)>& inputs) {
  check_vae_split(vae, split);
  const bool by_frames = split == models::vae::VideoSplit::frames;
  // Each rank needs a latent row (frame): a world with more ranks decodes on its first `parts`.
  const int64_t parts = !latents.defined() || latents.dim() < 4 ? 1
                        : by_frames && latents.dim() == 5   ? latents.size(2)
                                                            : latents.size(-2);
  std::shared_ptr<comm::Communicator> group(&world, [](comm::Communicator*) {});
  if (parts < world.size()) {
    group = world.split(world.rank() < parts ? 0 : 1, world.rank());
    if (world.rank() >= parts) return Tensor();
  }
  auto model = vae.replica();
  if (by_frames) dynamic_cast<models::vae::AutoencoderKLWan&>(*model).set_video_split(split);
  if (group->size() > 1)  // split over the ranks; the one-head mid-block attention on the ring
    model->enable_parallelism(group, parallel::ContextParallelConfig{group->size(), 1});
  return model->forward(inputs(*model)).at("sample");
}

}  // namespace

Tensor decode_latents(const models::LoadedModel& vae, const Tensor& latents, comm::Communicator& world,
                      const DecodeTimestep& ltx, models::vae::VideoSplit split) {
  return run_decoder(vae, latents, world, split, [&](const nn::Model& model) {
    const auto* ltx_vae = dynamic_cast<const models::vae::AutoencoderKLLTXVideo*>(&model);
    return ltx_vae ? ltx_vae_inputs(*ltx_vae, latents, ltx) : nn::TensorMap{{"latents", vae_latents(vae.config, latents)}};
  });
}

Tensor decode_vae_input(const models::LoadedModel& vae, const Tensor& z, comm::Communicator& world) {
  const auto* ltx = std::any_cast<models::vae::LtxVaeConfig>(&vae.config);
  CPDIT_CHECK(!ltx || !ltx->timestep_conditioning, unsupported,
              "this LTX-Video VAE decodes with a timestep (decode(z, temb)), which is not supported here: run the "
              "pipeline to pixels instead");
  CPDIT_CHECK(ltx || std::any_cast<models::vae::KLConfig>(&vae.config) ||
                  std::any_cast<models::vae::WanVaeConfig>(&vae.config),
              unsupported, vae.class_name, " is not a VAE cpdit decodes");
  return run_decoder(vae, z, world, models::vae::VideoSplit::rows,
                     [&](const nn::Model&) { return nn::TensorMap{{"latents", z.to(DType::f32)}}; });
}

nlohmann::json vae_config_json(const models::LoadedModel& vae) {
  if (const auto* kl = std::any_cast<models::vae::KLConfig>(&vae.config))
    return {{"_class_name", vae.class_name},
            {"in_channels", kl->in_channels},
            {"out_channels", kl->out_channels},
            {"latent_channels", kl->latent_channels},
            {"block_out_channels", kl->block_out_channels},
            {"layers_per_block", kl->layers_per_block},
            {"norm_num_groups", kl->norm_num_groups},
            {"mid_block_add_attention", kl->mid_block_add_attention},
            {"use_quant_conv", kl->use_quant_conv},
            {"use_post_quant_conv", kl->use_post_quant_conv},
            {"scaling_factor", kl->scaling_factor},
            {"shift_factor", kl->shift_factor}};
  if (const auto* wan = std::any_cast<models::vae::WanVaeConfig>(&vae.config))
    return {{"_class_name", vae.class_name},
            {"base_dim", wan->base_dim},
            {"decoder_base_dim", wan->decoder_base_dim > 0 ? nlohmann::json(wan->decoder_base_dim) : nlohmann::json()},
            {"z_dim", wan->z_dim},
            {"in_channels", wan->in_channels},
            {"out_channels", wan->out_channels},
            {"dim_mult", wan->dim_mult},
            {"num_res_blocks", wan->num_res_blocks},
            {"attn_scales", wan->attn_scales},
            {"temperal_downsample", wan->temperal_downsample},
            {"latents_mean", wan->latents_mean},
            {"latents_std", wan->latents_std}};
  if (const auto* ltx = std::any_cast<models::vae::LtxVaeConfig>(&vae.config))
    return {{"_class_name", vae.class_name},
            {"latent_channels", ltx->latent_channels},
            {"out_channels", ltx->out_channels},
            {"decoder_block_out_channels", ltx->decoder_block_out_channels},
            {"decoder_layers_per_block", ltx->decoder_layers_per_block},
            {"decoder_spatio_temporal_scaling", ltx->decoder_spatio_temporal_scaling},
            {"upsample_residual", ltx->upsample_residual},
            {"upsample_factor", ltx->upsample_factor},
            {"timestep_conditioning", ltx->timestep_conditioning},
            {"decoder_causal", ltx->decoder_causal},
            {"patch_size", ltx->patch_size},
            {"patch_size_t", ltx->patch_size_t},
            {"resnet_norm_eps", ltx->resnet_norm_eps},
            {"scaling_factor", ltx->scaling_factor}};
  fail(ErrorKind::unsupported, vae.class_name, " is not a VAE cpdit decodes");
}

Tensor postprocess_pixels(const Tensor& sample_in) {
  CPDIT_CHECK(sample_in.defined() && (sample_in.dim() == 4 || sample_in.dim() == 5) && sample_in.size(1) == 3,
              invalid_argument, "a decoded sample must be (B, 3, H, W) or (B, 3, F, H, W), got ",
              sample_in.defined() ? sample_in.describe() : "undefined");
  // Channels last: (B, 3, H, W) -> (B, H, W, 3); (B, 3, F, H, W) -> (B, F, H, W, 3).
  const Tensor sample = sample_in.dim() == 4 ? sample_in.to(DType::f32).permute({0, 2, 3, 1})
                                             : sample_in.to(DType::f32).permute({0, 2, 3, 4, 1});
  Tensor pixels = sample.contiguous();
  float* p = pixels.data<float>();
  for (int64_t i = 0; i < pixels.numel(); ++i) p[i] = std::clamp(p[i] * 0.5f + 0.5f, 0.0f, 1.0f);
  return pixels;
}

std::vector<uint8_t> pixels_to_rgb8(const Tensor& pixels_in, int64_t index) {
  CPDIT_CHECK(pixels_in.defined() && pixels_in.dim() >= 3 && pixels_in.size(-1) == 3, invalid_argument,
              "pixels must be (..., H, W, 3), got ", pixels_in.defined() ? pixels_in.describe() : "undefined");
  const Tensor pixels = pixels_in.to(DType::f32).contiguous();
  const int64_t h = pixels.size(-3), w = pixels.size(-2), picture = h * w * 3;
  const int64_t pictures = pixels.numel() / std::max<int64_t>(picture, 1);
  CPDIT_CHECK(index >= 0 && index < pictures, invalid_argument, "picture ", index, " of ", pictures);
  const float* src = pixels.data<float>() + index * picture;
  std::vector<uint8_t> rgb(static_cast<size_t>(picture));
  for (int64_t i = 0; i < picture; ++i)
    rgb[size_t(i)] = std::isnan(src[i]) ? 0 : uint8_t(std::nearbyint(std::clamp(src[i], 0.0f, 1.0f) * 255.0f));
  return rgb;
}

}  // namespace cpdit::pipeline
