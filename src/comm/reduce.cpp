#include "reduce.hpp"

#include <cpdit/core/error.hpp>

#include <algorithm>
#include <cstdint>

namespace cpdit::comm {

namespace {

template <class T>
T combine(T a, T b, ReduceOp op) {
  return op == ReduceOp::sum ? a + b : std::max(a, b);
}

// Same-type accumulation straight into out (f32, i64).
template <class T>
void reduce_native(const std::vector<const void*>& inputs, size_t first, size_t count, T* out, ReduceOp op) {
  const T* in0 = static_cast<const T*>(inputs[0]) + first;
  std::copy(in0, in0 + count, out);
  for (size_t k = 1; k < inputs.size(); ++k) {
    const T* in = static_cast<const T*>(inputs[k]) + first;
    for (size_t i = 0; i < count; ++i) out[i] = combine(out[i], in[i], op);
  }
}

// 16-bit floats: accumulate a block in f32 on the stack, round once into out.
void reduce_half(const std::vector<const void*>& inputs, size_t first, size_t count, void* out, DType dtype,
                 ReduceOp op) {
  constexpr size_t kBlock = 2048;
  float acc[kBlock];
  float in[kBlock];
  const size_t elem = dtype_size(dtype);
  for (size_t begin = 0; begin < count; begin += kBlock) {
    size_t n = std::min(kBlock, count - begin);
    auto at = [&](const void* base) { return static_cast<const std::byte*>(base) + (first + begin) * elem; };
    convert(at(inputs[0]), dtype, acc, DType::f32, n);
    for (size_t k = 1; k < inputs.size(); ++k) {
      convert(at(inputs[k]), dtype, in, DType::f32, n);
      for (size_t i = 0; i < n; ++i) acc[i] = combine(acc[i], in[i], op);
    }
    convert(acc, DType::f32, static_cast<std::byte*>(out) + begin * elem, dtype, n);
  }
}

}  // namespace

void check_reducible(DType dtype, const char* operation) {
  CPDIT_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16 || dtype == DType::i64,
              unsupported, operation, " does not reduce ", dtype_name(dtype), "; use f32, bf16, f16 or i64");
}

void reduce_elements(const std::vector<const void*>& inputs, size_t first, size_t count, void* out, DType dtype,
            ReduceOp op) {
  if (count == 0) return;
  switch (dtype) {
    case DType::f32: return reduce_native(inputs, first, count, static_cast<float*>(out), op);
    case DType::i64: return reduce_native(inputs, first, count, static_cast<int64_t*>(out), op);
    case DType::bf16:
    case DType::f16: return reduce_half(inputs, first, count, out, dtype, op);
    default: check_reducible(dtype, "reduce_elements");
  }
}

}  // namespace cpdit::comm
