#include "attention/flash_tiles.hpp"
#include "kernels/cpu/bf16_pairs.hpp"

#include <algorithm>

namespace cpdit::attention::detail::flash {

namespace pairs = cpdit::kernels::bf16_pairs;

namespace {

// Where the key tile's rows start in k and v (B, S_k, H_kv, D).
int64_t kv_offset(const Dims& d, const KeyTile& tile) { return (tile.b * d.Sk + tile.c0) * d.Hkv * d.D + tile.hk * d.D; }

// Zeros in a packed operand of `pairs` rows of `ld` pairs outside its data, the first data_pairs rows
// of `cols` pairs (bf16 zero is all zero bits). Nothing to do for full tiles.
void zero_padding(bf16* packed, int64_t pairs, int64_t ld, int64_t data_pairs, int64_t cols) {
  for (int64_t p = 0; p < pairs; ++p) {
    bf16* row = packed + 2 * p * ld;
    std::fill(row + (p < data_pairs ? 2 * cols : 0), row + 2 * ld, bf16{0});
  }
}

// A packed row stride: the padded length plus one cache line (16 pairs). Strides of a power of two
// bytes (2 KiB for K^T at 512 keys) put the 16 rows of a tile load into a few L1 sets, where they
// evict each other before their reuse by the next block of the product.
int64_t skewed(int64_t ld_pairs) { return ld_pairs + 16; }

}  // namespace

Bf16Tiles::Bf16Tiles(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, const Tiling& t)
    : q_(q.data<float>()),
      k_(k.data<float>()),
      v_(v.data<float>()),
      d_(d),
      rows_(pairs::round_up(t.br, pairs::kEdge)),
      bc_(t.bc),
      k_tiles_(t.k_tiles),
      d_pairs_(pairs::padded_pairs(d.D)),
      c_pairs_(pairs::padded_pairs(t.bc)),
      keys_ld_(skewed(pairs::round_up(t.bc, pairs::kEdge))),
      values_ld_(skewed(pairs::round_up(d.D, pairs::kEdge))),
      queries_ld_(2 * skewed(d_pairs_)),
      weights_ld_(2 * skewed(c_pairs_)) {}

int64_t Bf16Tiles::scratch_floats() const {
  // Per key tile K^T and V; the query tile and the P tile, rows padded for the tile products' reads.
  // Pairs of bf16 are one float's worth each.
  return (weights_at() + rows_ * weights_ld_ + 1) / 2;
}

int64_t Bf16Tiles::keys_at(int64_t kt) const { return kt * d_pairs_ * keys_ld_ * 2; }

int64_t Bf16Tiles::values_at(int64_t kt) const { return keys_at(k_tiles_) + kt * c_pairs_ * values_ld_ * 2; }

int64_t Bf16Tiles::queries_at() const { return values_at(k_tiles_); }

int64_t Bf16Tiles::weights_at() const { return queries_at() + rows_ * queries_ld_; }

void Bf16Tiles::pack_keys(float* scratch, int64_t b, int64_t hk) const {
  bf16* packed = reinterpret_cast<bf16*>(scratch);
  const int64_t ld = d_.Hkv * d_.D;
  for (int64_t kt = 0; kt < k_tiles_; ++kt) {
    const KeyTile tile{b, hk, kt, kt * bc_, std::min(bc_, d_.Sk - kt * bc_)};
    bf16 *keys = packed + keys_at(kt), *values = packed + values_at(kt);
    pairs::pack_transposed(k_ + kv_offset(d_, tile), ld, tile.cols, d_.D, keys, keys_ld_);
    zero_padding(keys, d_pairs_, keys_ld_, (d_.D + 1) / 2, tile.cols);
    pairs::pack_rows(v_ + kv_offset(d_, tile), ld, tile.cols, d_.D, values, values_ld_);
    zero_padding(values, c_pairs_, values_ld_, (tile.cols + 1) / 2, d_.D);
  }
}

Bf16Tiles::Queries Bf16Tiles::queries(float* scratch, int64_t b, int64_t h, int64_t r0, int64_t rows) const {
  bf16* q = reinterpret_cast<bf16*>(scratch) + queries_at();
  pairs::round_rows(q_ + (b * d_.Sq + r0) * d_.H * d_.D + h * d_.D, d_.H * d_.D, rows, d_.D, q, queries_ld_);
  return q;
}

void Bf16Tiles::scores(float* scratch, Queries q, int64_t rows, const KeyTile& tile, float* s, int64_t lds) const {
  const bf16* keys = reinterpret_cast<const bf16*>(scratch) + keys_at(tile.kt);
  pairs::gemm(rows, tile.cols, d_pairs_, 1, q, queries_ld_, keys, keys_ld_, 0, s, lds);
}

bf16* Bf16Tiles::weights(float* scratch) const {
  return reinterpret_cast<bf16*>(scratch) + weights_at();
}

int64_t Bf16Tiles::weights_width(int64_t cols) { return 2 * pairs::padded_pairs(cols); }

void Bf16Tiles::accumulate(float* scratch, const bf16* p, int64_t rows, const KeyTile& tile, float* acc) const {
  const bf16* values = reinterpret_cast<const bf16*>(scratch) + values_at(tile.kt);
  pairs::gemm(rows, d_.D, pairs::padded_pairs(tile.cols), 1, p, weights_ld(), values, values_ld_, 1, acc, d_.D);
}

}  // namespace cpdit::attention::detail::flash
