#pragma once
// Writing 8-bit RGB PNG images (previews), atomically like every output of cpdit, and reading one
// (the image an image-to-video run starts from); and the text chunks a PNG carries, such as the
// "parameters" that generate (like stable-diffusion.cpp and A1111) stores.
#include <cpdit/io/image.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::io {

// `rgb` holds height * width * 3 bytes, row-major, R G B per pixel; `text` goes before the pixels, in
// tEXt chunks for ASCII text, iTXt (UTF-8) for any other.
void write_png(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height,
               const PictureText& text = {});

// The text chunks (tEXt, zTXt, iTXt) before a PNG's pixels, where PNG writers put them, in file order.
// A file libpng cannot read is a one-line error; a chunk above 1 MiB is refused before it is inflated.
PictureText read_png_text(const std::string& path);

// Any PNG as 8-bit RGB, as PIL's convert("RGB") gives it for 8-bit files: gray copied to R, G and B,
// a palette looked up, alpha dropped (16-bit channels are scaled to 8 bits by libpng). Decoded by
// libpng's simplified reader; a file it cannot read, or of more than `max_pixels`, is a one-line error.
// Input pictures are read by read_image (io/image.hpp), which calls this for a PNG.
RgbImage read_png(const std::string& path, int64_t max_pixels = kMaxImagePixels);

}  // namespace cpdit::io
