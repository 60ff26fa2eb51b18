// Linear with AMX tile products: y = bf16(x) W^T + b for a bf16 weight W (n, k), f32 accumulation.
//
// The weight is the tile product's left operand as it is stored: 16 of its rows (output features) by
// 32 of its k values are a 16 x 64-byte tile read straight from row-major memory, so the weights are
// never copied or repacked (a mapped checkpoint stays one copy). The activations are the right
// operand, packed per call in AMX's pair layout (each tile row: one pair of consecutive k values for
// 16 tokens side by side), which is also where they are rounded to bf16. One block is 32 features x
// 32 tokens: per step of 32 k values two weight tiles and two activation tiles feed four f32
// accumulator tiles (all eight tile registers). The accumulators hold y transposed (features x
// tokens); they are transposed back on the way out, with the bias added (and GELU applied, when the
// Linear's epilogue asks for it).
//
// Cache blocking (measured at 1536 tokens x 3072 features, k = 3072, 12288 and 15360, one thread): a
// run of 256 features' weight rows over a span of 512 k values (256 KiB) stays in L2 while every
// token block of a run passes over it, and one token block's activations over the span (a 32 KiB
// panel) stay in L1 while the run's 8 feature blocks read them. The accumulators are parked in a
// per-thread buffer between spans. Against whole-k accumulation over 128-feature runs this was
// 1.0-1.1x at k = 3072 and about 2x at k = 12288 and 15360, whose 128 weight rows of 24-30 KiB no
// longer fitted in L2. While a span computes, the next span's weight rows are fetched into L2
// (SpanPrefetch): a model's weights come from memory, and the 16-rows-apart tile loads are a pattern
// the hardware prefetchers do not follow. Software prefetch of the next step's operands (already in
// L2) cost 5% and is gone.
//
// A weight whose n or k is not a multiple of 32 is copied once per call into a zero-padded one (no
// model here has one on a large layer); tokens are padded with zeros in the packed activations.
// A weight is read a span at a time through an aligned copy (rows one after another) where reading it
// in place is slow: where its rows do not start on a 64-byte line (a safetensors file's tensors start
// 8 bytes apart, past a header of any length, and GGUF's 32; a tile load whose 16 rows each straddle
// two lines ran the products at 0.63x), and where the rows are a multiple of 8 KiB apart and a run of
// them spans more than 4 MiB (k a multiple of 4096 above 8192). There the in-place products ran at
// full speed on some weights and at 0.5-0.7x on others of the same shape in the same process, by
// where the weight landed in memory (1024 x 3072 x k, 8 weights: k 12288 a quarter of them, 16384 to
// 24576 most; never k 4096, 8192 or 15360), while through the copy every weight ran at 0.85-0.95x of
// the fast ones.
#include "kernels/cpu/amx_tiles.hpp"
#include "kernels/cpu/bf16_pairs.hpp"
#include "kernels/cpu/block_decode.hpp"
#include "kernels/cpu/gelu_tanh.hpp"
#include "kernels/cpu/int8_blocks.hpp"
#include "kernels/cpu/linear_args.hpp"
#include "kernels/cpu/tile_rows.hpp"

#include <cpdit/core/threads.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

#include <immintrin.h>

namespace cpdit::kernels::detail {

namespace {

constexpr int64_t kBlock = 32;               // features and tokens of one accumulator block (2 x 2 tiles)
constexpr int64_t kStep = 32;                // k values per tile product (16 pairs)
constexpr int64_t kTileValues = 16 * kStep;  // bf16 values of one 16-row tile (1 KiB)
// The cache blocking above, in features, k steps and tokens (a sweep of 128..512 features, 256..1024
// k values per panel and 1024..3072 per span at 1536 x 3072 x {3072, 15360}, then spans of 512 for
// the prefetch; the token run only bounds the parked accumulators, 512 KiB).
constexpr int64_t kFeatureRun = 256;
constexpr int64_t kPanelSteps = 16;
constexpr int64_t kSpanSteps = 16;
constexpr int64_t kTokenRun = 512;
constexpr int64_t kBlockFloats = 4 * 16 * 16;  // one block's four accumulator tiles
// Rows this many bytes apart, over runs wider than kInPlaceRunBytes, are read through copies (above).
constexpr int64_t kAliasedRowBytes = 8192;
constexpr int64_t kInPlaceRunBytes = int64_t(4) << 20;

using tile_rows::lanes;
using bf16_pairs::round_up;
using tile_rows::transpose16;

// The activations (m, k) f32 as right-operand tiles: for each block of 32 tokens, each step of 32 k
// values, two tiles (tokens 0-15, 16-31) of 16 rows (pairs) x 16 tokens x 2 values. Zeros beyond m and k.
CPDIT_TARGET_AMX Tensor pack_activations(const float* x, int64_t m, int64_t k) {
  const int64_t blocks = round_up(m, kBlock) / kBlock, steps = round_up(k, kStep) / kStep;
  Tensor packed = Tensor::empty({blocks * steps * 2 * kTileValues}, DType::bf16);
  bf16* out = packed.data<bf16>();
#pragma omp parallel for collapse(2) num_threads(compute_threads()) if (m * k >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t s = 0; s < steps; ++s) {
      const __mmask16 low = lanes(k - s * kStep), high = lanes(k - s * kStep - 16);
      for (int64_t half = 0; half < 2; ++half) {
        __m512i rows[16];
        for (int64_t c = 0; c < 16; ++c) {
          const int64_t token = b * kBlock + half * 16 + c;
          if (token >= m) {
            rows[c] = _mm512_setzero_si512();
            continue;
          }
          const float* src = x + token * k + s * kStep;
          rows[c] =
              (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(high, src + 16), _mm512_maskz_loadu_ps(low, src));
        }
        transpose16(rows);  // rows[r]: pair r of the 16 tokens
        bf16* tile = out + ((b * steps + s) * 2 + half) * kTileValues;
        for (int r = 0; r < 16; ++r) _mm512_storeu_si512(tile + r * kStep, rows[r]);
      }
    }
  return packed;
}

// The weight as the kernel reads it: rows padded to a multiple of 32 features and kStep values.
struct WeightRows {
  Tensor padded;  // undefined when the weight is used in place
  const bf16* rows;
  int64_t stride;  // elements between rows, a multiple of kStep (whole 64-byte lines)
};

bool on_lines(const bf16* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

WeightRows weight_rows(const Tensor& w, int64_t n, int64_t k) {
  if (n % kBlock == 0 && k % kStep == 0) return {Tensor(), w.data<bf16>(), k};
  const int64_t ld = round_up(k, kStep);
  Tensor padded = Tensor::zeros({round_up(n, kBlock), ld}, DType::bf16);
  for (int64_t r = 0; r < n; ++r) std::memcpy(padded.data<bf16>() + r * ld, w.data<bf16>() + r * k, k * sizeof(bf16));
  return {padded, padded.data<bf16>(), ld};
}

// The span of `rows` weight rows (stride ld) from k step `first`, `steps` long, copied into the calling
// thread's 64-byte aligned buffer with rows of kSpanSteps steps.
const bf16* aligned_span(const bf16* run, int64_t ld, int64_t rows, int64_t first, int64_t steps) {
  thread_local Tensor span;
  if (!span.defined()) span = Tensor::empty({kFeatureRun * kSpanSteps * kStep}, DType::bf16);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(span.data<bf16>() + r * kSpanSteps * kStep, run + r * ld + first * kStep, steps * kStep * sizeof(bf16));
  return span.data<bf16>();
}

// n values of Q8_0 blocks (f16 d, 32 int8 codes) as bf16(d * code); d * code is exact in f32.
CPDIT_TARGET_AMX void decode_q8_0(const uint8_t* blocks, int64_t n, bf16* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* block = blocks + b * 34;
    const __m512 d = _mm512_set1_ps(int8_blocks::half_at(block));
    const auto* codes = reinterpret_cast<const __m128i*>(block + 2);  // 16 + 16 int8 codes
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(codes)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(codes + 1)));
    _mm512_storeu_si512(out + b * 32, (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, d), _mm512_mul_ps(lo, d)));
  }
}

// Rows [first, first + kFeatureRun) of a block-quantised weight (k a multiple of 32), decoded and
// rounded to bf16 into the calling thread's buffer; zeros past n.
const bf16* decoded_run(const LinearArgs& a, int64_t first) {
  // At least 2 MiB, so that the allocator maps it on huge pages as it does the weights (on 4 KiB pages
  // the tile loads, 16 rows a weight row apart, missed the TLB: 0.75x the in-place rate).
  thread_local Tensor rows;
  const int64_t size = std::max<int64_t>(kFeatureRun * a.k, int64_t(1) << 20);
  if (!rows.defined() || rows.numel() < size) rows = Tensor::empty({size}, DType::bf16);
  std::fill_n(rows.data<bf16>(), kFeatureRun * a.k, bf16{0});
  thread_local std::vector<float> values;
  values.resize(size_t(a.k));
  const QuantisedRows weight(a.blocks);
  const auto* blocks = static_cast<const uint8_t*>(a.blocks.codes().raw());
  const int64_t row_stride = a.blocks.codes().strides()[0];  // a narrowed weight's rows keep the file's stride
  const bool q8_0 = a.blocks.format() == "Q8_0";  // GGUF's blocks carry their scales: no weight scale
  for (int64_t r = 0; r < std::min(kFeatureRun, a.n - first); ++r) {
    if (q8_0) {
      decode_q8_0(blocks + (first + r) * row_stride, a.k, rows.data<bf16>() + r * a.k);
      continue;
    }
    weight.decode(first + r, values.data());
    bf16_pairs::round_rows(values.data(), a.k, 1, a.k, rows.data<bf16>() + r * a.k, a.k);
  }
  return rows.data<bf16>();
}

// y rows [token, token + 32) x columns [feature, feature + 32) = the four accumulators + bias, through
// GELU where asked: on the tile while it is in L1, instead of a pass over the whole of y after.
CPDIT_TARGET_AMX void store_block(int64_t token, int64_t feature, int64_t m, int64_t n, const float* bias, bool gelu,
                                  float* y) {
  alignas(64) float acc[4][16 * 16];
  _tile_stored(0, acc[0], 64);
  _tile_stored(1, acc[1], 64);
  _tile_stored(2, acc[2], 64);
  _tile_stored(3, acc[3], 64);
  for (int t = 0; t < 4; ++t) {  // tile t: features half t / 2, tokens half t % 2
    const int64_t f0 = feature + 16 * (t / 2), t0 = token + 16 * (t % 2);
    if (f0 >= n || t0 >= m) continue;
    __m512i rows[16];
    for (int r = 0; r < 16; ++r) rows[r] = _mm512_load_si512(acc[t] + 16 * r);
    transpose16(rows);  // rows[c]: token t0 + c, features f0 .. f0 + 15
    const __mmask16 mask = lanes(n - f0);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + f0) : _mm512_setzero_ps();
    float* out = acc[t];  // now the tile transposed: row c is token t0 + c
    for (int c = 0; c < 16; ++c) _mm512_store_ps(out + 16 * c, _mm512_add_ps(_mm512_castsi512_ps(rows[c]), b));
    if (gelu) {
#pragma omp simd simdlen(16)
      for (int i = 0; i < 16 * 16; ++i) out[i] = gelu_tanh_value(out[i]);
    }
    for (int64_t c = 0; c < std::min<int64_t>(16, m - t0); ++c)
      _mm512_mask_storeu_ps(y + (t0 + c) * n + f0, mask, _mm512_load_ps(out + 16 * c));
  }
}

// The four accumulators += 32 weight rows (stride ld elements) x one packed block of 32 tokens, over
// `steps` k steps from w and x. `half`: the block's tokens 16-31 are all padding (the last block of
// 975 tokens, Wan's share on 2 ranks, holds 15), so only accumulators 0 and 2 are multiplied.
CPDIT_TARGET_AMX void multiply_block(const bf16* w, int64_t ld, const bf16* x, int64_t steps, bool half) {
  const int64_t w_bytes = ld * int64_t(sizeof(bf16));
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, w + s * kStep, w_bytes);
    _tile_loadd(6, x + s * 2 * kTileValues, 64);
    if (!half) _tile_loadd(7, x + s * 2 * kTileValues + kTileValues, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(5, w + 16 * ld + s * kStep, w_bytes);
    if (!half) _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    if (!half) _tile_dpbf16ps(3, 5, 7);
  }
}

// A block's accumulators out to its place in the parked buffer, between panels.
CPDIT_TARGET_AMX void park(float* block) {
  _tile_stored(0, block, 64);
  _tile_stored(1, block + 256, 64);
  _tile_stored(2, block + 512, 64);
  _tile_stored(3, block + 768, 64);
}

// A block's accumulators back from the parked buffer, or zeroed for its first panel.
CPDIT_TARGET_AMX void resume(const float* block, bool first) {
  if (first) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    return;
  }
  _tile_loadd(0, block, 64);
  _tile_loadd(1, block + 256, 64);
  _tile_loadd(2, block + 512, 64);
  _tile_loadd(3, block + 768, 64);
}

// The weight rows the next span reads, brought into L2 a share at a time while this span computes, so
// that a span's first token block does not wait on memory row by row. FLUX.1's blocks in bf16 (bench
// model, 12 alternations) ran 3-4% faster with it at spans of 512 k values, where this span, the next
// and the activations fit L2 together; with spans of 1024 the prefetch evicted the span in use and the
// products ran at 0.88-0.93x.
struct SpanPrefetch {
  const bf16* rows = nullptr;  // the next span's first value in the run's first row; null: none
  int64_t ld = 0, count = 0, values = 0;  // row stride, rows, and values per row to fetch
  int64_t per_call = 0, next = 0;         // rows per share, and the first row not yet fetched

  SpanPrefetch(const bf16* first, int64_t stride, int64_t rows_, int64_t values_, int64_t calls)
      : rows(first), ld(stride), count(rows_), values(values_), per_call((rows_ + calls - 1) / calls) {}

  void share() {
    if (rows == nullptr) return;
    for (const int64_t end = std::min(count, next + per_call); next < end; ++next)
      for (int64_t v = 0; v < values; v += 64 / int64_t(sizeof(bf16)))
        _mm_prefetch(reinterpret_cast<const char*>(rows + next * ld + v), _MM_HINT_T1);
  }
};

// y rows [t_first, t_last) x features [f_first, f_last) (multiples of 32, padded), with the weight
// rows of the feature run at `run` (stride ld; read through aligned span copies where `run` is not on a
// line or the rows are aliased, see above), in the order of the cache blocking above. `next_run` is the
// next_rows weight rows of the feature run after this one (null at the last or when decoded), whose
// first span is fetched during this run's last.
void multiply_run(const bf16* run, const bf16* next_run, int64_t next_rows, int64_t ld, const bf16* x,
                  int64_t steps, int64_t t_first, int64_t t_last, int64_t f_first, int64_t f_last, int64_t m,
                  int64_t n, const float* bias, bool gelu, float* y) {
  thread_local std::vector<float> parked;  // accumulators between panels: token block x feature block
  const int64_t feature_blocks = (f_last - f_first) / kBlock;
  parked.resize(size_t((t_last - t_first) / kBlock * feature_blocks * kBlockFloats));
  // When the run's first row is on a line so is every row: the stride is whole lines.
  const int64_t row_bytes = ld * int64_t(sizeof(bf16));
  const bool in_place =
      on_lines(run) && (row_bytes % kAliasedRowBytes != 0 || kFeatureRun * row_bytes <= kInPlaceRunBytes);
  for (int64_t span = 0; span < steps; span += kSpanSteps) {
    const int64_t span_steps = std::min(kSpanSteps, steps - span);
    const int64_t calls =
        (t_last - t_first) / kBlock * ((span_steps + kPanelSteps - 1) / kPanelSteps) * feature_blocks;
    const bool last = span + kSpanSteps >= steps;  // then the next run's first span
    SpanPrefetch prefetch(last ? next_run : run + (span + kSpanSteps) * kStep, ld,
                          last ? next_rows : f_last - f_first,
                          std::min(kSpanSteps, last ? steps : steps - span - kSpanSteps) * kStep, calls);
    // The span's weight rows and their stride, with k steps counted from the span's first.
    const bf16* rows = in_place ? run + span * kStep : aligned_span(run, ld, f_last - f_first, span, span_steps);
    const int64_t rows_ld = in_place ? ld : kSpanSteps * kStep;
    for (int64_t t = t_first; t < t_last; t += kBlock) {
      const bf16* tokens = x + (t / kBlock) * steps * 2 * kTileValues;
      for (int64_t panel = span; panel < std::min(steps, span + kSpanSteps); panel += kPanelSteps) {
        const int64_t panel_end = std::min({steps, span + kSpanSteps, panel + kPanelSteps});
        for (int64_t f = f_first; f < f_last; f += kBlock) {
          const int64_t index = (t - t_first) / kBlock * feature_blocks + (f - f_first) / kBlock;
          float* block = parked.data() + index * kBlockFloats;
          resume(block, panel == 0);
          prefetch.share();
          multiply_block(rows + (f - f_first) * rows_ld + (panel - span) * kStep, rows_ld,
                         tokens + panel * 2 * kTileValues, panel_end - panel, t + 16 >= m);
          if (panel_end == steps) store_block(t, f, m, n, bias, gelu, y);
          else park(block);
        }
      }
    }
  }
}

}  // namespace

bool amx_linear_available() { return amx::granted(); }

void amx_linear_into(const LinearArgs& a, float* y) {
  CPDIT_CHECK(amx::granted(), unsupported, "linear: AMX tiles are not available on this CPU (or CPDIT_KERNEL_ISA)");
  if (a.m == 0 || a.n == 0) return;
  const int64_t steps = round_up(a.k, kStep) / kStep;
  const Tensor packed = pack_activations(a.x.data<float>(), a.m, a.k);
  const WeightRows w = a.blocks.defined() ? WeightRows{Tensor(), nullptr, a.k} : weight_rows(a.weight, a.n, a.k);
  // Decoding a run of weight rows pays off over every token, not a run of them.
  const int64_t token_run = a.blocks.defined() ? round_up(a.m, kBlock) : kTokenRun;
  const bf16* x = packed.data<bf16>();
  const float* bias = a.bias.defined() ? a.bias.data<float>() : nullptr;
  const bool gelu = a.epilogue == Epilogue::gelu_tanh;
  const int64_t features = round_up(a.n, kBlock), tokens = round_up(a.m, kBlock);
#pragma omp parallel num_threads(compute_threads())
  {
    amx::configure_tiles();
#pragma omp for collapse(2) schedule(dynamic)
    for (int64_t f_run = 0; f_run < features; f_run += kFeatureRun)
      for (int64_t t_run = 0; t_run < tokens; t_run += token_run) {
        const bf16* run = a.blocks.defined() ? decoded_run(a, f_run) : w.rows + f_run * w.stride;
        const int64_t f_next = f_run + kFeatureRun;
        const int64_t next_rows = a.blocks.defined() ? 0 : std::clamp<int64_t>(features - f_next, 0, kFeatureRun);
        multiply_run(run, next_rows ? run + kFeatureRun * w.stride : nullptr, next_rows, w.stride, x, steps,
                     t_run, std::min(tokens, t_run + token_run), f_run, std::min(features, f_next), a.m, a.n, bias,
                     gelu, y);
      }
    amx::release_tiles();
  }
}

}  // namespace cpdit::kernels::detail
