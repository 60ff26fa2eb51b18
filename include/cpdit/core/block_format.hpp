#pragma once
// The block-quantised weight formats of GGUF (ggml): each row of a weight is cut into blocks of
// `block_size` consecutive values, and each block is stored in `block_bytes` bytes holding its codes
// and its own scale(s). The byte layouts are ggml's (the kernels' dequantise.cpp spells them out).
#include <cstdint>
#include <string_view>

namespace cpdit {

struct BlockFormat {
  std::string_view name;  // "Q8_0", "Q4_K", ...
  int64_t block_size;     // values per block
  int64_t block_bytes;    // bytes per block
};

// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (blocks of 32), Q4_K, Q5_K, Q6_K (super-blocks of 256), and safetensors'
// F8_E4M3 and F8_E5M2 (blocks of one 8-bit float, no scale). nullptr for any other name.
const BlockFormat* find_block_format(std::string_view name);

}  // namespace cpdit
