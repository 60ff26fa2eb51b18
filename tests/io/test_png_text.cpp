// The text chunks of a PNG: what write_png stores (tEXt for ASCII, iTXt for UTF-8) read_png_text reads
// back, beside the pixels; a chunk that would inflate past 1 MiB is refused before it is allocated,
// and a file that is not a PNG is a one-line error.
#include "support/temp_dir.hpp"
#include "support/expect_error.hpp"

#include <cpdit/io/png.hpp>

#include <gtest/gtest.h>

#include <zlib.h>

#include <array>
#include <fstream>

namespace cpdit::io {
namespace {

using cpdit::testing::TempDir;

TEST(PngText, WrittenChunksReadBackBesideThePixels) {
  TempDir dir("png_text");
  const std::string path = dir.file("a.png");
  const std::vector<uint8_t> rgb{255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 9, 9};  // 2x2
  const PictureText text{{"parameters", "a red fox\nSteps: 4, Seed: 7"}, {"Comment", "un renard roux, été"}};
  write_png(path, rgb, 2, 2, text);
  EXPECT_EQ(read_png_text(path), text);
  EXPECT_EQ(read_png(path).rgb, rgb);
  write_png(path, rgb, 2, 2);
  EXPECT_TRUE(read_png_text(path).empty());
  cpdit::testing::expect_error([&] { write_png(path, rgb, 2, 2, {{"", "x"}}); }, {"a text keyword has 1 to 79 bytes"});
}

// One PNG chunk: length, type, data, CRC of type and data.
void put_chunk(std::string& png, const char* type, const std::string& data) {
  const uint32_t length = uint32_t(data.size());
  for (int shift : {24, 16, 8, 0}) png += char((length >> shift) & 0xff);
  const std::string body = std::string(type, 4) + data;
  png += body;
  const uint32_t crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size())));
  for (int shift : {24, 16, 8, 0}) png += char((crc >> shift) & 0xff);
}

TEST(PngText, AChunkInflatingPastTheLimitIsRefused) {
  // A 1x1 PNG whose zTXt chunk holds 4 MiB of zeros compressed to about 4 KiB: below libpng's own
  // 8 MB default limit and above cpdit's 1 MiB, a bomb for a reader that inflates what it is given.
  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", std::string("\0\0\0\1\0\0\0\1\x08\x02\0\0\0", 13));
  const std::string zeros(size_t(4) << 20, '\0');
  uLongf packed_size = compressBound(uLong(zeros.size()));
  std::string packed(packed_size, '\0');
  ASSERT_EQ(compress(reinterpret_cast<Bytef*>(packed.data()), &packed_size,
                     reinterpret_cast<const Bytef*>(zeros.data()), uLong(zeros.size())),
            Z_OK);
  packed.resize(packed_size);
  put_chunk(png, "zTXt", std::string("bomb\0\0", 6) + packed);
  std::string pixel(4, '\0');  // one filter byte and one RGB pixel
  uLongf idat_size = compressBound(4);
  std::string idat(idat_size, '\0');
  compress(reinterpret_cast<Bytef*>(idat.data()), &idat_size, reinterpret_cast<const Bytef*>(pixel.data()), 4);
  idat.resize(idat_size);
  put_chunk(png, "IDAT", idat);
  put_chunk(png, "IEND", "");
  TempDir dir("png_text_bomb");
  const std::string path = dir.file("bomb.png");
  std::ofstream(path, std::ios::binary) << png;
  EXPECT_EQ(read_png(path).rgb.size(), 3u);  // a valid PNG otherwise
  // libpng drops an over-limit text chunk with a benign warning: the rest of the file still reads.
  EXPECT_TRUE(read_png_text(path).empty());
}

TEST(PngText, AChunkClaimingMoreThanTheLimitIsRefusedBeforeLibpngAllocatesIt) {
  // Found by fuzzing (fuzz/fuzz_image.cpp): a 156-byte file whose iTXt chunk claimed 1.9 GB made libpng allocate it.
  TempDir dir("png_text_claim");
  std::string png("\x89PNG\r\n\x1a\n", 8);
  put_chunk(png, "IHDR", std::string("\0\0\0\1\0\0\0\1\x08\x02\0\0\0", 13));
  std::string claim = png;
  claim += std::string("\x77\x35\x94\x00tEXt", 8) + "parameters";  // 2 billion bytes claimed, 10 there
  const std::string claimed = dir.file("claimed.png");
  std::ofstream(claimed, std::ios::binary) << claim;
  for (auto read : {+[](const std::string& p) { read_png(p); }, +[](const std::string& p) { read_png_text(p); }})
    cpdit::testing::expect_error([&] { read(claimed); }, {"its tEXt chunk of 2000000000 bytes is above the 1 MiB"});
  // A compressed chunk is held to 64 KiB, what inflates to at most 64 MiB.
  std::string big = png;
  put_chunk(big, "zTXt", std::string("k\0\0", 3) + std::string(70000, 'x'));
  const std::string compressed = dir.file("compressed.png");
  std::ofstream(compressed, std::ios::binary) << big;
  cpdit::testing::expect_error([&] { read_png(compressed); }, {"its zTXt chunk of 70003 bytes is above the 64 KiB"});
}

TEST(PngText, ANonPngIsAOneLineError) {
  TempDir dir("png_text_bad");
  const std::string path = dir.file("bad.png");
  std::ofstream(path) << "not a png";
  cpdit::testing::expect_error([&] { read_png_text(path); }, {"cannot read ", "as a PNG"});
  cpdit::testing::expect_error([&] { read_png_text(dir.file("missing.png")); }, {"cannot open ", "missing.png"});
}

}  // namespace
}  // namespace cpdit::io
