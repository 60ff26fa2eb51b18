// Every hand-written kernel gives bit-identical results with 1 and 2 compute threads: rows are split
// between threads, never a reduction, so ranks with different budgets agree. Kernels that run a
// oneDNN GEMM (patch embedding) are only as close as a reordered sum: oneDNN does not promise the
// same summation order at different thread counts.
#include "kernels/reference.hpp"

#include <cpdit/core/threads.hpp>
#include <cpdit/kernels/cpu.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace cpdit;
using cpdit::test::bitwise_equal;
using cpdit::test::random_tensor;

namespace {

Tensor with_threads(int n, const std::function<Tensor()>& fn) {
  ScopedComputeThreads threads(n);
  return fn();
}

}  // namespace

TEST(Threads, OneAndTwoThreadsGiveIdenticalResults) {
  const int64_t B = 2, S = 67, H = 3, D = 128, C = H * D;  // above the parallel threshold
  Tensor x = random_tensor({B, S, C}, 1), y = random_tensor({B, S, C}, 2);
  Tensor w = random_tensor({C}, 3), b = random_tensor({C}, 4);
  Tensor scale = random_tensor({B, C}, 5), shift = random_tensor({B, C}, 6), gate = random_tensor({B, 1, C}, 7);
  Tensor cos = random_tensor({S, D}, 8), sin = random_tensor({S, D}, 9);
  Tensor video = random_tensor({1, 4, 2, 16, 16}, 10), conv = random_tensor({C, 4, 1, 2, 2}, 11);
  const std::vector<std::pair<const char*, std::function<Tensor()>>> kernels_under_test = {
      {"layer_norm", [&] { return kernels::layer_norm(x, w, b, 1e-6f); }},
      {"rms_norm", [&] { return kernels::rms_norm(x, w, 1e-6f); }},
      {"gelu", [&] { return kernels::gelu(x, true); }},
      {"silu", [&] { return kernels::silu(x); }},
      {"softmax", [&] { return kernels::softmax(x); }},
      {"rope", [&] { return kernels::rope(x.reshape({B, S, H, D}), cos, sin); }},
      {"add", [&] { return kernels::add(x, w); }},
      {"mul", [&] { return kernels::mul(x, gate); }},
      {"add_mul_", [&] {
         Tensor r = x.clone();
         kernels::add_mul_(r, y, gate);
         return r;
       }},
      {"bias_residual_", [&] {
         Tensor r = y.clone();
         kernels::bias_residual_(r, x, b, gate);
         return r;
       }},
      {"modulate", [&] { return kernels::modulate(x, scale, shift); }},
      {"layer_norm_modulate", [&] { return kernels::layer_norm_modulate(x, scale, shift, 1e-6f); }},
  };
  for (const auto& [name, fn] : kernels_under_test) {
    EXPECT_TRUE(bitwise_equal(with_threads(1, fn), with_threads(2, fn))) << name;
  }
  // patch_embed: K = 4 channels x 2 x 2 = 16 products of |x|, |w| <= 2 plus a bias |b| <= 2, so
  // sum |terms| <= 66; two orders of one f32 sum differ by at most 2 (K - 1) 2^-24 sum |terms|.
  auto patch_embed = [&] { return kernels::patch_embed(video, conv, b, {1, 2, 2}); };
  const Tensor one = with_threads(1, patch_embed), two = with_threads(2, patch_embed);
  EXPECT_LE(max_abs_diff(one, two), 2 * 15 * std::ldexp(66.0, -24));
}
