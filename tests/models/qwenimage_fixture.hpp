#pragma once
// Shared by the Qwen-Image tests: the qwenimage_tiny fixture (diffusers' own numbers), random inputs
// of its config, and the tolerance every comparison uses.
#include "support/model_fixture.hpp"
#include "support/random_normal.hpp"
#include "support/relative_error.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/qwenimage/checkpoint.hpp>

#include <string>
#include <vector>

namespace cpdit::models::qwenimage::testing {

// float32 and float64 runs of the fixture models differ by ~2e-6 of their output range; the porting
// mistakes the fixture README lists move outputs by 1e-4 or more of it. 1e-5 of the range sits between.
constexpr double kRelativeTolerance = 1e-5;

constexpr const char* kFixture = "qwenimage_tiny";
// The zero_cond_t fixture (tools/reference/qwenimage_zero_cond_t.py): batch 2, two image segments.
constexpr const char* kZeroCondT = "qwenimage_zero_cond_t";

inline std::string fixture_dir() { return cpdit::testing::fixture_dir(kFixture); }

inline QwenImageCheckpoint fixture_checkpoint(const char* name = kFixture) {
  return read_qwenimage_checkpoint(cpdit::testing::fixture_weights(name), cpdit::testing::fixture_config(name));
}

inline nn::TensorMap fixture_inputs(const char* name = kFixture) {
  return cpdit::testing::fixture_file(name, "inputs");
}

// The fixture's intermediates; `proj_out` is the model's sample (no expected.safetensors is kept).
inline nn::TensorMap fixture_intermediates() { return cpdit::testing::fixture_file(kFixture, "intermediates"); }

using cpdit::testing::relative_error;  // max |got - want| / max |want|

// Random inputs of the fixture's config: image segments (frames, h, w) in token units, `text` tokens
// of which the last `padded` are masked out (no mask at all when padded < 0), timestep 0.4.
inline nn::TensorMap random_inputs(const QwenImageConfig& config, const std::vector<std::array<int64_t, 3>>& segments,
                                   int64_t text, int64_t padded, unsigned seed) {
  int64_t tokens = 0;
  std::vector<int64_t> shapes;
  for (const auto& s : segments) {
    tokens += s[0] * s[1] * s[2];
    shapes.insert(shapes.end(), s.begin(), s.end());
  }
  Tensor img_shapes = Tensor::empty({1, int64_t(segments.size()), 3}, DType::i64);
  std::copy(shapes.begin(), shapes.end(), img_shapes.data<int64_t>());
  nn::TensorMap inputs{
      {"hidden_states", cpdit::testing::random_normal({1, tokens, config.in_channels}, seed)},
      {"encoder_hidden_states", cpdit::testing::random_normal({1, text, config.joint_attention_dim}, seed + 1)},
      {"timestep", Tensor::full({1}, 0.4)},
      {"img_shapes", img_shapes}};
  if (padded >= 0) {
    Tensor mask = Tensor::empty({1, text}, DType::i64);
    for (int64_t j = 0; j < text; ++j) mask.data<int64_t>()[j] = j < text - padded ? 1 : 0;
    inputs["encoder_hidden_states_mask"] = mask;
  }
  return inputs;
}

}  // namespace cpdit::models::qwenimage::testing
