// LoRA adapters against diffusers' load_lora_weights (tests/data/fixtures/lora_flux_tiny, lora_wan_tiny:
// two adapters on a tiny random FluxPipeline and WanPipeline, each in the four layouts users download,
// the fixture's README proving the layouts hold the same adapter): one adapter at scale 1 in every
// layout, at weight 0.7, two stacked, fuse_lora's merged run, the decoded picture; the same adapter
// on every split; a resident pipeline switching adapters between runs; and the files that must be
// refused, each in one line naming what is wrong.
#include "pipeline/cache_case.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/nn/lora.hpp>
#include <cpdit/pipeline/presets.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

namespace cpdit::pipeline {
namespace {

using cpdit::testing::expect_cli_refused;
using cpdit::testing::fixture_dir;
using cpdit::testing::fixture_file;
using cpdit::testing::in_fixture_layout;
using cpdit::testing::read_json_file;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

// diffusers' float32 run against ours: the same products in another summation order, which moves
// these tiny models' final latents (of magnitude ~3 to 5, after 3 steps) by at most 1e-5 (measured:
// FLUX.1 3.7e-6, Wan 9.7e-6); diffusers' fuse_lora adds the delta into W before the product, a
// rounding apart from adding x·Aᵀ·Bᵀ after it.
constexpr double kLatentsTolerance = 2e-5;
// Splits against one rank: the attention's summation order only.
constexpr double kSplitTolerance = 1e-5;

struct LoraFixture {
  std::string name;
  Pipeline pipe;
  nn::TensorMap inputs, expected;
  nlohmann::json call;
  std::vector<std::string> layouts;  // the files of each adapter folder, the PEFT truth first

  LoraFixture(const std::string& fixture, std::vector<std::string> files)
      : name(fixture),
        pipe(Pipeline::open({.model = fixture_dir(fixture) + "/pipeline"}, LoadPolicy::resident)),
        inputs(fixture_file(fixture, "inputs")),
        expected(fixture_file(fixture, "expected")),
        call(read_json_file(fixture_dir(fixture) + "/call.json")),
        layouts(std::move(files)) {}

  std::string lora(const std::string& adapter, const std::string& file = "pytorch_lora_weights.safetensors") const {
    return fixture_dir(name) + "/" + adapter + "/" + file;
  }

  Request request(std::vector<LoraChoice> loras, int ranks = 1) const {
    Request r = cpdit::testing::fixture_call(inputs, call, ranks);
    r.loras = std::move(loras);
    return r;
  }

  Result run(const Request& r) const {
    StageLog log;
    return pipe.run(r, log);
  }

  double error(const Result& got, const std::string& key) const {
    const Tensor& want = expected.at(key);
    return max_abs_diff(in_fixture_layout(got.latents, want), want);
  }
};

const LoraFixture& flux() {
  static const LoraFixture f("lora_flux_tiny", {"pytorch_lora_weights.safetensors", "kohya_sd_scripts.safetensors",
                                                "comfyui_diffusion_model_lora_down.safetensors",
                                                "bfl_diffusion_model_lora_A.safetensors"});
  return f;
}
const LoraFixture& wan() {
  static const LoraFixture f("lora_wan_tiny", {"pytorch_lora_weights.safetensors", "wan_diffusion_model_lora_A.safetensors",
                                               "wan_diffusion_model_lora_down.safetensors",
                                               "musubi_tuner_lora_unet.safetensors"});
  return f;
}

// Uniform values in [-0.5, 0.5) from `seed`.
Tensor seeded(const Shape& shape, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = uniform(generator);
  return t;
}

// A LoRA file written for a test: `tensors` in a temporary folder.
std::string lora_file(const TempDir& dir, const std::string& name, const std::map<std::string, Tensor>& tensors) {
  const std::string path = dir.file(name);
  io::save_safetensors(path, tensors);
  return path;
}

class LoraFixtures : public ::testing::TestWithParam<const LoraFixture& (*)()> {};

TEST_P(LoraFixtures, WithoutAdaptersTheBaseRuns) {
  const LoraFixture& f = GetParam()();
  EXPECT_LT(f.error(f.run(f.request({})), "base_latents"), kLatentsTolerance);
}

// Each layout's file of each adapter gives diffusers' run of the PEFT file: the names of the model, of
// its release (FLUX.1's fused qkv and linear1 cut into their parts) and kohya's underscores all land on
// the same layers with the same scales.
TEST_P(LoraFixtures, EveryLayoutOfAnAdapterGivesDiffusersLatents) {
  const LoraFixture& f = GetParam()();
  for (const std::string adapter : {"lora1", "lora2"})
    for (const std::string& file : f.layouts) {
      SCOPED_TRACE(adapter + "/" + file);
      const Result got = f.run(f.request({{f.lora(adapter, file), 1.0}}));
      EXPECT_LT(f.error(got, adapter + "_scale1.0_latents"), kLatentsTolerance);
      // The adapter changed the run by far more than the tolerance (the README's max |case - base|).
      EXPECT_GT(f.error(got, "base_latents"), 0.1);
    }
}

TEST_P(LoraFixtures, WeightsScaleAndStackedAdaptersAddUp) {
  const LoraFixture& f = GetParam()();
  EXPECT_LT(f.error(f.run(f.request({{f.lora("lora1"), 0.7}})), "lora1_weight0.7_latents"), kLatentsTolerance);
  EXPECT_LT(f.error(f.run(f.request({{f.lora("lora1"), 0.8}, {f.lora("lora2"), 0.5}})), "lora1x0.8_lora2x0.5_latents"),
            kLatentsTolerance);
  // fuse_lora(lora_scale=0.6): W + 0.6·ΔW merged into the weights (--lora-merge), and the same function
  // as the unmerged delta at weight 0.6.
  for (const bool merge : {true, false})
    EXPECT_LT(f.error(f.run(f.request({{f.lora("lora1", f.layouts.back()), 0.6, merge}})), "lora1_fused0.6_latents"),
              kLatentsTolerance)
        << (merge ? "merged" : "beside");
  // A merged adapter and one beside the weights in one run.
  EXPECT_LT(f.error(f.run(f.request({{f.lora("lora1"), 0.8, true}, {f.lora("lora2"), 0.5}})), "lora1x0.8_lora2x0.5_latents"),
            kLatentsTolerance);
}

// XLabs' layout (processor.qkv_lora1 ..., no alpha), which the fixture above does not hold: lora1 in its
// names through diffusers' own XLabs conversion (tests/data/fixtures/lora_xlabs).
TEST(LoraXlabs, XlabsNamesGiveDiffusersLatents) {
  const LoraFixture& f = flux();
  const Result got = f.run(f.request({{fixture_dir("lora_xlabs") + "/xlabs_lora.safetensors", 1.0}}));
  const Tensor want = fixture_file("lora_xlabs", "expected").at("xlabs_latents");
  EXPECT_LT(max_abs_diff(in_fixture_layout(got.latents, want), want), kLatentsTolerance);
  EXPECT_GT(max_abs_diff(in_fixture_layout(got.latents, want), f.expected.at("base_latents")), 0.1);
}

// Qwen-Image, LTX-Video and SkyReels-V2 adapters name diffusers' modules (their ComfyUI files the same
// behind diffusion_model.): a random adapter on three layers of the first block of each — through the
// Qwen-Image pipeline fixture and the ltx-tiny and skyreels-tiny presets — changes the run, and merged
// into the weights gives the run beside them (one summation order apart).
TEST(LoraFamilies, QwenImageLtxAndSkyReelsTakeDiffusersNames) {
  TempDir dir("lora_families");
  struct Case {
    std::string name;
    PipelineSource source;
    std::string block;  // the first block's path
  };
  const std::string qwen = fixture_dir("qwenimage_pipeline_tiny");
  for (const Case& c : {Case{"qwen", {.model = qwen + "/pipeline"}, "transformer_blocks.0."},
                        Case{"ltx", {.preset = "ltx-tiny"}, "transformer_blocks.0."},
                        Case{"skyreels", {.preset = "skyreels-tiny"}, "blocks.0."}}) {
    SCOPED_TRACE(c.name);
    const Pipeline pipe = Pipeline::open(c.source, LoadPolicy::resident);
    const models::LoadedModel model = c.source.preset.empty() ? models::open_model(qwen + "/pipeline", std::nullopt, {})
                                                              : preset_model(c.source.preset, 0, {});
    // Three Linear layers of the first block, in the layout of a ComfyUI file of diffusers' names.
    std::map<std::string, Tensor> tensors;
    uint32_t seed = 1;
    const std::unique_ptr<nn::Model> replica = model.replica();
    for (const auto& [path, module] : replica->named_modules()) {
      const auto* linear = dynamic_cast<const nn::Linear*>(module);
      if (linear == nullptr || path.rfind(c.block, 0) != 0 || tensors.size() == 6) continue;
      tensors["diffusion_model." + path + ".lora_down.weight"] = seeded({4, linear->in_features()}, seed++);
      tensors["diffusion_model." + path + ".lora_up.weight"] = seeded({linear->out_features(), 4}, seed++);
    }
    ASSERT_EQ(tensors.size(), 6u);
    const std::string lora = lora_file(dir, c.name + ".safetensors", tensors);
    Request r;
    if (c.name == "qwen") {
      r.embeddings = fixture_file("qwenimage_pipeline_tiny", "inputs");
      r.initial_latents = r.embeddings.at("latents");
      r.height = r.width = 32;
    }
    r.steps = 2;
    r.parallel.threads = 1;
    StageLog log;
    const Tensor base = pipe.run(r, log).latents;
    r.loras = {{lora, 1.0}};
    const Tensor beside = pipe.run(r, log).latents;
    r.loras = {{lora, 1.0, true}};
    const Tensor merged = pipe.run(r, log).latents;
    EXPECT_GT(max_abs_diff(beside, base), 1e-3);
    EXPECT_LT(max_abs_diff(merged, beside), 1e-5);
  }
}

// Wan 2.2's two experts: --lora adapts transformer/ (the high-noise expert), --lora-2 transformer_2/ (diffusers'
// load_into_transformer_2): each changes the run, the two differently; at weight 0 the low-noise one is the
// base bitwise; a model with one transformer refuses an adapter for a second.
TEST(LoraExperts, EachExpertTakesItsOwnAdapters) {
  TempDir dir("lora_experts");
  const std::string folder = fixture_dir("wan22_experts") + "/t2v/pipeline";
  const Pipeline pipe = Pipeline::open({.model = folder}, LoadPolicy::resident);
  const std::unique_ptr<nn::Model> replica = models::open_model(folder, std::nullopt, {}).replica();
  std::map<std::string, Tensor> tensors;
  uint32_t seed = 1;
  for (const std::string path : {"blocks.0.attn1.to_q", "blocks.0.attn2.to_v", "blocks.0.ffn.net.2"}) {
    const auto* linear = dynamic_cast<const nn::Linear*>(replica->find(path));
    ASSERT_NE(linear, nullptr) << path;
    tensors["transformer." + path + ".lora_A.weight"] = seeded({4, linear->in_features()}, seed++);
    tensors["transformer." + path + ".lora_B.weight"] = seeded({linear->out_features(), 4}, seed++);
  }
  const std::string lora = lora_file(dir, "experts.safetensors", tensors);
  Request r;
  r.embeddings = fixture_file("wan22_experts", "inputs");
  r.frames = 9, r.height = 48, r.width = 32, r.steps = 4;
  r.parallel.threads = 1;
  StageLog log;
  auto run = [&](std::vector<LoraChoice> loras) {
    r.loras = std::move(loras);
    return pipe.run(r, log).latents;
  };
  const Tensor base = run({});
  const Tensor high = run({{lora, 1.0, false, false}});
  const Tensor low = run({{lora, 1.0, false, true}});
  EXPECT_GT(max_abs_diff(high, base), 1e-3);
  EXPECT_GT(max_abs_diff(low, base), 1e-3);
  EXPECT_GT(max_abs_diff(high, low), 1e-3);
  EXPECT_EQ(max_abs_diff(run({{lora, 0.0, false, true}}), base), 0.0);
  try {
    flux().run(flux().request({{flux().lora("lora1"), 1.0, false, true}}));
    ADD_FAILURE() << "an adapter for a second transformer was taken by FLUX.1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no low-noise expert (transformer_2/) to take it"), std::string::npos)
        << e.what();
  }
}

// One pipeline, adapters switched between its runs: nothing of an adapter stays after it, and an
// adapter run again gives bitwise its first run.
TEST_P(LoraFixtures, AResidentPipelineSwitchesAdapters) {
  const LoraFixture& f = GetParam()();
  const Result first = f.run(f.request({{f.lora("lora1"), 1.0}}));
  const Result base = f.run(f.request({}));
  const Result other = f.run(f.request({{f.lora("lora2"), 1.0}}));
  const Result again = f.run(f.request({{f.lora("lora1"), 1.0}}));
  EXPECT_LT(f.error(base, "base_latents"), kLatentsTolerance);
  EXPECT_LT(f.error(other, "lora2_scale1.0_latents"), kLatentsTolerance);
  EXPECT_EQ(max_abs_diff(first.latents, again.latents), 0.0);
}

INSTANTIATE_TEST_SUITE_P(FluxAndWan, LoraFixtures, ::testing::Values(&flux, &wan),
                         [](const auto& info) { return info.index == 0 ? std::string("Flux") : std::string("Wan"); });

// A Q8_0 base (the transformer's Linear weights quantised on load) takes an adapter beside its blocks:
// the adapted run is off the dense adapted run by no more than the quantisation moves the base alone.
// Merging into the quantised blocks is refused (it would requantise them), naming the layer.
TEST(LoraQuantisedBase, AnAdapterOnQ8_0IsWithinTheBasesOwnQuantisationError) {
  const LoraFixture& f = flux();
  const Pipeline q8 = Pipeline::open({.model = fixture_dir(f.name) + "/pipeline", .dtype = "q8_0"}, LoadPolicy::resident);
  StageLog log;
  const std::vector<LoraChoice> lora{{f.lora("lora1"), 1.0}};
  const double base_error = max_abs_diff(q8.run(f.request({}), log).latents, f.run(f.request({})).latents);
  const double lora_error = max_abs_diff(q8.run(f.request(lora), log).latents, f.run(f.request(lora)).latents);
  std::printf("Q8_0 base: %.3g off the dense base; with lora1, %.3g off the dense run with it\n", base_error, lora_error);
  EXPECT_GT(base_error, 0.0);  // the base really is quantised
  // The adapter's own product is exact in both; what differs is the base's rounding, carried through an
  // adapted network about as sensitive to it (observed: 0.037 with the adapter, 0.044 without; 2x leaves
  // room for the rounding landing elsewhere, and stays far below the adapter's own effect of ~2).
  EXPECT_LT(lora_error, 2 * base_error);
  try {
    q8.run(f.request({{f.lora("lora1"), 1.0, true}}), log);
    ADD_FAILURE() << "an adapter was merged into Q8_0 blocks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("merging needs dense weights, but "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(" is Q8_0: apply the adapter unmerged"), std::string::npos) << e.what();
  }
}

// A Q8_0 GGUF transformer (tests/data/fixtures/lora_gguf_base) with lora1 beside its blocks: diffusers' run
// of the same adapter on the GGUF's dequantised weights, within the float32 tolerance (the blocks are
// decoded exactly); its distance from the dense run with the adapter is the quantisation error diffusers
// itself shows (0.040, against 0.031 for the base alone: run_log.json).
TEST(LoraQuantisedBase, AGgufQ8_0BaseWithAnAdapterIsDiffusersOnItsDequantisedWeights) {
  const LoraFixture& f = flux();
  const Pipeline gguf = Pipeline::open({.model = fixture_dir(f.name) + "/pipeline",
                                        .transformer = fixture_dir("lora_gguf_base") + "/transformer-Q8_0.gguf"},
                                       LoadPolicy::resident);
  const nn::TensorMap want = fixture_file("lora_gguf_base", "expected");
  StageLog log;
  const Tensor base = gguf.run(f.request({}), log).latents, lora = gguf.run(f.request({{f.lora("lora1"), 1.0}}), log).latents;
  EXPECT_LT(max_abs_diff(in_fixture_layout(base, want.at("base_latents")), want.at("base_latents")), kLatentsTolerance);
  EXPECT_LT(max_abs_diff(in_fixture_layout(lora, want.at("lora1_latents")), want.at("lora1_latents")), kLatentsTolerance);
  const double base_error = f.error({.latents = base}, "base_latents");
  const double lora_error = f.error({.latents = lora}, "lora1_scale1.0_latents");
  std::printf("Q8_0 GGUF base: %.4f off the dense base; with lora1, %.4f off the dense run with it\n", base_error,
              lora_error);
  EXPECT_NEAR(base_error, 0.0313, 1e-3);  // diffusers' own figures for the same weights (run_log.json)
  EXPECT_NEAR(lora_error, 0.0403, 1e-3);
}

// The adapter on every rank of every split (each rank's replica of the layers carries the same deltas,
// the modulations computed whole where an adapter touches them): the one-rank latents.
TEST(LoraSplits, EverySplitGivesTheOneRankLatents) {
  struct Split {
    const char* name;
    int ranks, ring, ulysses, cfg;
  };
  for (const LoraFixture* f : {&flux(), &wan()}) {
    const std::vector<LoraChoice> loras{{f->lora("lora1", f->layouts[1]), 0.8}, {f->lora("lora2"), 0.5}};
    const Result one = f->run(f->request(loras));
    EXPECT_LT(f->error(one, "lora1x0.8_lora2x0.5_latents"), kLatentsTolerance) << f->name;
    std::vector<Split> splits{{"ring 2", 2, 2, 1, 1}, {"ulysses 2", 2, 1, 2, 1}, {"ring 2 x ulysses 2", 4, 2, 2, 1}};
    if (f == &wan()) splits.push_back({"cfg 2", 2, 1, 1, 2});
    for (const Split& s : splits) {
      SCOPED_TRACE(f->name + " on " + s.name);
      Request r = f->request(loras, s.ranks);
      r.parallel.ring = s.ring;
      r.parallel.ulysses = s.ulysses;
      r.parallel.cfg = s.cfg;
      EXPECT_LT(max_abs_diff(f->run(r).latents, one.latents), kSplitTolerance);
    }
  }
}

// The decoded picture of the adapter's run: diffusers' output_type='np'.
TEST(LoraPicture, TheDecodedPictureIsDiffusers) {
  const LoraFixture& f = flux();
  Request r = f.request({{f.lora("lora1"), 1.0}});
  r.decode = Decode::yes;
  const Result got = f.run(r);
  const Tensor& want = f.expected.at("lora1_scale1.0_image");
  ASSERT_TRUE(got.pixels.defined());
  // The VAE's own parity bound over latents already 2e-5 apart (fixture VAE tests hold 1e-5 alone).
  EXPECT_LT(max_abs_diff(got.pixels.reshape(want.shape()), want), 1e-4);
}

void expect_refused(const LoraFixture& f, const std::string& path, const std::string& words) {
  try {
    f.run(f.request({{path, 1.0}}));
    ADD_FAILURE() << path << " was applied";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(LoraRefused, AnotherFamilysAdapterNamesWhatMatchedNothing) {
  // Wan's adapter on FLUX.1: none of its modules is a layer of the FLUX.1 model.
  expect_refused(flux(), wan().lora("lora1"), "name no layer of");
  expect_refused(flux(), wan().lora("lora1", "musubi_tuner_lora_unet.safetensors"), "(e.g. 'lora_unet_blocks_0_");
}

TEST(LoraRefused, BrokenFilesAreOneLine) {
  TempDir dir("lora_refused");
  const LoraFixture& f = flux();
  const std::string layer = "transformer.transformer_blocks.0.attn.to_q";
  const Tensor down = Tensor::full({4, 32}, 0.1), up = Tensor::full({32, 4}, 0.1);
  // A rank mismatch between A and B.
  expect_refused(f, lora_file(dir, "rank.safetensors", {{layer + ".lora_A.weight", down},
                                                        {layer + ".lora_B.weight", Tensor::full({32, 8}, 0.1)}}),
                 "has rank 4 but");
  // NaN in a matrix.
  Tensor nan = down.clone();
  nan.data<float>()[5] = std::nanf("");
  expect_refused(f, lora_file(dir, "nan.safetensors", {{layer + ".lora_A.weight", nan}, {layer + ".lora_B.weight", up}}),
                 "holds NaN or Inf");
  // A down without its up.
  expect_refused(f, lora_file(dir, "half.safetensors", {{layer + ".lora_A.weight", down}}), "has a down matrix but no up");
  // A LoRA of another size: the layer takes 32 features, this one 64.
  expect_refused(f, lora_file(dir, "size.safetensors", {{layer + ".lora_A.weight", Tensor::full({4, 64}, 0.1)},
                                                        {layer + ".lora_B.weight", up}}),
                 "(a LoRA for another model or size?)");
  // A text encoder's module (kohya's lora_te1_): said so, not left unmatched.
  expect_refused(f, lora_file(dir, "te.safetensors", {{"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_down.weight", down},
                                                      {"lora_te1_text_model_encoder_layers_0_mlp_fc1.lora_up.weight", up}}),
                 "adapts a text encoder, which cpdit does not");
  // LoCon's mid tensor: not plain LoRA.
  expect_refused(f, lora_file(dir, "locon.safetensors", {{layer + ".lora_A.weight", down}, {layer + ".lora_B.weight", up},
                                                         {layer + ".lora_mid.weight", down}}),
                 "is not a LoRA down, up or alpha tensor");
  // A truncated file.
  const std::string whole = f.lora("lora1");
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = dir.file("truncated.safetensors");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_refused(f, cut, "truncated.safetensors");
}

// The command line: --lora FILE:WEIGHT gives diffusers' weighted run and names the adapter in the
// summary; a file for another family exits 2 in one line and writes nothing.
TEST(LoraCli, GenerateTakesLoraWithAWeight) {
  TempDir dir("lora_cli");
  const LoraFixture& f = flux();
  const std::string inputs = fixture_dir(f.name) + "/inputs.safetensors";
  const std::string args = "generate --model " + fixture_dir(f.name) + "/pipeline --embeddings " + inputs +
                           " --latents " + inputs + " --threads 1 --steps 3 --height 16 --width 24";
  const std::string out = dir.file("out.safetensors");
  const auto r = run_cli(args + " --lora " + f.lora("lora1", "kohya_sd_scripts.safetensors") + ":0.7 --out " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string merged = dir.file("merged.safetensors");
  const auto m = run_cli(args + " --lora " + f.lora("lora1") + ":0.6 --lora-merge --out " + merged);
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find(" at weight 0.6, merged\n"), std::string::npos) << m.out;
  const Tensor& fused = f.expected.at("lora1_fused0.6_latents");
  EXPECT_LT(max_abs_diff(in_fixture_layout(io::load_safetensors(merged).at("latents"), fused), fused), kLatentsTolerance);
  EXPECT_NE(r.out.find("lora         " + f.lora("lora1", "kohya_sd_scripts.safetensors") + " at weight 0.7\n"),
            std::string::npos)
      << r.out;
  const Tensor& want = f.expected.at("lora1_weight0.7_latents");
  EXPECT_LT(max_abs_diff(in_fixture_layout(io::load_safetensors(out).at("latents"), want), want), kLatentsTolerance);

  // The adapter's matrices are weights of the run, counted once in the summary's resident weights:
  // lora1's PEFT file holds each layer's A and B as the run applies them (its B's scaled copies).
  auto resident = [&](const std::string& extra, const std::string& name) {
    const auto j = run_cli(args + extra + " --json --out " + dir.file(name));
    EXPECT_EQ(j.code, 0) << j.err;
    return nlohmann::json::parse(j.out).at("weight_bytes_resident").get<int64_t>();
  };
  int64_t adapter_bytes = 0;
  for (const auto& [name, t] : io::load_safetensors(f.lora("lora1"))) adapter_bytes += int64_t(t.nbytes());
  EXPECT_EQ(resident(" --lora " + f.lora("lora1"), "with.safetensors") - resident("", "without.safetensors"),
            adapter_bytes);

  const std::string refused = dir.file("refused.safetensors");
  expect_cli_refused(args + " --lora " + wan().lora("lora1") + " --json --out " + refused, "name no layer of");
  EXPECT_FALSE(std::filesystem::exists(refused));
  expect_cli_refused(args + " --lora " + dir.file("none.safetensors") + ":0.5 --json --out " + refused, "no such file");
  expect_cli_refused(args + " --lora " + f.lora("lora1") + ":nan --out " + refused, "the weight must be a finite number");
  expect_cli_refused(args + " --lora-merge --out " + refused, "--lora-merge goes with --lora");
  // A broken file through the command line: exit 2, one line, nothing written.
  const std::string layer = "transformer.transformer_blocks.0.attn.to_q";
  Tensor nan = seeded({4, 32}, 1);
  nan.data<float>()[3] = std::nanf("");
  const std::string with_nan = lora_file(dir, "nan.safetensors",
                                         {{layer + ".lora_A.weight", nan}, {layer + ".lora_B.weight", seeded({32, 4}, 2)}});
  const std::string ranks = lora_file(dir, "ranks.safetensors", {{layer + ".lora_A.weight", seeded({4, 32}, 3)},
                                                                 {layer + ".lora_B.weight", seeded({32, 8}, 4)}});
  std::ifstream whole(f.lora("lora1"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(whole)), std::istreambuf_iterator<char>());
  const std::string truncated = dir.file("truncated.safetensors");
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  for (const auto& [file, words] : {std::pair{with_nan, "holds NaN or Inf"}, std::pair{ranks, "has rank 4 but"},
                                    std::pair{truncated, "truncated.safetensors"}})
    expect_cli_refused(args + " --lora " + file + " --json --out " + refused, words, refused);
}

// forward --lora: the transformer alone with the adapter beside its weights and merged into them (the
// same function), unlike the base; an adapter of another family refused in one line.
TEST(LoraCli, ForwardTakesLoraBesideOrMerged) {
  TempDir dir("lora_forward");
  const LoraFixture& f = flux();
  // FluxTransformer2DModel's inputs at the fixture's widths: 6 image tokens of 16 channels, 7 text tokens.
  std::map<std::string, Tensor> inputs{{"hidden_states", Tensor::full({1, 6, 16}, 0.3)},
                                       {"encoder_hidden_states", Tensor::full({1, 7, 24}, -0.2)},
                                       {"pooled_projections", Tensor::full({1, 20}, 0.1)},
                                       {"timestep", Tensor::full({1}, 0.5)},
                                       {"img_ids", Tensor::zeros({6, 3})},
                                       {"txt_ids", Tensor::zeros({7, 3})}};
  for (int64_t i = 0; i < 6; ++i) inputs["img_ids"].data<float>()[i * 3 + 2] = float(i);
  const std::string in = dir.file("inputs.safetensors");
  io::save_safetensors(in, inputs);
  const std::string model = fixture_dir(f.name) + "/pipeline/transformer";
  auto forward = [&](const std::string& extra, const std::string& name) {
    const std::string out = dir.file(name);
    const auto r = run_cli("forward --model " + model + " --inputs " + in + " --threads 1 --out " + out + extra);
    EXPECT_EQ(r.code, 0) << r.err;
    return io::load_safetensors(out).at("sample");
  };
  const Tensor base = forward("", "base.safetensors");
  const Tensor beside = forward(" --lora " + f.lora("lora1") + ":0.7", "beside.safetensors");
  const Tensor merged = forward(" --lora " + f.lora("lora1", "kohya_sd_scripts.safetensors") + ":0.7 --lora-merge --ulysses 2",
                                "merged.safetensors");
  EXPECT_GT(max_abs_diff(beside, base), 0.1);
  // The same function: one summation order apart, and Ulysses' split of the attention (f32, magnitude ~1).
  EXPECT_LT(max_abs_diff(merged, beside), 1e-5);
  expect_cli_refused("forward --model " + model + " --inputs " + in + " --out " + dir.file("x.safetensors") +
                         " --lora " + wan().lora("lora1"),
                     "name no layer of", dir.file("x.safetensors"));
}

// inspect on a LoRA file says its layout, modules, rank and scale as generate reads them.
TEST(LoraCli, InspectSaysTheLayoutRankAndScale) {
  const auto r = run_cli("inspect " + wan().lora("lora1", "musubi_tuner_lora_unet.safetensors"));
  ASSERT_EQ(r.code, 0) << r.err;
  // 2 blocks x (self- and cross-attention's q, k, v, o and the two FFN layers); rank 4, lora_alpha 8.
  EXPECT_NE(r.out.find("lora: kohya (lora_down, lora_up, alpha), 20 modules (e.g. lora_unet_blocks_0_"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(", rank 4, alpha/rank 2\n"), std::string::npos) << r.out;
  // Against a model: every module of the Wan adapter matches a layer of the Wan fixture, none of FLUX.1's.
  const auto on_wan = run_cli("inspect " + wan().lora("lora1", "musubi_tuner_lora_unet.safetensors") + " --model " +
                              fixture_dir("lora_wan_tiny") + "/pipeline");
  ASSERT_EQ(on_wan.code, 0) << on_wan.err;
  EXPECT_NE(on_wan.out.find("(WanTransformer3DModel): 20 of 20 modules match 20 layers (e.g. lora_unet_blocks_0_"),
            std::string::npos)
      << on_wan.out;
  const auto on_flux = run_cli("inspect " + wan().lora("lora1") + " --model " + fixture_dir("lora_flux_tiny") + "/pipeline");
  ASSERT_EQ(on_flux.code, 0) << on_flux.err;
  EXPECT_NE(on_flux.out.find("(FluxTransformer2DModel): 0 of 20 modules match 0 layers\n  names no layer: blocks.0."),
            std::string::npos)
      << on_flux.out;
  EXPECT_NE(on_flux.out.find("  ... and 17 more\n"), std::string::npos) << on_flux.out;
}

}  // namespace
}  // namespace cpdit::pipeline
