// cpdit diff A B: the largest absolute difference between the tensors two safetensors files share,
// e.g. the latents of a multi-rank run against a single-rank run. With --tolerance it is a check:
// exit code 1 when a difference exceeds it.
#include "command.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

namespace cpdit::app {
namespace {

struct DiffArgs {
  std::string a, b;
  std::optional<double> tolerance;
};

int run(const DiffArgs& args) {
  CPDIT_CHECK(!args.tolerance || (std::isfinite(*args.tolerance) && *args.tolerance >= 0), invalid_argument,
              "--tolerance must be a finite number >= 0, got ", *args.tolerance);
  const auto a = io::load_safetensors(args.a);
  const auto b = io::load_safetensors(args.b);
  double worst = 0;
  int compared = 0;
  for (const auto& [name, ta] : a) {
    auto it = b.find(name);
    if (it == b.end()) continue;
    CPDIT_CHECK(ta.shape() == it->second.shape(), invalid_argument, name, " is ", ta.describe(), " in ", args.a,
                " but ", it->second.describe(), " in ", args.b);
    double d = max_abs_diff(ta, it->second);
    std::printf("%s max_abs_diff %.3e\n", name.c_str(), d);
    worst = std::isnan(d) || std::isnan(worst) ? std::nan("") : std::max(worst, d);  // NaN is never within tolerance
    ++compared;
  }
  CPDIT_CHECK(compared > 0, invalid_argument, args.a, " and ", args.b, " share no tensor name");
  return args.tolerance && !(worst <= *args.tolerance) ? 1 : 0;
}

void add_diff(CLI::App& parent) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* cmd =
      parent.add_subcommand("diff", "Largest absolute difference between same-named tensors of two safetensors files");
  cmd->add_option("a", args->a, "first file")->required();
  cmd->add_option("b", args->b, "second file")->required();
  cmd->add_option("--tolerance", args->tolerance, "exit with code 1 when a difference exceeds this");
  cmd->callback([args] {
    if (int code = run(*args)) throw CLI::RuntimeError(code);
  });
}

const bool registered = register_command("diff", add_diff);

}  // namespace
}  // namespace cpdit::app
