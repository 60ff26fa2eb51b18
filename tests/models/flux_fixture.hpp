#pragma once
// Shared by the FLUX tests: the flux_tiny fixture (diffusers' own numbers) and random inputs of its
// config.
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/flux/checkpoint.hpp>

#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>

namespace cpdit::models::flux::testing {

constexpr const char* kFixture = "flux_tiny";

inline std::string fixture_dir() { return cpdit::testing::fixture_dir(kFixture); }

inline FluxCheckpoint fixture_checkpoint() {
  return read_flux_checkpoint(cpdit::testing::fixture_weights(kFixture), cpdit::testing::fixture_config(kFixture));
}

inline nn::TensorMap fixture_inputs() { return cpdit::testing::fixture_file(kFixture, "inputs"); }

// Inputs of the tiny config on an h x w token grid with `text` tokens, ids laid out as the pipeline
// lays them out (img (0, row, col), text zeros).
inline nn::TensorMap random_inputs(const FluxConfig& config, int64_t h, int64_t w, int64_t text, unsigned seed) {
  std::mt19937 rng(seed);
  auto randn = [&](const Shape& shape) { return cpdit::testing::random_normal(shape, rng); };
  std::vector<float> ids;
  for (int64_t i = 0; i < h; ++i)
    for (int64_t j = 0; j < w; ++j) ids.insert(ids.end(), {0.0f, float(i), float(j)});
  nn::TensorMap in{{"hidden_states", randn({1, h * w, config.in_channels})},
                   {"encoder_hidden_states", randn({1, text, config.joint_attention_dim})},
                   {"pooled_projections", randn({1, config.pooled_projection_dim})},
                   {"timestep", Tensor::from_vector({0.35f}, {1})},
                   {"img_ids", Tensor::from_vector(ids, {h * w, 3})},
                   {"txt_ids", Tensor::zeros({text, 3})}};
  if (config.guidance_embeds) in["guidance"] = Tensor::from_vector({3.5f}, {1});
  return in;
}

using cpdit::testing::TempDir;

}  // namespace cpdit::models::flux::testing
