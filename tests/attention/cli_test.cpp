// cpdit attention on the command line: fixture in, file out matching; bad input exits 2 with one line.
#include "support/attention_reference.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <algorithm>

namespace cpdit::attention::testing {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = fs::path(CPDIT_TEST_DATA) / "fixtures" / "attention";

cpdit::testing::CliResult run_cli(const std::string& args, const std::string& env = "") {
  return cpdit::testing::run_cli("attention " + args, env);
}

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("cpdit_attention_" + std::to_string(getpid()) + "_" + name);
}

TEST(AttentionCli, FixtureInFileOutMatchesFloat64Reference) {
  const fs::path input = kFixtures / "attention_b2_s100_h4_d32_keymask.safetensors";
  const auto want = io::load_safetensors(input.string());
  for (const char* backend : {"native", "flash"}) {
    SCOPED_TRACE(backend);
    const fs::path out = temp_file(std::string(backend) + ".safetensors");
    const cpdit::testing::CliResult r =
        run_cli("--inputs " + input.string() + " --output " + out.string() + " --backend " + backend + " --threads 2");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto got = io::load_safetensors(out.string());
    EXPECT_EQ(got.at("out").dtype(), DType::f32);
    EXPECT_LE(max_abs_diff(values(got.at("out")), values(want.at("out_f64"))), 1e-5);
    EXPECT_LE(max_abs_diff(values(got.at("lse")), values(want.at("lse_f64"))), 1e-5);
    fs::remove(out);
  }
}

// The default backend comes from CPDIT_ATTENTION_BACKEND, read when the process first needs it.
TEST(AttentionCli, EnvironmentChoosesTheDefaultBackend) {
  const fs::path input = kFixtures / "attention_b1_s64_h2_d16.safetensors";
  const fs::path out = temp_file("env.safetensors");
  const std::string args = "--inputs " + input.string() + " --output " + out.string();
  EXPECT_EQ(run_cli(args, "CPDIT_ATTENTION_BACKEND=native").code, 0);
  EXPECT_EQ(io::SafetensorsFile::open(out.string()).metadata().at("backend"), "native");
  EXPECT_EQ(run_cli(args, "CPDIT_ATTENTION_BACKEND=flash").code, 0);
  EXPECT_EQ(io::SafetensorsFile::open(out.string()).metadata().at("backend"), "flash");
  const cpdit::testing::CliResult bad = run_cli(args, "CPDIT_ATTENTION_BACKEND=nope");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("CPDIT_ATTENTION_BACKEND"), std::string::npos) << bad.err;
  fs::remove(out);
}

void expect_one_line_error(const cpdit::testing::CliResult& r, const std::string& mentions) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
}

TEST(AttentionCli, BadInputExitsTwoWithOneLine) {
  const fs::path good = kFixtures / "attention_b1_s64_h2_d16.safetensors";
  const fs::path out = temp_file("bad.safetensors");
  auto t = io::load_safetensors(good.string());

  const fs::path no_v = temp_file("no_v.safetensors");
  io::save_safetensors(no_v.string(), {{"q", t.at("q")}, {"k", t.at("k")}});
  expect_one_line_error(run_cli("--inputs " + no_v.string() + " --output " + out.string()), "'v'");

  const fs::path mismatch = temp_file("mismatch.safetensors");
  io::save_safetensors(mismatch.string(), {{"q", t.at("q")}, {"k", t.at("k")}, {"v", t.at("v").narrow(1, 0, 10)}});
  expect_one_line_error(run_cli("--inputs " + mismatch.string() + " --output " + out.string()), "same shape");

  expect_one_line_error(
      run_cli("--inputs " + good.string() + " --output " + out.string() + " --backend sage"), "available");

  // An I32 q (widened to i64 on load): the message names the dtype the file holds.
  const fs::path int_q = temp_file("int_q.safetensors");
  {
    const std::string header = R"({"q":{"dtype":"I32","shape":[1,4,2,8],"data_offsets":[0,256]}})";
    const uint64_t length = header.size();
    std::ofstream file(int_q, std::ios::binary);
    file.write(reinterpret_cast<const char*>(&length), sizeof length);  // little-endian, as on x86
    file << header << std::string(256, '\0');
  }
  expect_one_line_error(run_cli("--inputs " + int_q.string() + " --output " + out.string()),
                        "q is I32; attention takes floating-point q, k, v");
  EXPECT_FALSE(fs::exists(out));
  fs::remove(no_v);
  fs::remove(mismatch);
  fs::remove(int_q);
}

}  // namespace
}  // namespace cpdit::attention::testing
