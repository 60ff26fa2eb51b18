// `cpdit generate` as users of other engines type it: -o/--out (or --output) writes the format its name
// says — a .png is a PNG, not safetensors under that name; the short flags of the usual options; a
// mistyped flag answered with the closest one.
#include "support/read_mp4.hpp"
#include "support/read_png.hpp"
#include "support/expect_cli_refused.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/png.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;
using cpdit::testing::expect_cli_refused;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

const std::string kFlux = "generate --preset flux-tiny --steps 1 --height 32 --width 48 --text-tokens 8 --threads 1";
const std::string kWan =
    "generate --preset wan-tiny --steps 1 --frames 5 --height 32 --width 32 --text-tokens 8 --threads 1";


TEST(GenerateNames, OutNamedPngIsAPngImage) {
  TempDir dir("generate_names_png");
  const std::string png = dir.file("fox.png");
  const auto r = run_cli(kFlux + " -o " + png);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto image = cpdit::testing::read_png(png);  // a PNG decoder reads it: not safetensors
  EXPECT_EQ(image.width, 48);
  EXPECT_EQ(image.height, 32);
  EXPECT_NE(r.out.find("wrote        " + png), std::string::npos) << r.out;
  // --output is the same flag.
  const std::string other = dir.file("other.png");
  ASSERT_EQ(run_cli(kFlux + " --output " + other).code, 0);
  EXPECT_TRUE(fs::is_regular_file(other));
}

TEST(GenerateNames, APictureCarriesItsSettingsAndInspectPrintsThem) {
  TempDir dir("generate_names_parameters");
  const std::string png = dir.file("fox.png");
  const std::string settings = " -p 'a red fox' -n blurry -s 7 --true-cfg-scale 2.5 -o ";
  const auto r = run_cli(kFlux + settings + png);
  ASSERT_EQ(r.code, 0) << r.err;
  // flux-tiny has no guidance embedding (as FLUX.1-schnell): no "Guidance", the true CFG that ran.
  const std::string parameters =
      "a red fox\nNegative prompt: blurry\nSteps: 1, Sampler: flow-match Euler, Seed: 7, Size: 48x32, "
      "True CFG scale: 2.5, Model: preset flux-tiny, Version: cpdit " CPDIT_VERSION;
  EXPECT_EQ(io::read_png_text(png), (io::PictureText{{"parameters", parameters}}));
  const auto inspect = run_cli("inspect " + png);
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_EQ(inspect.out, png + ": 1 text entry\nparameters:\n" + parameters + "\n");
  // The same settings in the EXIF UserComment of a JPEG and a WebP, read back by the same command.
  for (const std::string name : {"fox.jpg", "fox.webp"}) {
    const std::string path = dir.file(name);
    ASSERT_EQ(run_cli(kFlux + settings + path).code, 0);
    const auto shown = run_cli("inspect " + path);
    ASSERT_EQ(shown.code, 0) << shown.err;
    EXPECT_EQ(shown.out, path + ": 1 text entry\nparameters:\n" + parameters + "\n");
  }
}

TEST(GenerateNames, OutNamedMp4OrAFolderIsTheClip) {
  TempDir dir("generate_names_mp4");
  const std::string mp4 = dir.file("clip.mp4");
  ASSERT_EQ(run_cli(kWan + " --out " + mp4).code, 0);
  EXPECT_EQ(cpdit::testing::read_mp4(mp4).rgb.size(), 5u);
  const std::string frames = dir.file("frames") + "/";
  ASSERT_EQ(run_cli(kWan + " --out " + frames).code, 0);
  EXPECT_TRUE(fs::is_regular_file(dir.file("frames/frame_00004.png")));
}

TEST(GenerateNames, AnOutNameThatDoesNotFitIsRefusedAndNothingWritten) {
  TempDir dir("generate_names_refused");
  expect_cli_refused(kWan + " --out " + dir.file("x.png"), "is a picture, but this model makes video");
  expect_cli_refused(kFlux + " --out " + dir.file("x.mp4"), "is a clip, but this model makes images");
  expect_cli_refused(kFlux + " --out " + dir.file("x.txt"), "the name says no format cpdit writes");
  expect_cli_refused(kFlux + " --out " + dir.file("x.png") + " --image " + dir.file("y.png"), "both name the image");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(GenerateNames, ShortFlagsAreTheLongOnes) {
  TempDir dir("generate_names_short");
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors");
  const std::string common = "generate -m " + std::string(CPDIT_TEST_DATA) +
                             "/fixtures/flux_pipeline_tiny/pipeline --steps 1 --text-tokens 8 --threads 1 --ranks 1 "
                             "--random-embeddings";
  ASSERT_EQ(run_cli(common + " -W 48 -H 32 -s 7 -o " + a).code, 0);
  ASSERT_EQ(run_cli(common + " --width 48 --height 32 --seed 7 --out " + b).code, 0);
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(x), {}, std::istreambuf_iterator<char>(y)));
  // -p and -n are the prompt and the negative prompt.
  ASSERT_EQ(run_cli(kFlux + " -p 'a red fox' -n blurry --true-cfg-scale 2 -o " + a).code, 0);
  ASSERT_EQ(run_cli(kFlux + " --prompt 'a red fox' --negative-prompt blurry --true-cfg-scale 2 -o " + b).code, 0);
  std::ifstream p(a, std::ios::binary), q(b, std::ios::binary);
  EXPECT_TRUE(std::equal(std::istreambuf_iterator<char>(p), {}, std::istreambuf_iterator<char>(q)));
}

TEST(GenerateNames, AMistypedFlagIsAnsweredWithTheClosestOne) {
  expect_cli_refused(kFlux + " --stpes 2", "unknown flag --stpes of 'generate'; did you mean --steps?");
  expect_cli_refused(kFlux + " --negative-promtp x", "did you mean --negative-prompt?");
  expect_cli_refused(kFlux + " --preest flux-tiny", "did you mean --preset?");  // a flag of an option group
  // The CFG-parallel degree was --cfg, which other engines use for the guidance scale: the old name is
  // answered with the flag it begins.
  expect_cli_refused(kFlux + " --cfg 2", "unknown flag --cfg of 'generate'; did you mean --cfg-scale or --cfg-parallel?");
  expect_cli_refused(kFlux + " --zzzzzzzz 3", "unknown flag --zzzzzzzz of 'generate' (see --help)");
  expect_cli_refused("forward --model x --inputs y --output z --ouptut w", "did you mean --output?");
}

// CLI11's own wordings ("At Most 1 required but received 2", "1 required TEXT missing", "Exactly 1
// option from [...]") in words a user reads.
TEST(GenerateNames, FlagMistakesAreSaidInWords) {
  const auto repeated = expect_cli_refused(kFlux + " --steps 2", "--steps was given 2 times; give it once");  // kFlux has one
  EXPECT_EQ(repeated.err.find("At Most"), std::string::npos) << repeated.err;
  expect_cli_refused("generate --preset", "--preset needs a value");
  expect_cli_refused("generate --steps 1", "give one of -m,--model,--preset,--transformer (see --help)");
  expect_cli_refused("generate --preset flux-tiny -m x",
                     "give exactly one of --model DIR|FILE, --preset NAME and --transformer FILE");
  expect_cli_refused("encode-prompt -p x -o x.safetensors", "give one of -m,--model,--preset (see --help)");
}

TEST(GenerateNames, HelpNamesChoicesInWordsWithTheirDefaults) {
  for (const std::string command : {"generate", "decode", "forward"}) {
    const auto r = run_cli(command + " --help");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("--vae-split {rows,frames}"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("ENUM"), std::string::npos) << r.out;  // CLI11's own rendering of a mapping
  }
  const auto generate = run_cli("generate --help");
  for (const std::string default_said : {"-1 draws one at random, printed in the summary (default: 0)",
                                         "or allgather (default: p2p)", "(default: cfg-parallel x ring x ulysses"})
    EXPECT_NE(generate.out.find(default_said), std::string::npos) << default_said;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The seed the summary printed ("made ... 1 steps of flow-match Euler, true CFG 1, seed N").
uint64_t printed_seed(const std::string& out) {
  const size_t made = out.find("made "), at = out.find(", seed ", made);
  EXPECT_NE(at, std::string::npos) << out;
  return made == std::string::npos || at == std::string::npos ? 0 : std::stoull(out.substr(at + 7));
}

TEST(GenerateNames, SeedMinusOneDrawsOneThatThePrintedSeedReproduces) {
  TempDir dir("generate_names_seed");
  const std::string a = dir.file("a.safetensors"), b = dir.file("b.safetensors"), again = dir.file("c.safetensors");
  const auto first = run_cli(kFlux + " -s -1 -o " + a);
  const auto second = run_cli(kFlux + " --seed -1 -o " + b);
  ASSERT_EQ(first.code, 0) << first.err;
  ASSERT_EQ(second.code, 0) << second.err;
  const uint64_t seed = printed_seed(first.out);
  EXPECT_NE(seed, printed_seed(second.out));  // two draws of 53 bits
  EXPECT_NE(file_bytes(a), file_bytes(b));
  ASSERT_EQ(run_cli(kFlux + " -s " + std::to_string(seed) + " -o " + again).code, 0);
  EXPECT_EQ(file_bytes(again), file_bytes(a));
  expect_cli_refused(kFlux + " -s -2", "--seed: must be >= -1, got -2");
}

}  // namespace
}  // namespace cpdit::pipeline
