// JPEG through libjpeg-turbo. libjpeg reports errors by longjmp, which C++ objects must not be skipped
// by: each function that calls into libjpeg sets its own jump point and holds nothing but plain data,
// and the decoder's state lives in a struct the caller owns and destroys.
#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>

#include "io/image_formats.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <jpeglib.h>
#include <jerror.h>

namespace cpdit::io {

namespace {
namespace jpeg_codec {  // named: a unity build joins this file with png.cpp

// A progressive file of many scans costs a pass over the image each: real encoders write about ten.
constexpr int kMaxScans = 100;

struct Failure {
  jpeg_error_mgr manager;  // first: libjpeg hands callbacks a pointer to it
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX + 64];
};

[[noreturn]] void on_error(j_common_ptr info) {
  auto* failure = reinterpret_cast<Failure*>(info->err);
  info->err->format_message(info, failure->message);
  std::longjmp(failure->jump, 1);
}

// libjpeg goes on past damaged or missing pixel data, filling the rest of the image with gray (and
// reports it as a warning): a file cut short is refused, as Pillow refuses it ("image file is
// truncated"), and so is a damaged one, where Pillow would give the gray. Warnings about what lies
// around the pixels (extraneous bytes before a marker, an unknown JFIF version) leave it readable.
void on_message(j_common_ptr info, int level) {
  if (level != -1) return;  // trace messages
  switch (info->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_BOGUS_PROGRESSION:
      on_error(info);
    default:
      return;
  }
}

void on_progress(j_common_ptr info) {
  auto* d = reinterpret_cast<j_decompress_ptr>(info);
  if (d->input_scan_number <= kMaxScans) return;
  auto* failure = reinterpret_cast<Failure*>(info->err);
  std::snprintf(failure->message, sizeof failure->message, "more than %d progressive scans", kMaxScans);
  std::longjmp(failure->jump, 1);
}

struct Decoder {
  jpeg_decompress_struct d;
  jpeg_progress_mgr progress;
  Failure failure;
  Decoder() {
    std::memset(&d, 0, sizeof d);  // jpeg_destroy_decompress is safe on a zeroed struct
    std::memset(&progress, 0, sizeof progress);
    std::memset(&failure, 0, sizeof failure);
    d.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = on_error;
    failure.manager.emit_message = on_message;
  }
  ~Decoder() { jpeg_destroy_decompress(&d); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

bool read_header(Decoder* j, const uint8_t* data, size_t size) {
  if (setjmp(j->failure.jump)) return false;
  jpeg_create_decompress(&j->d);
  j->progress.progress_monitor = on_progress;
  j->d.progress = &j->progress;
  jpeg_mem_src(&j->d, data, static_cast<unsigned long>(size));
  jpeg_read_header(&j->d, TRUE);
  return true;
}

bool start(Decoder* j) {
  if (setjmp(j->failure.jump)) return false;
  // Gray is copied to R, G and B, as convert("RGB") does to Pillow's "L" image. The IDCT and upsampling
  // stay libjpeg's defaults (JDCT_ISLOW, fancy upsampling), as Pillow leaves them outside draft mode.
  j->d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&j->d);
  return true;
}

bool read_row(Decoder* j, uint8_t* row) {
  if (setjmp(j->failure.jump)) return false;
  JSAMPROW rows[1] = {row};
  jpeg_read_scanlines(&j->d, rows, 1);
  return true;
}

struct Encoder {
  jpeg_compress_struct c;
  Failure failure;
  unsigned char* bytes = nullptr;  // malloc'ed by libjpeg's memory destination
  unsigned long size = 0;
  Encoder() {
    std::memset(&c, 0, sizeof c);
    std::memset(&failure, 0, sizeof failure);
    c.err = jpeg_std_error(&failure.manager);
    failure.manager.error_exit = on_error;
  }
  ~Encoder() {
    jpeg_destroy_compress(&c);
    std::free(bytes);
  }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

bool encode(Encoder* j, const uint8_t* rgb, JDIMENSION width, JDIMENSION height, const std::vector<uint8_t>& exif) {
  if (setjmp(j->failure.jump)) {
    // The memory destination may have freed the buffer `bytes` points to while growing it: leaked, not
    // freed twice, on this path of a failed allocation.
    j->bytes = nullptr;
    return false;
  }
  jpeg_compress_struct& c = j->c;
  jpeg_create_compress(&c);
  jpeg_mem_dest(&c, &j->bytes, &j->size);
  c.image_width = width;
  c.image_height = height;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);  // baseline, 4:2:0, JFIF
  jpeg_set_quality(&c, 90, TRUE);
  jpeg_start_compress(&c, TRUE);
  if (!exif.empty()) jpeg_write_marker(&c, JPEG_APP0 + 1, exif.data(), unsigned(exif.size()));
  while (c.next_scanline < height) {
    JSAMPROW rows[1] = {const_cast<JSAMPROW>(rgb + size_t(c.next_scanline) * width * 3)};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  return true;
}

}  // namespace jpeg_codec
}  // namespace

RgbImage decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path, int64_t max_pixels) {
  using namespace jpeg_codec;
  Decoder j;
  CPDIT_CHECK(read_header(&j, bytes.data(), bytes.size()), invalid_argument, "cannot read ", path, " as a JPEG: ",
              j.failure.message);
  const int64_t width = j.d.image_width, height = j.d.image_height;
  check_pixel_count(path, width, height, max_pixels);
  CPDIT_CHECK(j.d.jpeg_color_space != JCS_CMYK && j.d.jpeg_color_space != JCS_YCCK, invalid_argument, path,
              " is a CMYK JPEG: cpdit reads RGB and grayscale ones (convert it to RGB first)");
  CPDIT_CHECK(start(&j), invalid_argument, "cannot decode ", path, " as a JPEG: ", j.failure.message);
  // The pixels grow row by row: a file that claims a large image and stops short is refused before
  // memory for the rows it lacks is touched.
  RgbImage image{width, height, {}};
  const size_t row_bytes = size_t(width) * 3;
  image.rgb.reserve(row_bytes * size_t(height));
  while (j.d.output_scanline < j.d.output_height) {
    image.rgb.resize(image.rgb.size() + row_bytes);
    CPDIT_CHECK(read_row(&j, image.rgb.data() + image.rgb.size() - row_bytes), invalid_argument, "cannot decode ",
                path, " as a JPEG: ", j.failure.message);
  }
  // No jpeg_finish_decompress: the pixels are complete, and what may follow them is of no use. (The
  // entropy decoder reads a little past the last block, so a file cut just before its EOI marker is
  // refused as truncated, as Pillow refuses it.)
  return image;
}

std::vector<uint8_t> jpeg_exif(const std::vector<uint8_t>& bytes) {
  // The segments between SOI and the first scan, each FF, its marker and a big-endian length that
  // counts itself; the APP1 segment EXIF writers put there starts "Exif\0\0".
  size_t at = 2;
  while (at + 4 <= bytes.size() && bytes[at] == 0xff) {
    const uint8_t marker = bytes[at + 1];
    if (marker == 0xff) {  // fill byte before a marker
      ++at;
      continue;
    }
    if (marker == 0xda || marker == 0xd9) break;  // the pixels (or the end) begin
    if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {  // markers without a length
      at += 2;
      continue;
    }
    const size_t length = size_t(bytes[at + 2]) << 8 | bytes[at + 3];
    if (length < 2 || length > bytes.size() - at - 2) break;
    const uint8_t* body = bytes.data() + at + 4;
    if (marker == 0xe1 && length >= 8 && std::memcmp(body, "Exif\0\0", 6) == 0)
      return std::vector<uint8_t>(body + 6, body + length - 2);
    at += 2 + length;
  }
  return {};
}

void write_jpeg(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
                const std::string& parameters) {
  CPDIT_CHECK(width > 0 && height > 0 && width <= JPEG_MAX_DIMENSION && height <= JPEG_MAX_DIMENSION &&
                  rgb.size() == size_t(width * height * 3),
              invalid_argument, "write_jpeg: ", rgb.size(), " bytes do not hold a ", width, "x", height,
              " RGB image of at most ", JPEG_MAX_DIMENSION, " pixels a side");
  // An APP1 segment holds at most 65533 bytes, "Exif\0\0" first.
  std::vector<uint8_t> exif;
  if (!parameters.empty()) {
    exif = {'E', 'x', 'i', 'f', 0, 0};
    const std::vector<uint8_t> tiff = exif_user_comment(parameters, 65533 - exif.size());
    exif.insert(exif.end(), tiff.begin(), tiff.end());
  }
  jpeg_codec::Encoder encoder;
  CPDIT_CHECK(jpeg_codec::encode(&encoder, rgb.data(), JDIMENSION(width), JDIMENSION(height), exif), io,
              "jpeg encoding of ", path, " failed: ", encoder.failure.message);
  AtomicFile file(path);
  file.write(encoder.bytes, encoder.size);
  file.commit();
}

}  // namespace cpdit::io
