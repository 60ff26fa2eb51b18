#include "attention/flash_tiles.hpp"
#include "kernels/cpu/bf16_pairs.hpp"

#include <cpdit/core/threads.hpp>

namespace cpdit::attention::detail::flash {

namespace pairs = cpdit::kernels::bf16_pairs;

namespace {
// Where the key tile's rows start in k and v (B, S_k, H_kv, D).
int64_t kv_offset(const Dims& d, const KeyTile& tile) { return (tile.b * d.Sk + tile.c0) * d.Hkv * d.D + tile.hk * d.D; }
}  // namespace

Bf16Tiles::Bf16Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t)
    : q_(q.data<float>()),
      d_(d),
      rows_(pairs::round_up(t.br, pairs::kEdge)),
      bc_(t.bc),
      k_tiles_(t.k_tiles),
      d_pairs_(pairs::padded_pairs(d.D)),
      c_pairs_(pairs::padded_pairs(t.bc)),
      keys_ld_(pairs::round_up(t.bc, pairs::kEdge)),
      values_ld_(pairs::round_up(d.D, pairs::kEdge)) {
  const int64_t tiles = d.B * d.Hkv * k_tiles_;
  // Zeros where the packing pads (bf16 zero is all zero bits); where every tile is full there is no
  // padding, and no pass to write zeros only to overwrite them.
  const bool padded = 2 * d_pairs_ != d.D || values_ld_ != d.D || keys_ld_ != bc_ || 2 * c_pairs_ != bc_ ||
                      d.Sk % bc_ != 0;
  const auto make = [&](int64_t n) { return padded ? Tensor::zeros({n}, DType::bf16) : Tensor::empty({n}, DType::bf16); };
  keys_ = make(tiles * d_pairs_ * keys_ld_ * 2);
  values_ = make(tiles * c_pairs_ * values_ld_ * 2);
  const float *kp = k.data<float>(), *vp = v.data<float>();
#pragma omp parallel for collapse(3) num_threads(compute_threads()) if (tiles > 1)
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t hk = 0; hk < d.Hkv; ++hk)
      for (int64_t kt = 0; kt < k_tiles_; ++kt) {
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
  return ((tile.b * d_.Hkv + tile.hk) * k_tiles_ + tile.kt) * d_pairs_ * keys_ld_ * 2;
}

int64_t Bf16Tiles::values_at(const KeyTile& tile) const {
  return ((tile.b * d_.Hkv + tile.hk) * k_tiles_ + tile.kt) * c_pairs_ * values_ld_ * 2;
}

Bf16Tiles::Queries Bf16Tiles::queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const {
  bf16* q = reinterpret_cast<bf16*>(scratch);
  pairs::round_rows(q_ + (b * d_.Sq + r0) * d_.H * d_.D + h * d_.D, d_.H * d_.D, rows, d_.D, q, 2 * d_pairs_);
  return q;
}

void Bf16Tiles::scores(Queries q, int64_t rows, const KeyTile& tile, float* s, int64_t lds) const {
  pairs::gemm(rows, tile.cols, d_pairs_, 1, q, 2 * d_pairs_, keys_.data<bf16>() + keys_at(tile), keys_ld_, 0, s, lds);
}

bf16* Bf16Tiles::weights(float* scratch) const { return reinterpret_cast<bf16*>(scratch) + rows_ * 2 * d_pairs_; }

int64_t Bf16Tiles::weights_width(int64_t cols) { return 2 * pairs::padded_pairs(cols); }

void Bf16Tiles::accumulate(const bf16* p, int64_t rows, const KeyTile& tile, float* acc) const {
  pairs::gemm(rows, d_.D, pairs::padded_pairs(tile.cols), 1, p, weights_ld(), values_.data<bf16>() + values_at(tile),
              values_ld_, 1, acc, d_.D);
}

}  // namespace cpdit::attention::detail::flash
