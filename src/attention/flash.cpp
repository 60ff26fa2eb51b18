// The `flash` backend: FlashAttention-2 on the CPU. Scores exist one tile at a time (never S x S);
// the softmax runs online over key tiles; backward recomputes P from the LSE. Masks are classified
// per tile: fully hidden tiles are skipped, fully visible ones run with no per-element test.
#include "attention/flash.hpp"

#include <cpdit/core/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <string>

namespace cpdit::attention::detail {
namespace flash {
namespace {

int64_t l2_cache_bytes() {
  long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (bytes > 0) return bytes;
  std::ifstream file("/sys/devices/system/cpu/cpu0/cache/index2/size");  // e.g. "2048K"
  std::string text;
  if (file >> text && !text.empty()) {
    int64_t value = std::atoll(text.c_str());
    if (value > 0) return text.back() == 'K' ? value << 10 : text.back() == 'M' ? value << 20 : value;
  }
  return int64_t(1) << 20;
}

// The largest multiple of 64 in [64, cap] whose working set `floats_for(cols)` fits in half of L2.
template <class WorkingSet>
int64_t widest_cols(int64_t cap, WorkingSet floats_for) {
  const int64_t budget = l2_cache_bytes() / 2 / int64_t(sizeof(float));
  int64_t cols = 64;
  while (cols + 64 <= cap && floats_for(cols + 64) <= budget) cols += 64;
  return cols;
}

}  // namespace

Blocking forward_blocking(int64_t D) {
  // Q tile and output accumulator (rows x D), K and V tiles (cols x D), scores (rows x cols).
  const int64_t rows = 128;
  return {rows, widest_cols(512, [&](int64_t c) { return 2 * rows * D + 2 * c * D + rows * c; })};
}

Blocking forward_f32_blocking(int64_t D) {
  // Q^T and O^T (D x rows), the K and V^T tiles (cols x D), key-major scores (cols x rows). 256 query
  // rows per tile halve the reads of each key tile per FLOP against 128 (flash_forward.cpp).
  const int64_t rows = 256;
  return {rows, widest_cols(256, [&](int64_t c) { return 2 * rows * D + 2 * c * D + rows * c; })};
}

Blocking backward_blocking(int64_t D) {
  // Q and dO tiles (rows x D); K, K^T, V^T and the dK, dV accumulators (cols x D); P and dP (rows x cols).
  const int64_t rows = 128;
  return {rows, widest_cols(256, [&](int64_t c) { return 2 * rows * D + 5 * c * D + 2 * rows * c; })};
}

Tiling make_tiling(Blocking blocking, const Mask& mask, const Dims& d) {
  Tiling t;
  t.br = std::max<int64_t>(1, std::min(blocking.rows, d.Sq));
  t.bc = std::max<int64_t>(1, std::min(blocking.cols, d.Sk));
  t.q_tiles = (d.Sq + t.br - 1) / t.br;
  t.k_tiles = (d.Sk + t.bc - 1) / t.bc;
  t.Sq = d.Sq;
  t.Sk = d.Sk;
  t.rule = mask;
  t.rule.kind = MaskKind::none;
  t.rule.tensor = Tensor();
  t.keys.assign(size_t(d.B * t.k_tiles), TileKeys::all);
  if (mask.kind != MaskKind::key_padding) return t;
  t.keep_mask = mask.tensor.contiguous();
  t.keep = t.keep_mask.data<bool>();
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t tile = 0; tile < t.k_tiles; ++tile) {
      const bool* k = t.keep + b * d.Sk + tile * t.bc;
      const int64_t n = std::min(t.bc, d.Sk - tile * t.bc);
      const int64_t kept = std::count(k, k + n, true);
      t.keys[size_t(b * t.k_tiles + tile)] = kept == 0 ? TileKeys::none : kept == n ? TileKeys::all : TileKeys::some;
    }
  return t;
}

// The rule's visible keys of query i are a prefix of the sequence ending at last_visible_key(i),
// which never decreases with i: a tile is fully visible when its last key is visible to its first
// query, and fully hidden when its first key is hidden from its last query.
TileKeys Tiling::rule_state(int64_t qt, int64_t kt) const {
  if (!rule.has_rule()) return TileKeys::all;
  const int64_t r0 = qt * br, rows = std::min(br, Sq - r0);
  const int64_t c0 = kt * bc, cols = std::min(bc, Sk - c0);
  const int64_t first_key = rule.k_offset + c0;
  if (first_key + cols - 1 <= rule.last_visible_key(rule.q_offset + r0)) return TileKeys::all;
  if (first_key > rule.last_visible_key(rule.q_offset + r0 + rows - 1)) return TileKeys::none;
  return TileKeys::some;
}

TileKeys Tiling::state(int64_t b, int64_t qt, int64_t kt) const {
  const TileKeys padding = keys[size_t(b * k_tiles + kt)], positions = rule_state(qt, kt);
  if (padding == TileKeys::none || positions == TileKeys::none) return TileKeys::none;
  if (padding == TileKeys::all && positions == TileKeys::all) return TileKeys::all;
  return TileKeys::some;
}

void Tiling::mask_scores(int64_t b, int64_t qt, int64_t kt, float* s, int64_t query_stride, int64_t key_stride) const {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const int64_t r0 = qt * br, rows = std::min(br, Sq - r0);
  const int64_t c0 = kt * bc, cols = std::min(bc, Sk - c0);
  if (keys[size_t(b * k_tiles + kt)] == TileKeys::some)
    for (int64_t c = 0; c < cols; ++c)
      if (!keep[b * Sk + c0 + c])
        for (int64_t r = 0; r < rows; ++r) s[r * query_stride + c * key_stride] = kNegInf;
  if (rule_state(qt, kt) != TileKeys::some) return;
  for (int64_t r = 0; r < rows; ++r) {  // row r sees the tile's keys up to its last visible one
    const int64_t seen = rule.last_visible_key(rule.q_offset + r0 + r) - (rule.k_offset + c0) + 1;
    for (int64_t c = std::clamp<int64_t>(seen, 0, cols); c < cols; ++c) s[r * query_stride + c * key_stride] = kNegInf;
  }
}

}  // namespace flash

namespace {

class FlashBackend final : public Backend {
 public:
  std::string name() const override { return "flash"; }

  Capabilities capabilities() const override {
    Capabilities c;
    c.returns_lse = c.backward = c.key_padding_mask = c.gqa = true;
    c.causal_mask = c.block_causal_mask = true;
    c.ring = c.ulysses = c.unified = true;
    c.dtypes = {DType::f32, DType::bf16, DType::f16};
    return c;
  }

  Result forward(const Tensor& q, const Tensor& k, const Tensor& v, const Mask& mask,
                 float scale) const override {
    const Dims d = check_forward_args("flash attention", q, k, v, mask, scale);
    refuse_full_masks(mask);
    Result r = flash::forward(q.to(DType::f32), k.to(DType::f32), v.to(DType::f32), d, mask, scale);
    r.out = r.out.to(q.dtype());
    return r;
  }

  Grads backward(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v,
                 const Tensor& out, const Tensor& lse, const Mask& mask, float scale) const override {
    const Dims d =
        check_backward_args("flash attention backward", dout, q, k, v, out, lse, mask, scale);
    refuse_full_masks(mask);
    return flash::backward(dout.to(DType::f32), q.to(DType::f32), k.to(DType::f32),
                           v.to(DType::f32), out, lse.contiguous(), d, mask, scale);
  }

 private:
  static void refuse_full_masks(const Mask& mask) {
    CPDIT_CHECK(mask.kind == MaskKind::none || mask.kind == MaskKind::key_padding, unsupported,
                "attention backend 'flash' does not support ", mask_kind_name(mask.kind),
                " masks (only key_padding and position rules); use backend 'native' for full (S_q, S_k) "
                "masks");
  }
};

}  // namespace

std::shared_ptr<const Backend> make_flash_backend() { return std::make_shared<FlashBackend>(); }

}  // namespace cpdit::attention::detail
