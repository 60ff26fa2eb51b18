// Encoding f32 values into GGUF's Q8_0 and Q4_K blocks (what `--dtype q8_0|q4_k` and the benchmarks
// quantise a dense checkpoint with). Q8_0 is the gguf Python package's quantize, bit for bit: f32
// d = max|x| / 127, codes x * (1 / d) rounded half away from zero, d stored as f16. Q4_K (which that
// package cannot encode) uses a plain per-32 scale and min, relative to the super-block's f16 d and
// dmin, rounded half to even: a valid encoding, not ggml's search for the best scales.
#include <cpdit/core/block_format.hpp>
#include <cpdit/core/dtype.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cpdit::kernels {

namespace {

void put_half(uint8_t* p, float v) {
  const f16 h = f32_to_f16(v);
  std::memcpy(p, &h.bits, 2);
}

// One Q8_0 block (34 bytes) of 32 values.
void encode_q8_0(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
  const float d = amax / 127.0f, inverse = d == 0 ? 0.0f : 1.0f / d;
  put_half(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(std::round(x[j] * inverse)));
}

// One Q4_K super-block (144 bytes) of 256 values: f16 d, f16 dmin, the 12 bytes of eight 6-bit
// (scale, min) pairs, 128 bytes of nibbles; value = d * scale * nibble - dmin * min.
void encode_q4_k(const float* x, uint8_t* b) {
  float scale[8], min[8], d_max = 0, m_max = 0;
  for (int s = 0; s < 8; ++s) {
    float lo = 0, hi = -INFINITY;
    for (int j = 0; j < 32; ++j) lo = std::min(lo, x[s * 32 + j]), hi = std::max(hi, x[s * 32 + j]);
    scale[s] = (hi - lo) / 15.0f;
    min[s] = -lo;
    d_max = std::max(d_max, scale[s]), m_max = std::max(m_max, min[s]);
  }
  const float d = f16_to_f32(f32_to_f16(d_max / 63.0f)), dmin = f16_to_f32(f32_to_f16(m_max / 63.0f));
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = d > 0 ? uint8_t(std::clamp(std::nearbyint(scale[s] / d), 0.0f, 63.0f)) : 0;
    mn[s] = dmin > 0 ? uint8_t(std::clamp(std::nearbyint(min[s] / dmin), 0.0f, 63.0f)) : 0;
  }
  put_half(b, d);
  put_half(b + 2, dmin);
  uint8_t* packed = b + 4;
  for (int j = 0; j < 4; ++j) {
    packed[j] = uint8_t(sc[j] | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = uint8_t(mn[j] | ((mn[j + 4] >> 4) << 6));
    packed[j + 8] = uint8_t((sc[j + 4] & 0x0F) | ((mn[j + 4] & 0x0F) << 4));
  }
  uint8_t q[8][32];
  for (int s = 0; s < 8; ++s) {
    const float step = d * float(sc[s]), offset = dmin * float(mn[s]);
    for (int j = 0; j < 32; ++j)
      q[s][j] = step > 0 ? uint8_t(std::clamp(std::nearbyint((x[s * 32 + j] + offset) / step), 0.0f, 15.0f)) : 0;
  }
  // Sub-blocks 2p and 2p + 1 share 32 bytes: the low nibble from the first, the high from the second.
  for (int p = 0; p < 4; ++p)
    for (int j = 0; j < 32; ++j) b[16 + p * 32 + j] = uint8_t(q[2 * p][j] | (q[2 * p + 1][j] << 4));
}

}  // namespace

Weight quantise(const Tensor& values, const std::string& format) {
  const BlockFormat* f = find_block_format(format);
  CPDIT_CHECK(f != nullptr && (f->name == "Q8_0" || f->name == "Q4_K"), unsupported,
              "quantise encodes Q8_0 and Q4_K, not ", format);
  CPDIT_CHECK(values.dim() == 2 && values.size(1) % f->block_size == 0, invalid_argument, "quantise to ", format,
              ": needs (rows, cols) with cols a multiple of ", f->block_size, ", got ", values.describe());
  const Tensor x = values.to(DType::f32).contiguous();
  const int64_t rows = x.size(0), blocks = x.size(1) / f->block_size;
  Tensor bytes = Tensor::empty({rows, blocks * f->block_bytes}, DType::boolean);
  auto* out = static_cast<uint8_t*>(bytes.raw());
  auto encode = f->name == "Q8_0" ? encode_q8_0 : encode_q4_k;
#pragma omp parallel for num_threads(compute_threads()) if (rows * blocks >= 64)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < blocks; ++b)
      encode(x.data<float>() + (r * blocks + b) * f->block_size, out + (r * blocks + b) * f->block_bytes);
  return Weight::blocks(values.shape(), format, bytes);
}

}  // namespace cpdit::kernels
