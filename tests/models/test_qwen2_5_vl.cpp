// Qwen2.5-VL's language model (Qwen-Image's text encoder) against transformers'
// Qwen2_5_VLForConditionalGeneration (tests/data/fixtures/qwenimage_prompt_tiny: 2 layers, 4 query heads
// over 2 key/value heads, mrope_section [2, 3, 3]), opened from the pipeline's text_encoder/ as the
// registry opens it.
#include "models/text_fixture.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/text/qwen2_5_vl.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace cpdit::models::text {
namespace {

using testing::fixture_dir;
using testing::kRelativeTolerance;
using testing::relative_error;

const std::string kEncoder = fixture_dir("qwenimage_prompt_tiny") + "/pipeline/text_encoder";

const nn::TensorMap& expected() {
  static const nn::TensorMap e = io::load_safetensors(fixture_dir("qwenimage_prompt_tiny") + "/expected.safetensors");
  return e;
}

std::unique_ptr<nn::Model> encoder() {
  const LoadedModel m = open_model(kEncoder, std::nullopt, {}, "text_encoder");
  EXPECT_EQ(m.class_name, "Qwen2_5_VLForConditionalGeneration");
  return m.replica();
}

// hidden_states[-1] (after the final norm) for six templated prompts: English, Chinese, emoji, " " and
// two short negatives, 59 to 90 tokens.
TEST(Qwen2_5_VLText, LastHiddenStateMatchesTransformers) {
  auto model = encoder();
  for (int i = 0; i < 6; ++i) {
    const std::string n = "enc" + std::to_string(i);
    SCOPED_TRACE(n);
    const nn::TensorMap out = model->forward(
        {{"input_ids", expected().at(n + ".input_ids")}, {"attention_mask", expected().at(n + ".attention_mask")}});
    EXPECT_LT(relative_error(out.at("last_hidden_state"), expected().at(n + ".text_encoder_hidden_states_last")),
              kRelativeTolerance);
  }
}

// A batch padded on the right: causal attention over the real keys leaves every real token as it is alone.
TEST(Qwen2_5_VLText, RightPaddingLeavesTheRealTokensAlone) {
  auto model = encoder();
  const Tensor& long_ids = expected().at("enc2.input_ids");  // 90 tokens
  const Tensor& short_ids = expected().at("enc3.input_ids");  // 59 tokens
  const int64_t length = long_ids.size(1), real = short_ids.size(1);
  Tensor ids = Tensor::full({2, length}, 1000.0, DType::i64), mask = Tensor::zeros({2, length}, DType::i64);
  for (int64_t s = 0; s < length; ++s) {
    ids.data<int64_t>()[s] = long_ids.data<int64_t>()[s];
    mask.data<int64_t>()[s] = 1;
    if (s < real) ids.data<int64_t>()[length + s] = short_ids.data<int64_t>()[s], mask.data<int64_t>()[length + s] = 1;
  }
  const Tensor out = model->forward({{"input_ids", ids}, {"attention_mask", mask}}).at("last_hidden_state");
  EXPECT_LT(relative_error(out.narrow(0, 0, 1), expected().at("enc2.text_encoder_hidden_states_last")),
            kRelativeTolerance);
  EXPECT_LT(relative_error(out.narrow(0, 1, 1).narrow(1, 0, real),
                           expected().at("enc3.text_encoder_hidden_states_last")),
            kRelativeTolerance);
}

// transformers' rotary tables: inv_freq = theta^(-2i/d) in f32, cos/sin of the f32 angle.
TEST(Qwen2_5_VLText, RotaryTablesAreTheF32Angles) {
  const RotaryTables t = rotary_tables(1058, 16, 1e6);
  for (int64_t p : {0, 1, 57, 1057})
    for (int64_t i = 0; i < 8; ++i) {
      const float inv_freq = 1.0f / std::pow(1e6f, float(2 * i) / 16.0f);
      EXPECT_FLOAT_EQ(t.cos.data<float>()[p * 8 + i], std::cos(float(p) * inv_freq)) << p << " " << i;
      EXPECT_FLOAT_EQ(t.sin.data<float>()[p * 8 + i], std::sin(float(p) * inv_freq)) << p << " " << i;
    }
}

TEST(Qwen2_5_VLText, ConfigsItCannotRunAreRefused) {
  Qwen2_5_VLTextConfig c;
  c.num_key_value_heads = 3;  // 28 query heads do not group over 3
  try {
    c.validate();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of num_key_value_heads 3"), std::string::npos) << e.what();
  }
  // The released config keeps the text fields at the top and rope_theta beside them.
  const Qwen2_5_VLTextConfig top = Qwen2_5_VLTextConfig::from_json(
      {{"hidden_size", 64}, {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"rope_theta", 5000.0}});
  EXPECT_EQ(top.hidden_size, 64);
  EXPECT_EQ(top.rope_theta, 5000.0);
}

}  // namespace
}  // namespace cpdit::models::text
