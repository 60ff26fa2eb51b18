// `cpdit forward` on the VAE fixtures: config.json's _class_name picks the VAE, an input `latents` is
// decoded on one rank or split by rows over several, an input `sample` encoded on one rank, and bad
// input is one line, exit 2.
// `cpdit decode` on pipeline folders: FLUX.1 latents to a sample or a PNG, JPEG or WebP, Wan latents to an MP4.
#include "models/vae_fixture.hpp"
#include "support/read_mp4.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/image.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

namespace cpdit::models::vae {
namespace {

namespace fs = std::filesystem;
using testing::fixture_config;
using testing::fixture_dir;
using testing::fixture_file;
using testing::fixture_weights;
using testing::relative_to_range;

std::string model_args(const std::string& fixture) {
  return " --model " + fixture_weights(fixture) + " --config " + fixture_config(fixture);
}

// `args --output out` exits 0 and its output `name` is `expected` within 1e-5 of the range, as the
// in-process tests (README of the fixtures).
void expect_output(const std::string& args, const std::string& out, const std::string& name, const Tensor& expected) {
  const auto r = cpdit::testing::run_cli(args + " --output " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LE(relative_to_range(io::load_safetensors(out).at(name), expected), 1e-5) << args;
}

void expect_decodes(const std::string& fixture, std::initializer_list<int> rank_counts) {
  cpdit::testing::TempDir dir("vae_cli");
  const Tensor expected = fixture_file(fixture, "expected").at("sample");
  for (int ranks : rank_counts)
    expect_output("forward" + model_args(fixture) + " --inputs " + fixture_dir(fixture) +
                      "/inputs.safetensors --threads 1 --ranks " + std::to_string(ranks),
                  dir.file("sample" + std::to_string(ranks) + ".safetensors"), "sample", expected);
}

TEST(VaeCli, ForwardDecodesAutoencoderKLLatents) { expect_decodes("vae_kl_tiny", {1, 2, 3, 4}); }  // 4 latent rows
TEST(VaeCli, ForwardDecodesAutoencoderKLWanLatents) { expect_decodes("vae_wan_tiny", {1, 2, 3}); }  // 3 latent rows

// `args` refused in one line naming `words`, exit 2, `out` not written.
void expect_refused(const std::string& args, const std::string& out, const std::string& words) {
  const auto r = cpdit::testing::run_cli(args + " --output " + out);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out)) << args;
}

// An input `sample` is encoded into `latent`, the posterior's mean, on one rank: Wan's video and
// AutoencoderKL's image (the first half of the fixture's moments), within 1e-5 of the range as the
// in-process tests; the encoders split over no ranks, which is one line and exit 2.
TEST(VaeCli, ForwardEncodesASampleIntoTheLatentMean) {
  cpdit::testing::TempDir dir("vae_cli_encode");
  const std::string wan = "forward" + model_args("vae_wan_tiny") + " --inputs " + fixture_dir("vae_wan_tiny_encode") +
                          "/inputs.safetensors --threads 1";
  expect_output(wan, dir.file("wan.safetensors"), "latent",
                fixture_file("vae_wan_tiny_encode", "expected").at("latent"));
  const Tensor moments = fixture_file("vae_kl_tiny_encode", "expected").at("moments");
  expect_output("forward" + model_args("vae_kl_tiny") + " --inputs " + fixture_dir("vae_kl_tiny_encode") +
                    "/inputs.safetensors --threads 1",
                dir.file("kl.safetensors"), "latent", moments.narrow(1, 0, moments.size(1) / 2).contiguous());
  expect_refused(wan + " --ranks 2", dir.file("split.safetensors"), "runs on one rank");
}

// forward --vae-split frames: each of 2 ranks decodes one of vae_wan_tiny's 2 latent frames, equal to
// diffusers' sample within 1e-5 of the range as every split; 3 ranks have a frame too few, and an
// image VAE has no frames to split: one line, exit 2, nothing written.
TEST(VaeCli, ForwardSplitsAWanVideoByFrames) {
  cpdit::testing::TempDir dir("vae_cli_frames");
  const std::string wan = "forward" + model_args("vae_wan_tiny") + " --inputs " + fixture_dir("vae_wan_tiny") +
                          "/inputs.safetensors --threads 1 --vae-split frames";
  expect_output(wan + " --ranks 2", dir.file("frames.safetensors"), "sample",
                fixture_file("vae_wan_tiny", "expected").at("sample"));
  const std::string out = dir.file("bad.safetensors");
  expect_refused(wan + " --ranks 3", out, "at least as many latent frames");
  expect_refused("forward" + model_args("vae_kl_tiny") + " --inputs " + fixture_dir("vae_kl_tiny") +
                     "/inputs.safetensors --ranks 2 --vae-split frames",
                 out, "a frame split is for Wan");
}

TEST(VaeCli, BadInputIsOneLineAndWritesNothing) {
  cpdit::testing::TempDir dir("vae_cli_bad");
  const std::string out = dir.file("sample.safetensors");
  const std::string kl = "forward" + model_args("vae_kl_tiny") + " --output " + out;
  for (const std::string& args :
       {kl + " --inputs " + fixture_dir("vae_wan_tiny") + "/inputs.safetensors",         // 5-D latents
        kl + " --inputs " + fixture_dir("vae_kl_tiny") + "/intermediates.safetensors",    // no `latents` nor `sample`
        kl + " --inputs " + fixture_dir("vae_kl_tiny") + "/inputs.safetensors --ranks 5"}) {  // 4 rows, 5 ranks
    const auto r = cpdit::testing::run_cli(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

// A diffusers pipeline folder whose vae/ is the vae_kl_tiny fixture, and latents as FLUX.1's
// generate writes them (scaled: (z - shift_factor) * scaling_factor).
class PipelineFolder {
 public:
  PipelineFolder() {
    fs::create_directories(dir_.file("pipeline/vae"));
    fs::copy_file(fixture_config("vae_kl_tiny"), dir_.file("pipeline/vae/config.json"));
    fs::copy_file(fixture_weights("vae_kl_tiny"), dir_.file("pipeline/vae/diffusion_pytorch_model.safetensors"));
    const Tensor z = fixture_file("vae_kl_tiny", "inputs").at("latents");
    const float* p = z.data<float>();
    std::vector<float> scaled(p, p + z.numel());
    for (float& v : scaled) v = (v - 0.1159f) * 0.3611f;
    io::save_safetensors(latents(), {{"latents", Tensor::from_vector(scaled, z.shape())}});
  }
  std::string model() const { return dir_.file("pipeline"); }
  std::string latents() const { return dir_.file("latents.safetensors"); }
  std::string file(const std::string& name) const { return dir_.file(name); }

 private:
  cpdit::testing::TempDir dir_{"vae_decode_cli"};
};

TEST(VaeCli, DecodeUnscalesFluxLatentsOnOneOrTwoRanks) {
  PipelineFolder dir;
  const std::string out = dir.file("sample.safetensors");
  for (const char* ranks : {"1", "2"}) {
    const auto r = cpdit::testing::run_cli("decode --model " + dir.model() + " --latents " + dir.latents() +
                                           " --threads 1 --out " + out + " --ranks " + ranks);
    ASSERT_EQ(r.code, 0) << r.err;
    // The scaling round trip adds a rounding of the latents (~1e-7): far below 1e-5 of the range.
    EXPECT_LE(
        relative_to_range(io::load_safetensors(out).at("sample"), fixture_file("vae_kl_tiny", "expected").at("sample")),
        1e-5);
  }
}

TEST(VaeCli, DecodeWritesAPngJpegOrWebpOfTheImageSize) {
  PipelineFolder dir;
  const std::string png = dir.file("image.png");
  const auto r =
      cpdit::testing::run_cli("decode --model " + dir.model() + " --latents " + dir.latents() + " --out " + png);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + png + "\n");
  std::ifstream in(png, std::ios::binary);
  std::vector<unsigned char> head(24);
  in.read(reinterpret_cast<char*>(head.data()), 24);
  ASSERT_TRUE(in) << png;
  EXPECT_EQ(std::vector<unsigned char>(head.begin() + 1, head.begin() + 4),
            (std::vector<unsigned char>{'P', 'N', 'G'}));
  auto be32 = [&](int at) { return (head[at] << 24) | (head[at + 1] << 16) | (head[at + 2] << 8) | head[at + 3]; };
  EXPECT_EQ(be32(16), 6);  // IHDR width, height: the 8 x 6 sample
  EXPECT_EQ(be32(20), 8);
  // A .jpg or .webp name is that format (write_pictures, as generate writes them): the PNG's pixels
  // through the same encoder.
  const io::RgbImage lossless = io::read_image(png);
  for (const char* name : {"image.jpg", "image.webp"}) {
    const std::string path = dir.file(name), again = dir.file(std::string("again_") + name);
    ASSERT_EQ(cpdit::testing::run_cli("decode --model " + dir.model() + " --latents " + dir.latents() + " --out " +
                                      path).code, 0) << name;
    if (fs::path(path).extension() == ".jpg") io::write_jpeg(again, lossless.rgb, 6, 8);
    else io::write_webp(again, lossless.rgb, 6, 8);
    EXPECT_TRUE(io::read_image(path).rgb == io::read_image(again).rgb) << name;
  }
  const auto bad = cpdit::testing::run_cli("decode --model " + dir.model() + " --latents " + dir.latents() +
                                           " --out " + dir.file("image.bmp"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--out must end in .png, .jpg, .jpeg, .webp or .safetensors"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(dir.file("image.bmp")));
}

// diffusers' final latents of wan_pipeline_tiny decode to an MP4 that plays as diffusers' video:
// its 5 frames of 32 x 48 at 16 fps, each frame's mean colour that of diffusers' float frame.
TEST(VaeCli, DecodeWritesWanLatentsAsAnMp4OfDiffusersVideo) {
  const fs::path wan = fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan_pipeline_tiny";
  const std::string expected = (wan / "expected.safetensors").string();
  cpdit::testing::TempDir dir("decode_mp4");
  const std::string mp4 = dir.file("clip.mp4");
  const auto r = cpdit::testing::run_cli("decode --model " + (wan / "pipeline").string() + " --latents " + expected +
                                         " --ranks 2 --threads 1 --video " + mp4);
  ASSERT_EQ(r.code, 0) << r.err;
  cpdit::testing::expect_mp4_shows_video(mp4, io::load_safetensors(expected).at("video"));
  // An image VAE has no video to write.
  PipelineFolder flux;
  const auto image = cpdit::testing::run_cli("decode --model " + flux.model() + " --latents " + flux.latents() +
                                             " --video " + dir.file("image.mp4"));
  EXPECT_EQ(image.code, 2) << image.err;
  EXPECT_NE(image.err.find("--video needs a video VAE"), std::string::npos) << image.err;
  EXPECT_FALSE(fs::exists(dir.file("image.mp4")));
}

// --vae-split frames: each rank decodes its latent frames of a Wan video (2 here: 3 ranks decode on
// the first 2), which equals the one-rank decode as the frame split's own tests bound it (1e-5 of
// the range); an image VAE has no frames to split, and a split is rows or frames.
TEST(VaeCli, DecodeSplitsAWanVideoByFrames) {
  const fs::path wan = fs::path(CPDIT_TEST_DATA) / "fixtures" / "wan_pipeline_tiny";
  const std::string decode = "decode --model " + (wan / "pipeline").string() + " --latents " +
                             (wan / "expected.safetensors").string() + " --threads 1";
  cpdit::testing::TempDir dir("decode_frames");
  const auto one = cpdit::testing::run_cli(decode + " --ranks 1 --out " + dir.file("one.safetensors"));
  ASSERT_EQ(one.code, 0) << one.err;
  const Tensor want = io::load_safetensors(dir.file("one.safetensors")).at("sample");
  for (const std::string ranks : {"2", "3"}) {
    const std::string out = dir.file("frames" + ranks + ".safetensors");
    const auto r = cpdit::testing::run_cli(decode + " --vae-split frames --ranks " + ranks + " --out " + out);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_LE(relative_to_range(io::load_safetensors(out).at("sample"), want), 1e-5) << ranks << " ranks";
  }
  PipelineFolder flux;
  const std::string image = dir.file("image.safetensors");
  for (const auto& [split, words] : {std::pair<std::string, std::string>{"frames", "a frame split is for Wan"},
                                     {"columns", "--vae-split"}}) {
    const auto bad = cpdit::testing::run_cli("decode --model " + flux.model() + " --latents " + flux.latents() +
                                             " --ranks 2 --vae-split " + split + " --out " + image);
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_NE(bad.err.find(words), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
    EXPECT_FALSE(fs::exists(image));
  }
}

}  // namespace
}  // namespace cpdit::models::vae
