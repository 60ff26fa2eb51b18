// One decoder per block format; each reads one block of ggml's layout and writes its values.
#include "kernels/cpu/block_decode.hpp"

#include <cpdit/core/dtype.hpp>
#include <cpdit/core/error.hpp>

#include <array>
#include <cstring>

namespace cpdit::kernels::detail {

namespace {

float half(const uint8_t* p) {
  f16 h;
  std::memcpy(&h.bits, p, 2);
  return f16_to_f32(h);
}

// Q8_0: f16 d, 32 int8 codes; x = d * q.
void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int j = 0; j < 32; ++j) y[j] = d * float(int8_t(b[2 + j]));
}

// Q4_0: f16 d, 16 bytes: value j in the low nibble of byte j, value j + 16 in its high nibble;
// x = d * (nibble - 8).
void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(qs[j] & 0x0F) - 8);
    y[j + 16] = d * float(int(qs[j] >> 4) - 8);
  }
}

// Q4_1: f16 d, f16 m, nibbles as Q4_0; x = d * nibble + m.
void q4_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(qs[j] & 0x0F) + m;
    y[j + 16] = d * float(qs[j] >> 4) + m;
  }
}

// The 5-bit codes of Q5_0 / Q5_1: nibbles as Q4_0, bit j of the u32 `qh` the fifth bit of value j.
void five_bit_codes(const uint8_t* qh_bytes, const uint8_t* qs, int q[32]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    q[j] = int(qs[j] & 0x0F) | int(((qh >> j) & 1u) << 4);
    q[j + 16] = int(qs[j] >> 4) | int(((qh >> (j + 16)) & 1u) << 4);
  }
}

// Q5_0: f16 d, u32 high bits, 16 bytes of nibbles; x = d * (code - 16).
void q5_0(const uint8_t* b, float* y) {
  const float d = half(b);
  int q[32];
  five_bit_codes(b + 2, b + 6, q);
  for (int j = 0; j < 32; ++j) y[j] = d * float(q[j] - 16);
}

// Q5_1: f16 d, f16 m, u32 high bits, nibbles; x = d * code + m.
void q5_1(const uint8_t* b, float* y) {
  const float d = half(b), m = half(b + 2);
  int q[32];
  five_bit_codes(b + 4, b + 8, q);
  for (int j = 0; j < 32; ++j) y[j] = d * float(q[j]) + m;
}

// The eight 6-bit (scale, min) pairs of a Q4_K / Q5_K super-block, packed in 12 bytes: pairs 0-3 in
// the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 in the nibbles of bytes 8-11, their
// top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
void k_scales(const uint8_t* s, int sc[8], int mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
    mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

// Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Sub-block i (32 values) of each 64 takes
// the low (even i) or high (odd i) nibbles of the same 32 bytes; x = (d * sc_i) * q - (dmin * min_i).
void q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  k_scales(b + 4, sc, mn);
  const uint8_t* qs = b + 16;
  for (int i = 0; i < 8; ++i) {
    const float scale = d * float(sc[i]), min = dmin * float(mn[i]);
    const uint8_t* q = qs + (i / 2) * 32;
    const int shift = (i % 2) * 4;
    for (int l = 0; l < 32; ++l) y[i * 32 + l] = scale * float((q[l] >> shift) & 0x0F) - min;
  }
}

// Q5_K: as Q4_K with 32 bytes of fifth bits before the nibbles: bit i of byte l is the fifth bit of
// value l of sub-block i.
void q5_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  k_scales(b + 4, sc, mn);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int i = 0; i < 8; ++i) {
    const float scale = d * float(sc[i]), min = dmin * float(mn[i]);
    const uint8_t* q = qs + (i / 2) * 32;
    const int shift = (i % 2) * 4;
    for (int l = 0; l < 32; ++l) {
      const int code = ((q[l] >> shift) & 0x0F) | (((qh[l] >> i) & 1) << 4);
      y[i * 32 + l] = scale * float(code) - min;
    }
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of 2-bit highs, 16 int8 scales, f16 d. Each half (128
// values) has 64 low-nibble bytes and 32 high bytes: value 32 * g + l (g = 0..3) takes the low (g even)
// or high (g odd) nibble of low byte l + 32 * (g % 2) and bits 2g..2g+1 of high byte l; a scale per 16
// values; x = (d * scale) * (code - 32).
void q6_k(const uint8_t* b, float* y) {
  const float d = half(b + 208);
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b + h * 64;
    const uint8_t* qh = b + 128 + h * 32;
    for (int g = 0; g < 4; ++g)
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[l + 32 * (g % 2)] >> (4 * (g / 2))) & 0x0F;
        const int code = low | (((qh[l] >> (2 * g)) & 3) << 4);
        const int v = h * 128 + g * 32 + l;
        y[v] = (d * float(scales[v / 16])) * float(code - 32);
      }
  }
}

// FP8: one value per byte, through a table of the 256 codes (dtype.hpp's exact conversions).
template <float (*Convert)(uint8_t)>
void f8(const uint8_t* codes, int64_t n_values, float* out) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t;
    for (int code = 0; code < 256; ++code) t[size_t(code)] = Convert(uint8_t(code));
    return t;
  }();
  for (int64_t i = 0; i < n_values; ++i) out[i] = table[codes[i]];
}

template <void (*Block)(const uint8_t*, float*), int kValues, int kBytes>
void decode(const uint8_t* blocks, int64_t n_values, float* out) {
  for (int64_t i = 0; i < n_values / kValues; ++i) Block(blocks + i * kBytes, out + i * kValues);
}

}  // namespace

BlockDecoder block_decoder(const BlockFormat& format) {
  const std::string_view n = format.name;
  if (n == "Q8_0") return decode<q8_0, 32, 34>;
  if (n == "Q4_0") return decode<q4_0, 32, 18>;
  if (n == "Q4_1") return decode<q4_1, 32, 20>;
  if (n == "Q5_0") return decode<q5_0, 32, 22>;
  if (n == "Q5_1") return decode<q5_1, 32, 24>;
  if (n == "Q4_K") return decode<q4_k, 256, 144>;
  if (n == "Q5_K") return decode<q5_k, 256, 176>;
  if (n == "Q6_K") return decode<q6_k, 256, 210>;
  if (n == "F8_E4M3") return f8<f8_e4m3_to_f32>;
  if (n == "F8_E5M2") return f8<f8_e5m2_to_f32>;
  fail(ErrorKind::unsupported, "no decoder for block format ", n);
}

QuantisedRows::QuantisedRows(const Weight& weight)
    : decoder_(nullptr),
      blocks_(static_cast<const uint8_t*>(weight.codes().raw())),
      stride_(weight.codes().strides()[0]),
      cols_(weight.shape()[1]),
      scale_(weight.quantisation().scale) {
  const BlockFormat* f = find_block_format(weight.format());
  CPDIT_CHECK(f != nullptr && !weight.quantisation().scales.defined(), unsupported,
              "kernels decode GGUF's block formats and FP8, not ", weight.describe());
  decoder_ = block_decoder(*f);
}

void QuantisedRows::decode(int64_t row, float* out) const {
  decoder_(blocks_ + row * stride_, cols_, out);
  if (scale_ != 1.0f)
    for (int64_t i = 0; i < cols_; ++i) out[i] *= scale_;
}

}  // namespace cpdit::kernels::detail
