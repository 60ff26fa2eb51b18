// AutoencoderKLLTXVideo's decoder against diffusers' own numbers (vae_ltx_tiny, made by
// tools/reference/vae_ltx.py): the 0.9.0 layout (plain/) and the timestep-conditioned 0.9.1+ one
// with residual upsamplers (timestep/), in process and through `cpdit forward`.
#include "models/vae_fixture.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/nn/load.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::models::vae {
namespace {

using testing::fixture_config;
using testing::fixture_dir;
using testing::fixture_file;
using testing::fixture_weights;
using testing::relative_to_range;

// The fixtures' README: a float32 port lands within ~1e-6 of the output range of a float64 run;
// porting mistakes (an RMS eps of 1e-6 for 1e-8 aside) move it by 1e-4 or more.
constexpr double kTolerance = 1e-5;

const char* const kPlain = "vae_ltx_tiny/plain";
const char* const kTimestep = "vae_ltx_tiny/timestep";

std::unique_ptr<AutoencoderKLLTXVideo> load(const std::string& fixture) {
  return load_autoencoder_kl_ltx(fixture_weights(fixture), fixture_config(fixture));
}

void expect_fixture(const std::string& fixture, const Shape& shape) {
  auto vae = load(fixture);
  const Tensor expected = fixture_file(fixture, "expected").at("sample");
  EXPECT_EQ(expected.shape(), shape);
  cpdit::testing::expect_forward_matches(*vae, fixture_file(fixture, "inputs"), "sample", expected,
                                         fixture_file(fixture, "intermediates"), relative_to_range, kTolerance);
}

// 2 latent frames of 3x4: two x2 upsamplers give 1 + 4 (2 - 1) frames, patch 2 makes 8x in space.
TEST(AutoencoderKLLTXVideo, DecodesThePlainFixtureAndItsIntermediates) { expect_fixture(kPlain, {1, 3, 5, 24, 32}); }

// Three upsamplers: 1 + 8 (2 - 1) frames, 16x in space.
TEST(AutoencoderKLLTXVideo, DecodesTheTimestepConditionedFixtureAndItsIntermediates) {
  expect_fixture(kTimestep, {1, 3, 9, 48, 64});
}

TEST(AutoencoderKLLTXVideo, TheTimestepChangesTheConditionedDecode) {
  // The decode timestep reaches the output: another value moves the sample (guards against a
  // conditioning that is built but never applied).
  auto vae = load(kTimestep);
  const Tensor latents = fixture_file(kTimestep, "inputs").at("latents");
  const Tensor want = fixture_file(kTimestep, "expected").at("sample");
  EXPECT_GT(relative_to_range(vae->decode(latents, Tensor::from_vector({0.5f}, {1})), want), 1e-3);
}

TEST(AutoencoderKLLTXVideo, KeepsTheLatentStatisticsForThePipeline) {
  auto vae = load(kPlain);
  const nn::TensorMap weights = io::load_safetensors(fixture_weights(kPlain));
  const nn::StateDict state = nn::parameters_of(*vae);
  EXPECT_EQ(relative_to_range(state.at("latents_mean").values(), weights.at("latents_mean")), 0.0);
  EXPECT_EQ(relative_to_range(state.at("latents_std").values(), weights.at("latents_std")), 0.0);
}

// LTXPipeline's own _denormalize_latents (and noise mixing at decode_noise_scale 0.025 for the
// conditioned decoder): the same float32 operations in the same order, so exact to a few ulps.
TEST(AutoencoderKLLTXVideo, PreparesLatentsAsThePipelineDoes) {
  for (const char* fixture : {kPlain, kTimestep}) {
    const nn::TensorMap pipeline = fixture_file(fixture, "pipeline");
    const auto noise = pipeline.find("noise");
    const Tensor prepared = load(fixture)->prepare_latents(
        pipeline.at("normalized"), noise == pipeline.end() ? Tensor() : noise->second, 0.025f);
    EXPECT_LE(relative_to_range(prepared, pipeline.at("prepared")), 1e-6) << fixture;
  }
  const Tensor latents = fixture_file(kPlain, "inputs").at("latents");
  EXPECT_THROW(load(kPlain)->prepare_latents(latents, latents, 0.025f), Error);  // noise without conditioning
  EXPECT_THROW(load(kTimestep)->prepare_latents(latents), Error);                // conditioning without noise
}

TEST(AutoencoderKLLTXVideo, RefusesBadInput) {
  auto plain = load(kPlain);
  auto conditioned = load(kTimestep);
  const Tensor latents = fixture_file(kPlain, "inputs").at("latents");
  const Tensor t = Tensor::from_vector({0.05f}, {1});
  EXPECT_THROW(plain->decode(Tensor::zeros({1, 8, 3, 4})), Error);         // 4-D
  EXPECT_THROW(plain->decode(Tensor::zeros({1, 4, 2, 3, 4})), Error);      // wrong channel count
  EXPECT_THROW(plain->decode(latents, t), Error);                          // a timestep it cannot use
  EXPECT_THROW(conditioned->decode(latents), Error);                       // no timestep
  EXPECT_THROW(conditioned->decode(latents, Tensor::from_vector({0.1f, 0.2f}, {2})), Error);  // one per item
  EXPECT_THROW(conditioned->decode(latents, Tensor::from_vector({NAN}, {1})), Error);
  EXPECT_THROW(load_autoencoder_kl_ltx(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny")), Error);
}

TEST(AutoencoderKLLTXVideo, RefusesConfigsItCannotRun) {
  nlohmann::json j = io::read_json(fixture_config(kTimestep));
  nlohmann::json noise = j;
  noise["decoder_inject_noise"] = {false, true, false, false};
  EXPECT_THROW(LtxVaeConfig::from_json(noise), Error);
  nlohmann::json lengths = j;
  lengths["upsample_factor"] = {2, 2};
  EXPECT_THROW(LtxVaeConfig::from_json(lengths), Error);
  nlohmann::json chain = j;
  chain["decoder_block_out_channels"] = {8, 16, 16};  // the second block would take 8 channels as 4
  EXPECT_THROW(LtxVaeConfig::from_json(chain), Error);
  EXPECT_NO_THROW(LtxVaeConfig::from_json(j));
}

// `cpdit forward` finds the class by _class_name and decodes on one rank and split by rows over
// two and three (3 latent rows, so three ranks get one row each).
TEST(AutoencoderKLLTXVideo, CliForwardDecodesOnOneTwoAndThreeRanks) {
  cpdit::testing::TempDir dir("vae_ltx_cli");
  for (const char* fixture : {kPlain, kTimestep}) {
    const Tensor expected = fixture_file(fixture, "expected").at("sample");
    for (int ranks : {1, 2, 3}) {
      const std::string out = dir.file("sample" + std::to_string(ranks) + ".safetensors");
      const auto r = cpdit::testing::run_cli("forward --model " + fixture_weights(fixture) + " --config " +
                                             fixture_config(fixture) + " --inputs " + fixture_dir(fixture) +
                                             "/inputs.safetensors --threads 1 --ranks " + std::to_string(ranks) +
                                             " --output " + out);
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_LE(relative_to_range(io::load_safetensors(out).at("sample"), expected), kTolerance)
          << fixture << " on " << ranks << " ranks";
    }
  }
}

}  // namespace
}  // namespace cpdit::models::vae
