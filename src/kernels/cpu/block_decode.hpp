#pragma once
// Decoding GGUF's quantised blocks and safetensors' FP8 codes (core/block_format.hpp) to f32 values,
// in ggml's layouts and with the arithmetic of the `gguf` Python package's dequantize (scale times code, then minus the min or
// plus the offset, each rounded to f32), so the values match it exactly.
#include <cpdit/core/block_format.hpp>

#include <cstdint>

namespace cpdit::kernels::detail {

// Decodes `n_values` (a multiple of the format's block size) from the blocks at `blocks` into `out`.
using BlockDecoder = void (*)(const uint8_t* blocks, int64_t n_values, float* out);

// The decoder of a format; throws unsupported for a format without one.
BlockDecoder block_decoder(const BlockFormat& format);

}  // namespace cpdit::kernels::detail
