#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/png.hpp>

#include "io/image_formats.hpp"

#include <png.h>

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>

namespace cpdit::io {

namespace {

// libpng reports errors by longjmp; C++ exceptions must not cross its C frames. So the image is
// encoded into memory by a function that holds no C++ objects, and written to disk afterwards.
struct Encoder {
  std::vector<uint8_t> bytes;
  char message[256] = {};
};

// The error pointer is a char[256] that receives libpng's message.
void on_error(png_structp png, png_const_charp message) {
  std::strncpy(static_cast<char*>(png_get_error_ptr(png)), message, 255);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}
void on_write(png_structp png, png_bytep data, png_size_t length) {
  auto* encoder = static_cast<Encoder*>(png_get_io_ptr(png));
  encoder->bytes.insert(encoder->bytes.end(), data, data + length);
}
void on_flush(png_structp) {}

bool encode(const uint8_t* rgb, png_uint_32 width, png_uint_32 height, std::vector<png_text>& text,
            Encoder* encoder) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, encoder->message, on_error, on_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_set_write_fn(png, encoder, on_write, on_flush);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!text.empty()) png_set_text(png, info, text.data(), int(text.size()));
  png_write_info(png, info);
  for (png_uint_32 y = 0; y < height; ++y) png_write_row(png, rgb + size_t(y) * width * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

struct TextReader {
  FILE* file = nullptr;
  char message[256] = {};
};

// The text chunks of the PNG before its pixels (libpng's, freed with the read struct it returns);
// false with the reader's message set when libpng cannot read the file. It holds no C++ object, as
// libpng may longjmp out of it.
bool read_text_chunks(TextReader* reader, png_textp* chunks, int* count, png_structp* png_out, png_infop* info_out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, reader->message, on_error, on_warning);
  if (!png) return false;
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  // A text chunk is inflated into memory: one that would inflate past 1 MiB is dropped (libpng's
  // benign error, a warning on read).
  png_set_chunk_malloc_max(png, 1 << 20);
  png_init_io(png, reader->file);
  png_read_info(png, info);
  *count = png_get_text(png, info, chunks, nullptr);
  *png_out = png;
  *info_out = info;
  return true;
}

// libpng allocates a chunk's claimed length before reading it, and inflates compressed chunks whole,
// with no limit in this build: a 100-byte file claiming a 2 GB text chunk, or a zTXt bomb, would be
// allocated. So the chunk headers are walked first (seeking past the data, to IEND) and a chunk
// other than the pixels' IDAT above 1 MiB, or a compressed one (zTXt, iTXt, iCCP) above 64 KiB
// (deflate inflates at most ~1032x: 64 MiB), is refused before libpng sees the file.
void check_chunk_sizes(FILE* file, const std::string& path) {
  unsigned char header[8];
  if (std::fread(header, 1, 8, file) == 8 && png_sig_cmp(header, 0, 8) == 0) {
    while (std::fread(header, 1, 8, file) == 8) {
      const uint64_t length = uint64_t(header[0]) << 24 | uint64_t(header[1]) << 16 | uint64_t(header[2]) << 8 |
                              uint64_t(header[3]);
      const std::string type(reinterpret_cast<const char*>(header + 4), 4);
      if (type == "IEND") break;
      const bool compressed = type == "zTXt" || type == "iTXt" || type == "iCCP";
      CPDIT_CHECK(type == "IDAT" || length <= (compressed ? uint64_t(64) << 10 : uint64_t(1) << 20),
                  invalid_argument, path, ": its ", type, " chunk of ", length, " bytes is above the ",
                  compressed ? "64 KiB" : "1 MiB", " cpdit reads outside the pixels");
      if (std::fseek(file, long(length + 4), SEEK_CUR) != 0) break;  // the data and its CRC
    }
  }
  // A file that is no PNG is left for libpng to say so.
}

struct CloseFile {
  void operator()(FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<FILE, CloseFile>;

// The file at `path` open at its start, once its chunk sizes passed check_chunk_sizes.
File open_png(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"));
  CPDIT_CHECK(file != nullptr, invalid_argument, "cannot open ", path, ": ", std::strerror(errno));
  check_chunk_sizes(file.get(), path);
  std::rewind(file.get());
  return file;
}

}  // namespace

PictureText read_png_text(const std::string& path) {
  const File file = open_png(path);
  TextReader reader;
  reader.file = file.get();
  png_textp chunks = nullptr;
  int count = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  const bool ok = read_text_chunks(&reader, &chunks, &count, &png, &info);
  PictureText text;
  if (ok) {
    for (int i = 0; i < count; ++i) {
      const png_text& c = chunks[i];  // an iTXt chunk's length is itxt_length, the others' text_length
      text.emplace_back(c.key, std::string(c.text, c.compression >= PNG_ITXT_COMPRESSION_NONE ? c.itxt_length
                                                                                                : c.text_length));
    }
    png_destroy_read_struct(&png, &info, nullptr);
  }
  CPDIT_CHECK(ok, invalid_argument, "cannot read ", path, " as a PNG: ", reader.message);
  return text;
}

void write_png(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
               const PictureText& text) {
  CPDIT_CHECK(width > 0 && height > 0 && width < (1 << 24) && height < (1 << 24) &&
                  rgb.size() == size_t(width * height * 3),
              invalid_argument, "write_png: ", rgb.size(), " bytes do not hold a ", width, "x", height, " RGB image");
  std::vector<png_text> chunks;
  for (const auto& [key, value] : text) {
    CPDIT_CHECK(!key.empty() && key.size() <= 79, invalid_argument, "write_png: a text keyword has 1 to 79 bytes, got '",
                key, "'");
    png_text chunk{};
    const bool ascii = std::all_of(value.begin(), value.end(), [](char c) { return (unsigned char)c < 128; });
    chunk.compression = ascii ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
    chunk.key = const_cast<char*>(key.c_str());  // libpng copies; it takes non-const pointers
    chunk.text = const_cast<char*>(value.c_str());
    (ascii ? chunk.text_length : chunk.itxt_length) = value.size();
    chunks.push_back(chunk);
  }
  Encoder encoder;
  CPDIT_CHECK(encode(rgb.data(), png_uint_32(width), png_uint_32(height), chunks, &encoder), io, "png encoding of ",
              path, " failed: ", encoder.message);
  AtomicFile file(path);
  file.write(encoder.bytes.data(), encoder.bytes.size());
  file.commit();
}

RgbImage read_png(const std::string& path, int64_t max_pixels) {
  const File file = open_png(path);
  // The simplified API keeps libpng's longjmp inside libpng: errors come back as a flag and a message.
  png_image image;
  std::memset(&image, 0, sizeof image);
  image.version = PNG_IMAGE_VERSION;
  CPDIT_CHECK(png_image_begin_read_from_stdio(&image, file.get()) != 0, invalid_argument, "cannot read ", path,
              " as a PNG: ", image.message);
  const int64_t pixels = int64_t(image.width) * int64_t(image.height);
  if (pixels > max_pixels) png_image_free(&image);
  check_pixel_count(path, image.width, image.height, max_pixels);
  // Read with alpha, then drop it: PIL's RGB conversion keeps the colour of a transparent pixel as it is
  // (libpng would composite it onto a background without the alpha channel).
  image.format = PNG_FORMAT_RGBA;
  std::vector<uint8_t> rgba(size_t(PNG_IMAGE_SIZE(image)));
  CPDIT_CHECK(png_image_finish_read(&image, nullptr, rgba.data(), 0, nullptr) != 0, invalid_argument, "cannot decode ",
              path, " as a PNG: ", image.message);
  RgbImage out{int64_t(image.width), int64_t(image.height), std::vector<uint8_t>(size_t(pixels) * 3)};
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t c = 0; c < 3; ++c) out.rgb[size_t(3 * i + c)] = rgba[size_t(4 * i + c)];
  return out;
}

}  // namespace cpdit::io
