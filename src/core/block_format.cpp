#include <cpdit/core/block_format.hpp>

#include <array>

namespace cpdit {

namespace {
// Sizes as ggml defines them: a block is its f16 scale(s), then packed codes (and high bits).
// safetensors' 8-bit floats ride along as blocks of one value with no scale: Linear decodes them a tile at
// a time, as it decodes GGUF's blocks, so an FP8 checkpoint stays 8-bit in memory.
constexpr std::array<BlockFormat, 10> kFormats = {{
    {"Q8_0", 32, 2 + 32},                  // d, 32 int8
    {"Q4_0", 32, 2 + 16},                  // d, 32 nibbles
    {"Q4_1", 32, 2 + 2 + 16},              // d, m, 32 nibbles
    {"Q5_0", 32, 2 + 4 + 16},              // d, 32 high bits, 32 nibbles
    {"Q5_1", 32, 2 + 2 + 4 + 16},          // d, m, high bits, nibbles
    {"Q4_K", 256, 2 + 2 + 12 + 128},       // d, dmin, 8 x 6-bit (scale, min), 256 nibbles
    {"Q5_K", 256, 2 + 2 + 12 + 32 + 128},  // as Q4_K plus 256 high bits
    {"Q6_K", 256, 128 + 64 + 16 + 2},      // low nibbles, 2-bit highs, 16 int8 scales, d
    {"F8_E4M3", 1, 1},                     // PyTorch's float8_e4m3fn
    {"F8_E5M2", 1, 1},                     // PyTorch's float8_e5m2
}};
}  // namespace

const BlockFormat* find_block_format(std::string_view name) {
  for (const BlockFormat& f : kFormats)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace cpdit
