// The command line on inputs that hung it, crashed it or let it finish with nonsense: every file a
// user names is a regular file of bounded size (a FIFO would block, /dev/zero would be read until
// memory runs out), a flag a model would ignore is refused, a non-finite scale is refused before the
// run and an overflowing one stops it. Each answer: one line, exit 2, nothing written.
#include "support/expect_cli_refused.hpp"
#include "support/model_fixture.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/io/png.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/pipeline/picture_files.hpp>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::fixture_dir;
using cpdit::testing::TempDir;

TEST(HostileInputs, AFifoOrADeviceAsAFileIsRefusedBeforeItIsRead) {
  TempDir dir("hostile_fifo");
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string model = fixture_dir("flux_tiny") + "/weights.safetensors";
  for (const std::string& file : {fifo, std::string("/dev/zero")}) {
    SCOPED_TRACE(file);
    expect_cli_refused("generate -m " + model + " --config " + file + " --random-embeddings -o " + dir.file("a.png"),
                       file + " is not a regular file", dir.file("a.png"));
    expect_cli_refused("tokenize --tokenizer " + fixture_dir("tokenizer_clip_v2") + " --prompts " + file + " -o " +
                           dir.file("ids.safetensors"),
                       file + " is not a regular file", dir.file("ids.safetensors"));
  }
  // A tokenizer folder whose vocabulary is a device, and one whose spiece.model is a folder.
  const fs::path clip = dir.file("clip"), t5 = dir.file("t5");
  fs::copy(fixture_dir("tokenizer_clip_v2"), clip);
  fs::remove(clip / "vocab.json");
  fs::create_symlink("/dev/zero", clip / "vocab.json");
  fs::copy(fixture_dir("tokenizer_t5_v2"), t5);
  fs::remove(t5 / "spiece.model");
  fs::create_directory(t5 / "spiece.model");
  const std::string prompts = fixture_dir("tokenizer_clip_v2") + "/prompts.json";
  expect_cli_refused("tokenize --tokenizer " + clip.string() + " --prompts " + prompts + " -o " +
                         dir.file("ids.safetensors"),
                     "vocab.json is not a regular file");
  expect_cli_refused("tokenize --tokenizer " + t5.string() + " --prompts " + prompts + " -o " + dir.file("ids.safetensors"),
                     "spiece.model is a folder, expected a file");
}

TEST(HostileInputs, ConfigFilesAPresetWouldIgnoreAreRefused) {
  TempDir dir("hostile_preset_configs");
  const std::string config = fixture_dir("flux_tiny") + "/config.json";
  for (const std::string flag : {"--config", "--scheduler-config"})
    expect_cli_refused("generate --preset flux-tiny " + flag + " " + config + " -o " + dir.file("a.png"),
                       "--preset flux-tiny has its own configs and weights", dir.file("a.png"));
  // Given for a model, a scheduler config that is not a file is refused, not silently replaced.
  const std::string folder = fixture_dir("flux_pipeline_tiny") + "/pipeline";
  expect_cli_refused("generate -m " + folder + " --random-embeddings --scheduler-config " + dir.file("none.json") +
                         " -o " + dir.file("a.png"),
                     "--scheduler-config " + dir.file("none.json") + " is not a file", dir.file("a.png"));
}

TEST(HostileInputs, NonFiniteOrOverflowingScalesNeverFinishSilently) {
  TempDir dir("hostile_scales");
  const std::string flux = "generate --preset flux-tiny --steps 2 -W 32 -H 32 --text-tokens 8 ";
  expect_cli_refused(flux + "--true-cfg-scale nan -o " + dir.file("a.png"), "must be a finite number, got nan",
                     dir.file("a.png"));
  // Finite scales whose product with the guidance difference overflows: the transformer's output is
  // finite, the guided one is not; the run stops at that step (--json: no progress lines before the error).
  expect_cli_refused(flux + "-p fox -n blurry --true-cfg-scale 1e308 --json -o " + dir.file("a.png"),
                     "denoise step 1: the latents hold NaN or Inf", dir.file("a.png"));
  expect_cli_refused("generate --preset wan-tiny --steps 2 -W 32 -H 32 --frames 5 --text-tokens 8 -p fox "
                     "--guidance 1e308 --json -o " +
                         dir.file("a.mp4"),
                     "denoise step 1: the latents hold NaN or Inf", dir.file("a.mp4"));
}

TEST(HostileInputs, AnInitImageTooSmallToSizeTheRunIsRefused) {
  TempDir dir("hostile_tiny_init_image");
  const std::string one = dir.file("one.png");
  io::write_png(one, {200, 30, 90}, 1, 1);
  // Its own size, in whole packed latents (16 pixels for flux-tiny's VAE), is none: it used to become a
  // 256x256 run. With a size given, it is resized to it as any picture.
  expect_cli_refused("generate --preset flux-tiny --steps 2 --text-tokens 8 --init-image " + one + " -o " +
                         dir.file("a.png"),
                     "--init-image " + one + " is 1x1: smaller than one packed latent (16 pixels a side)",
                     dir.file("a.png"));
  EXPECT_EQ(cpdit::testing::run_cli("generate --preset flux-tiny --steps 2 --text-tokens 8 -W 32 -H 32 --init-image " +
                                    one + " -o " + dir.file("a.png")).code, 0);
}

TEST(HostileInputs, ForwardOnNonFiniteWeightsIsRefusedAndWritesNothing) {
  TempDir dir("hostile_nan_weights");
  nn::TensorMap weights = io::load_safetensors(fixture_dir("flux_tiny") + "/weights.safetensors");
  Tensor& first = weights.begin()->second;
  first = first.to(DType::f32).contiguous();
  first.data<float>()[0] = NAN;
  io::save_safetensors(dir.file("diffusion_pytorch_model.safetensors"), weights);
  fs::copy_file(fixture_dir("flux_tiny") + "/config.json", dir.file("config.json"));
  expect_cli_refused("forward -m " + dir.path().string() + " --inputs " + fixture_dir("flux_tiny") +
                         "/inputs.safetensors -o " + dir.file("out.safetensors"),
                     "the model's output `sample` holds NaN or Inf", dir.file("out.safetensors"));
}

// Every file a stage reads is protected, not only the transformer's: a pipeline folder's VAE weights
// and model_index.json, a tokenizer's vocabulary; and a --frames-dir (replaced whole) may hold no input
// and no other output.
TEST(HostileInputs, NoOutputReplacesAFileAnyStageReads) {
  TempDir dir("hostile_overwrite");
  const fs::path folder = dir.file("pipeline"), clip = dir.file("clip");
  fs::copy(fixture_dir("flux_pipeline_tiny") + "/pipeline", folder, fs::copy_options::recursive);
  fs::copy(fixture_dir("tokenizer_clip_v2"), clip);
  const std::string vae = (folder / "vae" / "diffusion_pytorch_model.safetensors").string();
  const auto vae_size = fs::file_size(vae);
  const std::string run = "generate -m " + folder.string() + " --random-embeddings --steps 1 -W 32 -H 32 ";
  expect_cli_refused(run + "--image " + vae, "--image " + vae + " is the file --model reads");
  expect_cli_refused(run + "--image " + (folder / "model_index.json").string(), "is the file --model reads");
  const std::string latents = dir.file("latents.safetensors");
  ASSERT_EQ(cpdit::testing::run_cli(run + "-o " + latents).code, 0);
  expect_cli_refused("decode -m " + folder.string() + " --latents " + latents + " -o " + vae,
                     "--out " + vae + " is the file --model reads");
  EXPECT_EQ(fs::file_size(vae), vae_size);
  const std::string vocab = (clip / "vocab.json").string();
  expect_cli_refused("tokenize --tokenizer " + clip.string() + " --prompts " + clip.string() + "/prompts.json -o " + vocab,
                     "--output " + vocab + " is the file --tokenizer reads");
  expect_cli_refused("encode-prompt -m " + folder.string() + " -p fox -o " + (folder / "model_index.json").string(),
                     "is the file --model reads");

  const fs::path frames = dir.file("frames");
  fs::create_directory(frames);
  io::write_png((frames / "frame_00000.png").string(), std::vector<uint8_t>(32 * 32 * 3, 90), 32, 32);
  const std::string wan = "generate --preset wan-tiny --steps 1 -W 32 -H 32 --frames 5 --frames-dir " + frames.string();
  expect_cli_refused(wan + " --first-image " + (frames / "frame_00000.png").string(),
                     "--frames-dir " + frames.string() + " is replaced whole by the output, but --first-image");
  expect_cli_refused(wan + " --video " + (frames / "clip.mp4").string(), "but --video " + (frames / "clip.mp4").string() +
                                                                             " lies in it");
}

TEST(HostileInputs, AnEmptyOutputNameIsRefused) {
  // Refused while the flags are read (an empty name meant "not given": the run wrote output.png).
  for (const std::string flag : {"-o", "--image", "--preview"})
    expect_cli_refused("generate --preset flux-tiny --steps 1 -W 32 -H 32 " + flag + " ''", "needs a file name, got ''");
  expect_cli_refused("tokenize --tokenizer " + fixture_dir("tokenizer_clip_v2") + " --prompts " +
                         fixture_dir("tokenizer_clip_v2") + "/prompts.json -o ''",
                     "needs a file name, got ''");
}

// --frames-dir into a folder that held a longer clip: only this clip's frames are left (an earlier clip's
// extra frames would read as part of this one), and a file of another name stays.
TEST(HostileInputs, AReusedFramesFolderHoldsOnlyThisClipsFrames) {
  TempDir dir("hostile_frames");
  const std::string frames = dir.file("frames");
  fs::create_directories(frames);
  for (const char* name : {"frame_00000.png", "frame_00004.png", "frame_00009.png", "notes.txt", "frame_9.png"})
    std::ofstream(frames + "/" + name) << "old";
  Tensor video = Tensor::full({1, 3, 8, 8, 3}, 0.5);
  write_frame_pngs(frames, video);
  std::vector<std::string> left;
  for (const fs::directory_entry& entry : fs::directory_iterator(frames)) left.push_back(entry.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png", "frame_9.png",
                                            "notes.txt"}));
  EXPECT_EQ(io::read_png(frames + "/frame_00000.png").width, 8);  // rewritten, not the old bytes
}

}  // namespace
}  // namespace cpdit::pipeline
