#pragma once
// AutoencoderKLWan (Wan 2.1's causal video VAE; Qwen-Image's VAE is the same architecture): its
// decoder and encoder, computing what diffusers computes, with their parameters under diffusers' key
// names. The decoder runs latent frame by latent frame: the first latent frame yields one video
// frame, each later one four; the encoder runs the other way, the first frame alone, then four
// frames per chunk. Time convolutions are causal, and each remembers the last two frames of the
// stream it has seen (a FrameCache), so running chunk by chunk equals running the whole stream at once.
#include <cpdit/comm/communicator.hpp>
#include <cpdit/models/vae/config.hpp>
#include <cpdit/nn/image_layers.hpp>
#include <cpdit/nn/model.hpp>

#include <map>
#include <memory>
#include <set>

namespace cpdit::models::vae {

// The state of one decode or encode: per causal convolution, the last (up to two) frames of its input
// stream (per time downsampler of the encoder, the last frame); and which time upsamplers have seen
// their first chunk (they pass it through without doubling).
// Under a frame split (VideoSplit::frames) each rank decodes its frames in one chunk, the frames
// before it come from the rank before (parallel::time_halo over `time_group`), and only the rank
// holding the first latent frame passes it through the upsamplers.
struct FrameCache {
  std::map<const nn::Module*, Tensor> frames;
  std::set<const nn::Module*> started;
  comm::Communicator* time_group = nullptr;
  bool holds_first_frame = true;
};

// Conv3d zero-padded causally in time (2*p frames before, none after) and symmetrically in space,
// with a stride in time (the encoder's time downsampling: 2). weight [out, in, kt, kh, kw], bias [out].
class CausalConv3d : public nn::Module {
 public:
  CausalConv3d(int64_t in_channels, int64_t out_channels, std::array<int64_t, 3> kernel,
               std::array<int64_t, 3> padding, int64_t time_stride = 1);
  // With a cache, the frames remembered from earlier chunks stand in for the zero padding, and the
  // cache then holds the last two frames of the stream including x.
  Tensor forward(const Tensor& x, FrameCache* cache = nullptr) const;

 private:
  const Tensor& weight() const { return weight_.value.values("CausalConv3d"); }
  const Tensor& bias() const { return bias_.value.values("CausalConv3d"); }

  nn::Parameter& weight_;
  nn::Parameter& bias_;
  std::array<int64_t, 3> padding_;
  int64_t time_stride_;
};

// Wan's RMS_norm over channels: gamma shaped [C, 1, 1, 1] (videos) or [C, 1, 1] (images).
class WanRMSNorm : public nn::Module {
 public:
  WanRMSNorm(int64_t channels, bool images);
  Tensor forward(const Tensor& x) const;

 private:
  nn::Parameter& gamma_;
};

// norm1 -> SiLU -> conv1 -> norm2 -> SiLU -> conv2 (causal 3x3x3), plus the input through a 1x1x1
// conv_shortcut when the channel count changes.
class WanResidualBlock : public nn::Module {
 public:
  WanResidualBlock(int64_t in_channels, int64_t out_channels);
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  WanRMSNorm& norm1_;
  CausalConv3d& conv1_;
  WanRMSNorm& norm2_;
  CausalConv3d& conv2_;
  CausalConv3d* conv_shortcut_ = nullptr;
};

// Single-head self-attention over the pixels of each frame, with a residual connection.
class WanAttentionBlock : public nn::Module {
 public:
  explicit WanAttentionBlock(int64_t channels);
  Tensor forward(const Tensor& x) const;

 private:
  WanRMSNorm& norm_;
  nn::Conv2d& to_qkv_;
  nn::Conv2d& proj_;
};

class WanMidBlock : public nn::Module {
 public:
  explicit WanMidBlock(int64_t channels);
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  nn::ModuleList<WanResidualBlock>& resnets_;
  nn::ModuleList<WanAttentionBlock>& attentions_;
};

// Nearest x2 in space then a 3x3 conv to `out_channels`, each frame alone; "upsample3d" first doubles
// the frames with a causal (3,1,1) time_conv to 2C channels, whose halves become frames 2t and 2t+1
// (from the second chunk on: the first chunk passes through).
class WanUpsample : public nn::Module {
 public:
  WanUpsample(int64_t channels, int64_t out_channels, bool temporal);
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  nn::Conv2d& conv_;
  CausalConv3d* time_conv_ = nullptr;
};

class WanUpBlock : public nn::Module {
 public:
  WanUpBlock(int64_t in_channels, int64_t out_channels, int64_t num_res_blocks, int upsample);  // upsample: 0, 2, 3
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  nn::ModuleList<WanResidualBlock>& resnets_;
  WanUpsample* upsampler_ = nullptr;
};

class WanEncoder3d;  // the encoder's own layers: src/models/vae/autoencoder_kl_wan_encoder.hpp

class WanDecoder3d : public nn::Module {
 public:
  explicit WanDecoder3d(const WanVaeConfig& config);
  // One chunk (B, z_dim, 1, h, w) -> (B, out_channels, 1 or 4, 8h, 8w).
  Tensor forward(const Tensor& x, FrameCache& cache) const;

 private:
  CausalConv3d& conv_in_;
  WanMidBlock& mid_block_;
  nn::ModuleList<WanUpBlock>& up_blocks_;
  WanRMSNorm& norm_out_;
  CausalConv3d& conv_out_;
};

// How a parallel decode splits the video over the ranks (parallel/halo.hpp). Both equal the one-rank
// decode.
// - rows: every latent frame's rows are split at the decoder's input and the video chunk's rows
//   gathered at its output; frames are decoded one by one as on one rank, so memory per rank is about
//   1/P of one rank's. Each convolution exchanges halo rows.
// - frames: each rank decodes its own latent frames (tensor_split rule) as one chunk, whole rows, and
//   each causal time convolution takes the two frames before from the rank before; the video is
//   gathered by frames. No row halos, but a rank holds all its frames' activations at once, so
//   memory per rank grows with F/P (more than one rank's frame-by-frame decode needs when F/P > 1).
enum class VideoSplit { rows, frames };

// The row split's plan; the frame split needs none (it splits inside decode).
parallel::ContextParallelPlan autoencoder_kl_wan_plan(VideoSplit split = VideoSplit::rows);

class AutoencoderKLWan : public nn::Model {
 public:
  explicit AutoencoderKLWan(const WanVaeConfig& config);
  const WanVaeConfig& config() const { return config_; }
  // latents (B, z_dim, F, h, w), already denormalised by the pipeline -> sample
  // (B, 3, 1 + 4(F-1), 8h, 8w), clamped to [-1, 1].
  Tensor decode(const Tensor& latents) const;
  // video (B, in_channels, F, H, W) in [-1, 1] -> the posterior's mean (diffusers' latent_dist.mode()),
  // not normalised: (B, z_dim, 1 + (F-1)/4, H/8, W/8) for Wan 2.1's layout (integer division; frames
  // after the last whole chunk of four are left out, as diffusers does). One rank only: the
  // encoder has no split plan.
  Tensor encode(const Tensor& video) const;
  // The posterior's moments encode takes its mean from: (B, 2 z_dim, F', h, w), the log-variance second.
  Tensor encode_moments(const Tensor& video) const;
  // The registry's call: `latents` -> {`sample`: decode(latents)}, or `sample` -> {`latent`: encode(sample)}.
  nn::TensorMap forward(const nn::TensorMap& inputs) const override;
  parallel::ContextParallelPlan context_parallel_plan() const override { return autoencoder_kl_wan_plan(split_); }
  // Before enable_parallelism, which installs the split's plan; rows unless set.
  void set_video_split(VideoSplit split);

 private:
  Tensor decode_frames(const Tensor& z, comm::Communicator& group) const;

  WanVaeConfig config_;
  VideoSplit split_ = VideoSplit::rows;
  CausalConv3d& post_quant_conv_;
  WanDecoder3d& decoder_;
  // Made after the decoder, so that a preset's random weights for the decoder stay what they were.
  WanEncoder3d& encoder_;
  CausalConv3d& quant_conv_;
};

// As load_autoencoder_kl; accepts _class_name AutoencoderKLWan and AutoencoderKLQwenImage.
std::unique_ptr<AutoencoderKLWan> load_autoencoder_kl_wan(const std::string& path, const std::string& config_path = "");

}  // namespace cpdit::models::vae
