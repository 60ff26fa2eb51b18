// Pictures at the command line: `generate -o NAME.jpg|.jpeg|.webp` writes that format, carrying the
// run's settings in an EXIF UserComment; a JPEG or WebP --init-image starts the run as the PNG of the
// same pixels does; and a bomb or a file that is no picture given as an input image is refused in one
// line, exit 2, before any model loads, with nothing written.
#include "io/image_bytes.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/image.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>

namespace cpdit::io {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;
using test::slurp;

const std::string kFixtures = std::string(CPDIT_TEST_DATA) + "/fixtures/image_decode/";
const std::string kTiny = "generate --preset flux-tiny --text-tokens 8 --threads 1";
const std::string kFlux = kTiny + " --steps 1 --height 32 --width 48";

// `text` as the UTF-16BE bytes an EXIF UserComment holds it in.
std::string utf16be(const std::string& ascii) {
  std::string out;
  for (char c : ascii) out += std::string(1, '\0') + c;
  return out;
}

TEST(ImageCli, OutNamedJpgJpegOrWebpWritesThatFormatWithTheSettings) {
  TempDir dir("image_cli_out");
  const std::string png = dir.file("fox.png");
  ASSERT_EQ(run_cli(kFlux + " -p 'a red fox' -s 7 -o " + png).code, 0);
  const RgbImage lossless = read_image(png);
  for (const char* name : {"fox.jpg", "fox.jpeg", "fox.webp"}) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(name);
    const auto r = run_cli(kFlux + " -p 'a red fox' -s 7 -o " + path);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("wrote        " + path), std::string::npos) << r.out;
    const std::string bytes = slurp(path);
    const bool webp = fs::path(path).extension() == ".webp";
    EXPECT_EQ(bytes.substr(0, 4), webp ? "RIFF" : "\xff\xd8\xff\xe0");
    if (webp) {
      EXPECT_NE(bytes.find("EXIF"), std::string::npos);
    }
    // A1111's layout: "UNICODE\0" and the text in UTF-16BE.
    const std::string comment = utf16be("a red fox\nSteps: 1, Sampler: flow-match Euler, Seed: 7");
    EXPECT_NE(bytes.find(std::string("UNICODE\0", 8) + comment), std::string::npos);
    // The picture of the PNG run, encoded alike: the same pixels as write_jpeg / write_webp make of
    // the PNG's (a noisy picture from random weights, so lossy is off by ~10 levels on average: only
    // the same encoder on the same pixels matches it exactly).
    const std::string again = dir.file(std::string("again_") + name);
    if (webp) write_webp(again, lossless.rgb, 48, 32);
    else write_jpeg(again, lossless.rgb, 48, 32);
    const RgbImage image = read_image(path);
    ASSERT_EQ(image.width, 48);
    ASSERT_EQ(image.height, 32);
    EXPECT_TRUE(image.rgb == read_image(again).rgb);
  }
}

// A tensor's bytes, to compare two to the bit.
std::string bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.raw()), c.nbytes());
}

TEST(ImageCli, AJpegOrWebpInitImageStartsTheRunAsThePngOfItsPixelsDoes) {
  // The fixtures' PNG is Pillow's decode of the JPEG (and WebP), which read_image matches exactly: the
  // runs are the same to the bit. (On the tiny FLUX.1 pipeline folder of tests/pipeline's
  // image-to-image tests: the flux-tiny preset does not encode an --init-image.)
  const std::string fixtures = std::string(CPDIT_TEST_DATA) + "/fixtures/";
  const std::string flux = "generate --model " + fixtures + "flux_pipeline_tiny/pipeline --embeddings " + fixtures +
                           "flux_img2img/inputs.safetensors --height 32 --width 32 --steps 5 --guidance 3.5 --seed 4 "
                           "--ranks 1 --threads 1";
  TempDir dir("image_cli_init");
  auto latents = [&](const std::string& image) {
    const std::string out = dir.file(fs::path(image).filename().string() + ".safetensors");
    const auto r = run_cli(flux + " --init-image " + image + " --out " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? load_safetensors(out).at("latents") : Tensor();
  };
  for (const char* stem : {"baseline_420", "lossy_alpha"}) {
    const std::string picture = kFixtures + stem + (std::string(stem) == "lossy_alpha" ? ".webp" : ".jpg");
    const Tensor from_picture = latents(picture), from_png = latents(kFixtures + stem + ".expected.png");
    ASSERT_TRUE(from_picture.defined() && from_png.defined());
    EXPECT_EQ(from_picture.shape(), from_png.shape());
    EXPECT_TRUE(bytes_of(from_picture) == bytes_of(from_png)) << stem;
  }
  // The picture matters: another one starts elsewhere.
  EXPECT_FALSE(bytes_of(latents(kFixtures + "gray.jpg")) == bytes_of(latents(kFixtures + "baseline_420.jpg")));
}

TEST(ImageCli, ABombOrANonPictureInputIsRefusedInOneLineAndNothingIsWritten) {
  TempDir dir("image_cli_bombs");
  test::write_bytes(dir.file("bomb.png"), test::png_header(100000, 100000));
  test::write_bytes(dir.file("bomb.jpg"), test::jpeg_header(60000, 60000));
  test::write_bytes(dir.file("bomb.webp"), test::webp_header(100000, 100000));
  test::write_bytes(dir.file("notes.jpg"), "a red fox");
  const std::string out = dir.file("x.png");
  expect_cli_refused(kFlux + " --init-image " + dir.file("bomb.jpg") + " -o " + out,
                     "bomb.jpg is 60000x60000: more than 2^28 pixels", out);
  expect_cli_refused(kFlux + " --init-image " + dir.file("bomb.png") + " -o " + out,
                     "bomb.png is 100000x100000: more than 2^28 pixels", out);
  expect_cli_refused(kFlux + " --init-image " + dir.file("bomb.webp") + " -o " + out,
                     "bomb.webp is 100000x100000: more than 2^28 pixels", out);
  expect_cli_refused(kFlux + " --init-image " + dir.file("notes.jpg") + " -o " + out,
                     "notes.jpg is not a PNG, JPEG or WebP file", out);
  // Checked with the other inputs before the model: a video model's --first-image alike.
  expect_cli_refused("generate --preset wan-tiny --steps 1 --frames 5 --height 32 --width 32 --first-image " +
                         dir.file("bomb.webp") + " -o " + dir.file("x.mp4"),
                     "bomb.webp is 100000x100000: more than 2^28 pixels", dir.file("x.mp4"));
}

}  // namespace
}  // namespace cpdit::io
