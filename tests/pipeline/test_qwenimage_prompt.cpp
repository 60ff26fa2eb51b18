// QwenImagePipeline from a prompt against diffusers (tests/data/fixtures/qwenimage_prompt_tiny): the
// template's token ids, encode_prompt (the 34 dropped tokens, max_sequence_length, the mask only where a row
// is padded), and whole runs from the prompt with true CFG 4.0 on given latents, on one rank and every
// split, CFG-parallel included, and a batch of two.
#include "support/expect_cli_refused.hpp"
#include "support/model_fixture.hpp"
#include "support/relative_error.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/latents.hpp>
#include <cpdit/pipeline/pipeline.hpp>
#include <cpdit/pipeline/qwenimage_pipeline.hpp>
#include <cpdit/tokenizers/tokenizer.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <fstream>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::fixture_dir;
using cpdit::testing::relative_to_range;

const std::string kPipeline = fixture_dir("qwenimage_prompt_tiny") + "/pipeline";

// transformers and diffusers in float32 against these kernels: summation order only (2 encoder layers,
// observed ~1e-7 of the range); 1e-5 of the range is the bound and the text-encoder tests'.
constexpr double kEmbedsTolerance = 1e-5;
// As the pipeline parity tests: 3 steps of a 2-block model, observed ~1e-5; 1e-4 under every split.
constexpr double kLatentsTolerance = 1e-4;
constexpr double kPixelsTolerance = 2e-4;

const nn::TensorMap& expected() {
  static const nn::TensorMap e = io::load_safetensors(fixture_dir("qwenimage_prompt_tiny") + "/expected.safetensors");
  return e;
}

const nlohmann::json& call() {
  static const nlohmann::json c = [] {
    std::ifstream in(fixture_dir("qwenimage_prompt_tiny") + "/call.json");
    return nlohmann::json::parse(in);
  }();
  return c;
}

std::string prompt_of(int i) { return call().at("encode_inputs").at(size_t(i)).get<std::string>(); }

TEST(QwenImagePrompt, TemplateTokensAreTransformers) {
  const TextComponents c = TextComponents::from_folder(kPipeline);
  const std::string tmpl = kQwenImagePromptTemplate;
  for (int i = 0; i < 6; ++i) {
    const std::string n = "enc" + std::to_string(i);
    const std::string text = tmpl.substr(0, tmpl.find("{}")) + prompt_of(i) + tmpl.substr(tmpl.find("{}") + 2);
    const tokenizers::TokenBatch got = tokenizers::tokenize(*c.tokenizer("tokenizer"), {text}, 1058,
                                                            tokenizers::Padding::longest);
    EXPECT_EQ(max_abs_diff(got.input_ids.to(DType::f32), expected().at(n + ".input_ids").to(DType::f32)), 0.0) << n;
    EXPECT_EQ(got.input_ids.shape(), expected().at(n + ".input_ids").shape()) << n;
  }
}

TEST(QwenImagePrompt, EncodePromptIsDiffusersAtEachMaxSequenceLength) {
  const TextComponents c = TextComponents::from_folder(kPipeline);
  for (int i = 0; i < 6; ++i)
    for (int64_t msl : {5, 512}) {
      const std::string key = "enc" + std::to_string(i) + ".msl" + std::to_string(msl) + ".prompt_embeds";
      const QwenPromptEmbeds got = encode_qwenimage_prompts(c, {prompt_of(i)}, msl);
      ASSERT_EQ(got.embeds.shape(), expected().at(key).shape()) << key;
      EXPECT_LT(relative_to_range(got.embeds, expected().at(key)), kEmbedsTolerance) << key;
      EXPECT_FALSE(got.mask.defined()) << key << ": one prompt, every token real: no mask, as diffusers' None";
    }
}

// Three prompts of 41, 28 and 25 kept tokens: each row zero-padded to 41, the mask 0 there.
TEST(QwenImagePrompt, ABatchPadsItsRowsAndReturnsTheMask) {
  const QwenPromptEmbeds got =
      encode_qwenimage_prompts(TextComponents::from_folder(kPipeline), {prompt_of(0), prompt_of(1), " "}, 512);
  ASSERT_EQ(got.embeds.shape(), expected().at("encbatch.prompt_embeds").shape());
  EXPECT_LT(relative_to_range(got.embeds, expected().at("encbatch.prompt_embeds")), kEmbedsTolerance);
  ASSERT_TRUE(got.mask.defined());
  EXPECT_EQ(max_abs_diff(got.mask.to(DType::f32), expected().at("encbatch.prompt_embeds_mask").to(DType::f32)), 0.0);
}

TEST(QwenImagePrompt, MoreThan1024TokensAreRefused) {
  try {
    encode_qwenimage_prompts(TextComponents::from_folder(kPipeline), {"a"}, 1025);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max sequence length is at most 1024, got 1025"), std::string::npos)
        << e.what();
  }
}

const Pipeline& pipe() {
  static const Pipeline p = Pipeline::open({.model = kPipeline}, LoadPolicy::resident);
  return p;
}

// The run's call (call.json) from its prompt: diffusers' kwargs, the given latents.
Request run_request(const std::string& run, int ranks = 1) {
  const nlohmann::json* kw = nullptr;
  for (const nlohmann::json& c : call().at("calls"))
    if (c.value("key", "") == run) kw = &c.at("kwargs");
  EXPECT_NE(kw, nullptr) << "no call " << run << " in call.json";
  Request r;
  r.prompt = kw->at("prompt").get<std::string>();
  r.negative_prompt = kw->at("negative_prompt").get<std::string>();
  r.true_cfg_scale = kw->at("true_cfg_scale").get<float>();
  r.steps = kw->at("num_inference_steps").get<int>();
  r.height = kw->at("height").get<int64_t>();
  r.width = kw->at("width").get<int64_t>();
  r.text_tokens = kw->at("max_sequence_length").get<int64_t>();
  r.initial_latents = expected().at(run + ".latents_in");
  r.parallel.ranks = ranks;
  r.parallel.threads = 1;
  return r;
}

// The run's final latents packed as the fixture holds them: (B, 16, 1, h, w) -> (B, h/2 * w/2, 64).
Tensor packed(const Tensor& latents) {
  return flux_pack(latents.reshape({latents.size(0), latents.size(1), latents.size(3), latents.size(4)}));
}

TEST(QwenImagePrompt, RunsFromThePromptAreDiffusers) {
  for (const std::string run : {"run0", "run1", "run2"}) {
    SCOPED_TRACE(run);
    Request r = run_request(run);
    r.decode = Decode::yes;
    StageLog log;
    const Result got = pipe().run(r, log);
    EXPECT_LT(max_abs_diff(packed(got.latents), expected().at(run + ".final_latents")), kLatentsTolerance);
    ASSERT_TRUE(got.pixels.defined());
    EXPECT_LT(max_abs_diff(got.pixels.reshape(expected().at(run + ".image").shape()), expected().at(run + ".image")),
              kPixelsTolerance);
  }
}

TEST(QwenImagePrompt, EverySplitIsDiffusersAndOneRank) {
  struct Split {
    const char* name;
    int ranks, ring, ulysses, cfg;
  };
  StageLog log;
  const Tensor one = pipe().run(run_request("run0"), log).latents;
  for (const Split& s : {Split{"ring 2", 2, 2, 1, 1}, Split{"ulysses 2", 2, 1, 2, 1},
                         Split{"ring 2 x ulysses 2", 4, 2, 2, 1}, Split{"cfg 2", 2, 1, 1, 2}}) {
    SCOPED_TRACE(s.name);
    Request r = run_request("run0", s.ranks);
    r.parallel.ring = s.ring;
    r.parallel.ulysses = s.ulysses;
    r.parallel.cfg = s.cfg;
    const Tensor got = pipe().run(r, log).latents;
    EXPECT_LT(max_abs_diff(packed(got), expected().at("run0.final_latents")), kLatentsTolerance);
    EXPECT_LT(max_abs_diff(got, one), kLatentsTolerance);
  }
}

// batch2: two prompts and two negatives of different lengths, encoded as one batch each, so the
// transformer reads padded masks.
TEST(QwenImagePrompt, ABatchOfTwoIsDiffusers) {
  const TextComponents c = TextComponents::from_folder(kPipeline);
  const QwenPromptEmbeds prompts = encode_qwenimage_prompts(c, {prompt_of(0), prompt_of(2)}, 512);
  const QwenPromptEmbeds negatives = encode_qwenimage_prompts(c, {" ", "ugly"}, 512);
  ASSERT_TRUE(prompts.mask.defined());
  Request r = run_request("run0");
  r.prompt.reset();
  r.negative_prompt.reset();
  r.embeddings = {{"prompt_embeds", prompts.embeds}, {"prompt_embeds_mask", prompts.mask},
                  {"negative_prompt_embeds", negatives.embeds}};
  if (negatives.mask.defined()) r.embeddings["negative_prompt_embeds_mask"] = negatives.mask;
  r.initial_latents = expected().at("batch2.latents_in");
  StageLog log;
  EXPECT_LT(max_abs_diff(packed(pipe().run(r, log).latents), expected().at("batch2.final_latents")),
            kLatentsTolerance);
}

// The command line from a prompt: generate's --out latents and encode-prompt's file.
TEST(QwenImagePrompt, TheCommandLineRunsFromThePrompt) {
  cpdit::testing::TempDir dir("qwen_prompt_cli");
  const std::string latents = dir.file("latents.safetensors"), out = dir.file("out.safetensors");
  io::save_safetensors(latents, {{"latents", expected().at("run0.latents_in")}});
  const auto r = cpdit::testing::run_cli("generate --model " + kPipeline +
                                         " --prompt 'A red fox sitting in the snow, watercolor' --steps 3 --height 48"
                                         " --width 64 --latents " + latents + " --ring 2 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(max_abs_diff(packed(io::load_safetensors(out).at("latents")), expected().at("run0.final_latents")),
            kLatentsTolerance) << "the default negative prompt \" \" and true CFG 4.0, as run0 gives them";
  const std::string embeds = dir.file("embeds.safetensors");
  const auto e = cpdit::testing::run_cli("encode-prompt --model " + kPipeline + " --prompt '" + prompt_of(4) +
                                         "' --max-sequence-length 5 --out " + embeds);
  ASSERT_EQ(e.code, 0) << e.err;
  const nn::TensorMap got = io::load_safetensors(embeds);
  EXPECT_LT(relative_to_range(got.at("prompt_embeds"), expected().at("enc4.msl5.prompt_embeds")), kEmbedsTolerance);
  EXPECT_LT(relative_to_range(got.at("negative_prompt_embeds"), expected().at("enc3.msl5.prompt_embeds")),
            kEmbedsTolerance) << "the default negative prompt is \" \"";
}

}  // namespace
}  // namespace cpdit::pipeline
