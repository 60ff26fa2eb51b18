#include "attention/flash_tiles.hpp"
#include "kernels/cpu/bf16_pairs.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>

namespace cpdit::attention::detail::flash {

namespace pairs = cpdit::kernels::bf16_pairs;

namespace {
// Where the key tile's rows start in k and v (B, S_k, H_kv, D).
int64_t kv_offset(const Dims& d, const KeyTile& tile) { return (tile.b * d.Sk + tile.c0) * d.Hkv * d.D + tile.hk * d.D; }
}  // namespace

namespace {
// The rows of `heads` (b * Hkv + hk, from first) of src (B, S, Hkv, D), each head's rows contiguous.
Tensor heads_apart(const float* src, const Dims& d, KvHeads heads) {
  Tensor out = Tensor::empty({heads.count, d.Sk, d.D});
  float* dst = out.data<float>();
#pragma omp parallel for num_threads(compute_threads()) if (heads.count > 1)
  for (int64_t i = 0; i < heads.count; ++i) {
    const int64_t b = (heads.first + i) / d.Hkv, hk = (heads.first + i) % d.Hkv;
    for (int64_t s = 0; s < d.Sk; ++s)
      std::copy_n(src + ((b * d.Sk + s) * d.Hkv + hk) * d.D, d.D, dst + (i * d.Sk + s) * d.D);
  }
  return out;
}
}  // namespace

F32Tiles::F32Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling&, KvHeads heads)
    : q_(q.data<float>()), k_(k.data<float>()), v_(v.data<float>()), kv_ld_(d.Hkv * d.D), d_(d), heads_(heads) {
  if (d.Hkv == 1) return;  // already one contiguous block per batch
  keys_ = heads_apart(k_, d, heads);
  values_ = heads_apart(v_, d, heads);
  k_ = keys_.data<float>();
  v_ = values_.data<float>();
  kv_ld_ = d.D;
}

int64_t F32Tiles::kv_at(const KeyTile& tile) const {
  return d_.Hkv == 1 ? kv_offset(d_, tile) : ((tile.b * d_.Hkv + tile.hk - heads_.first) * d_.Sk + tile.c0) * d_.D;
}

F32Tiles::Queries F32Tiles::queries(float*, int64_t b, int64_t h, int64_t r0, int64_t) const {
  return q_ + (b * d_.Sq + r0) * d_.H * d_.D + h * d_.D;
}

void F32Tiles::scores(Queries q, int64_t rows, const KeyTile& tile, float scale, float* s, int64_t lds) const {
  kernels::gemm(false, true, rows, tile.cols, d_.D, scale, q, d_.H * d_.D, k_ + kv_at(tile), kv_ld_, 0, s, lds);
}

void F32Tiles::accumulate(float*, float* s, int64_t lds, int64_t rows, const KeyTile& tile, float* acc) const {
  kernels::gemm(false, false, rows, d_.D, tile.cols, 1, s, lds, v_ + kv_at(tile), kv_ld_, 1, acc, d_.D);
}

Bf16Tiles::Bf16Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t,
                     KvHeads heads)
    : q_(q.data<float>()),
      d_(d),
      heads_(heads),
      rows_(pairs::round_up(t.br, pairs::kEdge)),
      bc_(t.bc),
      k_tiles_(t.k_tiles),
      d_pairs_(pairs::padded_pairs(d.D)),
      c_pairs_(pairs::padded_pairs(t.bc)),
      keys_ld_(pairs::round_up(t.bc, pairs::kEdge)),
      values_ld_(pairs::round_up(d.D, pairs::kEdge)) {
  const int64_t tiles = heads.count * k_tiles_;
  // Zeros where the packing pads (bf16 zero is all zero bits).
  keys_ = Tensor::zeros({tiles * d_pairs_ * keys_ld_ * 2}, DType::bf16);
  values_ = Tensor::zeros({tiles * c_pairs_ * values_ld_ * 2}, DType::bf16);
  const float *kp = k.data<float>(), *vp = v.data<float>();
#pragma omp parallel for collapse(2) num_threads(compute_threads()) if (tiles > 1)
  for (int64_t i = 0; i < heads.count; ++i)
    for (int64_t kt = 0; kt < k_tiles_; ++kt) {
      const int64_t b = (heads.first + i) / d.Hkv, hk = (heads.first + i) % d.Hkv;
      const KeyTile tile{b, hk, kt, kt * bc_, std::min(bc_, d.Sk - kt * bc_)};
      const int64_t at = kv_offset(d, tile), ld = d.Hkv * d.D;
      pairs::pack_transposed(kp + at, ld, tile.cols, d.D, keys_.data<bf16>() + keys_at(tile), keys_ld_);
      pairs::pack_rows(vp + at, ld, tile.cols, d.D, values_.data<bf16>() + values_at(tile), values_ld_);
    }
}

int64_t Bf16Tiles::scratch_floats(const Dims& d, const Tiling& t) {
  // The query tile and the P tile, rows padded for the tile products' reads.
  return pairs::round_up(t.br, pairs::kEdge) * (pairs::padded_pairs(d.D) + pairs::padded_pairs(t.bc));
}

int64_t Bf16Tiles::keys_at(const KeyTile& tile) const {
  return ((tile.b * d_.Hkv + tile.hk - heads_.first) * k_tiles_ + tile.kt) * d_pairs_ * keys_ld_ * 2;
}

int64_t Bf16Tiles::values_at(const KeyTile& tile) const {
  return ((tile.b * d_.Hkv + tile.hk - heads_.first) * k_tiles_ + tile.kt) * c_pairs_ * values_ld_ * 2;
}

Bf16Tiles::Queries Bf16Tiles::queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const {
  bf16* q = reinterpret_cast<bf16*>(scratch);
  pairs::round_rows(q_ + (b * d_.Sq + r0) * d_.H * d_.D + h * d_.D, d_.H * d_.D, rows, d_.D, q, 2 * d_pairs_);
  return q;
}

void Bf16Tiles::scores(Queries q, int64_t rows, const KeyTile& tile, float scale, float* s, int64_t lds) const {
  pairs::gemm(rows, tile.cols, d_pairs_, scale, q, 2 * d_pairs_, keys_.data<bf16>() + keys_at(tile), keys_ld_, 0, s,
              lds);
}

void Bf16Tiles::accumulate(float* scratch, float* s, int64_t lds, int64_t rows, const KeyTile& tile, float* acc) const {
  // The P tile goes after the query tile (at most as many rows) in this thread's scratch.
  bf16* p = reinterpret_cast<bf16*>(scratch) + rows_ * 2 * d_pairs_;
  pairs::round_rows(s, lds, rows, tile.cols, p, 2 * c_pairs_);
  pairs::gemm(rows, d_.D, pairs::padded_pairs(tile.cols), 1, p, 2 * c_pairs_, values_.data<bf16>() + values_at(tile),
              values_ld_, 1, acc, d_.D);
}

}  // namespace cpdit::attention::detail::flash
