// Text encoders from the single files ComfyUI users hold (single_file_tiny, written and run by transformers):
// CLIP-L under text_model. in f32 and f16, T5 with the tied `shared` embedding in f32, f16 and plain FP8
// (E4M3), each against transformers' outputs on the file's weights upcast as stored; T5's config read
// from its shapes alone.
#include "models/text/single_file.hpp"
#include "models/text_fixture.hpp"
#include "support/expect_error.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/text/checkpoint.hpp>

#include <gtest/gtest.h>

#include <map>

namespace cpdit::models::text {
namespace {

using testing::fixture_dir;
using testing::kRelativeTolerance;
using testing::relative_error;

std::string single_file(const std::string& name) { return fixture_dir("single_file_tiny") + "/" + name; }
nn::TensorMap inputs() { return io::load_safetensors(single_file("inputs.safetensors")); }
nn::TensorMap expected() { return io::load_safetensors(single_file("expected.safetensors")); }

TEST(TextSingleFile, ClipLInComfyLayoutMatchesTransformers) {
  // The tiny tower's 4 heads are not in its shapes: its config is given (CLIP-L's are known, below).
  for (const std::string file : {"clip_l", "clip_l_fp16"}) {
    SCOPED_TRACE(file);
    EXPECT_EQ(models::model_class(single_file(file + ".safetensors"), std::nullopt, "text_encoder"), "CLIPTextModel");
    auto model = load_clip_text(read_clip_text_checkpoint(single_file(file + ".safetensors"),
                                                          single_file("clip_l_config/config.json")));
    const nn::TensorMap out = model->forward({{"input_ids", inputs().at("clip_input_ids")}});
    // f16 weights widen exactly, so both files meet the f32 tolerance against their own reference.
    EXPECT_LT(relative_error(out.at("last_hidden_state"), expected().at(file + "_last_hidden_state")),
              kRelativeTolerance);
    EXPECT_LT(relative_error(out.at("pooler_output"), expected().at(file + "_pooler_output")), kRelativeTolerance);
  }
}

TEST(TextSingleFile, T5AloneTakesItsConfigFromItsShapes) {
  const nlohmann::json config = io::read_json(single_file("t5xxl_config/config.json"));
  std::map<std::string, size_t> held;  // the loaded model's weight bytes, by file
  for (const std::string file : {"t5xxl_fp32", "t5xxl_fp16", "t5xxl_fp8_e4m3fn"}) {
    SCOPED_TRACE(file);
    const std::string path = single_file(file + ".safetensors");
    EXPECT_EQ(models::model_class(path, std::nullopt, "text_encoder"), "T5EncoderModel");
    const T5Checkpoint checkpoint = read_t5_checkpoint(path, std::nullopt, false);
    EXPECT_EQ(checkpoint.config.vocab_size, config.at("vocab_size"));
    EXPECT_EQ(checkpoint.config.d_model, config.at("d_model"));
    EXPECT_EQ(checkpoint.config.d_kv, config.at("d_kv"));
    EXPECT_EQ(checkpoint.config.d_ff, config.at("d_ff"));
    EXPECT_EQ(checkpoint.config.num_layers, config.at("num_layers"));
    EXPECT_EQ(checkpoint.config.num_heads, config.at("num_heads"));
    EXPECT_EQ(checkpoint.config.relative_attention_num_buckets, config.at("relative_attention_num_buckets"));
    EXPECT_EQ(checkpoint.config.relative_attention_max_distance, config.at("relative_attention_max_distance"));
    auto model = load_t5(checkpoint);
    // FP8 matrices stay 8-bit in memory (decoded a tile at a time), never a widened copy.
    const Weight q = nn::parameters_of(*model).at("encoder.block.0.layer.0.SelfAttention.q.weight");
    EXPECT_EQ(q.format(), file == "t5xxl_fp8_e4m3fn" ? "F8_E4M3" : file == "t5xxl_fp16" ? "f16" : "f32");
    for (const auto& [name, weight] : nn::parameters_of(*model)) held[file] += weight.nbytes();
    const Tensor got = model->forward({{"input_ids", inputs().at("t5_input_ids")}}).at("last_hidden_state");
    EXPECT_LT(relative_error(got, expected().at(file + "_last_hidden_state")), kRelativeTolerance);
  }
  // Every matrix 1 byte a value (the norms' f16 vectors aside): a quarter of the f32 model's bytes, plus
  // those vectors' 2 bytes, so at most a third; the f16 file half.
  EXPECT_LT(3 * held["t5xxl_fp8_e4m3fn"], held["t5xxl_fp32"]);
  EXPECT_EQ(2 * held["t5xxl_fp16"], held["t5xxl_fp32"]);
}

TEST(TextSingleFile, T5WithoutTheEncoderPrefixIsTheSameModel) {
  nn::StateDict bare;
  for (auto& [name, weight] : nn::read_state_dict(io::Checkpoint::open(single_file("t5xxl_fp32.safetensors"))))
    bare.emplace(name.rfind("encoder.", 0) == 0 ? name.substr(8) : name, weight);
  const nn::StateDict renamed = t5_in_transformers_names(bare);
  EXPECT_TRUE(renamed.count("encoder.block.0.layer.0.SelfAttention.q.weight"));
  EXPECT_TRUE(renamed.count("encoder.final_layer_norm.weight"));
  EXPECT_TRUE(renamed.count("shared.weight"));
}

// CLIP ViT-L/14's text tower, by the tensors its config is read from (the dims read only).
nn::StateDict clip_l_shapes(int64_t layers) {
  nn::StateDict s;
  s["embeddings.token_embedding.weight"] = Tensor::zeros({64, 768});  // the release's 49408 rows: not needed here
  s["embeddings.position_embedding.weight"] = Tensor::zeros({77, 1});
  for (int64_t i = 0; i < layers; ++i) s["encoder.layers." + std::to_string(i) + ".mlp.fc1.weight"] = Tensor::zeros({3072, 1});
  return s;
}

TEST(TextSingleFile, ClipLReleaseShapesGiveItsConfig) {
  const ClipTextConfig c = ClipTextConfig::from_json(clip_text_config_from_shapes(clip_l_shapes(12), "clip_l"));
  EXPECT_EQ(c.vocab_size, 64);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.intermediate_size, 3072);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.max_position_embeddings, 77);
  EXPECT_EQ(c.hidden_act, "quick_gelu");
  EXPECT_EQ(c.eos_token_id, 2);  // FLUX.1's text_encoder config: the legacy pooling at the largest id
  cpdit::testing::expect_error([] { clip_text_config_from_shapes(clip_l_shapes(6), "clip"); },
                               {"is not CLIP ViT-L/14's", "give its config.json"});
}

// Qwen2.5-VL-7B's language model, by the tensors its config is read from (the dims read only).
nn::StateDict qwen_7b_shapes(int64_t width) {
  nn::StateDict s;
  s["model.embed_tokens.weight"] = Tensor::zeros({16, width});  // the release's 152064 rows: not needed here
  for (int64_t i = 0; i < 28; ++i) s["model.layers." + std::to_string(i) + ".mlp.gate_proj.weight"] = Tensor::zeros({18944, 1});
  s["model.layers.0.self_attn.k_proj.weight"] = Tensor::zeros({512, 1});
  return s;
}

TEST(TextSingleFile, Qwen7bReleaseShapesGiveItsConfig) {
  const Qwen2_5_VLTextConfig c = Qwen2_5_VLTextConfig::from_json(qwen2_5_vl_config_from_shapes(qwen_7b_shapes(3584), "qwen"));
  EXPECT_EQ(c.vocab_size, 16);
  EXPECT_EQ(c.hidden_size, 3584);
  EXPECT_EQ(c.intermediate_size, 18944);
  EXPECT_EQ(c.num_hidden_layers, 28);
  EXPECT_EQ(c.num_attention_heads, 28);
  EXPECT_EQ(c.num_key_value_heads, 4);  // 512 key features in heads of 128
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-6f);
  cpdit::testing::expect_error([] { qwen2_5_vl_config_from_shapes(qwen_7b_shapes(2048), "qwen"); },
                               {"is not Qwen2.5-VL-7B's (3584, 28)", "give its config.json"});
}

TEST(TextSingleFile, TinyClipAloneIsRefusedAskingForItsConfig) {
  cpdit::testing::expect_error([] { read_clip_text_checkpoint(single_file("clip_l.safetensors"), std::nullopt); },
                               {"width 32 and 2 layers is not CLIP ViT-L/14's", "give its config.json"});
}

}  // namespace
}  // namespace cpdit::models::text
