// The image processing in front of CLIPVisionModel against transformers' CLIPImageProcessor on a PNG
// (tests/data/fixtures/clip_vision_tiny/processed.safetensors, tools/reference/clip_vision_tiny.py):
// the shortest edge resized (PIL's bicubic), the centre crop, CLIP's mean and std.
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/clip_image.hpp>

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace cpdit::pipeline {
namespace {

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/clip_vision_tiny/";

TEST(ClipImage, PixelValuesAreTheProcessorsBitForBit) {
  const ClipImageProcessing processing = ClipImageProcessing::from_file(kDir + "preprocessor_config.json");
  EXPECT_EQ(processing.shortest_edge, 42);
  const Tensor want = io::load_safetensors(kDir + "processed.safetensors").at("pixel_values");
  const Tensor got = clip_image_pixels(kDir + "image.png", processing);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(max_abs_diff(got, want), 0.0);
}

// Each a one-line error: a filter, or a processing step turned off, that is not served; a size given
// as another processor's; an image that is not there.
TEST(ClipImage, RefusesWhatItDoesNotServe) {
  cpdit::testing::TempDir dir("clip_image");
  for (const std::string& config : {R"({"resample": 0})", R"({"do_center_crop": false})",
                                    R"({"size": {"height": 42, "width": 42}})", R"({"image_std": [0.5, 0.5, 0]})"}) {
    const std::string path = dir.file("preprocessor_config.json");
    std::ofstream(path) << config;
    EXPECT_THROW(ClipImageProcessing::from_file(path), Error) << config;
  }
  EXPECT_THROW(clip_image_pixels(kDir + "missing.png", ClipImageProcessing{}), Error);
}

}  // namespace
}  // namespace cpdit::pipeline
