#pragma once
// Decoding GGUF's quantised blocks and safetensors' FP8 codes (core/block_format.hpp) to f32 values,
// in ggml's layouts and with the arithmetic of the `gguf` Python package's dequantize (scale times code, then minus the min or
// plus the offset, each rounded to f32), so the values match it exactly.
#include <cpdit/core/block_format.hpp>
#include <cpdit/core/weight.hpp>

#include <cstdint>

namespace cpdit::kernels::detail {

// Decodes `n_values` (a multiple of the format's block size) from the blocks at `blocks` into `out`.
using BlockDecoder = void (*)(const uint8_t* blocks, int64_t n_values, float* out);

// The decoder of a format; throws unsupported for a format without one.
BlockDecoder block_decoder(const BlockFormat& format);

// The rows of a block-quantised (rows, cols) weight, decoded one at a time with its scale applied (every
// value times Weight::scaled's factor, rounded to f32, as ComfyUI multiplies its scaled FP8 weights):
// what every kernel that decodes a weight reads it through.
class QuantisedRows {
 public:
  explicit QuantisedRows(const Weight& weight);
  // Row `row`'s cols values into out.
  void decode(int64_t row, float* out) const;
  int64_t cols() const { return cols_; }

 private:
  BlockDecoder decoder_;
  const uint8_t* blocks_;
  int64_t stride_, cols_;  // a narrowed weight's rows keep the file's stride
  float scale_;
};

}  // namespace cpdit::kernels::detail
