#include "models/vae/checkpoint.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>

namespace cpdit::models::vae {

namespace k = kernels;

namespace {
constexpr float kNormEps = 1e-6f;  // every GroupNorm of the AutoencoderKL decoder
}  // namespace

ResnetBlock2D::ResnetBlock2D(int64_t in_channels, int64_t out_channels, int64_t groups)
    : norm1_(add_module<nn::GroupNorm>("norm1", groups, in_channels, kNormEps)),
      conv1_(add_module<nn::Conv2d>("conv1", in_channels, out_channels, 3, 1, 1)),
      norm2_(add_module<nn::GroupNorm>("norm2", groups, out_channels, kNormEps)),
      conv2_(add_module<nn::Conv2d>("conv2", out_channels, out_channels, 3, 1, 1)) {
  if (in_channels != out_channels)
    conv_shortcut_ = &add_module<nn::Conv2d>("conv_shortcut", in_channels, out_channels, 1);
}

Tensor ResnetBlock2D::forward(const Tensor& x) const {
  return with_hooks({{"input_tensor", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("input_tensor");
    Tensor h = conv1_.forward(k::silu(norm1_.forward(input)));
    h = conv2_.forward(k::silu(norm2_.forward(h)));
    k::add_(h, conv_shortcut_ ? conv_shortcut_->forward(input) : input);
    return one(h);
  })[0];
}

SpatialAttention::SpatialAttention(int64_t channels, int64_t groups)
    : group_norm_(add_module<nn::GroupNorm>("group_norm", groups, channels, kNormEps)),
      to_q_(add_module<nn::Linear>("to_q", channels, channels)),
      to_k_(add_module<nn::Linear>("to_k", channels, channels)),
      to_v_(add_module<nn::Linear>("to_v", channels, channels)),
      to_out_(add_module<nn::Container>("to_out").add_module<nn::Linear>("0", channels, channels)) {}

Tensor SpatialAttention::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("hidden_states");
    const int64_t b = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
    // Pixels become tokens (B, H*W, C): one head whose dim is the channel count.
    const Tensor tokens = group_norm_.forward(input).reshape({b, c, h * w}).permute({0, 2, 1});
    auto heads = [&](const nn::Linear& proj) { return proj.forward(tokens).reshape({b, h * w, 1, c}); };
    const Tensor attended = attention::dispatch(heads(to_q_), heads(to_k_), heads(to_v_)).out;
    Tensor out = to_out_.forward(attended.reshape({b, h * w, c})).permute({0, 2, 1}).reshape({b, c, h, w});
    k::add_(out, input);
    return one(out);
  })[0];
}

MidBlock2D::MidBlock2D(int64_t channels, int64_t groups, bool attention)
    : resnets_(add_module<nn::ModuleList<ResnetBlock2D>>("resnets")),
      attentions_(add_module<nn::ModuleList<SpatialAttention>>("attentions")) {
  resnets_.append(channels, channels, groups);
  if (attention) attentions_.append(channels, groups);
  resnets_.append(channels, channels, groups);
}

Tensor MidBlock2D::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    Tensor h = resnets_[0].forward(in.at("hidden_states"));
    if (attentions_.size() > 0) h = attentions_[0].forward(h);
    return one(resnets_[1].forward(h));
  })[0];
}

namespace {

// An up or down block's resnets: the first takes the block's input channels, the others its output's.
void append_kl_block_resnets(nn::ModuleList<ResnetBlock2D>& resnets, int64_t in_channels, int64_t out_channels,
                             int64_t layers, int64_t groups) {
  for (int64_t i = 0; i < layers; ++i) resnets.append(i == 0 ? in_channels : out_channels, out_channels, groups);
}

// The 3x3 convolution that resamples a block's output, at the path diffusers gives it: `<list>.0.conv`.
nn::Conv2d& kl_resample_conv(nn::Container& list, int64_t channels, int64_t stride, int64_t padding) {
  return list.add_module<nn::Container>("0").add_module<nn::Conv2d>("conv", channels, channels, 3, stride, padding);
}

Tensor run_kl_block_resnets(const nn::ModuleList<ResnetBlock2D>& resnets, Tensor h) {
  for (const ResnetBlock2D* r : resnets) h = r->forward(h);
  return h;
}

}  // namespace

UpDecoderBlock2D::UpDecoderBlock2D(int64_t in_channels, int64_t out_channels, int64_t layers, int64_t groups,
                                   bool upsample)
    : resnets_(add_module<nn::ModuleList<ResnetBlock2D>>("resnets")) {
  append_kl_block_resnets(resnets_, in_channels, out_channels, layers, groups);
  if (upsample) upsample_conv_ = &kl_resample_conv(add_module<nn::Container>("upsamplers"), out_channels, 1, 1);
}

Tensor UpDecoderBlock2D::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    Tensor h = run_kl_block_resnets(resnets_, in.at("hidden_states"));
    if (upsample_conv_) h = upsample_conv_->forward(k::upsample_nearest2x(h));
    return one(h);
  })[0];
}

DownEncoderBlock2D::DownEncoderBlock2D(int64_t in_channels, int64_t out_channels, int64_t layers, int64_t groups,
                                       bool downsample)
    : resnets_(add_module<nn::ModuleList<ResnetBlock2D>>("resnets")) {
  append_kl_block_resnets(resnets_, in_channels, out_channels, layers, groups);
  if (downsample) downsample_conv_ = &kl_resample_conv(add_module<nn::Container>("downsamplers"), out_channels, 2, 0);
}

Tensor DownEncoderBlock2D::forward(const Tensor& x) const {
  return with_hooks({{"hidden_states", x}}, [&](const nn::TensorMap& in) {
    Tensor h = run_kl_block_resnets(resnets_, in.at("hidden_states"));
    if (downsample_conv_) {
      kernels::ConvGeometry g = downsample_conv_->geometry();
      g.pad_after = {0, 1, 1};  // diffusers pads (0, 1, 0, 1) before a padding-0 stride-2 conv
      h = downsample_conv_->forward(h, g);
    }
    return one(h);
  })[0];
}

KLEncoder::KLEncoder(const KLConfig& c)
    : conv_in_(add_module<nn::Conv2d>("conv_in", c.in_channels, c.block_out_channels.front(), 3, 1, 1)),
      down_blocks_(add_module<nn::ModuleList<DownEncoderBlock2D>>("down_blocks")),
      mid_block_(add_module<MidBlock2D>("mid_block", c.block_out_channels.back(), c.norm_num_groups,
                                        c.mid_block_add_attention)),
      conv_norm_out_(add_module<nn::GroupNorm>("conv_norm_out", c.norm_num_groups, c.block_out_channels.back(),
                                               kNormEps)),
      conv_out_(add_module<nn::Conv2d>("conv_out", c.block_out_channels.back(), 2 * c.latent_channels, 3, 1, 1)) {
  // Down blocks run from the narrowest channel count to the widest; all but the last halve the size.
  int64_t channels = c.block_out_channels.front();
  for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
    down_blocks_.append(channels, c.block_out_channels[i], c.layers_per_block, c.norm_num_groups,
                        i + 1 != c.block_out_channels.size());
    channels = c.block_out_channels[i];
  }
}

Tensor KLEncoder::forward(const Tensor& sample) const {
  return with_hooks({{"sample", sample}}, [&](const nn::TensorMap& in) {
    Tensor h = conv_in_.forward(in.at("sample"));
    for (const DownEncoderBlock2D* block : down_blocks_) h = block->forward(h);
    return one(conv_out_.forward(k::silu(conv_norm_out_.forward(mid_block_.forward(h)))));
  })[0];
}

KLDecoder::KLDecoder(const KLConfig& c)
    : conv_in_(add_module<nn::Conv2d>("conv_in", c.latent_channels, c.block_out_channels.back(), 3, 1, 1)),
      mid_block_(add_module<MidBlock2D>("mid_block", c.block_out_channels.back(), c.norm_num_groups,
                                        c.mid_block_add_attention)),
      up_blocks_(add_module<nn::ModuleList<UpDecoderBlock2D>>("up_blocks")),
      conv_norm_out_(add_module<nn::GroupNorm>("conv_norm_out", c.norm_num_groups, c.block_out_channels.front(),
                                               kNormEps)),
      conv_out_(add_module<nn::Conv2d>("conv_out", c.block_out_channels.front(), c.out_channels, 3, 1, 1)) {
  // Up blocks run from the widest channel count to the narrowest; all but the last double the size.
  const int64_t n = int64_t(c.block_out_channels.size());
  int64_t channels = c.block_out_channels.back();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t out = c.block_out_channels[size_t(n - 1 - i)];
    up_blocks_.append(channels, out, c.layers_per_block + 1, c.norm_num_groups, i != n - 1);
    channels = out;
  }
}

Tensor KLDecoder::forward(const Tensor& z) const {
  return with_hooks({{"z", z}}, [&](const nn::TensorMap& in) {
    Tensor h = mid_block_.forward(conv_in_.forward(in.at("z")));
    for (const UpDecoderBlock2D* block : up_blocks_) h = block->forward(h);
    // diffusers records conv_norm_out's output; the SiLU follows it.
    return one(conv_out_.forward(k::silu(conv_norm_out_.forward(h))));
  })[0];
}

parallel::ContextParallelPlan autoencoder_kl_plan() { return detail::decoder_rows_plan("z", 4); }

AutoencoderKL::AutoencoderKL(const KLConfig& config)
    : config_(config),
      encoder_(add_module<KLEncoder>("encoder", config)),
      decoder_(add_module<KLDecoder>("decoder", config)) {
  if (config.use_quant_conv)
    quant_conv_ = &add_module<nn::Conv2d>("quant_conv", 2 * config.latent_channels, 2 * config.latent_channels, 1);
  if (config.use_post_quant_conv)
    post_quant_conv_ = &add_module<nn::Conv2d>("post_quant_conv", config.latent_channels, config.latent_channels, 1);
}

nn::TensorMap AutoencoderKL::forward(const nn::TensorMap& inputs) const {
  // An input `sample` gives the posterior's mean (latent_dist.mode()): the moments' first half.
  return detail::autoencoder_forward(
      inputs, "AutoencoderKL", [this](const Tensor& latents) { return decode(latents); },
      [this](const Tensor& image) { return encode(image).narrow(1, 0, config_.latent_channels).contiguous(); });
}

Tensor AutoencoderKL::decode(const Tensor& latents) const {
  CPDIT_CHECK(latents.defined() && latents.dim() == 4 && latents.size(1) == config_.latent_channels, invalid_argument,
              "AutoencoderKL.decode: latents must be (B, ", config_.latent_channels, ", h, w), got ",
              latents.defined() ? latents.describe() : "undefined");
  ForwardScope scope(*this);
  const kernels::ConvWeightScope transformed_weights;  // each layer's Winograd weights made once
  const Tensor z = latents.to(DType::f32);
  return decoder_.forward(post_quant_conv_ ? post_quant_conv_->forward(z) : z);
}

Tensor AutoencoderKL::encode(const Tensor& image) const {
  CPDIT_CHECK(image.defined() && image.dim() == 4 && image.size(1) == config_.in_channels, invalid_argument,
              "AutoencoderKL.encode: image must be (B, ", config_.in_channels, ", H, W), got ",
              image.defined() ? image.describe() : "undefined");
  CPDIT_CHECK(!parallel_enabled(), unsupported,
              "AutoencoderKL.encode runs on one rank (only decode splits rows); disable parallelism first");
  ForwardScope scope(*this);
  const kernels::ConvWeightScope transformed_weights;  // each layer's Winograd weights made once
  const Tensor moments = encoder_.forward(image.to(DType::f32));
  return quant_conv_ ? quant_conv_->forward(moments) : moments;
}

std::unique_ptr<AutoencoderKL> load_autoencoder_kl(const std::string& path, const std::string& config_path) {
  const auto checkpoint = detail::read_vae_checkpoint(path, config_path, {"AutoencoderKL"},
                                                      {"encoder.", "decoder.", "quant_conv.", "post_quant_conv."});
  auto model = std::make_unique<AutoencoderKL>(KLConfig::from_json(checkpoint.config));
  nn::load_state_dict(*model, checkpoint.state, detail::f32_weights());
  return model;
}

}  // namespace cpdit::models::vae
