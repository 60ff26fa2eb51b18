// The text conditioning the LTX-Video and Qwen-Image loops read from a text stage's output or an
// --embeddings file: both read the same four tensors under their own mask names, and refuse what
// does not fit the model with one error naming the file and the tensor.
#include "support/expect_error.hpp"

#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>

#include <gtest/gtest.h>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::expect_error;

// A (batch, tokens) mask whose last `padded` tokens of every item are padding.
Tensor padded_mask(int64_t batch, int64_t tokens, int64_t padded) {
  Tensor m = Tensor::empty({batch, tokens}, DType::i64);
  for (int64_t i = 0; i < batch * tokens; ++i) m.data<int64_t>()[i] = i % tokens < tokens - padded ? 1 : 0;
  return m;
}

models::ltx_video::LtxVideoConfig ltx_config() {
  models::ltx_video::LtxVideoConfig c;
  c.caption_channels = 4;
  return c;
}

models::qwenimage::QwenImageConfig qwen_config() {
  models::qwenimage::QwenImageConfig c;
  c.joint_attention_dim = 4;
  return c;
}

TEST(TextConditioning, BothFamiliesReadThePromptAndTheNegativeUnderTheirMaskNames) {
  const Tensor embeds = Tensor::full({2, 3, 4}, 0.5), negative = Tensor::full({2, 5, 4}, -0.5);
  const nn::TensorMap ltx{{"prompt_embeds", embeds},
                          {"prompt_attention_mask", padded_mask(2, 3, 1)},
                          {"negative_prompt_embeds", negative},
                          {"negative_prompt_attention_mask", padded_mask(2, 5, 2).to(DType::boolean)}};
  const LtxConditioning l = ltx_conditioning(ltx, "e.safetensors", ltx_config());
  EXPECT_EQ(max_abs_diff(l.prompt_embeds, embeds), 0.0);
  EXPECT_EQ(max_abs_diff(l.negative_prompt_embeds, negative), 0.0);
  EXPECT_EQ(max_abs_diff(l.prompt_attention_mask.to(DType::f32), padded_mask(2, 3, 1).to(DType::f32)), 0.0);
  // a bool mask is read as integers
  ASSERT_EQ(l.negative_prompt_attention_mask.dtype(), DType::i64);
  EXPECT_EQ(max_abs_diff(l.negative_prompt_attention_mask.to(DType::f32), padded_mask(2, 5, 2).to(DType::f32)), 0.0);

  const nn::TensorMap qwen{{"prompt_embeds", embeds}, {"negative_prompt_embeds_mask", padded_mask(2, 5, 1)},
                           {"negative_prompt_embeds", negative}};
  const QwenImageConditioning q = qwenimage_conditioning(qwen, "e.safetensors", qwen_config());
  EXPECT_EQ(max_abs_diff(q.prompt_embeds, embeds), 0.0);
  EXPECT_FALSE(q.prompt_embeds_mask.defined());  // absent: every token is real
  EXPECT_EQ(max_abs_diff(q.negative_prompt_embeds_mask.to(DType::f32), padded_mask(2, 5, 1).to(DType::f32)), 0.0);

  const LtxConditioning positive_only = ltx_conditioning({{"prompt_embeds", embeds}}, "e.safetensors", ltx_config());
  EXPECT_FALSE(positive_only.negative_prompt_embeds.defined());
  EXPECT_FALSE(positive_only.negative_prompt_attention_mask.defined());
}

TEST(TextConditioning, WhatDoesNotFitTheModelIsOneErrorNamingFileAndTensor) {
  const Tensor embeds = Tensor::full({2, 3, 4}, 0.5);
  expect_error([] { ltx_conditioning({}, "e.safetensors", ltx_config()); },
               {"e.safetensors", "'prompt_embeds'", "LTX-Video", "prompt_attention_mask (B, L)"});
  expect_error([] { qwenimage_conditioning({}, "e.safetensors", qwen_config()); },
               {"e.safetensors", "'prompt_embeds'", "Qwen-Image", "prompt_embeds_mask (B, L)"});
  expect_error(
      [&] {
        ltx_conditioning({{"prompt_embeds", Tensor::full({2, 3, 5}, 0.5)}}, "e.safetensors", ltx_config());
      },
      {"e.safetensors", "prompt_embeds", "(B, L, 4)"});
  expect_error([&] {
    ltx_conditioning({{"prompt_embeds", embeds}, {"negative_prompt_embeds", Tensor::full({1, 3, 4}, 0.5)}},
                     "e.safetensors", ltx_config());
  }, {"e.safetensors", "negative_prompt_embeds has batch 1, prompt_embeds 2"});
  expect_error([&] {
    qwenimage_conditioning({{"prompt_embeds", embeds}, {"negative_prompt_embeds", embeds},
                            {"negative_prompt_embeds_mask", padded_mask(2, 4, 1)}},
                           "e.safetensors", qwen_config());
  }, {"e.safetensors", "negative_prompt_embeds_mask", "(2, 3)"});
}

}  // namespace
}  // namespace cpdit::pipeline
