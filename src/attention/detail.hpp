#pragma once
// Shared by the attention backends: argument validation, the softmax-backward row term, and the
// constructors of the built-in backends (the registry calls them, so the static library never drops
// them). Both backends build on kernels::gemm (oneDNN sgemm; single-threaded inside a parallel region).
#include <cpdit/attention/attention.hpp>

#include <cstdint>
#include <memory>

namespace cpdit::attention::detail {

struct Dims {
  int64_t B = 0, Sq = 0, Sk = 0, H = 0, Hkv = 0, D = 0;
  int64_t group() const { return H / Hkv; }  // query heads per KV head
};

// Checks q (B,S_q,H,D), k/v (B,S_k,H_kv,D), dtypes, the mask's shape and the scale; names `who`.
Dims check_forward_args(const char* who, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Mask& mask, float scale);
// Also checks dout (like q), out (like q) and lse f32 (B,H,S_q).
Dims check_backward_args(const char* who, const Tensor& dout, const Tensor& q, const Tensor& k,
                         const Tensor& v, const Tensor& out, const Tensor& lse, const Mask& mask,
                         float scale);

// Dv[b,h,i] = sum_d dout[b,i,h,d] * out[b,i,h,d], f32 (B,H,S_q): the softmax-backward row term.
Tensor rowsum_dout_out(const Tensor& dout, const Tensor& out);

std::shared_ptr<const Backend> make_native_backend();
std::shared_ptr<const Backend> make_flash_backend();

}  // namespace cpdit::attention::detail
