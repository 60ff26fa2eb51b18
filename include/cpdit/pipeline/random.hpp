#pragma once
// Seeded Gaussian noise from a counter-based generator: value number `index` of the stream for
// `seed` is a pure function of (seed, index) — Philox4x32-10 (Salmon et al., SC'11; Random123) with
// key = seed and counter = index / 4, then Box-Muller on its four 32-bit outputs. Every rank
// therefore produces the same latents without communication, and a rank can produce only the
// elements of its own shard. The stream is cpdit's own: it does not reproduce torch.randn.
#include <cpdit/core/tensor.hpp>

#include <array>
#include <cstdint>

namespace cpdit::pipeline {

// One Philox4x32-10 block (exposed for its known-answer test).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// N(0, 1) values first_index, first_index + 1, ... of the stream for `seed`, into out[0..count).
void fill_normal(uint64_t seed, uint64_t first_index, float* out, int64_t count);

// Uniform values in (low, high) from a second stream of the same generator: index i is a pure
// function of (seed, i), like fill_normal, and several times cheaper (no Box-Muller).
void fill_uniform(uint64_t seed, uint64_t first_index, float* out, int64_t count, float low, float high);

// A float32 tensor whose row-major element i is value i of the stream for `seed`.
Tensor randn(const Shape& shape, uint64_t seed);

}  // namespace cpdit::pipeline
