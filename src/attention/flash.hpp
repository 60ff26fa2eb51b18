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
Blocking forward_blocking(int64_t head_dim);      // the bf16 tiles' forward
Blocking forward_f32_blocking(int64_t head_dim);  // run_forward_f32
Blocking backward_blocking(int64_t head_dim);

// What the mask leaves of one tile (query tile x key tile): no visible score (the tile is skipped),
// every score (computed with no per-element test), or some (the hidden scores are set to -inf).
enum class TileKeys : uint8_t { none, all, some };

// The tiling of one call, shared by both passes: tile sizes clamped to the sequence lengths, tile
// counts, what key padding leaves of every (batch, key tile), and the position rule.
struct Tiling {
  int64_t br = 0, bc = 0, q_tiles = 0, k_tiles = 0, Sq = 0, Sk = 0;
  std::vector<TileKeys> keys;  // key padding, index b * k_tiles + t
  Tensor keep_mask;
  const bool* keep = nullptr;  // null without key padding
  Mask rule;                   // the position rule and offsets (no tensor); rule none without one

  // Key padding and the position rule together, for (batch b, query tile qt, key tile kt).
  TileKeys state(int64_t b, int64_t qt, int64_t kt) const;
  // For a tile in state `some`: sets its hidden scores to -inf. The score of query row r and key
  // column c is s[r * query_stride + c * key_stride] (row-major: (ld, 1); key-major: (1, ld)).
  void mask_scores(int64_t b, int64_t qt, int64_t kt, float* s, int64_t query_stride, int64_t key_stride = 1) const;

 private:
  TileKeys rule_state(int64_t qt, int64_t kt) const;
};
Tiling make_tiling(Blocking blocking, const Mask& mask, const Dims& d);

Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Mask& mask,
               float scale);
Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, const Tensor& lse, const Dims& d, const Mask& mask, float scale);

}  // namespace cpdit::attention::detail::flash
