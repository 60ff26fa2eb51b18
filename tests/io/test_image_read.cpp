// io::read_image, the reader of every input picture: JPEG and WebP files of each kind decode within one
// 8-bit level of Pillow's Image.open(path).convert("RGB") (tools/reference/image_decode.py); the format
// comes from the bytes, not the name; truncated, corrupt, CMYK and non-picture files are one-line
// errors naming the file; and a header claiming 100000 x 100000 pixels is refused before any pixel
// memory is taken.
#include "io/image_bytes.hpp"
#include "support/address_space.hpp"
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/image.hpp>
#include <cpdit/io/png.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <jpeglib.h>

namespace cpdit::io {
namespace {

using cpdit::testing::expect_error;
using cpdit::testing::TempDir;
using test::slurp;
using test::write_bytes;

const std::string kFixtures = std::string(CPDIT_TEST_DATA) + "/fixtures/image_decode/";

// The largest difference of two same-sized images, in 8-bit levels.
int max_difference(const RgbImage& a, const RgbImage& b) {
  int most = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) most = std::max(most, std::abs(int(a.rgb[i]) - int(b.rgb[i])));
  return most;
}

TEST(ImageRead, EveryJpegAndWebpKindIsWithinOneLevelOfPillow) {
  // Pillow's wheels bring their own libjpeg-turbo (3.x) and libwebp (1.6), Debian's packages others
  // (2.1, 1.2): the integer IDCT and the YUV conversion may round one level apart between versions,
  // no more. (Found: 0 for every case with these versions.)
  for (const char* name : {"baseline_420.jpg", "baseline_422.jpg", "baseline_444.jpg", "progressive_420.jpg",
                           "gray.jpg", "lossy.webp", "lossless.webp", "lossy_alpha.webp", "lossless_alpha.webp"}) {
    SCOPED_TRACE(name);
    const std::string path = kFixtures + name;
    const RgbImage image = read_image(path);
    const RgbImage pillow = read_png(kFixtures + std::filesystem::path(name).stem().string() + ".expected.png");
    ASSERT_EQ(image.width, 33);
    ASSERT_EQ(image.height, 17);
    ASSERT_EQ(image.rgb.size(), pillow.rgb.size());
    const int most = max_difference(image, pillow);
    std::printf("%-22s max difference from Pillow: %d\n", name, most);
    EXPECT_LE(most, 1);
  }
}

TEST(ImageRead, TheFormatComesFromTheBytesNotTheName) {
  TempDir dir("image_read_names");
  const std::string jpeg_as_png = dir.file("photo.png"), webp_as_jpg = dir.file("photo.jpg");
  write_bytes(jpeg_as_png, slurp(kFixtures + "baseline_420.jpg"));
  write_bytes(webp_as_jpg, slurp(kFixtures + "lossless.webp"));
  EXPECT_EQ(read_image(jpeg_as_png).rgb, read_image(kFixtures + "baseline_420.jpg").rgb);
  EXPECT_EQ(read_image(webp_as_jpg).rgb, read_image(kFixtures + "lossless.webp").rgb);
  // PNG, the format cpdit writes, through read_png.
  const RgbImage png = read_image(kFixtures + "lossless.expected.png");
  EXPECT_EQ(png.rgb, read_png(kFixtures + "lossless.expected.png").rgb);
}

TEST(ImageRead, TruncatedOrCorruptJpegAndWebpAreRefusedNamingTheFile) {
  TempDir dir("image_read_corrupt");
  auto cut = [&](const char* name, double share) {
    const std::string bytes = slurp(kFixtures + name), path = dir.file(std::string("cut_") + name);
    write_bytes(path, bytes.substr(0, size_t(double(bytes.size()) * share)));
    return path;
  };
  // libjpeg would fill what is missing with gray, as Pillow's LOAD_TRUNCATED_IMAGES does; by default
  // Pillow refuses ("image file is truncated"), and so does cpdit.
  const std::string jpeg = cut("baseline_420.jpg", 0.6);
  expect_error([&] { read_image(jpeg); }, {"cannot decode ", jpeg, " as a JPEG: Premature end of JPEG file"});
  const std::string progressive = cut("progressive_420.jpg", 0.6);
  expect_error([&] { read_image(progressive); }, {progressive, " as a JPEG: Premature end of JPEG file"});
  const std::string header = cut("baseline_420.jpg", 0.1);  // cut inside its tables
  expect_error([&] { read_image(header); }, {"cannot read ", header, " as a JPEG: "});
  // A marker in the middle of the pixel data: the scan ends early (libjpeg: "premature end of data segment").
  std::string marked = slurp(kFixtures + "baseline_420.jpg");
  marked.replace(marked.size() * 3 / 4, 2, "\xff\xd9");
  const std::string marker = dir.file("marker.jpg");
  write_bytes(marker, marked);
  expect_error([&] { read_image(marker); }, {marker, " as a JPEG: Corrupt JPEG data"});

  for (const char* name : {"lossy.webp", "lossless.webp", "lossy_alpha.webp"}) {
    const std::string webp = cut(name, 0.6);
    expect_error([&] { read_image(webp); }, {"cannot decode ", webp, " as a WebP: the file is truncated"});
  }
  // A lossless stream with its entropy codes overwritten.
  std::string garbled = slurp(kFixtures + "lossless.webp");
  for (size_t i = 30; i < 60; ++i) garbled[i] = char(0xff);
  const std::string corrupt = dir.file("corrupt.webp");
  write_bytes(corrupt, garbled);
  expect_error([&] { read_image(corrupt); }, {corrupt, " as a WebP: "});
}

TEST(ImageRead, WhatIsNoPictureIsRefusedInOneLine) {
  TempDir dir("image_read_other");
  expect_error([&] { read_image(kFixtures + "cmyk.jpg"); }, {"cmyk.jpg is a CMYK JPEG: cpdit reads RGB and grayscale"});
  const std::string text = dir.file("notes.png"), empty = dir.file("empty.jpg");
  write_bytes(text, "a red fox");
  write_bytes(empty, "");
  expect_error([&] { read_image(text); }, {text, " is not a PNG, JPEG or WebP file"});
  expect_error([&] { read_image(empty); }, {empty, " is empty"});
  expect_error([&] { read_image(dir.file("missing.png")); }, {"cannot open ", "missing.png: No such file"});
  expect_error([&] { read_image(dir.path().string()); }, {" is a folder, not a picture"});
  // A FIFO would block a reader that opened it: refused from its kind, never opened.
  const std::string fifo = dir.file("pipe.jpg");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { read_image(fifo); }, {fifo, " is not a regular file"});
  // A file past 1 GiB is refused from its size (a sparse file: no disk is used).
  const std::string huge = dir.file("huge.jpg");
  write_bytes(huge, slurp(kFixtures + "gray.jpg"));
  std::filesystem::resize_file(huge, (uintmax_t(1) << 30) + 1);
  expect_error([&] { read_image(huge); }, {huge, " is 1073741825 bytes: cpdit reads pictures of at most 1 GiB"});
}

// A valid progressive JPEG of 1 + 3 x 63 scans (the DC of all components, then each AC coefficient of
// each component alone), written by libjpeg from a scan script.
std::string many_scans_jpeg() {
  jpeg_compress_struct c;
  jpeg_error_mgr errors;
  c.err = jpeg_std_error(&errors);
  jpeg_create_compress(&c);
  unsigned char* bytes = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &bytes, &size);
  c.image_width = 16;
  c.image_height = 16;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  std::vector<jpeg_scan_info> scans(1 + 3 * 63);
  scans[0] = {3, {0, 1, 2, 0}, 0, 0, 0, 0};
  for (int k = 1; k <= 63; ++k)
    for (int ci = 0; ci < 3; ++ci) scans[size_t(3 * (k - 1) + ci + 1)] = {1, {ci, 0, 0, 0}, k, k, 0, 0};
  c.scan_info = scans.data();
  c.num_scans = int(scans.size());
  jpeg_start_compress(&c, TRUE);
  std::vector<unsigned char> row(16 * 3, 128);
  while (c.next_scanline < 16) {
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string out(reinterpret_cast<const char*>(bytes), size);
  std::free(bytes);
  return out;
}

TEST(ImageRead, AProgressiveJpegOfMoreThan100ScansIsRefused) {
  // Each scan is a pass over the whole image: a small file of thousands would keep a reader busy for
  // minutes. Real encoders write about ten.
  TempDir dir("image_read_scans");
  const std::string path = dir.file("scans.jpg");
  write_bytes(path, many_scans_jpeg());
  expect_error([&] { read_image(path); }, {path, " as a JPEG: more than 100 progressive scans"});
}

// The bombs: headers claiming 100000 x 100000 (JPEG: 60000 x 60000, as its header holds at most 65535
// and libjpeg reads at most 65500 a side) with no pixel data.
void write_bombs(const TempDir& dir) {
  write_bytes(dir.file("bomb.png"), test::png_header(100000, 100000));
  write_bytes(dir.file("bomb.jpg"), test::jpeg_header(60000, 60000));
  write_bytes(dir.file("bomb.webp"), test::webp_header(100000, 100000));
}

TEST(ImageRead, AHeaderClaimingMoreThan2To28PixelsIsRefusedWithItsSize) {
  TempDir dir("image_read_bombs");
  write_bombs(dir);
  expect_error([&] { read_image(dir.file("bomb.png")); }, {"bomb.png is 100000x100000: more than 2^28 pixels"});
  expect_error([&] { read_image(dir.file("bomb.jpg")); }, {"bomb.jpg is 60000x60000: more than 2^28 pixels"});
  expect_error([&] { read_image(dir.file("bomb.webp")); }, {"bomb.webp is 100000x100000: more than 2^28 pixels"});
  // Just under the limit the header passes, and the missing data is what is refused.
  write_bytes(dir.file("short.webp"), test::webp_header(16384, 16384));
  expect_error([&] { read_image(dir.file("short.webp")); }, {"short.webp as a WebP: the file is truncated"});
}

// In a child whose address space is what it has mapped plus 64 MiB: the 30 GB (and 10 GB) of pixels
// the bombs claim could not even be reserved, so each refusal shows that nothing was.
void read_bombs_in_64_mib(const std::string& folder) {
  if (!cpdit::testing::limit_address_space(size_t(64) << 20)) std::_Exit(3);
  for (const char* name : {"bomb.png", "bomb.jpg", "bomb.webp"}) {
    try {
      read_image(folder + "/" + name);
      std::_Exit(1);
    } catch (const Error& e) {
      if (std::string(e.what()).find("more than 2^28 pixels") == std::string::npos) std::_Exit(2);
    } catch (...) {
      std::_Exit(4);  // std::bad_alloc: it tried to allocate
    }
  }
  std::filesystem::remove_all(folder);  // this child's own folder (the test body ran again in it)
  std::_Exit(0);
}

TEST(ImageReadDeathTest, TheBombsAreRefusedInTinyMemory) {
  if (!cpdit::testing::kAddressSpaceLimitWorks) GTEST_SKIP() << "an address-space limit cannot be set under a sanitizer";
  TempDir dir("image_read_tiny");
  write_bombs(dir);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(read_bombs_in_64_mib(dir.path().string()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace cpdit::io
