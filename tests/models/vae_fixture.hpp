#pragma once
// Shared by the VAE tests: the vae_kl_tiny / vae_wan_tiny / vae_ltx_tiny fixtures (diffusers' own
// numbers) and the comparison relative to a tensor's range that the fixtures' README prescribes
// (float32 against float64 runs of these models differ by ~1e-6 of the range, the porting mistakes
// the README lists by 1e-4 or more).
#include "support/model_fixture.hpp"
#include "support/relative_error.hpp"

namespace cpdit::models::vae::testing {

using cpdit::testing::fixture_config;
using cpdit::testing::fixture_dir;
using cpdit::testing::fixture_file;
using cpdit::testing::fixture_weights;
using cpdit::testing::relative_to_range;

}  // namespace cpdit::models::vae::testing
