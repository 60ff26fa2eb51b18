#include "models/vae/checkpoint.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>
#include <cpdit/models/common/adaptive_norm.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/parallel/halo.hpp>

#include <algorithm>
#include <cmath>

namespace cpdit::models::vae {

namespace k = kernels;

namespace {


constexpr float kRmsEps = 1e-8f;  // every RMSNorm of the decoder

// (B, C * s[0] * s[1] * s[2], F, H, W) -> (B, C, F s[0], H s[1], W s[2]): channel
// ((c s[0] + a) s[1] + i) s[2] + j goes to frame f s[0] + a and, in space, to (h s[1] + i, w s[2] + j);
// with `columns_first` (the decoder's final unpatchify) to (h s[1] + j, w s[2] + i) instead.
Tensor depth_to_space(const Tensor& x_in, std::array<int64_t, 3> s, bool columns_first) {
  const Tensor x = x_in.contiguous();
  const int64_t b = x.size(0), f = x.size(2), h = x.size(3), w = x.size(4);
  const int64_t c = x.size(1) / (s[0] * s[1] * s[2]);
  Tensor out = Tensor::empty({b, c, f * s[0], h * s[1], w * s[2]});
  const float* src = x.data<float>();
  float* dst = out.data<float>();
  const int64_t of = f * s[0], oh = h * s[1], ow = w * s[2];
  for (int64_t n = 0; n < b * c; ++n)
    for (int64_t a = 0; a < s[0]; ++a)
      for (int64_t i = 0; i < s[1]; ++i)
        for (int64_t j = 0; j < s[2]; ++j) {
          const int64_t channel = ((n % c * s[0] + a) * s[1] + i) * s[2] + j;
          const float* plane = src + (n / c * x.size(1) + channel) * f * h * w;
          const int64_t di = columns_first ? j : i, dj = columns_first ? i : j;
          for (int64_t t = 0; t < f; ++t)
            for (int64_t y = 0; y < h; ++y) {
              float* row = dst + ((n * of + t * s[0] + a) * oh + y * s[1] + di) * ow + dj;
              const float* in = plane + (t * h + y) * w;
              for (int64_t x0 = 0; x0 < w; ++x0) row[x0 * s[2]] = in[x0];
            }
        }
  return out;
}

// x (B, C, ...) * (1 + scale[b, c]) + shift[b, c]; scale and shift hold B*C values.
Tensor modulate_channels(const Tensor& x_in, const Tensor& scale_in, const Tensor& shift_in) {
  const Tensor x = x_in.contiguous(), scale = scale_in.contiguous(), shift = shift_in.contiguous();
  const int64_t bc = x.size(0) * x.size(1), plane = x.numel() / std::max<int64_t>(bc, 1);
  Tensor out = Tensor::empty(x.shape());
  const float *src = x.data<float>(), *sc = scale.data<float>(), *sh = shift.data<float>();
  float* dst = out.data<float>();
  for (int64_t n = 0; n < bc; ++n) {
    const float factor = 1.0f + sc[n], offset = sh[n];
    for (int64_t p = 0; p < plane; ++p) dst[n * plane + p] = src[n * plane + p] * factor + offset;
  }
  return out;
}

// temb (B, n*C) + table [n, C] -> n tensors of B*C values, in the table's row order.
std::vector<Tensor> table_modulation(const nn::Parameter& table, const Tensor& temb, int64_t rows) {
  return common::scale_shift_modulation(table.value, temb.reshape({temb.size(0), rows, -1}));
}

}  // namespace

LtxConv3dParameters::LtxConv3dParameters(int64_t in_channels, int64_t out_channels, int64_t kernel)
    : weight(add_parameter("weight", {out_channels, in_channels, kernel, kernel, kernel})),
      bias(add_parameter("bias", {out_channels})) {}

LtxCausalConv3d::LtxCausalConv3d(int64_t in_channels, int64_t out_channels, int64_t kernel, bool causal)
    : conv_(add_module<LtxConv3dParameters>("conv", in_channels, out_channels, kernel)),
      kernel_(kernel),
      causal_(causal) {}

Tensor LtxCausalConv3d::forward(const Tensor& x) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    const int64_t frames = input.size(2);
    const int64_t before = causal_ ? kernel_ - 1 : (kernel_ - 1) / 2, after = causal_ ? 0 : (kernel_ - 1) / 2;
    std::vector<Tensor> parts(size_t(before), input.narrow(2, 0, 1));
    parts.push_back(input);
    for (int64_t i = 0; i < after; ++i) parts.push_back(input.narrow(2, frames - 1, 1));
    const Tensor padded = parts.size() == 1 ? input : cat(parts, 2);
    k::ConvGeometry g;
    g.pad_before = {0, kernel_ / 2, kernel_ / 2};
    g.pad_after = {0, kernel_ / 2, kernel_ / 2};
    return one(parallel::conv3d_rows(padded, conv_.weight.value.values("LtxCausalConv3d"),
                                     conv_.bias.value.values("LtxCausalConv3d"), g));
  })[0];
}

LtxResnetBlock3d::LtxResnetBlock3d(int64_t in_channels, int64_t out_channels, bool causal,
                                   bool timestep_conditioning, float eps)
    : conv1_(add_module<LtxCausalConv3d>("conv1", in_channels, out_channels, 3, causal)),
      conv2_(add_module<LtxCausalConv3d>("conv2", out_channels, out_channels, 3, causal)) {
  if (in_channels != out_channels) {
    norm3_ = &add_module<nn::LayerNorm>("norm3", in_channels, eps, true);
    conv_shortcut_ = &add_module<LtxCausalConv3d>("conv_shortcut", in_channels, out_channels, 1, causal);
  }
  if (timestep_conditioning) scale_shift_table_ = &add_parameter("scale_shift_table", {4, in_channels});
}

Tensor LtxResnetBlock3d::forward(const Tensor& x, const Tensor& temb) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    std::vector<Tensor> mod;  // shift_1, scale_1, shift_2, scale_2
    if (scale_shift_table_) mod = table_modulation(*scale_shift_table_, temb, 4);
    Tensor h = k::channel_rms_norm_eps(input, kRmsEps);
    if (!mod.empty()) h = modulate_channels(h, mod[1], mod[0]);
    h = conv1_.forward(k::silu(h));
    h = k::channel_rms_norm_eps(h, kRmsEps);
    if (!mod.empty()) h = modulate_channels(h, mod[3], mod[2]);
    h = conv2_.forward(k::silu(h));
    Tensor residual = input;
    // LayerNorm over channels: channels last for the kernel, then back.
    if (norm3_) residual = norm3_->forward(input.permute({0, 2, 3, 4, 1})).permute({0, 4, 1, 2, 3});
    if (conv_shortcut_) residual = conv_shortcut_->forward(residual);
    k::add_(h, residual);
    return one(h);
  })[0];
}

LtxTimeEmbedder::LtxTimeEmbedder(int64_t dim)
    : timestep_embedder_(add_module<common::MlpEmbedder>("timestep_embedder", 256, dim, common::Activation::silu)) {}

Tensor LtxTimeEmbedder::forward(const Tensor& timestep) const {
  return timestep_embedder_.forward(common::timestep_sinusoid(timestep, 256));
}

LtxUpsampler3d::LtxUpsampler3d(int64_t in_channels, bool causal, bool residual, int64_t factor)
    : conv_(add_module<LtxCausalConv3d>("conv", in_channels, in_channels * 8 / factor, 3, causal)),
      residual_(residual),
      factor_(factor) {}

Tensor LtxUpsampler3d::forward(const Tensor& x) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    // x2 in time makes 2F frames, of which the first is dropped: its causal padding made it a copy.
    auto spread = [](const Tensor& t) {
      const Tensor s = depth_to_space(t, {2, 2, 2}, false);
      return s.narrow(2, 1, s.size(2) - 1).contiguous();
    };
    Tensor h = spread(conv_.forward(input));
    if (residual_) {
      const Tensor r = spread(input);
      k::add_(h, cat(std::vector<Tensor>(size_t(8 / factor_), r), 1));
    }
    return one(h);
  })[0];
}

LtxUpBlock3d::LtxUpBlock3d(int64_t in_channels, int64_t out_channels, int64_t layers, bool upsample, bool causal,
                           bool timestep_conditioning, bool residual, int64_t factor, float eps)
    : resnets_([&]() -> nn::ModuleList<LtxResnetBlock3d>& {
        if (timestep_conditioning) time_embedder_ = &add_module<LtxTimeEmbedder>("time_embedder", in_channels * 4);
        if (in_channels != out_channels)
          conv_in_ = &add_module<LtxResnetBlock3d>("conv_in", in_channels, out_channels, causal, false, eps);
        if (upsample)
          upsampler_ = &add_module<nn::ModuleList<LtxUpsampler3d>>("upsamplers")
                            .append(out_channels * factor, causal, residual, factor);
        return add_module<nn::ModuleList<LtxResnetBlock3d>>("resnets");
      }()) {
  for (int64_t i = 0; i < layers; ++i) resnets_.append(out_channels, out_channels, causal, timestep_conditioning, eps);
}

Tensor LtxUpBlock3d::forward(const Tensor& x, const Tensor& timestep) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = in.at("x");
    if (conv_in_) h = conv_in_->forward(h, {});
    const Tensor temb = time_embedder_ ? time_embedder_->forward(timestep) : Tensor();
    if (upsampler_) h = upsampler_->forward(h);
    for (const LtxResnetBlock3d* r : resnets_) h = r->forward(h, temb);
    return one(h);
  })[0];
}

namespace {
template <class T>
std::vector<T> reversed(std::vector<T> v) {
  std::reverse(v.begin(), v.end());
  return v;
}
}  // namespace

LtxDecoder3d::LtxDecoder3d(const LtxVaeConfig& c)
    : config_(c),
      conv_in_(add_module<LtxCausalConv3d>("conv_in", c.latent_channels, reversed(c.decoder_block_out_channels)[0], 3,
                                           c.decoder_causal)),
      mid_block_(add_module<LtxUpBlock3d>("mid_block", reversed(c.decoder_block_out_channels)[0],
                                          reversed(c.decoder_block_out_channels)[0],
                                          reversed(c.decoder_layers_per_block)[0], false, c.decoder_causal,
                                          c.timestep_conditioning, false, 1, float(c.resnet_norm_eps))),
      up_blocks_(add_module<nn::ModuleList<LtxUpBlock3d>>("up_blocks")),
      conv_out_([&]() -> LtxCausalConv3d& {
        // diffusers' channel arithmetic: each block runs at its width over its upsampling factor.
        const auto widths = reversed(c.decoder_block_out_channels);
        const auto layers = reversed(c.decoder_layers_per_block);
        const auto scaling = reversed(c.decoder_spatio_temporal_scaling);
        const auto residual = reversed(c.upsample_residual);
        const auto factor = reversed(c.upsample_factor);
        int64_t width = widths[0];
        for (size_t i = 0; i < widths.size(); ++i) {
          const int64_t in = width / factor[i];
          width = widths[i] / factor[i];
          up_blocks_.append(in, width, layers[i + 1], bool(scaling[i]), c.decoder_causal, c.timestep_conditioning,
                            bool(residual[i]), factor[i], float(c.resnet_norm_eps));
        }
        if (c.timestep_conditioning) {
          time_embedder_ = &add_module<LtxTimeEmbedder>("time_embedder", width * 2);
          scale_shift_table_ = &add_parameter("scale_shift_table", {2, width});
          timestep_scale_multiplier_ = &add_parameter("timestep_scale_multiplier", {});
        }
        return add_module<LtxCausalConv3d>("conv_out", width, c.out_channels * c.patch_size * c.patch_size, 3,
                                           c.decoder_causal);
      }()) {}

Tensor LtxDecoder3d::forward(const Tensor& x, const Tensor& timestep) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor t;
    if (timestep_scale_multiplier_)
      t = k::mul(timestep, timestep_scale_multiplier_->value.values("LtxDecoder3d").reshape({1}));
    Tensor h = mid_block_.forward(conv_in_.forward(in.at("x")), t);
    for (const LtxUpBlock3d* block : up_blocks_) h = block->forward(h, t);
    h = k::channel_rms_norm_eps(h, kRmsEps);
    if (time_embedder_) {
      const std::vector<Tensor> mod = table_modulation(*scale_shift_table_, time_embedder_->forward(t), 2);
      h = modulate_channels(h, mod[1], mod[0]);  // rows: shift, scale
    }
    h = conv_out_.forward(k::silu(h));
    const int64_t p = config_.patch_size;
    return one(depth_to_space(h, {config_.patch_size_t, p, p}, true));
  })[0];
}

parallel::ContextParallelPlan autoencoder_kl_ltx_plan() { return detail::decoder_rows_plan("x", 5); }

AutoencoderKLLTXVideo::AutoencoderKLLTXVideo(const LtxVaeConfig& config)
    : config_(config),
      decoder_(add_module<LtxDecoder3d>("decoder", config)),
      latents_mean_(add_parameter("latents_mean", {config.latent_channels})),
      latents_std_(add_parameter("latents_std", {config.latent_channels})) {}

nn::TensorMap AutoencoderKLLTXVideo::forward(const nn::TensorMap& inputs) const {
  const auto it = inputs.find("timestep");
  return {{"sample", decode(detail::latents_input(inputs, "AutoencoderKLLTXVideo"),
                            it == inputs.end() ? Tensor() : it->second)}};
}

Tensor AutoencoderKLLTXVideo::decode(const Tensor& latents, const Tensor& timestep) const {
  CPDIT_CHECK(latents.defined() && latents.dim() == 5 && latents.size(1) == config_.latent_channels &&
                  latents.size(2) >= 1 && latents.size(3) >= 1 && latents.size(4) >= 1,
              invalid_argument, "AutoencoderKLLTXVideo.decode: latents must be (B, ", config_.latent_channels,
              ", F, h, w), got ", latents.defined() ? latents.describe() : "undefined");
  CPDIT_CHECK(timestep.defined() == config_.timestep_conditioning, invalid_argument,
              "AutoencoderKLLTXVideo.decode: ",
              config_.timestep_conditioning ? "this timestep-conditioned decoder needs a `timestep` (B,)"
                                            : "this decoder is not timestep-conditioned but got a `timestep`");
  Tensor t;
  if (timestep.defined()) {
    t = timestep.to(DType::f32).reshape({-1});
    CPDIT_CHECK(t.numel() == latents.size(0), invalid_argument, "AutoencoderKLLTXVideo.decode: timestep ",
                timestep.describe(), " needs one value per batch item (", latents.size(0), ")");
    for (int64_t i = 0; i < t.numel(); ++i)
      CPDIT_CHECK(std::isfinite(t.data<float>()[i]), invalid_argument,
                  "AutoencoderKLLTXVideo.decode: the timestep must be finite");
  }
  ForwardScope scope(*this);
  const kernels::ConvWeightScope transformed_weights;  // each layer's Winograd weights made once
  return decoder_.forward(latents.to(DType::f32), t);
}

Tensor AutoencoderKLLTXVideo::prepare_latents(const Tensor& latents_in, const Tensor& noise_in,
                                              float decode_noise_scale) const {
  CPDIT_CHECK(latents_in.defined() && latents_in.dim() == 5 && latents_in.size(1) == config_.latent_channels,
              invalid_argument, "AutoencoderKLLTXVideo.prepare_latents: latents must be (B, ", config_.latent_channels,
              ", F, h, w), got ", latents_in.defined() ? latents_in.describe() : "undefined");
  CPDIT_CHECK(noise_in.defined() == config_.timestep_conditioning &&
                  (!noise_in.defined() || noise_in.shape() == latents_in.shape()) && std::isfinite(decode_noise_scale),
              invalid_argument, "AutoencoderKLLTXVideo.prepare_latents: ",
              config_.timestep_conditioning ? "a timestep-conditioned decoder needs noise of the latents' shape"
                                            : "noise is for timestep-conditioned decoders only",
              " and a finite decode_noise_scale");
  const Tensor x = latents_in.to(DType::f32).contiguous();
  const Tensor noise = noise_in.defined() ? noise_in.to(DType::f32).contiguous() : Tensor();
  const Tensor& mean = latents_mean_.value.values("AutoencoderKLLTXVideo");
  const Tensor& std_dev = latents_std_.value.values("AutoencoderKLLTXVideo");
  Tensor out = Tensor::empty(x.shape());
  const int64_t channels = x.size(1), plane = x.size(2) * x.size(3) * x.size(4);
  const float scaling = float(config_.scaling_factor), keep = 1.0f - decode_noise_scale;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = i / plane % channels;
    float v = x.data<float>()[i] * std_dev.data<float>()[c] / scaling + mean.data<float>()[c];
    if (noise.defined()) v = keep * v + decode_noise_scale * noise.data<float>()[i];
    out.data<float>()[i] = v;
  }
  return out;
}

std::unique_ptr<AutoencoderKLLTXVideo> load_autoencoder_kl_ltx(const std::string& path,
                                                               const std::string& config_path) {
  const auto checkpoint = detail::read_vae_checkpoint(path, config_path, {"AutoencoderKLLTXVideo"},
                                                      {"decoder.", "latents_mean", "latents_std"});
  auto model = std::make_unique<AutoencoderKLLTXVideo>(LtxVaeConfig::from_json(checkpoint.config));
  nn::load_state_dict(*model, checkpoint.state, detail::f32_weights());
  return model;
}

}  // namespace cpdit::models::vae
