// VAEs from the single files users download (single_file_tiny: diffusers' from_single_file proved each
// file's weights bitwise equal to a diffusers folder's): FLUX.1's ae.safetensors in the BFL / LDM names
// and Wan 2.1's VAE in its original names, renamed to diffusers' names and sized from their shapes.
#include "models/vae/single_file.hpp"
#include "models/vae_fixture.hpp"
#include "support/expect_error.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/vae/autoencoder_kl.hpp>
#include <cpdit/models/vae/autoencoder_kl_wan.hpp>

#include <gtest/gtest.h>

namespace cpdit::models::vae {
namespace {

using testing::fixture_dir;
using testing::fixture_file;
using testing::relative_to_range;

// As test_vae.cpp: a float32 port lands within ~1e-6 of the range, porting mistakes move it 1e-4 or more.
constexpr double kTolerance = 1e-5;

std::string single_file(const std::string& name) { return fixture_dir("single_file_tiny") + "/" + name; }

// Every parameter of `a` equal to `b`'s, bit for bit, and the two hold the same names.
void expect_same_weights(nn::Module& a, nn::Module& b) {
  const nn::StateDict pa = nn::parameters_of(a), pb = nn::parameters_of(b);
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& [name, weight] : pa) {
    ASSERT_TRUE(pb.count(name)) << name;
    EXPECT_EQ(relative_to_range(weight.values().to(DType::f32), pb.at(name).values().to(DType::f32)), 0.0) << name;
  }
}

TEST(VaeSingleFile, FluxAeInBflNamesIsTheDiffusersVae) {
  // The tiny ae's 4 norm groups are not in its shapes (FLUX.1's are 32): its config is given, as
  // diffusers' from_single_file(config=) takes it.
  const std::string config = single_file("flux_vae_diffusers/config.json");
  auto from_file = load_autoencoder_kl(single_file("ae.safetensors"), config);
  auto from_folder = load_autoencoder_kl(single_file("flux_vae_diffusers"));
  expect_same_weights(*from_file, *from_folder);
  const nn::TensorMap inputs = fixture_file("single_file_tiny", "inputs");
  const nn::TensorMap expected = fixture_file("single_file_tiny", "expected");
  EXPECT_LE(relative_to_range(from_file->decode(inputs.at("flux_vae_latents")), expected.at("flux_vae_decode")),
            kTolerance);
  // encode returns the moments, mean then log-variance along the channels.
  const Tensor moments = from_file->encode(inputs.at("flux_vae_image"));
  EXPECT_LE(relative_to_range(moments.narrow(1, 0, 16).contiguous(), expected.at("flux_vae_encode_mean")), kTolerance);
}

TEST(VaeSingleFile, WanVaeInOriginalNamesOpensAloneAsDiffusersDecodesIt) {
  // Everything of Wan 2.1's VAE but its latents' statistics is in the shapes, and those are the release's.
  EXPECT_EQ(models::model_class(single_file("wan_2.1_vae.safetensors"), std::nullopt, "vae"), "AutoencoderKLWan");
  const std::optional<nlohmann::json> inferred =
      models::checkpoint_config(io::resolve_model(single_file("wan_2.1_vae.safetensors"), "vae", std::nullopt));
  ASSERT_TRUE(inferred);
  const nlohmann::json diffusers = io::read_json(single_file("wan_vae_diffusers/config.json"));
  for (const char* field : {"base_dim", "z_dim", "dim_mult", "num_res_blocks", "temperal_downsample", "attn_scales",
                            "in_channels", "out_channels"})
    EXPECT_EQ(inferred->at(field), diffusers.at(field)) << field;
  for (const char* field : {"latents_mean", "latents_std"})
    for (size_t i = 0; i < diffusers.at(field).size(); ++i)
      EXPECT_FLOAT_EQ(inferred->at(field)[i].get<float>(), diffusers.at(field)[i].get<float>()) << field << i;
  EXPECT_FALSE(inferred->contains("decoder_base_dim"));

  auto from_file = load_autoencoder_kl_wan(single_file("wan_2.1_vae.safetensors"));
  auto from_folder = load_autoencoder_kl_wan(single_file("wan_vae_diffusers"));
  expect_same_weights(*from_file, *from_folder);
  EXPECT_LE(relative_to_range(from_file->decode(fixture_file("single_file_tiny", "inputs").at("wan_vae_latents")),
                              fixture_file("single_file_tiny", "expected").at("wan_vae_decode")),
            kTolerance);
}

TEST(VaeSingleFile, DiffusersNamedSingleFileOpensByItsTensorNames) {
  const std::string weights = single_file("wan_vae_diffusers/diffusion_pytorch_model.safetensors");
  EXPECT_EQ(models::model_class(weights, std::nullopt, "vae"), "AutoencoderKLWan");
  auto from_file = load_autoencoder_kl_wan(weights);
  auto from_folder = load_autoencoder_kl_wan(single_file("wan_vae_diffusers"));
  expect_same_weights(*from_file, *from_folder);
  EXPECT_EQ(models::model_class(single_file("flux_vae_diffusers/diffusion_pytorch_model.safetensors"), std::nullopt,
                                "vae"),
            "AutoencoderKL");
}

// The shapes that pick FLUX.1's ae: only the tensors the config is read from, each with the release's
// first two dims (the reader reads no more).
nn::StateDict flux_release_shapes(int64_t widest) {
  nn::StateDict s;
  const int64_t channels[] = {128, 256, 512, widest};
  for (int level = 0; level < 4; ++level)
    for (int block = 0; block < 2; ++block)
      s["encoder.down." + std::to_string(level) + ".block." + std::to_string(block) + ".conv1.weight"] =
          Tensor::zeros({channels[level], 1});
  s["encoder.conv_in.weight"] = Tensor::zeros({128, 3});
  s["decoder.conv_in.weight"] = Tensor::zeros({512, 16});
  s["decoder.conv_out.weight"] = Tensor::zeros({3, 128});
  s["decoder.mid.block_1.conv1.weight"] = Tensor::zeros({512, 1});
  s["decoder.mid.attn_1.q.weight"] = Tensor::zeros({512, 512, 1, 1});
  return s;
}

TEST(VaeSingleFile, FluxReleaseShapesGiveTheReleaseConfig) {
  const nlohmann::json c =
      detail::vae_config_from_shapes("AutoencoderKL", detail::vae_in_diffusers_names(flux_release_shapes(512)), "ae");
  EXPECT_EQ(c.at("block_out_channels"), nlohmann::json({128, 256, 512, 512}));
  EXPECT_EQ(c.at("layers_per_block"), 2);
  EXPECT_EQ(c.at("latent_channels"), 16);
  EXPECT_EQ(c.at("norm_num_groups"), 32);
  EXPECT_DOUBLE_EQ(c.at("scaling_factor").get<double>(), 0.3611);
  EXPECT_DOUBLE_EQ(c.at("shift_factor").get<double>(), 0.1159);
  EXPECT_EQ(c.at("mid_block_add_attention"), true);
  EXPECT_EQ(c.at("use_quant_conv"), false);
  // The 1x1-convolution attention weights become Linear matrices.
  EXPECT_EQ(detail::vae_in_diffusers_names(flux_release_shapes(512))
                .at("decoder.mid_block.attentions.0.to_q.weight")
                .shape(),
            (Shape{512, 512}));
  // Other channels are not FLUX.1's, whose norm groups a file does not carry.
  cpdit::testing::expect_error(
      [] {
        detail::vae_config_from_shapes("AutoencoderKL", detail::vae_in_diffusers_names(flux_release_shapes(256)), "ae");
      },
      {"is not FLUX.1's ae"});
}

TEST(VaeSingleFile, TinyAeAloneIsRefusedAskingForItsConfig) {
  cpdit::testing::expect_error([] { load_autoencoder_kl(single_file("ae.safetensors")); },
                               {"give its config.json (--vae-config)"});
}

TEST(VaeSingleFile, AnIndexTooLongToBeABlockStaysAnUnexpectedName) {
  // A downloaded file may hold any name: one whose block number overflows an int is kept as it is, for the
  // loader to name as unexpected, rather than thrown out of the number parser.
  nn::StateDict wan = {{"decoder.middle.0.residual.0.gamma", Tensor::zeros({4, 1, 1, 1})},
                       {"decoder.upsamples.99999999999.residual.0.gamma", Tensor::zeros({4, 1, 1, 1})}};
  const nn::StateDict renamed = detail::vae_in_diffusers_names(wan);
  EXPECT_TRUE(renamed.count("decoder.upsamples.99999999999.residual.0.gamma"));
  EXPECT_TRUE(renamed.count("decoder.mid_block.resnets.0.norm1.gamma"));
  nn::StateDict kl = flux_release_shapes(512);
  kl["decoder.up.12345678901.block.0.conv1.weight"] = Tensor::zeros({1, 1});
  EXPECT_TRUE(detail::vae_in_diffusers_names(kl).count("decoder.up.12345678901.block.0.conv1.weight"));
}

TEST(VaeSingleFile, OtherTensorsAreRefusedInOneLine) {
  // A CLIP text encoder is no VAE layout.
  cpdit::testing::expect_error([] { load_autoencoder_kl_wan(single_file("clip_l.safetensors")); },
                               {"the tensors are no VAE layout known here"});
}

}  // namespace
}  // namespace cpdit::models::vae
