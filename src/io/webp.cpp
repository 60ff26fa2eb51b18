// WebP through libwebp (plain C with status codes: no longjmp to keep C++ objects away from).
#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>

#include "io/image_formats.hpp"

#include <webp/decode.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <cstring>
#include <memory>

namespace cpdit::io {

namespace {
namespace webp_codec {  // named: a unity build joins this file with others

const char* status_name(VP8StatusCode status) {
  switch (status) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "corrupt data";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "a feature libwebp does not decode";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "the file is truncated";
    default: return "unknown error";
  }
}

struct DecodedBuffer {
  WebPDecBuffer* buffer;
  ~DecodedBuffer() { WebPFreeDecBuffer(buffer); }
};

}  // namespace webp_codec
}  // namespace

RgbImage decode_webp(const std::vector<uint8_t>& bytes, const std::string& path, int64_t max_pixels) {
  using namespace webp_codec;
  WebPDecoderConfig config;
  CPDIT_CHECK(WebPInitDecoderConfig(&config), internal, "libwebp's decoder does not match its headers");
  // The header alone: the size a VP8X chunk claims is known before anything is decoded. Its canvas
  // (24 bits a side) is read here first, as libwebp calls one of 2^32 pixels or more "corrupt".
  if (bytes.size() >= 30 && std::memcmp(bytes.data() + 12, "VP8X", 4) == 0) {
    const uint8_t* vp8x = bytes.data() + 12;
    auto side = [](const uint8_t* p) { return 1 + (int64_t(p[0]) | int64_t(p[1]) << 8 | int64_t(p[2]) << 16); };
    check_pixel_count(path, side(vp8x + 12), side(vp8x + 15), max_pixels);
  }
  const VP8StatusCode header = WebPGetFeatures(bytes.data(), bytes.size(), &config.input);
  CPDIT_CHECK(header == VP8_STATUS_OK, invalid_argument, "cannot read ", path, " as a WebP: ", status_name(header));
  const int64_t width = config.input.width, height = config.input.height;
  check_pixel_count(path, width, height, max_pixels);
  CPDIT_CHECK(!config.input.has_animation, invalid_argument, path,
              " is an animated WebP: cpdit reads still pictures (take one frame first)");
  // RGB straight from the decoder, with libwebp's default (fancy) upsampling as Pillow's decode: alpha is
  // not composited, so the colour under a transparent pixel stays as convert("RGB") keeps it. libwebp
  // mallocs the output and writes it row by row, so a file cut short touches only the rows it holds.
  config.output.colorspace = MODE_RGB;
  const DecodedBuffer decoded{&config.output};
  const VP8StatusCode status = WebPDecode(bytes.data(), bytes.size(), &config);
  CPDIT_CHECK(status == VP8_STATUS_OK, invalid_argument, "cannot decode ", path, " as a WebP: ", status_name(status));
  const WebPRGBABuffer& rgb = config.output.u.RGBA;
  RgbImage image{width, height, std::vector<uint8_t>(size_t(width * height * 3))};
  for (int64_t y = 0; y < height; ++y)
    std::memcpy(image.rgb.data() + size_t(y * width * 3), rgb.rgba + size_t(y) * size_t(rgb.stride), size_t(width * 3));
  return image;
}

std::vector<uint8_t> webp_exif(const std::vector<uint8_t>& bytes) {
  const WebPData data{bytes.data(), bytes.size()};
  const std::unique_ptr<WebPMux, void (*)(WebPMux*)> mux(WebPMuxCreate(&data, 0), WebPMuxDelete);
  WebPData chunk{nullptr, 0};
  if (!mux || WebPMuxGetChunk(mux.get(), "EXIF", &chunk) != WEBP_MUX_OK) return {};
  // Some writers keep JPEG's "Exif\0\0" before the TIFF block.
  const size_t skip = chunk.size >= 6 && std::memcmp(chunk.bytes, "Exif\0\0", 6) == 0 ? 6 : 0;
  return std::vector<uint8_t>(chunk.bytes + skip, chunk.bytes + chunk.size);
}

void write_webp(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
                const std::string& parameters) {
  CPDIT_CHECK(width > 0 && height > 0 && width <= WEBP_MAX_DIMENSION && height <= WEBP_MAX_DIMENSION &&
                  rgb.size() == size_t(width * height * 3),
              invalid_argument, "write_webp: ", rgb.size(), " bytes do not hold a ", width, "x", height,
              " RGB image of at most ", WEBP_MAX_DIMENSION, " pixels a side");
  uint8_t* encoded = nullptr;
  const size_t size = WebPEncodeRGB(rgb.data(), int(width), int(height), int(width * 3), 90.0f, &encoded);
  const std::unique_ptr<uint8_t, void (*)(void*)> owned(encoded, WebPFree);
  CPDIT_CHECK(size > 0, io, "webp encoding of ", path, " failed");
  const WebPData image{encoded, size};
  // The settings in an EXIF chunk (the TIFF block without JPEG's "Exif\0\0", as Pillow writes it).
  const std::vector<uint8_t> exif = parameters.empty() ? std::vector<uint8_t>{}
                                                       : exif_user_comment(parameters, size_t(1) << 24);
  const std::unique_ptr<WebPMux, void (*)(WebPMux*)> mux(WebPMuxNew(), WebPMuxDelete);
  WebPData assembled;
  WebPDataInit(&assembled);
  const WebPData exif_data{exif.data(), exif.size()};
  const bool ok = mux && WebPMuxSetImage(mux.get(), &image, 0) == WEBP_MUX_OK &&
                  (exif.empty() || WebPMuxSetChunk(mux.get(), "EXIF", &exif_data, 0) == WEBP_MUX_OK) &&
                  WebPMuxAssemble(mux.get(), &assembled) == WEBP_MUX_OK;
  const std::unique_ptr<WebPData, void (*)(WebPData*)> owned_file(&assembled, WebPDataClear);
  CPDIT_CHECK(ok, io, "webp encoding of ", path, " failed while adding its EXIF chunk");
  AtomicFile file(path);
  file.write(assembled.bytes, assembled.size);
  file.commit();
}

}  // namespace cpdit::io
