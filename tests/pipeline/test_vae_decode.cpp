// What the pipelines do around their VAE decoders: FLUX.1's unscaling, Wan's denormalisation, and the
// 8-bit conversion of the decoded image.
#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <gtest/gtest.h>

namespace cpdit::pipeline {
namespace {

TEST(VaeDecode, FluxLatentsAreUnscaledThenShifted) {
  models::vae::KLConfig config;
  config.latent_channels = 2;
  config.scaling_factor = 0.3611;
  config.shift_factor = 0.1159;
  const Tensor latents = Tensor::from_vector({0.0f, 0.3611f, -0.7222f, 1.0f}, {1, 2, 1, 2});
  const Tensor z = unscale_kl_latents(latents, config);
  const float* p = z.data<float>();
  // f32 arithmetic of two ops: within a few ulps of the exact values.
  EXPECT_NEAR(p[0], 0.1159, 1e-6);
  EXPECT_NEAR(p[1], 1.1159, 1e-6);
  EXPECT_NEAR(p[2], -1.8841, 1e-6);
  EXPECT_NEAR(p[3], 1.0 / 0.3611 + 0.1159, 1e-6);
  EXPECT_THROW(unscale_kl_latents(Tensor::zeros({1, 3, 2, 2}), config), Error);  // 3 channels, config 2
}

TEST(VaeDecode, WanLatentsTakeEachChannelsStdAndMean) {
  models::vae::WanVaeConfig config;
  config.z_dim = 2;
  config.latents_mean = {-0.5, 0.25};
  config.latents_std = {2.0, 1.5};
  const Tensor latents = Tensor::from_vector({1.0f, 2.0f, 1.0f, 2.0f}, {1, 2, 2, 1, 1});  // channel, frame
  const Tensor z = denormalize_wan_latents(latents, config);
  const float* p = z.data<float>();
  EXPECT_FLOAT_EQ(p[0], 1.5f);   // 1 * 2 - 0.5
  EXPECT_FLOAT_EQ(p[1], 3.5f);   // 2 * 2 - 0.5
  EXPECT_FLOAT_EQ(p[2], 1.75f);  // 1 * 1.5 + 0.25
  EXPECT_FLOAT_EQ(p[3], 3.25f);
  config.latents_std.clear();
  EXPECT_THROW(denormalize_wan_latents(latents, config), Error);
}

TEST(VaeDecode, PixelsAreChannelsLastInTheUnitRangeAndRgbBytesRoundThem) {
  // Pixel 0: -1, 0, 1; pixel 1: beyond the range and NaN.
  const Tensor sample = Tensor::from_vector({-1.0f, 7.0f, 0.0f, -3.0f, 1.0f, NAN}, {1, 3, 1, 2});
  const Tensor pixels = postprocess_pixels(sample);
  ASSERT_EQ(pixels.shape(), (Shape{1, 1, 2, 3}));
  const float* p = pixels.data<float>();
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[1], 0.5f);
  EXPECT_EQ(p[2], 1.0f);
  EXPECT_EQ(p[3], 1.0f);  // 7 clamps to 1
  EXPECT_EQ(p[4], 0.0f);  // -3 clamps to 0
  // 0.5 * 255 = 127.5 rounds to even: 128; NaN is written as 0.
  EXPECT_EQ(pixels_to_rgb8(pixels), (std::vector<uint8_t>{0, 128, 255, 255, 0, 0}));
  EXPECT_THROW(postprocess_pixels(Tensor::zeros({1, 4, 2, 2})), Error);
  EXPECT_THROW(pixels_to_rgb8(pixels, 1), Error);
}

TEST(VaeDecode, VideoPixelsAreFramesOfChannelsLast) {
  // (B=1, C=3, F=2, 1, 1): frame 0 is (-1, 0, 1), frame 1 is (1, 1, -1).
  const Tensor sample = Tensor::from_vector({-1.0f, 1.0f, 0.0f, 1.0f, 1.0f, -1.0f}, {1, 3, 2, 1, 1});
  const Tensor video = postprocess_pixels(sample);
  ASSERT_EQ(video.shape(), (Shape{1, 2, 1, 1, 3}));
  EXPECT_EQ(pixels_to_rgb8(video, 0), (std::vector<uint8_t>{0, 128, 255}));
  EXPECT_EQ(pixels_to_rgb8(video, 1), (std::vector<uint8_t>{255, 255, 0}));
}

}  // namespace
}  // namespace cpdit::pipeline
