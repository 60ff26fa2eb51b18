#pragma once
// Helpers for the io tests: a temporary folder, and safetensors files assembled byte by byte so
// that tests control exactly what a reader sees.
#include "support/expect_error.hpp"
#include "support/temp_dir.hpp"

#include <cpdit/core/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace cpdit::io::test {

using cpdit::testing::expect_error;
using cpdit::testing::TempDir;

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// 8-byte little-endian length + header text + data: a safetensors file with any header at all.
inline std::string raw_safetensors(const std::string& header, const std::string& data = "") {
  uint64_t n = header.size();
  std::string bytes(8, '\0');
  std::memcpy(bytes.data(), &n, 8);
  return bytes + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

}  // namespace cpdit::io::test
