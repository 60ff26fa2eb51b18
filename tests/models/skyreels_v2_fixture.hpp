#pragma once
// Shared by the SkyReels-V2 tests: the skyreels_v2_tiny fixture (diffusers' own numbers), the same
// weights with fps weights added or another num_frame_per_block, and random diffusion-forcing inputs.
#include "models/wan_fixture.hpp"
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/skyreels_v2/model.hpp>

#include <string>
#include <vector>

namespace cpdit::models::skyreels_v2::testing {

constexpr const char* kFixture = "skyreels_v2_tiny";

inline std::string fixture_dir() { return cpdit::testing::fixture_dir(kFixture); }

inline SkyReelsV2Checkpoint fixture_checkpoint() {
  return read_skyreels_v2_checkpoint(cpdit::testing::fixture_weights(kFixture),
                                     cpdit::testing::fixture_config(kFixture));
}

inline nn::TensorMap fixture_inputs() { return cpdit::testing::fixture_file(kFixture, "inputs"); }

using wan::testing::wan_intermediates;  // SkyReels-V2 is a Wan 2.1 network

// The fixture's weights with inject_sample_info on: seeded fps_embedding and fps_projection weights
// of the sizes diffusers gives them (scaled like the fixture's, 1/sqrt(fan_in)).
inline SkyReelsV2Checkpoint with_fps(SkyReelsV2Checkpoint ck) {
  const int64_t dim = ck.config.inner_dim();
  const float s = 1.0f / std::sqrt(float(dim));
  ck.state["fps_embedding.weight"] = cpdit::testing::random_normal({2, dim}, 11, 0.5f);
  ck.state["fps_projection.net.0.proj.weight"] = cpdit::testing::random_normal({dim, dim}, 12, s);
  ck.state["fps_projection.net.0.proj.bias"] = cpdit::testing::random_normal({dim}, 13, 0.1f);
  ck.state["fps_projection.net.2.weight"] = cpdit::testing::random_normal({6 * dim, dim}, 14, s);
  ck.state["fps_projection.net.2.bias"] = cpdit::testing::random_normal({6 * dim}, 15, 0.1f);
  ck.config.inject_sample_info = true;
  return ck;
}

inline SkyReelsV2Checkpoint with_frames_per_block(SkyReelsV2Checkpoint ck, int64_t frames_per_block) {
  ck.config.num_frame_per_block = frames_per_block;
  return ck;
}

// Diffusion-forcing inputs: a latent (batch, 4, frames, rows, cols), 10 text tokens and a different
// timestep for every latent frame, decreasing like the pipeline's (later frames noisier is the
// pipeline's order reversed; any distinct values serve).
inline nn::TensorMap random_inputs(int64_t batch, int64_t frames, int64_t rows, int64_t cols, unsigned seed) {
  std::vector<float> timesteps;
  for (int64_t i = 0; i < batch * frames; ++i) timesteps.push_back(float((997 * (i + seed)) % 1000));
  return {{"hidden_states", cpdit::testing::random_normal({batch, 4, frames, rows, cols}, seed)},
          {"encoder_hidden_states", cpdit::testing::random_normal({batch, 10, 16}, seed + 100)},
          {"timestep", Tensor::from_vector(timesteps, {batch, frames}).to(DType::i64)},
          {"enable_diffusion_forcing", Tensor::from_vector({1.0f}, {1}).to(DType::boolean)}};
}

}  // namespace cpdit::models::skyreels_v2::testing
