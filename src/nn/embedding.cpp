#include <cpdit/core/error.hpp>
#include <cpdit/nn/embedding.hpp>

namespace cpdit::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim)
    : weight_(add_parameter("weight", {num_embeddings, embedding_dim}, /*matrix=*/true)) {}

Tensor Embedding::forward(const Tensor& ids) const {
  return with_hooks({{"input", ids}}, [&](const TensorMap& in) {
    return std::vector<Tensor>{embedding_lookup(weight(), in.at("input"))};
  })[0];
}

Tensor embedding_lookup(const Tensor& table, const Tensor& ids_in) {
  CPDIT_CHECK(ids_in.dtype() == DType::i64, invalid_argument, "embedding ids must be I64, got ", ids_in.describe());
  CPDIT_CHECK(table.dim() == 2 && table.is_contiguous() &&
                  (table.dtype() == DType::f32 || table.dtype() == DType::bf16 || table.dtype() == DType::f16),
              internal, "embedding table must be a contiguous f32/bf16/f16 matrix, got ", table.describe());
  const Tensor ids = ids_in.contiguous();
  const int64_t rows = table.size(0), dim = table.size(1), n = ids.numel();
  Shape shape = ids.shape();
  shape.push_back(dim);
  Tensor out = Tensor::empty(shape);
  const int64_t* id = ids.data<int64_t>();
  const size_t row_bytes = size_t(dim) * dtype_size(table.dtype());
  for (int64_t i = 0; i < n; ++i) {
    CPDIT_CHECK(id[i] >= 0 && id[i] < rows, invalid_argument, "token id ", id[i], " is outside the vocabulary [0, ",
                rows, ")");
    convert(static_cast<const std::byte*>(table.raw()) + size_t(id[i]) * row_bytes, table.dtype(),
            out.data<float>() + i * dim, DType::f32, size_t(dim));
  }
  return out;
}

}  // namespace cpdit::nn
