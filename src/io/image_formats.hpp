#pragma once
// The decoders and encoders behind io/image.hpp, one format a file (png.cpp, jpeg.cpp, webp.cpp), and
// the EXIF block that carries a picture's settings in the formats without PNG's text chunks.
#include <cpdit/io/image.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cpdit::io {

// `bytes` (the whole file at `path`, named in errors) decoded to RGB; more than `max_pixels` claimed is
// refused from the header, before pixel memory.
RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path, int64_t max_pixels);
RgbImage decode_webp(const std::vector<uint8_t>& bytes, const std::string& path, int64_t max_pixels);

// Refuses an image of more than `max_pixels` ("PATH is WxH: more than 2^28 pixels"), from its header.
void check_pixel_count(const std::string& path, int64_t width, int64_t height, int64_t max_pixels);

// `text` as the EXIF UserComment A1111 writes (piexif's UserComment.dump(text, encoding="unicode")): a
// big-endian TIFF block whose first IFD points to an Exif IFD holding tag 0x9286, "UNICODE\0" and the
// text in UTF-16BE, which piexif.load (A1111's reader) and Pillow's getexif() read back. Cut to at most
// `max_bytes` in all (at a character), as a JPEG segment must be.
std::vector<uint8_t> exif_user_comment(const std::string& text, size_t max_bytes);

// The UserComment a TIFF block holds, as UTF-8 (UTF-16 after "UNICODE\0" in the block's byte order,
// ASCII after "ASCII\0\0\0" or an undefined code), or nullopt when it holds none: every offset and
// count is checked against the block, so a damaged one gives nullopt, never a read outside it.
std::optional<std::string> read_exif_user_comment(const uint8_t* tiff, size_t size);

// The TIFF block of a JPEG's first APP1 "Exif" segment before its pixels, and of a WebP's EXIF chunk
// (empty when the file has none).
std::vector<uint8_t> jpeg_exif(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> webp_exif(const std::vector<uint8_t>& bytes);

}  // namespace cpdit::io
