#pragma once
// The text conditioning a pipeline reads from a text stage's output or an --embeddings file, checked
// as it is taken (`source` names the file in errors).
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

}  // namespace cpdit::pipeline
