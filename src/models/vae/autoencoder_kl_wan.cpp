#include "models/vae/autoencoder_kl_wan_encoder.hpp"
#include "models/vae/checkpoint.hpp"

#include <cpdit/attention/attention.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/kernels/image.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>
#include <cpdit/comm/tensor_ops.hpp>
#include <cpdit/parallel/halo.hpp>
#include <cpdit/parallel/shard.hpp>

#include <algorithm>

namespace cpdit::models::vae {

namespace k = kernels;

namespace {
constexpr int64_t kCachedFrames = 2;  // a kernel 3 deep in time needs the two frames before
}  // namespace

CausalConv3d::CausalConv3d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 3> kernel,
                           std::array<int64_t, 3> padding, int64_t time_stride)
    : weight_(add_parameter("weight", {out_channels, in_channels, kernel[0], kernel[1], kernel[2]})),
      bias_(add_parameter("bias", {out_channels})),
      padding_(padding),
      time_stride_(time_stride) {}

Tensor CausalConv3d::forward(const Tensor& x, FrameCache* cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    k::ConvGeometry g;
    g.stride[0] = time_stride_;
    g.pad_before = {2 * padding_[0], padding_[1], padding_[2]};
    g.pad_after = {0, padding_[1], padding_[2]};
    if (!cache || padding_[0] == 0) return one(parallel::conv3d_rows(input, weight(), bias(), g));
    if (cache->time_group) {
      // Frame split: the frames before this rank's stand in for the zero padding (zeros on rank 0).
      const Tensor halo = parallel::time_halo(*cache->time_group, input, g.pad_before[0]);
      g.pad_before[0] = 0;
      if (input.size(2) == 0) return one(Tensor::empty({input.size(0), weight().size(0), 0, input.size(3), input.size(4)}));
      return one(parallel::conv3d_rows(cat({halo, input}, 2), weight(), bias(), g));
    }
    Tensor& remembered = cache->frames[this];
    const Tensor stream = remembered.defined() ? cat({remembered, input}, 2) : input;
    g.pad_before[0] -= stream.size(2) - input.size(2);
    Tensor out = parallel::conv3d_rows(stream, weight(), bias(), g);
    const int64_t keep = std::min(kCachedFrames, stream.size(2));
    remembered = stream.narrow(2, stream.size(2) - keep, keep).contiguous();
    return one(out);
  })[0];
}

WanRMSNorm::WanRMSNorm(int64_t channels, bool images)
    : gamma_(images ? add_parameter("gamma", {channels, 1, 1}) : add_parameter("gamma", {channels, 1, 1, 1})) {}

Tensor WanRMSNorm::forward(const Tensor& x) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    return one(k::channel_rms_norm(in.at("x"), gamma_.value.values("WanRMSNorm")));
  })[0];
}

WanResidualBlock::WanResidualBlock(int64_t in_channels, int64_t out_channels)
    : norm1_(add_module<WanRMSNorm>("norm1", in_channels, false)),
      conv1_(add_module<CausalConv3d>("conv1", in_channels, out_channels, std::array<int64_t, 3>{3, 3, 3},
                                      std::array<int64_t, 3>{1, 1, 1})),
      norm2_(add_module<WanRMSNorm>("norm2", out_channels, false)),
      conv2_(add_module<CausalConv3d>("conv2", out_channels, out_channels, std::array<int64_t, 3>{3, 3, 3},
                                      std::array<int64_t, 3>{1, 1, 1})) {
  if (in_channels != out_channels)
    conv_shortcut_ = &add_module<CausalConv3d>("conv_shortcut", in_channels, out_channels,
                                               std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{0, 0, 0});
}

Tensor WanResidualBlock::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    Tensor h = conv1_.forward(k::silu(norm1_.forward(input)), &cache);
    h = conv2_.forward(k::silu(norm2_.forward(h)), &cache);
    k::add_(h, conv_shortcut_ ? conv_shortcut_->forward(input) : input);
    return one(h);
  })[0];
}

WanAttentionBlock::WanAttentionBlock(int64_t channels)
    : norm_(add_module<WanRMSNorm>("norm", channels, true)),
      to_qkv_(add_module<nn::Conv2d>("to_qkv", channels, 3 * channels, 1)),
      proj_(add_module<nn::Conv2d>("proj", channels, channels, 1)) {}

Tensor WanAttentionBlock::forward(const Tensor& x) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    const Tensor& input = in.at("x");
    const int64_t b = input.size(0), c = input.size(1), t = input.size(2), h = input.size(3), w = input.size(4);
    // Each frame's pixels are the tokens of one attention call: (B*T, H*W, 1 head, C).
    const Tensor qkv = to_qkv_.forward(norm_.forward(input)).permute({0, 2, 3, 4, 1}).reshape({b * t, h * w, 3 * c});
    auto part = [&](int64_t i) { return qkv.narrow(2, i * c, c).contiguous().reshape({b * t, h * w, 1, c}); };
    const Tensor attended = attention::dispatch(part(0), part(1), part(2)).out;
    const Tensor frames = attended.reshape({b, t, h, w, c}).permute({0, 4, 1, 2, 3});
    Tensor out = proj_.forward(frames);
    k::add_(out, input);
    return one(out);
  })[0];
}

WanMidBlock::WanMidBlock(int64_t channels)
    : resnets_(add_module<nn::ModuleList<WanResidualBlock>>("resnets")),
      attentions_(add_module<nn::ModuleList<WanAttentionBlock>>("attentions")) {
  resnets_.append(channels, channels);
  attentions_.append(channels);
  resnets_.append(channels, channels);
}

Tensor WanMidBlock::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = resnets_[0].forward(in.at("x"), cache);
    return one(resnets_[1].forward(attentions_[0].forward(h), cache));
  })[0];
}

WanUpsample::WanUpsample(int64_t channels, int64_t out_channels, bool temporal)
    : conv_(add_module<nn::Container>("resample").add_module<nn::Conv2d>("1", channels, out_channels, 3, 1, 1)) {
  if (temporal)
    time_conv_ = &add_module<CausalConv3d>("time_conv", channels, 2 * channels, std::array<int64_t, 3>{3, 1, 1},
                                           std::array<int64_t, 3>{1, 0, 0});
}

Tensor WanUpsample::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = in.at("x");
    if (time_conv_) {
      // The stream's first frame (the first latent frame's) passes through undoubled; the time
      // convolution's stream starts after it.
      const bool first_chunk = cache.started.insert(this).second && cache.holds_first_frame;
      const int64_t passed = first_chunk ? 1 : 0;
      const Tensor rest = h.narrow(2, passed, h.size(2) - passed);
      // Under a frame split a rank whose chunk is only the first frame still passes the time halo on.
      if (rest.size(2) > 0 || cache.time_group) {
        const int64_t b = h.size(0), c = h.size(1), t = rest.size(2), rows = h.size(3), cols = h.size(4);
        const Tensor doubled = time_conv_->forward(rest, &cache);
        std::vector<Tensor> parts;
        if (passed) parts.push_back(h.narrow(2, 0, 1));
        // Channels [0, C) become frame 2t, [C, 2C) frame 2t+1.
        if (t > 0)
          parts.push_back(
              doubled.reshape({b, 2, c, t, rows, cols}).permute({0, 2, 3, 1, 4, 5}).reshape({b, c, 2 * t, rows, cols}));
        h = parts.size() == 1 ? parts[0] : cat(parts, 2);
      }
    }
    return one(conv_.forward(k::upsample_nearest2x(h)));
  })[0];
}

WanUpBlock::WanUpBlock(int64_t in_channels, int64_t out_channels, int64_t num_res_blocks, int upsample)
    : resnets_(add_module<nn::ModuleList<WanResidualBlock>>("resnets")) {
  for (int64_t i = 0; i <= num_res_blocks; ++i) resnets_.append(i == 0 ? in_channels : out_channels, out_channels);
  if (upsample != 0)
    upsampler_ = &add_module<nn::Container>("upsamplers")
                      .add_module<WanUpsample>("0", out_channels, out_channels / 2, upsample == 3);
}

Tensor WanUpBlock::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = in.at("x");
    for (const WanResidualBlock* r : resnets_) h = r->forward(h, cache);
    return one(upsampler_ ? upsampler_->forward(h, cache) : h);
  })[0];
}

namespace {
// Channel counts along the decoder: dims[0] at the latent, then one per up block.
std::vector<int64_t> decoder_dims(const WanVaeConfig& c) {
  std::vector<int64_t> dims{c.decoder_dim() * c.dim_mult.back()};
  for (auto it = c.dim_mult.rbegin(); it != c.dim_mult.rend(); ++it) dims.push_back(c.decoder_dim() * *it);
  return dims;
}
}  // namespace

WanDecoder3d::WanDecoder3d(const WanVaeConfig& c)
    : conv_in_(add_module<CausalConv3d>("conv_in", c.z_dim, decoder_dims(c)[0], std::array<int64_t, 3>{3, 3, 3},
                                        std::array<int64_t, 3>{1, 1, 1})),
      mid_block_(add_module<WanMidBlock>("mid_block", decoder_dims(c)[0])),
      up_blocks_(add_module<nn::ModuleList<WanUpBlock>>("up_blocks")),
      norm_out_(add_module<WanRMSNorm>("norm_out", decoder_dims(c).back(), false)),
      conv_out_(add_module<CausalConv3d>("conv_out", decoder_dims(c).back(), c.out_channels,
                                         std::array<int64_t, 3>{3, 3, 3}, std::array<int64_t, 3>{1, 1, 1})) {
  const std::vector<int64_t> dims = decoder_dims(c);
  const size_t blocks = c.dim_mult.size();
  for (size_t i = 0; i < blocks; ++i) {
    // Every upsampler halves the channels, so blocks after the first start at half the width.
    const int64_t in = i == 0 ? dims[i] : dims[i] / 2;
    // The decoder upsamples in time where the encoder downsampled, in reverse order.
    const int upsample = i + 1 == blocks ? 0 : (c.temperal_downsample[blocks - 2 - i] ? 3 : 2);
    up_blocks_.append(in, dims[i + 1], c.num_res_blocks, upsample);
  }
}

Tensor WanDecoder3d::forward(const Tensor& x, FrameCache& cache) const {
  return with_hooks({{"x", x}}, [&](const nn::TensorMap& in) {
    Tensor h = mid_block_.forward(conv_in_.forward(in.at("x"), &cache), cache);
    for (const WanUpBlock* block : up_blocks_) h = block->forward(h, cache);
    return one(conv_out_.forward(k::silu(norm_out_.forward(h)), &cache));
  })[0];
}

parallel::ContextParallelPlan autoencoder_kl_wan_plan(VideoSplit split) {
  return split == VideoSplit::rows ? detail::decoder_rows_plan("x", 5) : parallel::ContextParallelPlan{};
}

AutoencoderKLWan::AutoencoderKLWan(const WanVaeConfig& config)
    : config_(config),
      post_quant_conv_(add_module<CausalConv3d>("post_quant_conv", config.z_dim, config.z_dim,
                                                std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{0, 0, 0})),
      decoder_(add_module<WanDecoder3d>("decoder", config)),
      encoder_(add_module<WanEncoder3d>("encoder", config)),
      quant_conv_(add_module<CausalConv3d>("quant_conv", 2 * config.z_dim, 2 * config.z_dim,
                                           std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{0, 0, 0})) {}

nn::TensorMap AutoencoderKLWan::forward(const nn::TensorMap& inputs) const {
  return detail::autoencoder_forward(
      inputs, "AutoencoderKLWan", [this](const Tensor& latents) { return decode(latents); },
      [this](const Tensor& video) { return encode(video); });
}

Tensor AutoencoderKLWan::decode(const Tensor& latents) const {
  CPDIT_CHECK(latents.defined() && latents.dim() == 5 && latents.size(1) == config_.z_dim && latents.size(2) >= 1,
              invalid_argument, "AutoencoderKLWan.decode: latents must be (B, ", config_.z_dim,
              ", F >= 1, h, w), got ", latents.defined() ? latents.describe() : "undefined");
  ForwardScope scope(*this);
  const kernels::ConvWeightScope transformed_weights;  // each layer's Winograd weights made once
  comm::Communicator* group = parallel::row_split_group();
  if (split_ == VideoSplit::frames && group && group->size() > 1) return decode_frames(latents, *group);
  const Tensor z = post_quant_conv_.forward(latents.to(DType::f32));
  FrameCache cache;
  std::vector<Tensor> chunks;
  for (int64_t f = 0; f < z.size(2); ++f) chunks.push_back(decoder_.forward(z.narrow(2, f, 1), cache));
  return k::clamp(cat(chunks, 2), -1.0f, 1.0f);
}

Tensor AutoencoderKLWan::decode_frames(const Tensor& latents, comm::Communicator& group) const {
  CPDIT_CHECK(latents.size(2) >= group.size(), invalid_argument, "AutoencoderKLWan.decode: a frame split over ",
              group.size(), " ranks needs at least as many latent frames, got ", latents.size(2),
              "; decode on fewer ranks or split by rows");
  // Whole rows on every rank: convolutions, RMS norms and the per-frame attention run locally.
  const attention::ScopedRouter local(nullptr);
  const parallel::ScopedContext unsplit(nullptr);
  FrameCache cache;
  cache.time_group = &group;
  cache.holds_first_frame = group.rank() == 0;
  const Tensor z = post_quant_conv_.forward(parallel::shard(latents.to(DType::f32), 2, group));
  return k::clamp(comm::all_gather(group, decoder_.forward(z, cache), 2), -1.0f, 1.0f);
}

void AutoencoderKLWan::set_video_split(VideoSplit split) {
  CPDIT_CHECK(!parallel_enabled(), invalid_argument,
              "AutoencoderKLWan: choose the video split before enable_parallelism, which installs its plan");
  split_ = split;
}

std::unique_ptr<AutoencoderKLWan> load_autoencoder_kl_wan(const std::string& path, const std::string& config_path) {
  const auto checkpoint = detail::read_vae_checkpoint(path, config_path, {"AutoencoderKLWan", "AutoencoderKLQwenImage"},
                                                      {"decoder.", "post_quant_conv.", "encoder.", "quant_conv."});
  auto model = std::make_unique<AutoencoderKLWan>(WanVaeConfig::from_json(checkpoint.config));
  nn::load_state_dict(*model, checkpoint.state, detail::f32_weights());
  return model;
}

}  // namespace cpdit::models::vae
