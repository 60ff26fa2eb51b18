#pragma once
// The two products of a forward tile, S = scale Q K^T and O += P V, under MatmulPrecision::bf16
// (flash_forward.cpp's run_forward; the f32 pass has its own loop there):
//   Bf16Tiles — Q, K, V and P rounded to bf16, bf16 products accumulated in f32
//               (kernels/cpu/bf16_pairs). A task packs its KV head's keys and values, key tile by
//               key tile, into its thread's scratch once for all its query tiles; the online softmax
//               and the output accumulator stay f32.
#include "attention/flash.hpp"

#include <cpdit/core/tensor.hpp>

#include <cstdint>

namespace cpdit::attention::detail::flash {

// One key tile of one (batch, KV head): its first key c0, its width, and its index among all tiles.
struct KeyTile {
  int64_t b = 0, hk = 0, kt = 0, c0 = 0, cols = 0;
};

// Every call takes `scratch`, the thread's share of scratch_floats(): the packed keys and values of
// the KV head last given to pack_keys, then the query tile and the P tile.
class Bf16Tiles {
 public:
  using Queries = const bf16*;
  Bf16Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t);
  int64_t scratch_floats() const;
  // K^T and V of (batch b, KV head hk), every key tile, with zeros where the tile products read padding.
  void pack_keys(float* scratch, int64_t b, int64_t hk) const;
  Queries queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const;
  // s = Q K^T, unscaled: the softmax applies the scale as it takes the exponential.
  void scores(float* scratch, Queries q, int64_t rows, const KeyTile& tile, float* s, int64_t lds) const;
  // The P tile: the softmax writes row r of P at weights(scratch) + r * weights_ld(),
  // weights_width(cols) values of it (zeros past cols).
  bf16* weights(float* scratch) const;
  int64_t weights_ld() const { return weights_ld_; }
  static int64_t weights_width(int64_t cols);
  // acc += P V for the key tile.
  void accumulate(float* scratch, const bf16* p, int64_t rows, const KeyTile& tile, float* acc) const;

 private:
  // Element offsets of a key tile's packed keys and values, and of the query and P tiles, in bf16 scratch.
  int64_t keys_at(int64_t kt) const;
  int64_t values_at(int64_t kt) const;
  int64_t queries_at() const;
  int64_t weights_at() const;

  const float *q_, *k_, *v_;
  Dims d_;
  int64_t rows_ = 0;                  // query rows of the scratch tiles, padded (bf16_pairs.hpp)
  int64_t bc_ = 0, k_tiles_ = 0;
  int64_t d_pairs_ = 0, c_pairs_ = 0;  // padded pairs along the head dim and along a key tile
  // Padded row lengths (in pairs) of the packed keys, K^T as (d_pairs_, keys_ld_) pairs per key tile,
  // and of the packed values, V as (c_pairs_, values_ld_).
  int64_t keys_ld_ = 0, values_ld_ = 0;
  int64_t queries_ld_ = 0, weights_ld_ = 0;  // row strides (in bf16) of the query and P tiles
};

}  // namespace cpdit::attention::detail::flash
