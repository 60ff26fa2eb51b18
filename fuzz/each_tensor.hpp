// The shared shape of the tensor-file fuzzers: any bytes must either open or be refused with
// cpdit::Error, and every tensor of a file that opens must be handed out (or refused) without
// touching memory out of range.
#pragma once

#include <cpdit/core/error.hpp>
#include <cpdit/core/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cpdit::fuzz {

// Reads every byte a tensor views so the sanitizers see any out-of-range view.
inline unsigned touch(const Tensor& t) {
  const unsigned char* p = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  return sum;
}

// `open(bytes)` parses the input into a file with names(); `tensor(file, name)` returns the Tensor
// whose bytes are checked. A cpdit::Error from either is a refusal, the expected outcome for most
// inputs; anything else (a crash, a sanitizer report, another exception) is a finding.
template <class Open, class TensorOf>
int each_tensor(const uint8_t* data, size_t size, Open open, TensorOf tensor) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  try {
    auto file = open(std::vector<std::byte>(bytes, bytes + size));
    volatile unsigned sink = 0;
    for (const std::string& name : file.names()) {
      try {
        sink = sink + touch(tensor(file, name));
      } catch (const Error&) {
        // a tensor cpdit does not compute with: refused, fine
      }
    }
  } catch (const Error&) {
  }
  return 0;
}

}  // namespace cpdit::fuzz
