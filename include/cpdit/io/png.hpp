#pragma once
// Writing 8-bit RGB PNG images (previews), atomically like every output of cpdit.
#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::io {

// `rgb` holds height * width * 3 bytes, row-major, R G B per pixel.
void write_png(const std::string& path, const std::vector<uint8_t>& rgb, int64_t width, int64_t height);

}  // namespace cpdit::io
