// T5EncoderModel, UMT5EncoderModel and CLIPTextModel against transformers' own numbers
// (tests/data/fixtures/t5_tiny, umt5_tiny, clip_text_tiny), and the checkpoint layouts they come in.
#include "models/text_fixture.hpp"
#include "support/expect_error.hpp"
#include "support/record_outputs.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/models/text/checkpoint.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace cpdit::models::text {
namespace {

using testing::fixture_dir;
using testing::kRelativeTolerance;
using testing::relative_error;

nn::TensorMap inputs_of(const std::string& name) { return io::load_safetensors(fixture_dir(name) + "/inputs.safetensors"); }

std::unique_ptr<T5EncoderModel> fixture_t5(const std::string& name, bool umt5) {
  return load_t5(read_t5_checkpoint(fixture_dir(name) + "/weights.safetensors", fixture_dir(name) + "/config.json", umt5));
}

// Every recorded intermediate of the fixture, within the tolerance.
void expect_intermediates(nn::Model& model, const nn::TensorMap& inputs, const std::string& name) {
  const auto expected = io::load_safetensors(fixture_dir(name) + "/intermediates.safetensors");
  SCOPED_TRACE(name);
  cpdit::testing::expect_intermediates(model, [&] { model.forward(inputs); }, expected, relative_error, kRelativeTolerance);
}

TEST(T5Encoder, MatchesTransformersWithAndWithoutAttentionMask) {
  auto model = fixture_t5("t5_tiny", false);
  const Tensor want = io::load_safetensors(fixture_dir("t5_tiny") + "/expected.safetensors").at("last_hidden_state");
  nn::TensorMap inputs = inputs_of("t5_tiny");
  EXPECT_LT(relative_error(model->forward(inputs).at("last_hidden_state"), want), kRelativeTolerance);
  inputs.erase("attention_mask");  // the fixture's mask is all ones: the same numbers without it
  EXPECT_LT(relative_error(model->forward(inputs).at("last_hidden_state"), want), kRelativeTolerance);
}

TEST(T5Encoder, IntermediatesMatchTransformers) {
  auto model = fixture_t5("t5_tiny", false);
  expect_intermediates(*model, inputs_of("t5_tiny"), "t5_tiny");
}

TEST(Umt5Encoder, MatchesTransformers) {
  auto model = fixture_t5("umt5_tiny", true);
  const Tensor want = io::load_safetensors(fixture_dir("umt5_tiny") + "/expected.safetensors").at("last_hidden_state");
  EXPECT_LT(relative_error(model->forward(inputs_of("umt5_tiny")).at("last_hidden_state"), want), kRelativeTolerance);
  expect_intermediates(*model, inputs_of("umt5_tiny"), "umt5_tiny");
}

// Padded keys get float's lowest logit, so their softmax weight is exactly 0: the real tokens of a
// padded row come out as the same tokens alone would (T5's bias depends on relative positions only).
TEST(T5Encoder, PaddedKeysDoNotReachRealTokens) {
  for (bool umt5 : {false, true}) {
    auto model = fixture_t5(umt5 ? "umt5_tiny" : "t5_tiny", umt5);
    const nn::TensorMap full = inputs_of("t5_tiny");
    const int64_t len = full.at("input_ids").size(1), real = len - 4;
    Tensor mask = full.at("attention_mask").clone();
    for (int64_t s = real; s < len; ++s) mask.data<int64_t>()[s] = 0;
    const Tensor padded = model->forward({{"input_ids", full.at("input_ids")}, {"attention_mask", mask}}).at("last_hidden_state");
    const Tensor alone =
        model->forward({{"input_ids", full.at("input_ids").narrow(1, 0, real).contiguous()}}).at("last_hidden_state");
    // Same arithmetic on the same values up to the summation order over keys: float32 rounding.
    EXPECT_LT(max_abs_diff(padded.narrow(1, 0, real), alone), 1e-5) << (umt5 ? "UMT5" : "T5");
  }
}

// transformers' buckets for -600..600 (tools/reference/t5_relative_buckets.py), incl. the distances
// 16, 32, 64 where the float32 log lands on a bucket boundary.
TEST(T5Encoder, RelativeBucketsEqualTransformers) {
  const auto table = io::read_json(std::string(CPDIT_TEST_DATA) + "/fixtures/t5_relative_buckets.json");
  const auto positions = table.at("relative_positions").get<std::vector<int64_t>>();
  const auto buckets = table.at("buckets").get<std::vector<int64_t>>();
  ASSERT_EQ(positions.size(), buckets.size());
  for (size_t i = 0; i < positions.size(); ++i)
    EXPECT_EQ(relative_position_bucket(positions[i], 32, 128), buckets[i]) << "relative position " << positions[i];
}

TEST(ClipText, MatchesTransformersByBothPoolingRules) {
  const std::string dir = fixture_dir("clip_text_tiny");
  for (const auto& [config, expected] : {std::pair{"config.json", "expected.safetensors"},
                                         std::pair{"config_eos999.json", "expected_eos999.safetensors"}}) {
    auto model = load_clip_text(read_clip_text_checkpoint(dir + "/weights.safetensors", dir + "/" + config));
    const auto want = io::load_safetensors(dir + "/" + expected);
    const auto got = model->forward(inputs_of("clip_text_tiny"));
    EXPECT_LT(relative_error(got.at("last_hidden_state"), want.at("last_hidden_state")), kRelativeTolerance) << config;
    EXPECT_LT(relative_error(got.at("pooler_output"), want.at("pooler_output")), kRelativeTolerance) << config;
  }
}

TEST(ClipText, IntermediatesMatchTransformers) {
  const std::string dir = fixture_dir("clip_text_tiny");
  auto model = load_clip_text(read_clip_text_checkpoint(dir + "/weights.safetensors", dir + "/config.json"));
  expect_intermediates(*model, inputs_of("clip_text_tiny"), "clip_text_tiny");
}

TEST(ClipText, EosPositionRules) {
  Tensor ids = Tensor::empty({2, 6}, DType::i64);
  const std::vector<int64_t> values{0, 5, 9, 7, 9, 1,   // largest id 9 first at 2; id 7 at 3
                                    0, 2, 4, 4, 3, 3};  // largest 4 first at 2; no 7
  std::copy(values.begin(), values.end(), ids.data<int64_t>());
  EXPECT_EQ(clip_eos_positions(ids, 2), (std::vector<int64_t>{2, 2}));  // legacy: argmax of the ids
  EXPECT_EQ(clip_eos_positions(ids, 7), (std::vector<int64_t>{3, 0}));  // first eos; none -> 0
}

// The layouts checkpoints come in: Hub CLIP files prefix text_model. (and hold position_ids); T5
// files may hold only one of the tied tables; bf16 files stay bf16 in memory.
class TextCheckpointLayouts : public ::testing::Test {
 protected:
  cpdit::testing::TempDir dir{"text_layouts"};

  std::string write(const std::string& folder, const std::string& config, const nn::TensorMap& state) {
    std::filesystem::create_directories(dir.path() / folder);
    std::filesystem::copy_file(config, dir.path() / folder / "config.json");
    io::save_safetensors(dir.file(folder + "/model.safetensors"), state);
    return dir.file(folder);
  }
};

TEST_F(TextCheckpointLayouts, ClipWithTextModelPrefixAndPositionIds) {
  const std::string fixture = fixture_dir("clip_text_tiny");
  nn::TensorMap prefixed;
  for (const auto& [name, t] : io::load_safetensors(fixture + "/weights.safetensors")) prefixed["text_model." + name] = t;
  Tensor position_ids = Tensor::empty({1, 77}, DType::i64);
  for (int64_t i = 0; i < 77; ++i) position_ids.data<int64_t>()[i] = i;
  prefixed["text_model.embeddings.position_ids"] = position_ids;
  auto model = load_clip_text(read_clip_text_checkpoint(write("clip", fixture + "/config.json", prefixed), std::nullopt));
  const Tensor want = io::load_safetensors(fixture + "/expected.safetensors").at("pooler_output");
  EXPECT_LT(relative_error(model->forward(inputs_of("clip_text_tiny")).at("pooler_output"), want), kRelativeTolerance);
}

// A diffusers pipeline folder's text_encoder/ is read through the same resolver as every checkpoint.
TEST_F(TextCheckpointLayouts, ClipInAPipelineFolder) {
  const std::string fixture = fixture_dir("clip_text_tiny");
  write("text_encoder", fixture + "/config.json", io::load_safetensors(fixture + "/weights.safetensors"));
  std::ofstream(dir.file("model_index.json")) << R"({"_class_name": "FluxPipeline", "text_encoder": ["transformers", "CLIPTextModel"]})";
  auto model = load_clip_text(read_clip_text_checkpoint(dir.path().string(), std::nullopt));
  const Tensor want = io::load_safetensors(fixture + "/expected.safetensors").at("pooler_output");
  EXPECT_LT(relative_error(model->forward(inputs_of("clip_text_tiny")).at("pooler_output"), want), kRelativeTolerance);
}

TEST_F(TextCheckpointLayouts, T5WithEitherTiedTable) {
  const std::string fixture = fixture_dir("t5_tiny");
  const Tensor want = io::load_safetensors(fixture + "/expected.safetensors").at("last_hidden_state");
  for (const char* dropped : {"shared.weight", "encoder.embed_tokens.weight"}) {
    nn::TensorMap state = io::load_safetensors(fixture + "/weights.safetensors");
    state.erase(dropped);
    const std::string folder = write(std::string("t5_without_") + dropped, fixture + "/config.json", state);
    const T5Checkpoint checkpoint = read_t5_checkpoint(folder, std::nullopt, false);
    EXPECT_EQ(checkpoint.state.count("shared.weight"), 0u);  // one table, not two
    auto model = load_t5(checkpoint);
    EXPECT_LT(relative_error(model->forward(inputs_of("t5_tiny")).at("last_hidden_state"), want), kRelativeTolerance)
        << "without " << dropped;
  }
}

TEST_F(TextCheckpointLayouts, Bf16WeightsStayBf16) {
  const std::string fixture = fixture_dir("t5_tiny");
  nn::TensorMap state;
  for (const auto& [name, t] : io::load_safetensors(fixture + "/weights.safetensors")) state[name] = t.to(DType::bf16);
  auto model = load_t5(read_t5_checkpoint(write("t5_bf16", fixture + "/config.json", state), std::nullopt, false));
  for (auto& [name, p] : model->named_parameters())
    if (p->matrix) {
      EXPECT_EQ(p->value.dtype(), DType::bf16) << name;
    }
  // bf16 weights (8 significant bits) move the output by about 2^-8 of its scale; 2e-2 of the range
  // bounds that with margin while catching any wrong layer (>= 1e-4 .. 1 of the range).
  const Tensor want = io::load_safetensors(fixture + "/expected.safetensors").at("last_hidden_state");
  EXPECT_LT(relative_error(model->forward(inputs_of("t5_tiny")).at("last_hidden_state"), want), 2e-2);
}

TEST(TextEncoders, RefuseBadInputsInOneLine) {
  auto model = fixture_t5("t5_tiny", false);
  nn::TensorMap inputs = inputs_of("t5_tiny");
  inputs["input_ids"].data<int64_t>()[3] = 300;  // vocab is 300
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = inputs_of("t5_tiny");
  inputs["encoder_hidden_states"] = inputs["input_ids"];
  EXPECT_THROW(model->forward(inputs), Error);
  inputs = inputs_of("t5_tiny");
  inputs["attention_mask"].data<int64_t>()[0] = 2;
  EXPECT_THROW(model->forward(inputs), Error);
  const std::string dir = fixture_dir("clip_text_tiny");
  auto clip = load_clip_text(read_clip_text_checkpoint(dir + "/weights.safetensors", dir + "/config.json"));
  EXPECT_THROW(clip->forward({{"input_ids", Tensor::zeros({1, 78}, DType::i64)}}), Error);  // 77 positions
}

// A config.json field of the wrong type, or a config that is not an object, is one line naming the
// model's config, as every family's config reader says it.
TEST(TextEncoders, RefuseBadConfigsInOneLine) {
  nlohmann::json t5 = io::read_json(fixture_dir("t5_tiny") + "/config.json");
  t5["num_heads"] = "four";
  cpdit::testing::expect_error([&] { T5Config::from_json(t5, false); }, {"T5 config", "wrong type"});
  cpdit::testing::expect_error([&] { T5Config::from_json(t5, true); }, {"UMT5 config", "wrong type"});
  nlohmann::json clip = io::read_json(fixture_dir("clip_text_tiny") + "/config.json");
  clip["hidden_size"] = 1.5;
  cpdit::testing::expect_error([&] { ClipTextConfig::from_json(clip); }, {"CLIP config", "hidden_size", "whole number"});
  cpdit::testing::expect_error([&] { ClipTextConfig::from_json(nlohmann::json::array()); },
                               {"CLIP config must be a JSON object"});
}

}  // namespace
}  // namespace cpdit::models::text
