// The VAE decoders against diffusers' own numbers (vae_kl_tiny, vae_wan_tiny).
#include "models/vae_fixture.hpp"
#include "support/record_outputs.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::vae {
namespace {

using testing::fixture_config;
using testing::fixture_weights;
using testing::fixture_file;
using testing::relative_to_range;

// The fixtures' README: a correct float32 port lands within ~1e-6 of the range; mistakes move
// the output by 1e-4 (a GroupNorm eps of 1e-5) or far more.
constexpr double kTolerance = 1e-5;

TEST(AutoencoderKL, DecodesTheFixtureAndItsIntermediates) {
  auto vae = load_autoencoder_kl(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny"));
  EXPECT_FLOAT_EQ(vae->config().scaling_factor, 0.3611);  // kept for the pipeline, not applied here
  const cpdit::testing::Recorded recorded = cpdit::testing::record_outputs(*vae);
  const Tensor sample = vae->decode(fixture_file("vae_kl_tiny", "inputs").at("latents"));
  EXPECT_LE(relative_to_range(sample, fixture_file("vae_kl_tiny", "expected").at("sample")), kTolerance);
  for (const auto& [name, want] : fixture_file("vae_kl_tiny", "intermediates")) {
    ASSERT_TRUE(recorded->count(name)) << name;
    EXPECT_LE(relative_to_range(recorded->at(name), want), kTolerance) << name;
  }
}

TEST(AutoencoderKL, EncodesAnImageToTheMoments) {
  // vae_kl_tiny_encode: the same model's encoder (tools/reference/vae_kl_encode.py).
  auto vae = load_autoencoder_kl(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny"));
  const Tensor moments = vae->encode(fixture_file("vae_kl_tiny_encode", "inputs").at("sample"));
  EXPECT_LE(relative_to_range(moments, fixture_file("vae_kl_tiny_encode", "expected").at("moments")), kTolerance);
}

TEST(AutoencoderKL, RefusesLatentsOfTheWrongShape) {
  auto vae = load_autoencoder_kl(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny"));
  EXPECT_THROW(vae->decode(Tensor::zeros({1, 16, 4, 4})), Error);
  EXPECT_THROW(vae->decode(Tensor::zeros({1, 4, 2, 4, 4})), Error);
  EXPECT_THROW(vae->encode(Tensor::zeros({1, 4, 8, 8})), Error);
}

TEST(AutoencoderKLWan, DecodesTheFixtureFrameByFrame) {
  auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
  ASSERT_EQ(vae->config().latents_std.size(), 4u);  // kept for the pipeline, not applied here
  const cpdit::testing::Recorded recorded = cpdit::testing::record_outputs(*vae);
  const Tensor sample = vae->decode(fixture_file("vae_wan_tiny", "inputs").at("latents"));
  EXPECT_EQ(sample.shape(), (Shape{1, 3, 5, 24, 32}));  // 1 frame from the first latent frame, 4 from the next
  EXPECT_LE(relative_to_range(sample, fixture_file("vae_wan_tiny", "expected").at("sample")), kTolerance);
  EXPECT_LE(relative_to_range(recorded->at("post_quant_conv"),
                              fixture_file("vae_wan_tiny", "intermediates").at("post_quant_conv")),
            kTolerance);
}

TEST(AutoencoderKLWan, LaterFramesDoNotChangeEarlierOnes) {
  // Causal in time: decoding the first latent frame alone gives the first video frame of the full
  // decode exactly (the frame cache adds the past, never the future).
  auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
  const Tensor latents = fixture_file("vae_wan_tiny", "inputs").at("latents");
  const Tensor first = vae->decode(latents.narrow(2, 0, 1));
  const Tensor full = vae->decode(latents);
  EXPECT_EQ(relative_to_range(first, full.narrow(2, 0, 1).contiguous()), 0.0);
}

TEST(AutoencoderKLWan, RefusesAConfigOfAnotherClass) {
  EXPECT_THROW(load_autoencoder_kl_wan(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny")), Error);
  EXPECT_THROW(load_autoencoder_kl(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny")), Error);
}

}  // namespace
}  // namespace cpdit::models::vae
