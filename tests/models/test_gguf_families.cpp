// Wan 2.1, Qwen-Image and LTX-Video from GGUF files in the names people download them in (the
// original releases' names, as ComfyUI-GGUF and stable-diffusion.cpp convert them; made by
// tools/reference/gguf_family_fixtures.py, which checks those names against diffusers' own single-file
// conversion). Each family has a tiny Q8_0 file (its tiny fixture's weights, run with its config) and a
// wide Q4_K one (inner width 256, read without a config: the family from the tensor names, the sizes
// from their shapes). The reference `sample` is diffusers' model on the dequantised weights.
#include "support/forward_cli.hpp"
#include "support/model_fixture.hpp"
#include "support/relative_error.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

namespace cpdit::models {
namespace {

using cpdit::testing::relative_error;
using cpdit::testing::run_cli;

struct Family {
  std::string name;        // the fixtures' file prefix
  std::string class_name;  // what the tensor names must tell
  std::string q4_k_tensor; // a Q4_K tensor of the wide file, as `inspect` lists it (original name)
  int64_t heads, head_dim; // the wide file's, as the built-in config splits its width
};

std::ostream& operator<<(std::ostream& out, const Family& f) { return out << f.name; }

const std::string kData = std::string(CPDIT_TEST_DATA) + "/fixtures/";

std::string gguf(const Family& f, const std::string& kind) { return kData + "gguf/" + f.name + "_" + kind + ".gguf"; }
std::string tiny_dir(const Family& f) { return kData + f.name + "_tiny"; }
Tensor expected(const Family& f, const std::string& kind, const std::string& key = "sample") {
  return io::load_safetensors(kData + "gguf/" + f.name + "_" + kind + "_expected.safetensors").at(key);
}


class GgufFamilies : public ::testing::TestWithParam<Family> {};

// The Q8_0 blocks are bound as they are mapped and the sample is diffusers' on the decoded weights.
TEST_P(GgufFamilies, Q8_0GivesDiffusersSampleOnTheDecodedWeights) {
  const Family& f = GetParam();
  const LoadedModel loaded = open_model(gguf(f, "tiny_q8_0"), tiny_dir(f) + "/config.json", {});
  EXPECT_EQ(loaded.class_name, f.class_name);
  auto model = loaded.replica();
  // only the weights whose rows are whole 32-blocks are Q8_0 (in wan_tiny and ltx_tiny only a few)
  EXPECT_GE(cpdit::testing::parameters_in_format(*model, "Q8_0"), 3);
  const nn::TensorMap inputs = io::load_safetensors(tiny_dir(f) + "/inputs.safetensors");
  const Tensor sample = model->forward(inputs).at("sample");
  // Against diffusers on the same values: f32 rounding only, as the tiny fixtures' own f32 runs
  // (their float32 and float64 runs differ by ~2e-6 of the range).
  EXPECT_LT(relative_error(sample, expected(f, "tiny_q8_0")), 1e-5);
  // The same checkpoint decoded to f32 on load multiplies the same values through the f32 GEMM.
  auto decoded = open_model(gguf(f, "tiny_q8_0"), tiny_dir(f) + "/config.json", nn::load_options("f32")).replica();
  EXPECT_EQ(cpdit::testing::parameters_in_format(*decoded, "Q8_0"), 0);
  EXPECT_LT(relative_error(decoded->forward(inputs).at("sample"), sample), 1e-5);
}

// No config: the family and its sizes come from the tensors (the built-in widths: 128 per head for
// Wan and Qwen-Image, 64 for LTX-Video); forward on 1 rank and under ring 2 and Ulysses 2 gives
// diffusers' sample on the decoded Q4_K weights, and inspect lists the file.
TEST_P(GgufFamilies, Q4_KThroughTheCliWithTheBuiltInConfig) {
  const Family& f = GetParam();
  const Tensor want = expected(f, "wide_q4_k");
  // f32 sums over up to 512 products per output through one block: 1e-5 of the output's range.
  cpdit::testing::expect_forward_cli_runs("--model " + gguf(f, "wide_q4_k"), tiny_dir(f) + "/inputs.safetensors",
                                          {"", " --ring 2", " --ulysses 2"}, want, relative_error, 1e-5);
  // The comparison tells the quantised values from the f32 ones: Q4_K moves diffusers' own sample by
  // a few % of its range, far beyond the tolerance above.
  EXPECT_GT(relative_error(want, expected(f, "wide_q4_k", "sample_f32")), 1e-3);

  auto listed = run_cli("inspect " + gguf(f, "wide_q4_k"));
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("class: " + f.class_name + " (from tensor names)"), std::string::npos) << listed.out;
  // the config forward ran with: the built-in one, sized by the tensors (one block of width 256)
  const std::string config = "config \\(from the tensor shapes\\): \\{.*\"attention_head_dim\":" +
                             std::to_string(f.head_dim) + ",.*\"num_attention_heads\":" + std::to_string(f.heads) +
                             ",\"num_layers\":1,";
  EXPECT_TRUE(std::regex_search(listed.out, std::regex(config))) << listed.out;
  EXPECT_TRUE(std::regex_search(listed.out, std::regex(std::regex_replace(f.q4_k_tensor, std::regex(R"(\.)"), R"(\.)") +
                                                       R"( +Q4_K +\()")))
      << listed.out;
}

INSTANTIATE_TEST_SUITE_P(Families, GgufFamilies,
                         ::testing::Values(Family{"wan", "WanTransformer3DModel",
                                                  "model.diffusion_model.blocks.0.self_attn.q.weight", 2, 128},
                                           Family{"qwenimage", "QwenImageTransformer2DModel",
                                                  "transformer_blocks.0.attn.to_q.weight", 2, 128},
                                           Family{"ltx", "LTXVideoTransformer3DModel",
                                                  "model.diffusion_model.transformer_blocks.0.attn1.to_q.weight", 4,
                                                  64}),
                         [](const ::testing::TestParamInfo<Family>& info) { return info.param.name; });

// Wan 2.1's image conditioning in its original names (FLF2V: img_emb.proj.*, img_emb.emb_pos,
// cross_attn.k_img / v_img / norm_k_img, behind the prefix): every image tensor is bound to diffusers'
// parameter and the sample is diffusers' on the decoded weights.
TEST(GgufWanImageConditioning, OriginalNamesGiveDiffusersSample) {
  const std::string dir = kData + "wan_flf2v_tiny";
  const LoadedModel loaded = open_model(kData + "gguf/wan_flf2v_tiny_q8_0.gguf", dir + "/config.json", {});
  EXPECT_EQ(loaded.class_name, "WanTransformer3DModel");
  auto model = loaded.replica();
  int image_parameters = 0;
  for (auto& [name, p] : model->named_parameters())
    image_parameters += name.find("image_embedder") != std::string::npos || name.find("added") != std::string::npos ||
                        name.find("add_") != std::string::npos;
  // the embedder's 2 norms and 2 linears (weight and bias each) and pos_embed; per block add_k_proj and
  // add_v_proj (weight and bias) and norm_added_k: 9 + 2 x 5
  EXPECT_EQ(image_parameters, 19);
  const Tensor sample = model->forward(io::load_safetensors(dir + "/inputs.safetensors")).at("sample");
  // f32 rounding only, as for the other tiny Q8_0 files
  EXPECT_LT(relative_error(sample, io::load_safetensors(kData + "gguf/wan_flf2v_tiny_q8_0_expected.safetensors")
                                       .at("sample")),
            1e-5);
}

// Wan's width does not tell its head split; the built-in 128 per head leaves 24 wide wan_tiny no
// heads. inspect says so, and still lists the file; the same file with its config.json beside it
// shows that config.
TEST(GgufInspect, ConfigTheTensorsCannotSizeIsSaidAndAConfigBesideIsShown) {
  const Family wan{"wan", "WanTransformer3DModel", "", 2, 12};
  auto listed = run_cli("inspect " + gguf(wan, "tiny_q8_0"));
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("config: not told (Wan config: num_attention_heads must be positive"), std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("blocks.0.ffn.0.weight"), std::string::npos) << listed.out;

  cpdit::testing::TempDir dir("gguf_inspect");
  std::filesystem::copy_file(gguf(wan, "tiny_q8_0"), dir.file("wan.gguf"));
  std::filesystem::copy_file(tiny_dir(wan) + "/config.json", dir.file("config.json"));
  listed = run_cli("inspect " + dir.file("wan.gguf"));
  ASSERT_EQ(listed.code, 0) << listed.err;
  EXPECT_NE(listed.out.find("config (from " + dir.file("config.json") + "): {"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("\"attention_head_dim\":12,"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("\"eps\":1e-06,"), std::string::npos) << listed.out;  // a float as written
}

// generate with a GGUF as --model, as with any single transformer file: the class and the pipeline it
// runs come from the tensor names, the config from --config (else config.json beside the file, else
// the built-in one sized by the tensors), the scheduler from --scheduler-config (else the family's
// released default), the text from --embeddings (encode-prompt on the pipeline folder) or seeded
// random embeddings; a single file has no VAE, so it writes the latents (decode on the pipeline folder).
struct GenerateCase {
  std::string family;    // the fixtures' file prefix: gguf/FAMILY_tiny_q8_0.gguf, FAMILY_tiny/config.json
  std::string size;      // the flags of a small generation
  std::string parallel;  // one context-parallel layout
};

std::ostream& operator<<(std::ostream& out, const GenerateCase& c) { return out << c.family; }

class GgufGenerate : public ::testing::TestWithParam<GenerateCase> {};

// The latents of a GGUF's generate equal those of the same weights decoded to f32 and saved as a
// diffusers transformer folder (config.json and diffusion_pytorch_model.safetensors), on one rank and
// on two: the Linear layers multiply the same values, the blocks decoded one tile at a time.
TEST_P(GgufGenerate, LatentsEqualTheDecodedWeightsInADiffusersFolder) {
  const GenerateCase& c = GetParam();
  cpdit::testing::TempDir dir("gguf_generate");
  const std::string file = kData + "gguf/" + c.family + "_tiny_q8_0.gguf";
  const std::string config = kData + c.family + "_tiny/config.json";
  auto decoded = open_model(file, config, nn::load_options("f32")).replica();
  nn::TensorMap dense;
  for (const auto& [name, w] : nn::parameters_of(*decoded)) dense[name] = w.values();
  std::filesystem::create_directories(dir.path() / "dense");
  io::save_safetensors(dir.file("dense/diffusion_pytorch_model.safetensors"), dense);
  std::filesystem::copy_file(config, dir.file("dense/config.json"));

  auto latents = [&](const std::string& model, const std::string& flags, const std::string& name) {
    auto r = run_cli("generate --model " + model + " " + c.size +
                     " --steps 2 --text-tokens 4 --threads 1 --random-embeddings --json --out " + dir.file(name) + flags);
    EXPECT_EQ(r.code, 0) << model << flags << "\n" << r.err;
    return io::load_safetensors(dir.file(name)).at("latents");
  };
  const Tensor want = latents(dir.file("dense"), "", "dense.safetensors");
  const std::string gguf_model = file + " --config " + config;
  // Latents of unit scale after 2 steps of f32 arithmetic on the same values: 1e-5 is f32 rounding
  // (summation order).
  EXPECT_LT(relative_error(latents(gguf_model, "", "one.safetensors"), want), 1e-5);
  EXPECT_LT(relative_error(latents(gguf_model, " " + c.parallel, "split.safetensors"), want), 1e-5) << c.parallel;
}

INSTANTIATE_TEST_SUITE_P(Families, GgufGenerate,
                         ::testing::Values(GenerateCase{"flux", "--height 64 --width 64", "--ring 2"},
                                           GenerateCase{"wan", "--frames 5 --height 32 --width 32", "--ulysses 2"},
                                           GenerateCase{"qwenimage", "--height 64 --width 64", "--ring 2"},
                                           GenerateCase{"ltx", "--frames 9 --height 64 --width 64", "--ulysses 2"}),
                         [](const ::testing::TestParamInfo<GenerateCase>& info) { return info.param.family; });

}  // namespace
}  // namespace cpdit::models
