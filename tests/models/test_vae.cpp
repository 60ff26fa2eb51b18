// The VAE decoders and encoders against diffusers' own numbers (vae_kl_tiny, vae_wan_tiny and their
// encode fixtures).
#include "models/vae_fixture.hpp"
#include "support/expect_error.hpp"
#include "support/record_outputs.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
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
  cpdit::testing::expect_forward_matches(*vae, fixture_file("vae_kl_tiny", "inputs"), "sample",
                                         fixture_file("vae_kl_tiny", "expected").at("sample"),
                                         fixture_file("vae_kl_tiny", "intermediates"), relative_to_range, kTolerance);
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

// vae_wan_tiny_encode: the same model's encoder and Qwen-Image's VAE (tools/reference/vae_wan_encode.py),
// whose float32 outputs lie within 3e-7 of the range from float64 runs.
TEST(AutoencoderKLWan, EncodesAVideoToTheMeanAsDiffusers) {
  auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
  // 9 frames: the first alone, then two chunks of 4 whose time downsamplers reach back across chunks.
  const Tensor latent = vae->encode(fixture_file("vae_wan_tiny_encode", "inputs").at("sample"));
  EXPECT_EQ(latent.shape(), (Shape{1, 4, 3, 4, 6}));
  EXPECT_LE(relative_to_range(latent, fixture_file("vae_wan_tiny_encode", "expected").at("latent")), kTolerance);
  // A batch of one-frame videos (images).
  EXPECT_LE(relative_to_range(vae->encode(fixture_file("vae_wan_tiny_encode", "image_inputs").at("sample")),
                              fixture_file("vae_wan_tiny_encode", "image_expected").at("latent")),
            kTolerance);
}

TEST(AutoencoderKLWan, EncodesWithQwenImagesVae) {
  // AutoencoderKLQwenImage: one downsampler, none in time, so each chunk of 4 frames stays 4 frames.
  const std::string folder = testing::fixture_dir("qwenimage_pipeline_tiny") + "/pipeline/vae";
  auto vae = load_autoencoder_kl_wan(folder);
  EXPECT_LE(relative_to_range(vae->encode(fixture_file("vae_wan_tiny_encode", "qwenimage_inputs").at("sample")),
                              fixture_file("vae_wan_tiny_encode", "qwenimage_expected").at("latent")),
            kTolerance);
}

TEST(AutoencoderKLWan, EncodingIsCausalAndLeavesOutAPartialChunk) {
  // The first 5 frames encode to the first 2 latent frames of the 9-frame encode exactly (the caches
  // carry the past, never the future); 8 frames are the same 2 chunks, the last 3 frames left out.
  auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
  const Tensor video = fixture_file("vae_wan_tiny_encode", "inputs").at("sample");
  const Tensor full = vae->encode(video).narrow(2, 0, 2).contiguous();
  EXPECT_EQ(relative_to_range(vae->encode(video.narrow(2, 0, 5).contiguous()), full), 0.0);
  EXPECT_EQ(relative_to_range(vae->encode(video.narrow(2, 0, 8).contiguous()), full), 0.0);
}

TEST(AutoencoderKLWan, RefusesAVideoItCannotEncode) {
  auto vae = load_autoencoder_kl_wan(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny"));
  EXPECT_THROW(vae->encode(Tensor::zeros({1, 3, 16, 16})), Error);        // an image, not a video
  EXPECT_THROW(vae->encode(Tensor::zeros({1, 4, 1, 16, 16})), Error);     // 4 channels, not 3
  EXPECT_THROW(vae->encode(Tensor::zeros({1, 3, 0, 16, 16})), Error);     // no frames
  EXPECT_THROW(vae->encode(Tensor::zeros({1, 3, 1, 4, 16})), Error);      // 4 rows: three halvings need 8
  EXPECT_NO_THROW(vae->encode(Tensor::zeros({1, 3, 1, 8, 8})));           // the least it encodes: one latent pixel
}

TEST(AutoencoderKLWan, RefusesAConfigOfAnotherClass) {
  EXPECT_THROW(load_autoencoder_kl_wan(fixture_weights("vae_kl_tiny"), fixture_config("vae_kl_tiny")), Error);
  EXPECT_THROW(load_autoencoder_kl(fixture_weights("vae_wan_tiny"), fixture_config("vae_wan_tiny")), Error);
}

// Both configs are read as every model's config is: a config that is no object, or a field of the
// wrong type, is one line naming the VAE; Qwen-Image's `input_channels` sets both channel counts.
TEST(VaeConfigs, ReadAsEveryModelConfigAndRefuseBadOnesInOneLine) {
  const nlohmann::json kl = io::read_json(fixture_config("vae_kl_tiny"));
  const nlohmann::json wan = io::read_json(fixture_config("vae_wan_tiny"));
  EXPECT_EQ(KLConfig::from_json(kl).block_out_channels, kl.at("block_out_channels").get<std::vector<int64_t>>());
  EXPECT_EQ(WanVaeConfig::from_json(wan).z_dim, wan.at("z_dim").get<int64_t>());
  cpdit::testing::expect_error([] { KLConfig::from_json(nlohmann::json::array()); },
                               {"AutoencoderKL config must be a JSON object"});
  cpdit::testing::expect_error([] { WanVaeConfig::from_json(nlohmann::json::array()); },
                               {"AutoencoderKLWan config must be a JSON object"});
  nlohmann::json bad = kl;
  bad["layers_per_block"] = "two";
  cpdit::testing::expect_error([&] { KLConfig::from_json(bad); }, {"AutoencoderKL config", "wrong type"});
  bad = kl;
  bad["norm_num_groups"] = 0;
  cpdit::testing::expect_error([&] { KLConfig::from_json(bad); }, {"norm_num_groups must be positive"});
  bad = wan;
  bad["z_dim"] = 1.5;
  cpdit::testing::expect_error([&] { WanVaeConfig::from_json(bad); },
                               {"AutoencoderKLWan config", "z_dim", "whole number"});
  bad = wan;
  bad["patch_size"] = 2;
  cpdit::testing::expect_error([&] { WanVaeConfig::from_json(bad); }, {"Wan 2.2 layout"});
  nlohmann::json qwen = wan;
  qwen.erase("in_channels");
  qwen.erase("out_channels");
  qwen["input_channels"] = 4;
  const WanVaeConfig four = WanVaeConfig::from_json(qwen);
  EXPECT_EQ(four.in_channels, 4);
  EXPECT_EQ(four.out_channels, 4);
}

}  // namespace
}  // namespace cpdit::models::vae
