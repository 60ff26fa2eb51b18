#pragma once
// Picture files made byte by byte for the reader tests: headers that claim a size their data never
// holds (the bombs read_image must refuse from the header), and a file's bytes read or written whole.
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

namespace cpdit::io::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline void put_be(std::string& out, uint32_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out += char((value >> (8 * i)) & 0xff);
}
inline void put_le(std::string& out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char((value >> (8 * i)) & 0xff);
}

// A PNG of IHDR (8-bit RGB, width x height, valid CRC), an IDAT of no pixels and IEND.
inline std::string png_header(uint32_t width, uint32_t height) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  auto chunk = [&](const char* type, const std::string& data) {
    put_be(png, uint32_t(data.size()), 4);
    const std::string body = std::string(type, 4) + data;
    png += body;
    put_be(png, uint32_t(crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()))), 4);
  };
  std::string ihdr;
  put_be(ihdr, width, 4);
  put_be(ihdr, height, 4);
  ihdr += std::string("\x08\x02\0\0\0", 5);
  chunk("IHDR", ihdr);
  chunk("IDAT", std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8));  // zlib's stream of nothing
  chunk("IEND", "");
  return png;
}

// A baseline JPEG's markers up to its scan (SOI, SOF0 of three 1x1-sampled components, SOS) and EOI:
// what libjpeg's jpeg_read_header needs, with no tables and no pixel data. A JPEG holds at most 65535
// pixels a side (libjpeg 65500).
inline std::string jpeg_header(uint16_t width, uint16_t height) {
  std::string jpeg("\xff\xd8", 2);
  jpeg += std::string("\xff\xc0\x00\x11\x08", 5);
  put_be(jpeg, height, 2);
  put_be(jpeg, width, 2);
  jpeg += std::string("\x03\x01\x11\x00\x02\x11\x00\x03\x11\x00", 10);
  jpeg += std::string("\xff\xda\x00\x0c\x03\x01\x00\x02\x00\x03\x00\x00\x3f\x00", 14);
  jpeg += std::string("\xff\xd9", 2);
  return jpeg;
}

// A WebP of a RIFF header and a VP8X chunk claiming a width x height canvas (24 bits a side), and
// nothing else.
inline std::string webp_header(uint32_t width, uint32_t height) {
  std::string vp8x("VP8X", 4);
  put_le(vp8x, 10, 4);
  vp8x += std::string(4, '\0');  // no flags (no alpha, no animation)
  put_le(vp8x, width - 1, 3);
  put_le(vp8x, height - 1, 3);
  std::string webp("RIFF", 4);
  put_le(webp, uint32_t(4 + vp8x.size()), 4);
  return webp + "WEBP" + vp8x;
}

}  // namespace cpdit::io::test
