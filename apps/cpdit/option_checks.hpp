#pragma once
// Checks for command-line options that run on the text as typed, before CLI11 converts it:
// CLI11 alone wraps "-1" into an unsigned seed, truncates "1.5" and clamps "1e30", accepts "nan" for a
// float, and words a range as the 309 digits of the largest double. Each check fails with one line
// saying what the option takes and what it got.
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>

namespace cpdit::app {

// A whole number of type T, written in decimal digits, from `min` to T's largest value.
template <class T>
CLI::Validator whole_number(T min = 1) {
  auto check = [min](std::string& text) -> std::string {
    T value{};
    const char* end = text.data() + text.size();
    auto [stop, error] = std::from_chars(text.data(), end, value);
    if (error == std::errc::result_out_of_range)
      return "must be at most " + std::to_string(std::numeric_limits<T>::max()) + ", got " + text;
    if (error != std::errc() || stop != end || text.empty())
      return "must be a whole number >= " + std::to_string(min) + ", got " + text;
    if (value < min) return "must be >= " + std::to_string(min) + ", got " + text;
    return "";
  };
  return CLI::Validator(check, min == 1 ? "POSITIVE" : "NUMBER", "whole_number");
}

// A finite decimal number (not nan or inf).
inline CLI::Validator finite_number() {
  auto check = [](std::string& text) -> std::string {
    char* stop = nullptr;
    const double value = std::strtod(text.c_str(), &stop);
    if (text.empty() || *stop != '\0' || !std::isfinite(value)) return "must be a finite number, got " + text;
    return "";
  };
  return CLI::Validator(check, "NUMBER", "finite_number");
}

// A file or folder name to write: an empty one ("--out ''") would mean "not given" downstream.
inline CLI::Validator output_name() {
  auto check = [](std::string& text) -> std::string { return text.empty() ? "needs a file name, got ''" : ""; };
  return CLI::Validator(check, "PATH", "output_name");
}

}  // namespace cpdit::app
