#pragma once
// Element-wise reduction shared by the engines: out[i] = in[0][i] op in[1][i] op ..., in rank order,
// so every rank computes bitwise the same result. bf16 / f16 accumulate in f32 and round once.
#include <cpdit/comm/communicator.hpp>

#include <cstddef>
#include <vector>

namespace cpdit::comm {

// Reduces elements [first, first + count) of every input into out[0, count).
void reduce_elements(const std::vector<const void*>& inputs, size_t first, size_t count, void* out, DType dtype,
            ReduceOp op);

// Throws unsupported unless reduce() handles dtype.
void check_reducible(DType dtype, const char* operation);

}  // namespace cpdit::comm
