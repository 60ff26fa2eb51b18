#include "io/image_formats.hpp"

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
