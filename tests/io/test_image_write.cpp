// io::write_jpeg and io::write_webp: what they write read_image reads back as the picture given (within
// what quality 90 loses), the settings ride in an EXIF UserComment as A1111 writes it (cut to fit a
// JPEG segment when they are very long), and a failed write leaves the old file as it was.
#include "io/image_bytes.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/image.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace cpdit::io {
namespace {

using cpdit::testing::TempDir;
using test::slurp;

// 48 x 32 smooth gradients, a different one per channel.
std::vector<uint8_t> gradient(int64_t width, int64_t height) {
  std::vector<uint8_t> rgb(size_t(width * height * 3));
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < width; ++x) {
      uint8_t* p = &rgb[size_t((y * width + x) * 3)];
      p[0] = uint8_t(x * 5);
      p[1] = uint8_t(y * 7);
      p[2] = uint8_t(200 - x * 2 - y);
    }
  return rgb;
}

TEST(ImageWrite, JpegAndWebpReadBackAsThePictureWritten) {
  TempDir dir("image_write_round_trip");
  const std::vector<uint8_t> rgb = gradient(48, 32);
  // Quality 90 on smooth gradients: within a few levels (found: JPEG max 6, mean 0.86; WebP max 9,
  // mean 1.74). Swapped channels or a wrong row stride are off by tens.
  for (const char* name : {"a.jpg", "a.webp"}) {
    SCOPED_TRACE(name);
    const std::string path = dir.file(name);
    if (std::string(name) == "a.jpg") write_jpeg(path, rgb, 48, 32);
    else write_webp(path, rgb, 48, 32);
    const RgbImage back = read_image(path);
    ASSERT_EQ(back.width, 48);
    ASSERT_EQ(back.height, 32);
    int most = 0;
    double sum = 0;
    for (size_t i = 0; i < rgb.size(); ++i) {
      const int d = std::abs(int(rgb[i]) - int(back.rgb[i]));
      most = std::max(most, d);
      sum += d;
    }
    EXPECT_LE(most, 12);
    EXPECT_LT(sum / double(rgb.size()), 2.0);
  }
  EXPECT_EQ(slurp(dir.file("a.jpg")).find("Exif"), std::string::npos);  // no settings, no EXIF
  EXPECT_EQ(slurp(dir.file("a.webp")).find("EXIF"), std::string::npos);
}

TEST(ImageWrite, TheSettingsAreAnExifUserCommentInUtf16) {
  TempDir dir("image_write_exif");
  const std::vector<uint8_t> rgb = gradient(48, 32);
  const std::string text = "un renard roux, \xc3\xa9t\xc3\xa9\nSteps: 4";  // "été": U+00E9 twice
  const std::string utf16("\0u\0n\0 \0r\0e\0n\0a\0r\0d\0 \0r\0o\0u\0x\0,\0 \0\xe9\0t\0\xe9\0\n\0S\0t\0e\0p\0s\0:\0 \0" "4", 56);
  write_jpeg(dir.file("a.jpg"), rgb, 48, 32, text);
  write_webp(dir.file("a.webp"), rgb, 48, 32, text);
  // The tag (0x9286, UNDEFINED, 8 + 2 x 28 bytes) in a big-endian Exif IFD, then the comment.
  const std::string entry("\x92\x86\x00\x07\x00\x00\x00\x40", 8);
  for (const std::string& bytes : {slurp(dir.file("a.jpg")), slurp(dir.file("a.webp"))}) {
    EXPECT_NE(bytes.find(entry), std::string::npos);
    EXPECT_NE(bytes.find(std::string("UNICODE\0", 8) + utf16), std::string::npos);
  }
  EXPECT_NE(slurp(dir.file("a.jpg")).find(std::string("Exif\0\0MM\0*", 10)), std::string::npos);  // APP1
  const std::string webp = slurp(dir.file("a.webp"));
  const size_t chunk = webp.find("EXIF");  // the chunk's tag, its size, then the TIFF block
  ASSERT_NE(chunk, std::string::npos);
  EXPECT_EQ(webp.substr(chunk + 8, 4), std::string("MM\0*", 4));
}

TEST(ImageWrite, VeryLongSettingsAreCutToFitAJpegSegment) {
  TempDir dir("image_write_long");
  const std::vector<uint8_t> rgb = gradient(48, 32);
  // 40000 characters are 80000 bytes in UTF-16, past the 65533 an APP1 segment holds: the comment keeps
  // what fits, and the JPEG stays readable.
  const std::string path = dir.file("long.jpg");
  write_jpeg(path, rgb, 48, 32, std::string(40000, 'x'));
  EXPECT_EQ(read_image(path).width, 48);
  const std::string bytes = slurp(path);
  const size_t app1 = bytes.find("\xff\xe1");
  ASSERT_NE(app1, std::string::npos);
  EXPECT_GE((uint8_t(bytes[app1 + 2]) << 8) | uint8_t(bytes[app1 + 3]), 65530);  // all but a character's room
}

TEST(ImageWrite, ImpossibleSizesAreRefusedAndTheOldFileStays) {
  TempDir dir("image_write_refused");
  const std::string path = dir.file("a.webp");
  test::write_bytes(path, "old");
  cpdit::testing::expect_error([&] { write_webp(path, gradient(2, 2), 3, 2); },
                               {"write_webp: 12 bytes do not hold a 3x2 RGB image"});
  cpdit::testing::expect_error([&] { write_jpeg(path, std::vector<uint8_t>(size_t(70000) * 3), 70000, 1); },
                               {"write_jpeg: ", "at most 65500 pixels a side"});
  EXPECT_EQ(slurp(path), "old");
}

}  // namespace
}  // namespace cpdit::io
