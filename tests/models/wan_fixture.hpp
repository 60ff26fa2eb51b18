#pragma once
// Shared by the Wan tests: the wan_tiny fixture (diffusers' own numbers) and random inputs of its
// config.
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/wan/checkpoint.hpp>

#include <random>
#include <string>

namespace cpdit::models::wan::testing {

constexpr const char* kFixture = "wan_tiny";

inline std::string fixture_dir() { return cpdit::testing::fixture_dir(kFixture); }

inline WanCheckpoint fixture_checkpoint() {
  return read_wan_checkpoint(cpdit::testing::fixture_weights(kFixture), cpdit::testing::fixture_config(kFixture));
}

inline nn::TensorMap fixture_inputs() { return cpdit::testing::fixture_file(kFixture, "inputs"); }

// The intermediates of a Wan 2.1 network's fixture as cpdit's modules return them: diffusers records
// the patch embedding's Conv3d output (B, D, F', H', W'), cpdit's returns its tokens (B, S, D).
inline nn::TensorMap wan_intermediates(const std::string& fixture) {
  nn::TensorMap expected = cpdit::testing::fixture_file(fixture, "intermediates");
  const Tensor conv = expected.at("patch_embedding");
  expected["patch_embedding"] = conv.reshape({conv.size(0), conv.size(1), -1}).permute({0, 2, 1}).contiguous();
  return expected;
}

// A latent (1, C, frames, rows, cols), 12 text tokens and a timestep; per_token: one timestep per
// latent token (B, S), as Wan 2.2 TI2V passes it.
inline nn::TensorMap random_inputs(const WanConfig& config, int64_t frames, int64_t rows, int64_t cols, bool per_token,
                                   unsigned seed) {
  std::mt19937 rng(seed);
  const int64_t tokens = frames / config.patch_size[0] * (rows / config.patch_size[1]) * (cols / config.patch_size[2]);
  std::uniform_real_distribution<float> t(0.0f, 1000.0f);
  std::vector<float> timesteps(per_token ? size_t(tokens) : 1);
  for (float& v : timesteps) v = t(rng);
  using cpdit::testing::random_normal;
  return {{"hidden_states", random_normal({1, config.in_channels, frames, rows, cols}, rng)},
          {"encoder_hidden_states", random_normal({1, 12, config.text_dim}, rng)},
          {"timestep", per_token ? Tensor::from_vector(timesteps, {1, tokens}) : Tensor::from_vector(timesteps, {1})}};
}

}  // namespace cpdit::models::wan::testing
