#include "pipeline/text_tensors.hpp"

#include <cpdit/core/error.hpp>

namespace cpdit::pipeline {

Tensor read_text_embeds(const nn::TensorMap& tensors, const std::string& source, const std::string& name,
                        int64_t width) {
  Tensor p = tensors.at(name).to(DType::f32);
  CPDIT_CHECK(p.dim() == 3 && p.size(1) > 0 && p.size(2) == width, invalid_argument, source, ": ", name, " is ",
              p.describe(), ", the model needs (B, L, ", width, ")");
  return p;
}

Tensor read_text_mask(const nn::TensorMap& tensors, const std::string& source, const std::string& name,
                      const Tensor& embeds) {
  if (!tensors.count(name)) return {};
  Tensor m = tensors.at(name).to(DType::i64);
  CPDIT_CHECK(m.dim() == 2 && m.size(0) == embeds.size(0) && m.size(1) == embeds.size(1), invalid_argument, source,
              ": ", name, " is ", m.describe(), ", its embeddings need (", embeds.size(0), ", ", embeds.size(1), ")");
  return m;
}

}  // namespace cpdit::pipeline
