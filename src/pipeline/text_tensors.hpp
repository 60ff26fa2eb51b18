#pragma once
// The text conditioning a pipeline reads from a text stage's output or an --embeddings file, checked
// as it is taken (`source` names the file in errors), and its seeded stand-ins.
#include <cpdit/nn/module.hpp>

#include <string>

namespace cpdit::pipeline {

// `name` (B, L, width) with L > 0, as f32; it must be present.
Tensor read_text_embeds(const nn::TensorMap& tensors, const std::string& source, const std::string& name,
                        int64_t width);
// The mask `name` for `embeds`, bool or integer, as I64 (B, L) (1 = a real token); absent: undefined
// (every token real).
Tensor read_text_mask(const nn::TensorMap& tensors, const std::string& source, const std::string& name,
                      const Tensor& embeds);

// A prompt's embeddings and mask, and the negative prompt's; undefined where the tensors have none.
struct TextConditioning {
  Tensor embeds, mask, negative_embeds, negative_mask;
};

// prompt_embeds [+ `mask_name`] [+ negative_prompt_embeds [+ negative_`mask_name`]], the negative
// prompt of the same batch; `writer` ("an LTX-Video text stage") is named when prompt_embeds is missing.
TextConditioning read_text_conditioning(const nn::TensorMap& tensors, const std::string& source, int64_t width,
                                        const std::string& mask_name, const std::string& writer);

// Stand-in embeddings (batch, text_tokens, width) for demos and benchmarks, where no text encoder runs:
// the N(0, 1) stream of `seed` times `scale`, the magnitude of the encoder's outputs.
Tensor random_text_embeds(int64_t batch, int64_t text_tokens, int64_t width, uint64_t seed, float scale);

}  // namespace cpdit::pipeline
