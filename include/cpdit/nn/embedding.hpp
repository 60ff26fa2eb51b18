#pragma once
// A lookup table, as PyTorch's nn.Embedding: forward(ids) returns the rows of weight [num, dim] that
// the ids name. The table is kept as the checkpoint stores it (T5-XXL's bf16 32128 x 4096 stays bf16),
// and is a `matrix` parameter, so --dtype bf16 narrows an f32 one; rows are widened to f32 as read.
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  // ids: I64 of any shape, each in [0, num_embeddings) (else Error). Returns (ids.shape..., dim) f32. A
  // quantised table (an FP8 or GGUF checkpoint's) stays so: only the rows looked up are decoded.
  Tensor forward(const Tensor& ids) const;
  // The table itself, for lookups that are not a forward (T5's small bias-bucket table): the stored f32,
  // bf16 or f16 values, or a quantised table decoded to f32 (a copy).
  Tensor weight() const;
  int64_t num_embeddings() const { return weight_.value.shape()[0]; }

 private:
  Parameter& weight_;
};

// The rows of `table` [num, dim] (f32, bf16 or f16) named by `ids` (I64), as (ids.shape..., dim) f32.
Tensor embedding_lookup(const Tensor& table, const Tensor& ids);

}  // namespace cpdit::nn
