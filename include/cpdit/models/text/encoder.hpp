#pragma once
// What every text encoder is to its callers: inputs by transformers' argument names (input_ids I64
// (B, S) [, attention_mask (B, S) 1 = token, 0 = padding]), outputs last_hidden_state (B, S, D)
// [, pooler_output (B, D)]. Text encoders run whole on one rank (the prompt is short next to the
// image tokens), so their context-parallel plan is empty. CLIP's causal mask is a position rule any
// backend serves; T5's relative-position bias is an additive (S, S) mask, so T5 runs on `native`.
#include <cpdit/attention/attention.hpp>
#include <cpdit/nn/model.hpp>

namespace cpdit::models::text {

// input_ids, and attention_mask when given (I64, or BOOL returned as I64).
struct TextInputs {
  Tensor input_ids;
  Tensor attention_mask;  // undefined when not given
};

class TextEncoder : public nn::Model {
 public:
  parallel::ContextParallelPlan context_parallel_plan() const override { return {}; }

 protected:
  // The checked inputs of a forward of `model` (its class name, for errors): input_ids I64 (B, S) with
  // S >= 1, the mask of the same shape holding only 0 and 1; other names are refused, and so is a
  // context-parallel split (the encoder runs whole on one rank).
  TextInputs checked_inputs(const nn::TensorMap& inputs, const char* model) const;
};

// The decoder-style encoders' mask (CLIP's text tower, Qwen2.5-VL): causal, and with an attention_mask
// (B, S) I64 also only the real keys.
attention::Mask causal_text_mask(const Tensor& attention_mask);

}  // namespace cpdit::models::text
