// io::read_picture_text: the settings a picture carries, read back from the files AUTOMATIC1111 writes
// (piexif's big-endian UTF-16 UserComment in a JPEG and a WebP) and Pillow writes (little-endian TIFF,
// ASCII), as piexif.helper.UserComment.load reads them (tools/reference/picture_settings.py); what
// write_jpeg and write_webp store comes back the same; a damaged EXIF block gives no text, never a read
// outside it.
#include "io/image_bytes.hpp"
#include "io/image_formats.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/image.hpp>
#include <cpdit/io/json.hpp>

#include <gtest/gtest.h>

namespace cpdit::io {
namespace {

using cpdit::testing::TempDir;

const std::string kDir = std::string(CPDIT_TEST_DATA) + "/fixtures/picture_settings/";

TEST(PictureText, ReadsTheSettingsA1111AndPillowStore) {
  const nlohmann::json expected = read_json(kDir + "expected.json");
  ASSERT_EQ(expected.size(), 3u);
  for (const auto& [name, text] : expected.items()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(read_picture_text(kDir + name), (PictureText{{"parameters", text.get<std::string>()}}));
  }
}

TEST(PictureText, WhatWriteJpegAndWriteWebpStoreReadsBack) {
  TempDir dir("picture_text_round_trip");
  const std::vector<uint8_t> rgb(8 * 6 * 3, 120);
  const std::string text = "a fox, 狐 🦊\nNegative prompt: blurry\nSteps: 4, Seed: 42";
  write_jpeg(dir.file("a.jpg"), rgb, 8, 6, text);
  write_webp(dir.file("a.webp"), rgb, 8, 6, text);
  write_jpeg(dir.file("plain.jpg"), rgb, 8, 6);
  EXPECT_EQ(read_picture_text(dir.file("a.jpg")), (PictureText{{"parameters", text}}));
  EXPECT_EQ(read_picture_text(dir.file("a.webp")), (PictureText{{"parameters", text}}));
  EXPECT_TRUE(read_picture_text(dir.file("plain.jpg")).empty());
}

TEST(PictureText, ACutOrDamagedExifBlockGivesNoText) {
  const std::string jpeg = test::slurp(kDir + "a1111.jpg");
  const std::vector<uint8_t> tiff = jpeg_exif(std::vector<uint8_t>(jpeg.begin(), jpeg.end()));
  ASSERT_TRUE(read_exif_user_comment(tiff.data(), tiff.size()).has_value());
  // piexif puts the comment last: every shorter block cuts it, and each cut is found from the offsets.
  for (size_t size = 0; size < tiff.size(); ++size) {
    const std::vector<uint8_t> cut(tiff.begin(), tiff.begin() + ptrdiff_t(size));
    EXPECT_FALSE(read_exif_user_comment(cut.data(), cut.size()).has_value()) << size << " bytes";
  }
  std::vector<uint8_t> wrong_order = tiff;
  wrong_order[0] = 'X';
  EXPECT_FALSE(read_exif_user_comment(wrong_order.data(), wrong_order.size()).has_value());
  // A JPEG whose segments run past the file's end has no EXIF to find.
  EXPECT_TRUE(jpeg_exif(std::vector<uint8_t>(jpeg.begin(), jpeg.begin() + 40)).empty());
}

TEST(PictureText, AFileThatIsNoPictureIsAOneLineError) {
  TempDir dir("picture_text_refused");
  test::write_bytes(dir.file("weights.png"), "not a picture at all");
  cpdit::testing::expect_error([&] { read_picture_text(dir.file("weights.png")); },
                               {"weights.png", "is not a PNG, JPEG or WebP file"});
}

}  // namespace
}  // namespace cpdit::io
