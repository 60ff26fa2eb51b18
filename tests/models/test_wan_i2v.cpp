// The image conditioning the Wan 2.1 network shares between WanTransformer3DModel and
// SkyReelsV2Transformer3DModel (image_dim set: I2V, and FLF2V with pos_embed) against diffusers' own
// numbers (tests/data/fixtures/{skyreels_v2_i2v_tiny,wan_flf2v_tiny}, tools/reference/wan_i2v_transformer.py),
// and under context parallelism against one rank: the image tokens, like the text, stay whole on every rank.
#include "models/wan_fixture.hpp"
#include "support/plan_parity.hpp"
#include "support/relative_error.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/skyreels_v2/model.hpp>
#include <cpdit/models/wan/checkpoint.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

namespace cpdit::models {
namespace {

using cpdit::testing::fixture_config;
using cpdit::testing::fixture_file;
using cpdit::testing::fixture_weights;
using cpdit::testing::relative_error;  // max |got - want| / max |want|

wan::WanCheckpoint flf2v_checkpoint() {
  return wan::read_wan_checkpoint(fixture_weights("wan_flf2v_tiny"), fixture_config("wan_flf2v_tiny"));
}

skyreels_v2::SkyReelsV2Checkpoint skyreels_i2v_checkpoint() {
  return skyreels_v2::read_skyreels_v2_checkpoint(fixture_weights("skyreels_v2_i2v_tiny"),
                                                  fixture_config("skyreels_v2_i2v_tiny"));
}

nn::TensorMap inputs_of(const std::string& name) { return fixture_file(name, "inputs"); }

// As for the text-to-video fixtures: float32 against float64 runs of these widths differ by about
// 5e-7 relative, while leaving out pos_embed moves the FLF2V sample by 3.7% and the image tokens move
// the I2V one by 100% (printed by the fixture script). 1e-5 of the range sits between the two.
constexpr double kRelative = 1e-5;

// The sample, and every module output the fixture recorded (the patch embedding as tokens).
void expect_matches_diffusers(nn::Model& model, const std::string& name) {
  SCOPED_TRACE(name);
  cpdit::testing::expect_forward_matches(model, inputs_of(name), "sample", fixture_file(name, "expected").at("sample"),
                                         wan::testing::wan_intermediates(name), relative_error, kRelative);
}

TEST(WanImageConditioning, SkyReelsV2I2VMatchesDiffusers) {
  auto model = skyreels_v2::load_skyreels_v2(skyreels_i2v_checkpoint());
  expect_matches_diffusers(*model, "skyreels_v2_i2v_tiny");
}

TEST(WanImageConditioning, WanFlf2vWithPosEmbedMatchesDiffusers) {
  auto model = wan::load_wan(flf2v_checkpoint());
  expect_matches_diffusers(*model, "wan_flf2v_tiny");
}

// The image-conditioning fields are told by the tensors, as the text-to-video ones are.
TEST(WanImageConditioning, ConfigIsInferredFromTheTensors) {
  const wan::WanCheckpoint ck = flf2v_checkpoint();
  const wan::WanConfig inferred = wan::WanConfig::infer(ck.state);
  EXPECT_EQ(inferred.image_dim, 8);
  EXPECT_EQ(inferred.added_kv_proj_dim, 24);
  EXPECT_EQ(inferred.pos_embed_seq_len, 514);
  EXPECT_EQ(inferred.in_channels, 36);
  const wan::WanConfig text_only = wan::WanConfig::infer(skyreels_i2v_checkpoint().state);
  EXPECT_EQ(text_only.pos_embed_seq_len, 0);  // SkyReels-V2 I2V has no first-last-frame table
}

TEST(WanImageConditioning, RefusesMissingOrMisshapenImages) {
  auto i2v = skyreels_v2::load_skyreels_v2(skyreels_i2v_checkpoint());
  nn::TensorMap inputs = inputs_of("skyreels_v2_i2v_tiny");
  inputs.erase("encoder_hidden_states_image");
  EXPECT_THROW(i2v->forward(inputs), Error);  // an I2V model needs its image tokens
  inputs = inputs_of("skyreels_v2_i2v_tiny");
  inputs["encoder_hidden_states_image"] = Tensor::zeros({1, 257, 7});  // not image_dim wide
  EXPECT_THROW(i2v->forward(inputs), Error);

  auto flf2v = wan::load_wan(flf2v_checkpoint());
  inputs = inputs_of("wan_flf2v_tiny");
  inputs["encoder_hidden_states_image"] = inputs.at("encoder_hidden_states_image").narrow(0, 0, 1).contiguous();
  EXPECT_THROW(flf2v->forward(inputs), Error);  // pos_embed spans a first and a last image

  // A text-to-video model takes no image tokens, and half an image configuration is refused.
  auto t2v = wan::load_wan(wan::testing::fixture_checkpoint());
  inputs = wan::testing::fixture_inputs();
  inputs["encoder_hidden_states_image"] = Tensor::zeros({1, 257, 8});
  EXPECT_THROW(t2v->forward(inputs), Error);
  wan::WanConfig half = flf2v_checkpoint().config;
  half.added_kv_proj_dim = 0;
  EXPECT_THROW(wan::WanTransformer3DModel{half}, Error);
  half = flf2v_checkpoint().config;
  half.added_kv_proj_dim = 32;  // add_k_proj takes the image embedder's output: the model width 24
  EXPECT_THROW(wan::WanTransformer3DModel{half}, Error);
}

// The plans split only the video tokens: the image tokens' keys are whole on every rank, so every
// mesh equals one rank. 36 tokens: uneven shards for (2, 2). Tolerance: the LSE merge of split
// attention rounds f32 sums of outputs of magnitude 4-6 differently, far below what a split image
// context (each rank attending to a share of the 257 image keys) moves them by.
constexpr double kParity = 1e-5;
const std::vector<cpdit::testing::MeshDegrees> kMeshes{{2, 1}, {1, 2}, {2, 2}};
const std::vector<parallel::RotateMethod> kRotations{parallel::RotateMethod::p2p, parallel::RotateMethod::allgather};

double max_diff(const Tensor& got, const Tensor& want) { return max_abs_diff(got, want); }

TEST(WanImageConditioningParallel, SkyReelsV2I2VEveryMeshEqualsOneRank) {
  const skyreels_v2::SkyReelsV2Checkpoint ck = skyreels_i2v_checkpoint();
  cpdit::testing::expect_plan_parity([&] { return skyreels_v2::load_skyreels_v2(ck); },
                                     inputs_of("skyreels_v2_i2v_tiny"), "SkyReels-V2 I2V", kMeshes, kRotations,
                                     max_diff, kParity);
}

TEST(WanImageConditioningParallel, WanFlf2vEveryMeshEqualsOneRank) {
  const wan::WanCheckpoint ck = flf2v_checkpoint();
  cpdit::testing::expect_plan_parity([&] { return wan::load_wan(ck); }, inputs_of("wan_flf2v_tiny"), "Wan FLF2V",
                                     kMeshes, kRotations, max_diff, kParity);
}

// `cpdit forward` hands the image tokens of the inputs file to the model as diffusers names them, on a
// ring x Ulysses mesh; diffusers' sample within the one-rank bound.
TEST(WanImageConditioningCli, ForwardTakesTheImageTokens) {
  cpdit::testing::TempDir dir("wan_i2v_cli");
  const std::string out = dir.file("sample.safetensors");
  const auto r = cpdit::testing::run_cli("forward --model " + fixture_weights("wan_flf2v_tiny") + " --config " +
                                         fixture_config("wan_flf2v_tiny") + " --inputs " +
                                         cpdit::testing::fixture_dir("wan_flf2v_tiny") + "/inputs.safetensors" +
                                         " --threads 1 --ring 2 --ulysses 2 --output " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const Tensor want = fixture_file("wan_flf2v_tiny", "expected").at("sample");
  EXPECT_LE(relative_error(io::load_safetensors(out).at("sample"), want), kRelative);
}

}  // namespace
}  // namespace cpdit::models
