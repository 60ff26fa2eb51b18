// io::write_mp4: the file decodes back through the FFmpeg libraries as H.264 with the frame count,
// size, frame rate and mean colour of every frame of the float frames; bad frames are one-line errors
// that leave an existing file as it was.
#include "support/read_mp4.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/video.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cpdit::io {
namespace {

using cpdit::testing::TempDir;

// F frames of H x W: red rises along x, green along y, and blue and the overall brightness step with
// the frame, so every frame has its own mean colour (apart by 0.15 in blue, far above the tolerance).
Tensor test_frames(int64_t count, int64_t height, int64_t width) {
  Tensor t = Tensor::empty({count, height, width, 3});
  float* p = t.data<float>();
  for (int64_t f = 0; f < count; ++f)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x, p += 3) {
        p[0] = 0.1f + 0.8f * float(x) / float(width - 1);
        p[1] = 0.9f - 0.7f * float(y) / float(height - 1) - 0.05f * float(f);
        p[2] = 0.1f + 0.15f * float(f);
      }
  return t;
}

double float_mean(const Tensor& frames, int64_t f, int c) {
  const int64_t pixels = frames.size(1) * frames.size(2);
  const float* p = frames.data<float>() + f * pixels * 3;
  double sum = 0;
  for (int64_t i = 0; i < pixels; ++i) sum += std::round(p[3 * i + c] * 255.0) / 255.0;
  return sum / double(pixels);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Mp4Writer, DecodesBackWithTheFramesSizeRateAndColours) {
  TempDir dir("mp4");
  const std::string path = dir.file("clip.mp4");
  const Tensor frames = test_frames(6, 48, 64);
  write_mp4(path, frames, 16);
  const cpdit::testing::DecodedVideo video = cpdit::testing::read_mp4(path);
  EXPECT_EQ(video.codec, "h264");
  EXPECT_EQ(video.width, 64);
  EXPECT_EQ(video.height, 48);
  EXPECT_DOUBLE_EQ(video.fps, 16.0);
  ASSERT_EQ(video.rgb.size(), 6u);
  for (int64_t f = 0; f < 6; ++f)
    for (int c = 0; c < 3; ++c)
      // 2/255: x264 at CRF 18 and the 8-bit BT.601 limited-range 4:2:0 round trip (219 luma levels
      // for 256, chroma halved both ways) move a frame's mean colour by up to 1.4 levels here.
      EXPECT_NEAR(cpdit::testing::mean_channel(video.rgb[size_t(f)], c), float_mean(frames, f, c), 2.0 / 255)
          << "frame " << f << " channel " << c;
}

TEST(Mp4Writer, BadFramesAreOneLineErrorsAndLeaveTheOldFile) {
  TempDir dir("mp4_bad");
  const std::string path = dir.file("clip.mp4");
  write_mp4(path, test_frames(2, 16, 16), 16);
  const std::string before = read_file(path);
  auto expect_refused = [&](const Tensor& frames, int fps, const std::string& needle) {
    try {
      write_mp4(path, frames, fps);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
    EXPECT_EQ(read_file(path), before) << needle;
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1) << "a temp file was left";
  };
  expect_refused(test_frames(2, 15, 16), 16, "even width and height");
  expect_refused(Tensor::zeros({2, 16, 16}), 16, "(F, H, W, 3)");
  expect_refused(test_frames(2, 16, 16), 0, "frame rate");
  Tensor nan = test_frames(3, 16, 16);
  nan.data<float>()[nan.numel() - 1] = std::nanf("");
  expect_refused(nan, 16, "frame 2 holds NaN");
}

}  // namespace
}  // namespace cpdit::io
