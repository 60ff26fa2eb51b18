#pragma once
// Internals of the `flash` backend: tile sizes and the two tiled passes. All tensors here are
// contiguous f32; the backend class (flash.cpp) converts inputs and validates arguments.
#include "attention/detail.hpp"

#include <cstdint>
#include <vector>

namespace cpdit::attention::detail::flash {

// Query rows x key columns of one tile.
struct Blocking {
  int64_t rows = 0, cols = 0;
};
// Chosen so a tile's working set (Q/K/V/dO rows, the score tile, accumulators) fits in half the
// per-core L2 (sysconf, then /sys, then a 1 MiB default).
Blocking forward_blocking(int64_t head_dim);
Blocking backward_blocking(int64_t head_dim);

// What a key-padding mask leaves of each (batch, key tile): tiles with no attended key are skipped,
// tiles with some masked keys get those columns set to -inf.
enum class TileKeys : uint8_t { none, all, some };

// The tiling of one call, shared by both passes: tile sizes clamped to the sequence lengths, tile
// counts, the state of every (batch, key tile), and the key mask (keep is null without one).
struct Tiling {
  int64_t br = 0, bc = 0, q_tiles = 0, k_tiles = 0;
  std::vector<TileKeys> keys;  // index b * k_tiles + t
  Tensor keep_mask;
  const bool* keep = nullptr;
};
Tiling make_tiling(Blocking blocking, const Mask& mask, const Dims& d);

Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Mask& mask,
               float scale);
Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, const Tensor& lse, const Dims& d, const Mask& mask, float scale);

}  // namespace cpdit::attention::detail::flash
