#pragma once
// Shared by the LTX-Video tests: the ltx_tiny fixture (diffusers' own numbers), the per-token
// timestep / padded text fixture made from it (tools/reference/ltx_video_per_token.py), random
// inputs of its config, and the tolerance every comparison uses.
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"
#include "support/relative_error.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/ltx_video/checkpoint.hpp>

#include <array>
#include <string>

namespace cpdit::models::ltx_video::testing {

// float32 and float64 runs of the fixture models differ by ~2e-6 of their output range; the porting
// mistakes the fixture README lists move outputs by 1e-4 or more of it. 1e-5 of the range sits between.
constexpr double kRelativeTolerance = 1e-5;

constexpr const char* kFixture = "ltx_tiny";

inline std::string fixture_dir(const std::string& name = kFixture) { return cpdit::testing::fixture_dir(name); }

inline LtxVideoCheckpoint fixture_checkpoint() {
  return read_ltx_video_checkpoint(cpdit::testing::fixture_weights(kFixture), cpdit::testing::fixture_config(kFixture));
}

inline nn::TensorMap fixture_inputs(const std::string& name = kFixture) {
  return cpdit::testing::fixture_file(name, "inputs");
}

// The fixture's intermediates; `proj_out` is the model's sample (no expected.safetensors is kept).
inline nn::TensorMap fixture_intermediates() { return cpdit::testing::fixture_file(kFixture, "intermediates"); }

using cpdit::testing::relative_error;  // max |got - want| / max |want|

// Random inputs of the fixture's config on a (frames, height, width) latent grid, `text` tokens of
// which the last `padded` are masked out, and a timestep per token (B = 1).
inline nn::TensorMap random_inputs(const LtxVideoConfig& config, std::array<int64_t, 3> grid, int64_t text,
                                   int64_t padded, unsigned seed) {
  const int64_t tokens = grid[0] * grid[1] * grid[2];
  Tensor mask = Tensor::empty({1, text}, DType::boolean);
  for (int64_t j = 0; j < text; ++j) mask.data<bool>()[j] = j < text - padded;
  Tensor timestep = Tensor::empty({1, tokens});
  for (int64_t i = 0; i < tokens; ++i) timestep.data<float>()[i] = float(50 + (i * 37) % 900);
  auto scalar = [](int64_t v) { return Tensor::full({1}, double(v), DType::i64); };
  return {{"hidden_states", cpdit::testing::random_normal({1, tokens, config.in_channels}, seed)},
          {"encoder_hidden_states", cpdit::testing::random_normal({1, text, config.caption_channels}, seed + 1)},
          {"encoder_attention_mask", mask},
          {"timestep", timestep},
          {"num_frames", scalar(grid[0])},
          {"height", scalar(grid[1])},
          {"width", scalar(grid[2])},
          {"rope_interpolation_scale", Tensor::from_vector({8.0f / 24.0f, 32.0f, 32.0f}, {3})}};
}

}  // namespace cpdit::models::ltx_video::testing
