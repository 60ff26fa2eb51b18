#pragma once
// The --dtype flag of the commands that load a transformer, and the weight line of their summaries.
#include <cpdit/core/precision.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace cpdit::app {

// --dtype auto|f32|bf16 into `dtype` (nn::load_options parses it).
void add_dtype_flag(CLI::App& cmd, std::string& dtype);

// The most bytes this process held in model weights at once: a weight shared by the local ranks
// counts once, so the number does not grow with the rank count.
int64_t resident_weight_bytes();

// "weights      12.50 MiB resident in this process (13107200 bytes), --dtype auto"
void print_weights_line(int64_t bytes, const std::string& dtype);

}  // namespace cpdit::app
