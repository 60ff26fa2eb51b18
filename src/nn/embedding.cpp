#include <cpdit/core/error.hpp>
#include <cpdit/kernels/cpu.hpp>
#include <cpdit/nn/embedding.hpp>

#include <algorithm>

namespace cpdit::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim)
    : weight_(add_parameter("weight", {num_embeddings, embedding_dim}, /*matrix=*/true)) {}

namespace {

void check_id(int64_t id, int64_t rows) {
  CPDIT_CHECK(id >= 0 && id < rows, invalid_argument, "token id ", id, " is outside the vocabulary [0, ", rows, ")");
}

// The rows of a quantised table named by `ids`, each decoded alone.
Tensor quantised_lookup(const Weight& table, const Tensor& ids_in) {
  CPDIT_CHECK(ids_in.dtype() == DType::i64, invalid_argument, "embedding ids must be I64, got ", ids_in.describe());
  const Tensor ids = ids_in.contiguous();
  const int64_t rows = table.shape()[0], dim = table.shape()[1], n = ids.numel();
  Shape shape = ids.shape();
  shape.push_back(dim);
  Tensor out = Tensor::empty(shape);
  const int64_t* id = ids.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    check_id(id[i], rows);
    const Tensor row = kernels::dequantise(table.narrow_rows(id[i], 1));
    std::copy_n(row.data<float>(), dim, out.data<float>() + i * dim);
  }
  return out;
}

}  // namespace

Tensor Embedding::forward(const Tensor& ids) const {
  return with_hooks({{"input", ids}}, [&](const TensorMap& in) {
    const Weight& table = weight_.value;
    return std::vector<Tensor>{table.is_quantised() ? quantised_lookup(table, in.at("input"))
                                                    : embedding_lookup(table.values("Embedding"), in.at("input"))};
  })[0];
}

Tensor Embedding::weight() const {
  const Weight& table = weight_.value;
  return table.is_quantised() ? kernels::dequantise(table) : table.values("Embedding");
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
    check_id(id[i], rows);
    convert(static_cast<const std::byte*>(table.raw()) + size_t(id[i]) * row_bytes, table.dtype(),
            out.data<float>() + i * dim, DType::f32, size_t(dim));
  }
  return out;
}

}  // namespace cpdit::nn
