#pragma once
// A lookup table, as PyTorch's nn.Embedding: forward(ids) returns the rows of weight [num, dim] that
// the ids name. The table is kept as the checkpoint stores it (T5-XXL's bf16 32128 x 4096 stays bf16),
// and is a `matrix` parameter, so --dtype bf16 narrows an f32 one; rows are widened to f32 as read.
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  // ids: I64 of any shape, each in [0, num_embeddings) (else Error). Returns (ids.shape..., dim) f32.
  Tensor forward(const Tensor& ids) const;
  // The table itself (f32, bf16 or f16), for lookups that are not a forward (e.g. T5's bias buckets).
  const Tensor& weight() const { return weight_.value.values("Embedding"); }

 private:
  Parameter& weight_;
};

// The rows of `table` [num, dim] (f32, bf16 or f16) named by `ids` (I64), as (ids.shape..., dim) f32.
Tensor embedding_lookup(const Tensor& table, const Tensor& ids);

}  // namespace cpdit::nn
