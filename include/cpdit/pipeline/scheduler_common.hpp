#pragma once
// What the schedulers share: arithmetic that rounds exactly where diffusers (numpy / PyTorch eager)
// rounds, and reading a diffusers scheduler_config.json.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

// PyTorch and numpy round every product and every sum separately. GCC fuses a * b + c into one FMA
// across statements by default in C++ (-ffp-contract=fast), which moves results by an ulp; functions
// that must round like the reference opt out. Clang only fuses within one expression, so code that
// uses this keeps each product in its own statement.
#if defined(__GNUC__) && !defined(__clang__)
#define CPDIT_SEPARATE_ROUNDING __attribute__((optimize("fp-contract=off")))
#else
#define CPDIT_SEPARATE_ROUNDING
#endif

namespace cpdit::pipeline {

// numpy.linspace(start, stop, num) in float64, rounding as numpy does: i·step + start with
// step = (stop − start)/(num − 1), the last value exactly `stop`.
std::vector<double> numpy_linspace(double start, double stop, int num);

// μ of the dynamic shift for `image_seq_len` tokens, on the line from (base_len, base_shift) to
// (max_len, max_shift), in float64 as the Flux pipeline's calculate_shift computes it.
double shift_line_mu(double base_shift, double max_shift, int64_t base_len, int64_t max_len, int64_t image_seq_len);

// Values of a scheduler config: a missing or null key gives `fallback`; a value of another type
// throws a format error naming the key.
double config_number(const nlohmann::json& config, const std::string& key, double fallback);
int64_t config_integer(const nlohmann::json& config, const std::string& key, int64_t fallback);
bool config_flag(const nlohmann::json& config, const std::string& key, bool fallback);
std::string config_string(const nlohmann::json& config, const std::string& key,
                          const std::string& fallback);

// A config that names its class (`_class_name`, as diffusers writes it) must name `scheduler`: a
// transformer's or another scheduler's config would otherwise run with defaults for every key.
void require_scheduler_class(const nlohmann::json& config, const std::string& scheduler);

}  // namespace cpdit::pipeline
