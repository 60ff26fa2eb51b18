#pragma once
// The two products of a forward tile, S = scale Q K^T and O += P V, in the two precisions the
// forward pass runs (flash_forward.cpp is written once over either):
//   F32Tiles  — oneDNN's sgemm (exact f32) on the strided rows of q in place and on k and v copied
//               into one contiguous (S, D) block per (batch, KV head): with many heads the
//               (B, S, H, D) row stride (12 KiB at 24 heads of 128) made every key tile's rows
//               collide in the cache, and the forward ran at 0.45x PyTorch's SDPA (0.7x its own
//               few-heads rate);
//   Bf16Tiles — under MatmulPrecision::bf16: Q, K, V and P rounded to bf16, bf16 products
//               accumulated in f32 (kernels/cpu/bf16_pairs). K and V are packed key tile by key
//               tile; the online softmax and the output accumulator stay f32.
// Either copies the keys and values of a few KV heads at a time (KvHeads), so the extra memory is
// that of a few heads, not of all of k and v.
#include "attention/flash.hpp"

#include <cpdit/core/tensor.hpp>

#include <cstdint>

namespace cpdit::attention::detail::flash {

// The (batch, KV head) pairs a Tiles object serves: `count` of them from `first`, numbered b * Hkv + hk.
struct KvHeads {
  int64_t first = 0, count = 0;
};

// One key tile of one (batch, KV head): its first key c0, its width, and its index among all tiles.
struct KeyTile {
  int64_t b = 0, hk = 0, kt = 0, c0 = 0, cols = 0;
};

class F32Tiles {
 public:
  using Queries = const float*;
  F32Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t, KvHeads heads);
  static constexpr int64_t scratch_floats(const Dims&, const Tiling&) { return 0; }
  // The query tile of (b, h) starting at row r0, as scores() reads it.
  Queries queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const;
  // s (rows x tile.cols, row stride lds) = scale Q K^T.
  void scores(Queries q, int64_t rows, const KeyTile& tile, float scale, float* s, int64_t lds) const;
  // acc (rows x D) += P V with P in s. May overwrite s.
  void accumulate(float* scratch, float* s, int64_t lds, int64_t rows, const KeyTile& tile, float* acc) const;

 private:
  // Element offset of a key tile's first row in k_ and v_, and their row stride.
  int64_t kv_at(const KeyTile& tile) const;
  const float *q_, *k_, *v_;
  int64_t kv_ld_ = 0;
  Tensor keys_, values_;  // the copies of heads_, when k and v have more than one KV head
  Dims d_;
  KvHeads heads_;
};

class Bf16Tiles {
 public:
  using Queries = const bf16*;
  Bf16Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t, KvHeads heads);
  // Per thread: the query tile and a P tile in bf16 (as floats' worth of space).
  static int64_t scratch_floats(const Dims& d, const Tiling& t);
  Queries queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const;
  void scores(Queries q, int64_t rows, const KeyTile& tile, float scale, float* s, int64_t lds) const;
  void accumulate(float* scratch, float* s, int64_t lds, int64_t rows, const KeyTile& tile, float* acc) const;

 private:
  // Element offsets of a key tile's packed keys and values.
  int64_t keys_at(const KeyTile& tile) const;
  int64_t values_at(const KeyTile& tile) const;

  const float* q_;
  Dims d_;
  KvHeads heads_;
  int64_t rows_ = 0;                  // query rows of the scratch tiles, padded (bf16_pairs.hpp)
  int64_t bc_ = 0, k_tiles_ = 0;
  int64_t d_pairs_ = 0, c_pairs_ = 0;  // padded pairs along the head dim and along a key tile
  int64_t keys_ld_ = 0, values_ld_ = 0;  // padded row lengths (in pairs) of the packed keys and values
  // bf16, per (batch, KV head) of heads_ and key tile: K^T as (d_pairs_, keys_ld_) pairs, V as (c_pairs_, values_ld_).
  Tensor keys_, values_;
};

}  // namespace cpdit::attention::detail::flash
