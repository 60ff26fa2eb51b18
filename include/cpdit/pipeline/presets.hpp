#pragma once
// Built-in models with seeded random weights, for demos, tests and benchmarks without a download.
//
//   flux-tiny  FLUX.1 at the test fixture's widths (2 heads of 16, text width 32, one block of each
//              kind) but 64 input channels, so it takes real FLUX.1 latents; no guidance (schnell-like).
//   flux-mini  FLUX.1 widths (3072 hidden, 24 heads of 128, MLP 12288, text width 4096, pooled 768),
//              2 double and 4 single blocks, with a guidance embedder (dev-like).
//   wan-tiny   Wan at the test fixture's widths (2 heads of 12, text width 16) but 16 latent channels.
//   wan-mini   Wan 2.1 1.3B widths (12 heads of 128, FFN 8960, text width 4096), 2 blocks.
//   qwen-mini  Qwen-Image widths (3072 hidden, 24 heads of 128, text width 3584, 64 input channels),
//              2 dual-stream blocks; runs with Qwen-Image's scheduler and true CFG.
//   skyreels-tiny, skyreels-mini  SkyReels-V2 text-to-video (diffusion forcing) at the wan-tiny and
//              wan-mini widths, blocks of one latent frame, no fps embedding.
//   ltx-tiny   LTX-Video at the test fixture's widths (2 heads of 12, caption width 16), 8 latent channels.
//   ltx-mini   LTX-Video 2B widths (32 heads of 64, 128 latent channels, caption width 4096), 2 blocks;
//              LTX-Video's scheduler and classifier-free guidance.
#include <cpdit/models/flux/checkpoint.hpp>
#include <cpdit/models/ltx_video/checkpoint.hpp>
#include <cpdit/models/qwenimage/checkpoint.hpp>
#include <cpdit/models/skyreels_v2/model.hpp>
#include <cpdit/models/wan/checkpoint.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/pipeline/flow_match_euler.hpp>
#include <cpdit/pipeline/unipc.hpp>

#include <string>
#include <vector>

namespace cpdit::pipeline {

// What a preset's weights are seeded by: not a run's seed, which seeds its noise; a preset is one model,
// the same for every run and every request a resident pipeline takes.
inline constexpr uint64_t kPresetWeightsSeed = 0;

std::vector<std::string> preset_names();
// The preset's transformer parameters, counted from the shapes its model declares (nothing is allocated
// or drawn), for `cpdit presets`.
int64_t preset_parameters(const std::string& name);
// Refuses a name that is not a preset, with the list of presets.
void check_preset(const std::string& name);

// The preset as the model registry hands models out (weights converted once, shared by replicas);
// unknown names are refused with the list.
models::LoadedModel preset_model(const std::string& name, uint64_t seed, const nn::LoadOptions& options);

// Unknown names are refused with the list of presets.
models::flux::FluxConfig flux_preset_config(const std::string& name);
// The scheduler that goes with a preset: FLUX.1-dev's for flux-mini, FLUX.1-schnell's for flux-tiny.
FlowMatchEulerConfig flux_preset_scheduler(const std::string& name);
models::flux::FluxCheckpoint flux_preset(const std::string& name, uint64_t seed);

// The Wan 2.1 widths of a video preset (wan-* and skyreels-* alike).
models::wan::WanConfig wan_preset_config(const std::string& name);
models::wan::WanCheckpoint wan_preset(const std::string& name, uint64_t seed);

// qwen-mini: the released widths, 2 layers.
models::qwenimage::QwenImageConfig qwenimage_preset_config(const std::string& name);
models::qwenimage::QwenImageCheckpoint qwenimage_preset(const std::string& name, uint64_t seed);
// skyreels-tiny or skyreels-mini.
models::skyreels_v2::SkyReelsV2Checkpoint skyreels_preset(const std::string& name, uint64_t seed);
// The scheduler that goes with a video preset: UniPC with Wan 2.1's flow_shift 3, SkyReels-V2 T2V's 8.
UniPCConfig video_preset_scheduler(const std::string& name);

// ltx-tiny or ltx-mini.
models::ltx_video::LtxVideoConfig ltx_preset_config(const std::string& name);
models::ltx_video::LtxVideoCheckpoint ltx_preset(const std::string& name, uint64_t seed);

// Random values for every parameter of `model`, deterministic in `seed`: matrices
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as PyTorch initialises a Linear (fan_in = elements per output
// row), norm gains 1 (vectors named *.weight, and *.gamma), other vectors U(-0.02, 0.02) (biases).
nn::StateDict random_state_dict(nn::Module& model, uint64_t seed);

}  // namespace cpdit::pipeline
