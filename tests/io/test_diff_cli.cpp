// `cpdit diff A B --tolerance T`: exit 0 within the tolerance, 1 beyond it, 2 for bad input. A NaN
// difference is never within a tolerance (it would otherwise pass every check a parity test makes).
#include "io_test_util.hpp"
#include "support/run_cli.hpp"

#include <cpdit/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace cpdit;
using cpdit::testing::run_cli;
using cpdit::testing::TempDir;

namespace {

class DiffCli : public ::testing::Test {
 protected:
  void SetUp() override {
    io::save_safetensors(dir.file("a.safetensors"), {{"x", Tensor::from_vector({1, 2, 3}, {3})}});
    io::save_safetensors(dir.file("near.safetensors"), {{"x", Tensor::from_vector({1, 2, 3.00001f}, {3})}});
    io::save_safetensors(dir.file("nan.safetensors"), {{"x", Tensor::from_vector({1, std::nanf(""), 3}, {3})}});
  }
  cpdit::testing::CliResult diff(const std::string& b, const std::string& tolerance) {
    return run_cli("diff '" + dir.file("a.safetensors") + "' '" + dir.file(b) + "' --tolerance " + tolerance);
  }
  TempDir dir;
};

TEST_F(DiffCli, WithinAndBeyondTheTolerance) {
  EXPECT_EQ(diff("near.safetensors", "1e-4").code, 0);
  EXPECT_EQ(diff("near.safetensors", "1e-6").code, 1);
}

TEST_F(DiffCli, NanFailsEveryTolerance) {
  const auto run = diff("nan.safetensors", "1e30");
  EXPECT_EQ(run.code, 1) << run.out << run.err;
  EXPECT_NE(run.out.find("nan"), std::string::npos) << run.out;
}

TEST_F(DiffCli, NegativeOrNonFiniteToleranceIsRefused) {
  for (const char* tolerance : {"-1", "nan", "inf"}) {
    const auto run = diff("near.safetensors", tolerance);
    EXPECT_EQ(run.code, 2) << tolerance;
    EXPECT_NE(run.err.find("--tolerance must be a finite number >= 0"), std::string::npos) << run.err;
  }
}

}  // namespace
