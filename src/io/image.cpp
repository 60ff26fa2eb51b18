#include <cpdit/core/error.hpp>
#include <cpdit/io/png.hpp>

#include "io/image_formats.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

namespace cpdit::io {

namespace {
namespace image_files {  // named: a unity build joins this file with others

enum class Format { png, jpeg, webp, unknown };

// By the signature each format starts with, whatever the file is named.
Format format_of(const unsigned char* head, size_t size) {
  if (size >= 8 && std::memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0) return Format::png;
  if (size >= 3 && head[0] == 0xff && head[1] == 0xd8 && head[2] == 0xff) return Format::jpeg;
  if (size >= 12 && std::memcmp(head, "RIFF", 4) == 0 && std::memcmp(head + 8, "WEBP", 4) == 0) return Format::webp;
  return Format::unknown;
}

struct CloseFile {
  void operator()(FILE* file) const { std::fclose(file); }
};

// A picture file checked and its format told, its bytes read unless it is a PNG (libpng streams the
// file itself).
struct PictureFile {
  Format format;
  std::vector<uint8_t> bytes;
};

PictureFile open_picture(const std::string& path) {
  // Checked by name first: opening a FIFO or a device could block or never end.
  struct stat info;
  CPDIT_CHECK(::stat(path.c_str(), &info) == 0, invalid_argument, "cannot open ", path, ": ", std::strerror(errno));
  CPDIT_CHECK(!S_ISDIR(info.st_mode), invalid_argument, path, " is a folder, not a picture");
  CPDIT_CHECK(S_ISREG(info.st_mode), invalid_argument, path, " is not a regular file (a picture is read from one)");
  CPDIT_CHECK(info.st_size <= kMaxImageFileBytes, invalid_argument, path, " is ", info.st_size,
              " bytes: cpdit reads pictures of at most 1 GiB");
  const std::unique_ptr<FILE, CloseFile> file(std::fopen(path.c_str(), "rb"));
  CPDIT_CHECK(file != nullptr, invalid_argument, "cannot open ", path, ": ", std::strerror(errno));
  unsigned char head[12];
  const Format format = format_of(head, std::fread(head, 1, sizeof head, file.get()));
  CPDIT_CHECK(format != Format::unknown, invalid_argument, path,
              info.st_size == 0 ? " is empty" : " is not a PNG, JPEG or WebP file (by its first bytes)");
  if (format == Format::png) return {format, {}};
  std::vector<uint8_t> bytes(size_t(info.st_size));
  std::rewind(file.get());
  CPDIT_CHECK(std::fread(bytes.data(), 1, bytes.size(), file.get()) == bytes.size(), invalid_argument, "cannot read ",
              path, ": it changed while it was read");
  return {format, std::move(bytes)};
}

}  // namespace image_files
}  // namespace

void check_pixel_count(const std::string& path, int64_t width, int64_t height, int64_t max_pixels) {
  CPDIT_CHECK(width * height <= max_pixels, invalid_argument, path, " is ", width, "x", height, ": more than ",
              max_pixels == kMaxImagePixels ? "2^28" : std::to_string(max_pixels), " pixels");
}

RgbImage read_image(const std::string& path, int64_t max_pixels) {
  using namespace image_files;
  const PictureFile file = open_picture(path);
  if (file.format == Format::png) return read_png(path, max_pixels);
  return file.format == Format::jpeg ? decode_jpeg(file.bytes, path, max_pixels)
                                     : decode_webp(file.bytes, path, max_pixels);
}

PictureText read_picture_text(const std::string& path) {
  using namespace image_files;
  const PictureFile file = open_picture(path);
  if (file.format == Format::png) return read_png_text(path);
  const std::vector<uint8_t> tiff = file.format == Format::jpeg ? jpeg_exif(file.bytes) : webp_exif(file.bytes);
  const std::optional<std::string> comment = read_exif_user_comment(tiff.data(), tiff.size());
  if (!comment) return {};
  return {{"parameters", *comment}};
}

}  // namespace cpdit::io
