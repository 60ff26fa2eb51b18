#pragma once
// Pictures in the formats cpdit reads and writes besides video: PNG (io/png.hpp), JPEG (libjpeg-turbo)
// and WebP (libwebp). The images a run starts from are read as 8-bit RGB whatever their format; outputs
// are written atomically like every output of cpdit, carrying the settings that made them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::io {

struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3 bytes, row-major, R G B per pixel
};

// The most pixels an image may claim (16384 x 16384): refused from its header, before pixel memory.
inline constexpr int64_t kMaxImagePixels = int64_t(1) << 28;
// The largest picture file read: refused from its size, before it is read.
inline constexpr int64_t kMaxImageFileBytes = int64_t(1) << 30;

// A PNG, JPEG or WebP file, told apart by its first bytes (not its name), as Pillow's
// Image.open(path).convert("RGB") gives it: a JPEG decoded by libjpeg's defaults as Pillow leaves them
// (the accurate integer IDCT, fancy upsampling), gray copied to R, G and B, and alpha dropped (the
// colour under a transparent pixel kept as it is). A path that is not a regular file, a file over
// kMaxImageFileBytes, claiming more than `max_pixels`, CMYK, animated, truncated or corrupt is a
// one-line error that names the file (Error invalid_argument); so is a JPEG whose pixel data is damaged,
// which Pillow would fill out with gray. (A fuzzer lowers `max_pixels`, to stay fast.)
RgbImage read_image(const std::string& path, int64_t max_pixels = kMaxImagePixels);

// The text a picture carries, as (keyword, text) pairs in file order: a PNG's text chunks (the
// "parameters" generate stores, or another tool's chunks), or a JPEG's or WebP's EXIF UserComment as
// ("parameters", text), the way A1111 stores its settings in those formats (UTF-16 after "UNICODE\0" in
// the TIFF block's byte order, or ASCII). A picture without any gives none; a file that is not a PNG,
// JPEG or WebP, or one its format's reader cannot read, is a one-line error.
using PictureText = std::vector<std::pair<std::string, std::string>>;
PictureText read_picture_text(const std::string& path);

// `rgb` as write_png takes it, as a baseline JPEG of quality 90 (4:2:0, libjpeg's defaults) or a lossy
// WebP of quality 90. A non-empty `parameters` (a run's settings, see pipeline/picture_files.hpp) goes in
// an EXIF UserComment, as A1111 writes it for both formats (so the tools that read its JPEGs read cpdit's).
void write_jpeg(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
                const std::string& parameters = {});
void write_webp(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
                const std::string& parameters = {});

}  // namespace cpdit::io
