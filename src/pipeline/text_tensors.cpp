#include "pipeline/text_tensors.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/pipeline/random.hpp>

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

TextConditioning read_text_conditioning(const nn::TensorMap& tensors, const std::string& source, int64_t width,
                                        const std::string& mask_name, const std::string& writer) {
  CPDIT_CHECK(tensors.count("prompt_embeds"), invalid_argument, source, " has no tensor 'prompt_embeds' (", writer,
              " writes prompt_embeds (B, L, ", width, ") and ", mask_name, " (B, L))");
  TextConditioning c;
  c.embeds = read_text_embeds(tensors, source, "prompt_embeds", width);
  c.mask = read_text_mask(tensors, source, mask_name, c.embeds);
  if (tensors.count("negative_prompt_embeds")) {
    c.negative_embeds = read_text_embeds(tensors, source, "negative_prompt_embeds", width);
    CPDIT_CHECK(c.negative_embeds.size(0) == c.embeds.size(0), invalid_argument, source,
                ": negative_prompt_embeds has batch ", c.negative_embeds.size(0), ", prompt_embeds ", c.embeds.size(0));
    c.negative_mask = read_text_mask(tensors, source, "negative_" + mask_name, c.negative_embeds);
  }
  return c;
}

Tensor random_text_embeds(int64_t batch, int64_t text_tokens, int64_t width, uint64_t seed, float scale) {
  CPDIT_CHECK(batch >= 1 && text_tokens >= 1, invalid_argument, "random embeddings need batch >= 1 and a text token");
  Tensor t = randn({batch, text_tokens, width}, seed);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] *= scale;
  return t;
}

}  // namespace cpdit::pipeline
