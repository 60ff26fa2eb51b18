#pragma once
// A lookup table, as PyTorch's nn.Embedding: forward(ids) returns the rows of weight [num, dim] that
// the ids name. The table is a `matrix` parameter, so a bf16 checkpoint's table stays bf16 when the
// model keeps its matrices in bf16 (T5-XXL's is 32128 x 4096); rows are widened to f32 as they are read.
#include <cpdit/nn/module.hpp>

namespace cpdit::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  // ids: I64 of any shape, each in [0, num_embeddings) (else Error). Returns (ids.shape..., dim) f32.
  Tensor forward(const Tensor& ids) const;
  // The table itself (bf16 or f32), for lookups that are not a forward (e.g. T5's bias buckets).
  const Tensor& weight() const { return weight_.value; }

 private:
  Parameter& weight_;
};

// The rows of `table` [num, dim] (f32 or bf16) named by `ids` (I64), as (ids.shape..., dim) f32.
Tensor embedding_lookup(const Tensor& table, const Tensor& ids);

}  // namespace cpdit::nn
