// libFuzzer entry for the GGUF reader (see each_tensor.hpp). A quantised weight's blocks are exactly
// the bytes its decoder reads: Weight::blocks checks that, and touching codes() reads them all.
#include "each_tensor.hpp"

#include <cpdit/io/gguf.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return cpdit::fuzz::each_tensor(
      data, size,
      [](std::vector<std::byte> bytes) { return cpdit::io::GgufFile::from_bytes(std::move(bytes), "fuzz input"); },
      [](const cpdit::io::GgufFile& file, const std::string& name) { return file.get(name).codes(); });
}
