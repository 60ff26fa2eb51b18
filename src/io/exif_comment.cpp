#include "io/image_formats.hpp"

#include <cstring>

#include <unicode/unistr.h>
#include <unicode/utf16.h>

namespace cpdit::io {

namespace {
namespace exif {  // named: a unity build joins this file with others

void put16(std::vector<uint8_t>& out, uint32_t value) {
  out.push_back(uint8_t(value >> 8));
  out.push_back(uint8_t(value));
}
void put32(std::vector<uint8_t>& out, uint32_t value) {
  put16(out, value >> 16);
  put16(out, value & 0xffff);
}

// One IFD of a single entry (tag, type, count, value or offset), then no next IFD.
void put_ifd(std::vector<uint8_t>& out, uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
  put16(out, 1);
  put16(out, tag);
  put16(out, type);
  put32(out, count);
  put32(out, value);
  put32(out, 0);
}

}  // namespace exif
}  // namespace

std::vector<uint8_t> exif_user_comment(const std::string& text, size_t max_bytes) {
  constexpr uint32_t kIfd0 = 8, kIfdBytes = 18, kExifIfd = kIfd0 + kIfdBytes, kComment = kExifIfd + kIfdBytes;
  static const char kPrefix[8] = {'U', 'N', 'I', 'C', 'O', 'D', 'E', '\0'};
  // Invalid UTF-8 becomes U+FFFD, as piexif's errors="replace".
  const icu::UnicodeString utf16 = icu::UnicodeString::fromUTF8(text);
  int32_t units = utf16.length();
  const size_t room = max_bytes > kComment + sizeof kPrefix ? (max_bytes - kComment - sizeof kPrefix) / 2 : 0;
  if (size_t(units) > room) {
    units = int32_t(room);
    if (units > 0 && U16_IS_LEAD(utf16.charAt(units - 1))) --units;  // not half a surrogate pair
  }
  using exif::put16, exif::put32, exif::put_ifd;
  std::vector<uint8_t> out{'M', 'M', 0, 42};  // big-endian TIFF, as piexif.dump writes it
  put32(out, kIfd0);
  put_ifd(out, 0x8769, 4, 1, kExifIfd);  // ExifIFD pointer, LONG
  put_ifd(out, 0x9286, 7, uint32_t(sizeof kPrefix + 2 * size_t(units)), kComment);  // UserComment, UNDEFINED
  out.insert(out.end(), kPrefix, kPrefix + sizeof kPrefix);
  for (int32_t i = 0; i < units; ++i) put16(out, utf16.charAt(i));
  return out;
}

}  // namespace cpdit::io

namespace cpdit::io {

namespace {
namespace exif {

// A TIFF block read in its own byte order; every read is checked against its end.
struct Tiff {
  const uint8_t* data;
  size_t size;
  bool big_endian;
  bool fits(size_t at, size_t bytes) const { return at <= size && bytes <= size - at; }
  uint32_t u16(size_t at) const {
    return big_endian ? uint32_t(data[at]) << 8 | data[at + 1] : uint32_t(data[at + 1]) << 8 | data[at];
  }
  uint32_t u32(size_t at) const {
    return big_endian ? u16(at) << 16 | u16(at + 2) : u16(at + 2) << 16 | u16(at);
  }
  // The 12-byte entry of `tag` in the IFD at `ifd`, or nullopt.
  std::optional<size_t> entry(size_t ifd, uint32_t tag) const {
    if (!fits(ifd, 2)) return std::nullopt;
    const uint32_t count = u16(ifd);
    for (uint32_t i = 0; i < count && fits(ifd + 2 + 12 * size_t(i), 12); ++i)
      if (u16(ifd + 2 + 12 * size_t(i)) == tag) return ifd + 2 + 12 * size_t(i);
    return std::nullopt;
  }
};

}  // namespace exif
}  // namespace

std::optional<std::string> read_exif_user_comment(const uint8_t* tiff, size_t size) {
  if (size < 8) return std::nullopt;
  const bool big = std::memcmp(tiff, "MM\0*", 4) == 0;
  if (!big && std::memcmp(tiff, "II*\0", 4) != 0) return std::nullopt;
  const exif::Tiff t{tiff, size, big};
  const auto pointer = t.entry(t.u32(4), 0x8769);  // IFD0's pointer to the Exif IFD
  if (!pointer) return std::nullopt;
  const auto comment = t.entry(t.u32(*pointer + 8), 0x9286);
  if (!comment) return std::nullopt;
  // UNDEFINED (7) by the standard; Pillow writes BYTE (1). Over 4 bytes, so never inline.
  const uint32_t type = t.u16(*comment + 2), count = t.u32(*comment + 4), at = t.u32(*comment + 8);
  if ((type != 7 && type != 1) || count < 8 || !t.fits(at, count)) return std::nullopt;
  const uint8_t* code = tiff + at;
  const uint8_t* text = code + 8;
  const size_t bytes = count - 8;
  if (std::memcmp(code, "UNICODE\0", 8) == 0) {
    icu::UnicodeString utf16;
    for (size_t i = 0; i + 1 < bytes; i += 2) utf16.append(char16_t(t.u16(at + 8 + i)));
    std::string utf8;
    return utf16.toUTF8String(utf8);
  }
  if (std::memcmp(code, "ASCII\0\0\0", 8) == 0 || std::memcmp(code, "\0\0\0\0\0\0\0\0", 8) == 0) {
    std::string ascii(reinterpret_cast<const char*>(text), bytes);
    while (!ascii.empty() && ascii.back() == '\0') ascii.pop_back();
    return ascii;
  }
  return std::nullopt;  // JIS, or not a character code
}

}  // namespace cpdit::io
