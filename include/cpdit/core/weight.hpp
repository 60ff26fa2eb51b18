#pragma once
// Weight: the learned values a layer computes with (a Linear's or a convolution's matrix, a bias, a
// norm's scale), kept as the checkpoint stores them. A dense weight is a Tensor of f32, bf16 or f16,
// often a zero-copy view into the mapped checkpoint file. A block-quantised weight holds its codes
// and one scale per block of `block_size` consecutive values along the last dim: either as a separate
// `scales` tensor, or inside the blocks themselves (GGUF's formats, core/block_format.hpp: the codes
// are then each row's blocks as bytes, a (rows, blocks * block_bytes) byte tensor, often a view of the
// mapped .gguf file).
// Kernels read the format and refuse, with a clear error, one they do not compute with.
//
// Memory: the weights of a process are counted on one counter (weight_memory_counter), each storage
// once however many models (ranks as threads) bind it, and on no rank's counter.
#include <cpdit/core/memory.hpp>
#include <cpdit/core/tensor.hpp>

#include <string>
#include <vector>

namespace cpdit {

struct BlockQuantisation {
  std::string format;      // the layout of the codes, e.g. "Q8_0", "Q4_0"
  int64_t block_size = 0;  // consecutive values along the last dim that share one scale
  Tensor scales;           // (rows, cols / block_size); undefined when the blocks carry their scales
  // Every decoded value times this: ComfyUI's "scaled" FP8 files store one scale_weight per matrix.
  float scale = 1.0f;
};

class Weight {
 public:
  Weight() = default;  // undefined: defined() is false
  // A dense weight. Implicit: wherever a weight is expected, a tensor serves. Any dtype, so that a
  // checkpoint's other tensors (an i64 position_ids buffer) can be read as a state dict; the loader
  // binds f32, bf16 and f16 only, and kernels check what they are given.
  Weight(Tensor values);  // NOLINT(google-explicit-constructor)
  // A block-quantised (rows, cols) weight: `codes` as the format lays them out, `q.scales` one per block.
  static Weight quantised(const Shape& shape, Tensor codes, BlockQuantisation q);
  // A (rows, cols) weight in one of GGUF's block formats: `blocks` is a byte tensor (dtype bool, read
  // only as raw bytes) of (rows, cols / block_size * block_bytes).
  static Weight blocks(const Shape& shape, const std::string& format, Tensor blocks);

  bool defined() const { return data_.defined(); }
  const Shape& shape() const { return shape_; }
  bool is_quantised() const { return !quant_.format.empty(); }
  // The element dtype of a dense weight, or of a quantised weight's codes.
  DType dtype() const { return data_.dtype(); }
  std::string format() const;  // "f32", "bf16", "f16", or the quantisation's name
  std::string describe() const;  // "bf16(64, 32)", "Q4_0(64, 32)"
  size_t nbytes() const;  // what the weight holds: values, or codes and scales

  // The values of a dense weight; throws naming the format (and `user`) for a quantised one.
  const Tensor& values(const char* user = "this layer") const;
  const Tensor& codes() const { return data_; }
  const BlockQuantisation& quantisation() const { return quant_; }

  // The same codes, every value decoded times `scale` (an FP8 matrix only).
  Weight scaled(float scale) const;
  // Rows (entries of dim 0) [start, start + length) of a weight, dense or quantised, as a view (no copy).
  Weight narrow_rows(int64_t start, int64_t length) const;
  // The rows of `parts` one after another (a copy): all dense of one dtype, or all in one quantised
  // format, alike in every dim but the first.
  static Weight cat_rows(const std::vector<Weight>& parts);

  // Moves every storage this weight holds onto `counter` (a mapped view starts being counted there).
  void charge_to(MemoryCounter& counter) const;

 private:
  Shape shape_;
  Tensor data_;  // dense values, or quantised codes
  BlockQuantisation quant_;  // empty format: dense
};

// The counter of the process's model weights (see the top of this file).
MemoryCounter& weight_memory_counter();

}  // namespace cpdit
