// FLUX.1 latent packing, position ids and sharded initial noise, against the index formula of the
// diffusers Flux pipeline (token channel c·4 + dy·2 + dx, row-major token grid).
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/random.hpp>

#include <gtest/gtest.h>

using namespace cpdit;
using namespace cpdit::pipeline;

TEST(Latents, PackFollowsTheIndexFormula) {
  const int64_t B = 2, C = 3, H = 6, W = 10;
  const Tensor latents = randn({B, C, H, W}, 5);
  const Tensor packed = flux_pack(latents);
  ASSERT_EQ(packed.shape(), (Shape{B, (H / 2) * (W / 2), 4 * C}));
  const float* src = latents.data<float>();
  const float* dst = packed.data<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t y = 0; y < H; ++y)
        for (int64_t x = 0; x < W; ++x) {
          const int64_t token = (y / 2) * (W / 2) + x / 2;
          const int64_t channel = c * 4 + (y % 2) * 2 + x % 2;
          ASSERT_EQ(dst[(b * (H / 2) * (W / 2) + token) * 4 * C + channel], src[((b * C + c) * H + y) * W + x]);
        }
}

TEST(Latents, UnpackInvertsPack) {
  const Tensor latents = randn({1, 16, 8, 12}, 9);
  const Tensor round_trip = flux_unpack(flux_pack(latents), 8, 12);
  ASSERT_EQ(round_trip.shape(), latents.shape());
  EXPECT_EQ(max_abs_diff(round_trip, latents), 0.0);
  const Tensor packed = randn({2, 12, 8}, 10);
  EXPECT_EQ(max_abs_diff(flux_pack(flux_unpack(packed, 6, 8)), packed), 0.0);
}

TEST(Latents, PackedNoiseShardsAreSlicesOfTheWhole) {
  const FluxLatentShape shape = flux_latent_shape(48, 80, 16, 2);  // 3 x 5 = 15 tokens
  const Tensor whole = flux_pack(randn(shape.unpacked(), 2024));
  ASSERT_EQ(whole.shape(), shape.packed());
  EXPECT_EQ(max_abs_diff(flux_packed_noise(shape, 2024, 0, shape.tokens()), whole), 0.0);
  for (int ranks : {2, 4}) {  // 15 tokens do not divide: uneven shards
    for (int r = 0; r < ranks; ++r) {
      const int64_t begin = split_offset(shape.tokens(), ranks, r);
      const int64_t count = split_sizes(shape.tokens(), ranks)[size_t(r)];
      EXPECT_EQ(max_abs_diff(flux_packed_noise(shape, 2024, begin, count), whole.narrow(1, begin, count)), 0.0)
          << ranks << " ranks, rank " << r;
    }
  }
  EXPECT_THROW(flux_packed_noise(shape, 2024, 10, 6), Error);
}

TEST(Latents, ShapeFromImageSize) {
  const FluxLatentShape s = flux_latent_shape(1024, 768);
  EXPECT_EQ(s.unpacked(), (Shape{1, 16, 128, 96}));
  EXPECT_EQ(s.tokens(), 1024 * 768 / 256);
  EXPECT_EQ(s.packed(), (Shape{1, 3072, 64}));
  EXPECT_THROW(flux_latent_shape(1000, 1024), Error);
  EXPECT_THROW(flux_latent_shape(1024, 8), Error);
  EXPECT_THROW(flux_latent_shape(0, 1024), Error);
  try {
    flux_latent_shape(1000, 1024);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("992 or 1008"), std::string::npos) << e.what();
  }
}

// A VAE with two blocks halves the image once (factor 2^(2 - 1)): sides are multiples of 4.
TEST(Latents, ShapeFollowsTheVaeScaleFactor) {
  EXPECT_EQ(kl_vae_scale_factor(nlohmann::json::parse(R"({"block_out_channels": [8, 16]})"), "vae"), 2);
  EXPECT_EQ(kl_vae_scale_factor(nlohmann::json::parse(R"({"block_out_channels": [128, 256, 512, 512]})"), "vae"), 8);
  EXPECT_THROW(kl_vae_scale_factor(nlohmann::json::parse(R"({"block_out_channels": []})"), "vae"), Error);
  EXPECT_THROW(kl_vae_scale_factor(nlohmann::json::parse("{}"), "vae"), Error);
  const FluxLatentShape s = flux_latent_shape(32, 36, 4, 1, 2);
  EXPECT_EQ(s.unpacked(), (Shape{1, 4, 16, 18}));
  EXPECT_EQ(s.packed(), (Shape{1, 72, 16}));
  EXPECT_THROW(flux_latent_shape(32, 34, 4, 1, 2), Error);
}

TEST(Latents, IdsAreRowColumnOverThePackedGrid) {
  const Tensor ids = flux_image_ids(3, 4);
  ASSERT_EQ(ids.shape(), (Shape{12, 3}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      const float* row = ids.data<float>() + (i * 4 + j) * 3;
      EXPECT_EQ(row[0], 0.0f);
      EXPECT_EQ(row[1], float(i));
      EXPECT_EQ(row[2], float(j));
    }
  const Tensor text = flux_text_ids(7);
  ASSERT_EQ(text.shape(), (Shape{7, 3}));
  for (int64_t i = 0; i < 21; ++i) EXPECT_EQ(text.data<float>()[i], 0.0f);
}

// Outside truth: the ids the diffusers FLUX.1 fixture fed its model (a 4 x 4 token grid, 8 text tokens).
TEST(Latents, IdsEqualTheFluxFixture) {
  const auto inputs = io::load_safetensors(std::string(CPDIT_TEST_DATA) + "/fixtures/flux_tiny/inputs.safetensors");
  EXPECT_EQ(max_abs_diff(flux_image_ids(4, 4), inputs.at("img_ids")), 0.0);
  EXPECT_EQ(max_abs_diff(flux_text_ids(8), inputs.at("txt_ids")), 0.0);
}
