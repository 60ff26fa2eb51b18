// `cpdit generate` from the single files ComfyUI and stable-diffusion.cpp users hold, in one command:
// a transformer in FLUX.1's original layout, ae.safetensors in BFL names (single_file_tiny's), a ComfyUI
// CLIP-L, a plain FP8 T5 and two tokenizer folders (tests/data/fixtures/flux_single_files,
// tools/reference/flux_single_files.py: diffusers' FluxPipeline from the prompt on the weights those
// files hold).
#include "support/expect_cli_refused.hpp"
#include "support/pipeline_outputs.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/json.hpp>
#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures";
const fs::path kCase = kFixtures / "flux_single_files";

std::string file(const std::string& name) { return (kCase / name).string(); }
// The VAE: FLUX.1's ae.safetensors in BFL names, and its config (its 4 norm groups are not in its shapes).
const std::string kAe = (kFixtures / "single_file_tiny/ae.safetensors").string();
const std::string kAeConfig = (kFixtures / "single_file_tiny/flux_vae_diffusers/config.json").string();

// Every component as a file; `text` replaces the text encoder and tokenizer flags.
std::string single_file_args(const std::string& text = "") {
  const nlohmann::json call = io::read_json(file("call.json"));
  const std::string text_flags =
      !text.empty() ? text
                    : " --clip-l " + file("clip_l/clip_l.safetensors") + " --t5xxl " +
                          file("t5xxl_fp8_e4m3fn.safetensors") + " --tokenizer " +
                          (kFixtures / "tokenizer_clip_v2").string() + " --tokenizer " +
                          (kFixtures / "tokenizer_t5_v2").string();
  // The tiny transformer's RoPE axes are the one value its tensors do not tell (FLUX.1's are too wide).
  return "generate --transformer " + file("flux1-tiny.safetensors") + " --config " +
         file("transformer_config.json") + " --vae " + kAe + " --vae-config " + kAeConfig +
         text_flags + " --prompt '" + call.at("prompt").get<std::string>() +
         "' --height " + std::to_string(call.at("height").get<int>()) + " --width " +
         std::to_string(call.at("width").get<int>()) + " --steps " + std::to_string(call.at("steps").get<int>()) +
         " --guidance " + std::to_string(call.at("guidance").get<double>()) + " --text-tokens " +
         std::to_string(call.at("max_sequence_length").get<int>()) + " --latents " + file("inputs.safetensors");
}

TEST(SingleFiles, FluxFromThePromptIsDiffusersOnEverySplit) {
  // No pipeline folder: FLUX.1-dev's scheduler, the transformer's config from its original names, the
  // T5's from its shapes, the VAE's given. 2 heads: Ulysses up to 2; the decode splits 8 latent rows.
  cpdit::testing::expect_outputs_on_every_split(kCase, single_file_args(), "image",
                                                {"--ranks 1", "--ring 2", "--ulysses 2"});
}

TEST(SingleFiles, AFileOfAnotherClassOrAMissingPartIsOneLine) {
  const std::string clip = file("clip_l/clip_l.safetensors"), t5 = file("t5xxl_fp8_e4m3fn.safetensors");
  const std::string clip_tokenizer = (kFixtures / "tokenizer_clip_v2").string();
  const std::string t5_tokenizer = (kFixtures / "tokenizer_t5_v2").string();
  const std::string tokenizers = " --tokenizer " + clip_tokenizer + " --tokenizer " + t5_tokenizer;
  cpdit::testing::expect_cli_refused(single_file_args(" --clip-l " + t5 + " --t5xxl " + t5 + tokenizers),
                                     "--clip-l " + t5 + " holds a T5EncoderModel, not a CLIPTextModel");
  cpdit::testing::expect_cli_refused(single_file_args(" --umt5 " + t5 + " --clip-l " + clip + tokenizers),
                                     "holds a T5EncoderModel, not a UMT5EncoderModel");
  cpdit::testing::expect_cli_refused(single_file_args(" --clip-l " + clip + tokenizers),
                                     "FluxPipeline needs its T5EncoderModel (text_encoder_2/ of its diffusers folder): give --t5xxl FILE");
  cpdit::testing::expect_cli_refused(single_file_args(" --clip-l " + clip + " --t5xxl " + t5 + " --tokenizer " +
                                                      clip_tokenizer),
                                     "needs its T5EncoderModel's tokenizer (tokenizer_2/ of its diffusers folder): give --tokenizer DIR");
  cpdit::testing::expect_cli_refused(single_file_args(" --clip-l " + clip + " --text-encoder " + clip + " --t5xxl " +
                                                      t5 + tokenizers),
                                     "FluxPipeline's CLIPTextModel is already given");
  cpdit::testing::expect_cli_refused(single_file_args(" --clip-l " + clip + " --t5xxl " + t5 + tokenizers +
                                                      " --tokenizer " + clip_tokenizer),
                                     "CLIPTextModel tokenizer is already given");
}

TEST(SingleFiles, VaeFileMisuseIsOneLine) {
  const std::string base = "generate --preset flux-tiny --steps 1 -H 32 -W 32 --random-embeddings";
  cpdit::testing::expect_cli_refused(base + " --vae " + kAe, "--preset flux-tiny has its own");
  const std::string transformer = "generate --transformer " + file("flux1-tiny.safetensors") + " --config " +
                                  file("transformer_config.json") + " --random-embeddings --steps 1 -H 64 -W 48";
  cpdit::testing::expect_cli_refused(transformer + " --vae-config " + kAeConfig,
                                     "--vae-config is the config of a --vae FILE");
  cpdit::testing::expect_cli_refused(transformer + " --vae " + file("t5xxl_fp8_e4m3fn.safetensors"),
                                     "is a T5EncoderModel, not a VAE");
  // The tiny ae's norm groups are not in its shapes, and its shapes are not FLUX.1's.
  cpdit::testing::expect_cli_refused(transformer + " --vae " + kAe,
                                     "is not FLUX.1's ae (16 and [128,256,512,512]), the only one whose norm groups and scaling are known here: give its config.json (--vae-config)");
}

// The summary of a run of `args` (--json), its latents written to `out`.
nlohmann::json run_json(const std::string& args, const std::string& out) {
  const auto r = run_cli(args + " --json --threads 1 --out " + out);
  EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

// A transformer file with no folder runs as its release: FLUX.1-dev (a guidance embedding) 28 steps on
// FLUX.1-dev's scheduler; FLUX.1-schnell (none) 4 steps of 256 text tokens on schnell's (shift 1, no
// dynamic shifting), as its model card runs it.
TEST(SingleFiles, ATransformerFileAloneRunsAsItsRelease) {
  TempDir dir("single_files_release");
  std::map<std::string, Tensor> schnell;
  for (const auto& [name, t] : io::load_safetensors(file("flux1-tiny.safetensors")))
    if (name.find("guidance_in.") == std::string::npos) schnell[name] = t;
  const std::string schnell_file = dir.file("flux1-schnell-tiny.safetensors");
  io::save_safetensors(schnell_file, schnell);
  const std::string common = " --config " + file("transformer_config.json") + " --random-embeddings -H 64 -W 48";
  const nlohmann::json dev = run_json("generate --transformer " + file("flux1-tiny.safetensors") + common,
                                      dir.file("dev.safetensors"));
  EXPECT_EQ(dev.at("steps"), 28);
  EXPECT_EQ(dev.at("guidance"), 3.5);  // FLUX.1-dev's default guidance: the embedding is read
  const nlohmann::json by_default = run_json("generate --transformer " + schnell_file + common, dir.file("a.safetensors"));
  EXPECT_EQ(by_default.at("steps"), 4);
  // The same run spelt out: schnell's scheduler config and 256 text tokens give the same latents, bit for bit.
  io::write_text_atomic(dir.file("schnell_scheduler.json"),
                        R"({"_class_name": "FlowMatchEulerDiscreteScheduler", "base_image_seq_len": 256, "base_shift": 0.5,)"
                        R"( "max_image_seq_len": 4096, "max_shift": 1.15, "num_train_timesteps": 1000, "shift": 1.0,)"
                        R"( "use_dynamic_shifting": false})");
  run_json("generate --transformer " + schnell_file + common + " --steps 4 --text-tokens 256 --scheduler-config " +
               dir.file("schnell_scheduler.json"),
           dir.file("b.safetensors"));
  const Tensor a = io::load_safetensors(dir.file("a.safetensors")).at("latents");
  EXPECT_EQ(max_abs_diff(a, io::load_safetensors(dir.file("b.safetensors")).at("latents")), 0.0);
  // And they are not what FLUX.1-dev's schedule or 512 tokens would make.
  run_json("generate --transformer " + schnell_file + common + " --steps 4 --text-tokens 512 --scheduler-config " +
               dir.file("schnell_scheduler.json"),
           dir.file("c.safetensors"));
  EXPECT_GT(max_abs_diff(a, io::load_safetensors(dir.file("c.safetensors")).at("latents")), 1e-3);
}

}  // namespace
}  // namespace cpdit::pipeline
