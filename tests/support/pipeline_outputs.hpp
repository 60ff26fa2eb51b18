#pragma once
// generate's outputs against a diffusers pipeline's (a fixture's expected.safetensors) under each split of
// the ranks, and against the first split's: the comparison the pipeline parity tests share.
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace cpdit::testing {

// diffusers' float32 run and ours differ only in summation order over 3 steps of a 2-block model:
// the observed gap is 1e-5 on latents of magnitude 5 (FLUX.1, Wan; LTX-Video 3e-6 on magnitude 3, its two
// passes run apart where diffusers batches them); 1e-4, ten times that, is the tightest round bound
// that holds under every split (ranks change the attention's summation order).
constexpr double kLatentsTolerance = 1e-4;
// The decoded pixels in [0, 1] against diffusers': the latents' 1e-5 passes through the VAE's
// unscaling (x2.8 for FLUX.1, latents_std up to x2.5 for Qwen-Image's one frame) and a decoder of gain
// about 1, then halves; observed 4e-6 (FLUX.1) and 1.5e-6 (Qwen-Image). The latents' bound through the
// same path (1e-4 x 2.8 / 2 = 1.4e-4) rounded up is 2e-4.
constexpr double kPixelsTolerance = 2e-4;
// Every split against one rank: the latents differ by summation order only (1e-5) and the row-split
// decode adds none of its own (halo rows are exact copies); 1e-4 as for the latents against diffusers.
constexpr double kSplitTolerance = 1e-4;

// Runs generate under each split (the first is "--ranks 1") and compares its latents with the case's
// `latents_name` of expected.safetensors and with the first split's and, unless `pixels` is empty, its
// decoded `pixels` ("image" or "video") with the case's and with the first split's.
inline void expect_outputs_on_every_split(const std::filesystem::path& case_dir, const std::string& args,
                                          const std::string& pixels, const std::vector<std::string>& splits,
                                          const std::string& latents_name = "latents") {
  const auto expected = io::load_safetensors((case_dir / "expected.safetensors").string());
  std::map<std::string, Tensor> single;
  for (const std::string& split : splits) {
    TempDir dir("pipeline_parity");
    const std::string out = dir.file("out.safetensors");
    const auto r = run_cli(args + " " + split + " --out " + out);
    ASSERT_EQ(r.code, 0) << split << "\n" << r.err;
    const auto got = io::load_safetensors(out);
    if (single.empty()) single = got;
    EXPECT_LT(max_abs_diff(got.at("latents"), expected.at(latents_name)), kLatentsTolerance) << split;
    EXPECT_LT(max_abs_diff(got.at("latents"), single.at("latents")), kSplitTolerance)
        << split << " against one rank";
    if (pixels.empty()) continue;
    ASSERT_TRUE(got.count(pixels)) << split << ": no " << pixels << " in --out";
    EXPECT_EQ(got.at(pixels).shape(), expected.at(pixels).shape()) << split;
    EXPECT_LT(max_abs_diff(got.at(pixels), expected.at(pixels)), kPixelsTolerance) << split;
    EXPECT_LT(max_abs_diff(got.at(pixels), single.at(pixels)), kSplitTolerance) << split << " against one rank";
  }
}

}  // namespace cpdit::testing
