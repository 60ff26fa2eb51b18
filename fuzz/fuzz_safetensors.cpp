// libFuzzer entry for the safetensors reader (see each_tensor.hpp); a file that opens must also have
// ordered offsets for every tensor, as its validation promises.
#include "each_tensor.hpp"

#include <cpdit/io/safetensors.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return cpdit::fuzz::each_tensor(
      data, size,
      [](std::vector<std::byte> bytes) {
        return cpdit::io::SafetensorsFile::from_bytes(std::move(bytes), "fuzz input");
      },
      [](const cpdit::io::SafetensorsFile& file, const std::string& name) {
        const cpdit::io::TensorInfo& info = file.info(name);
        if (info.end < info.begin) __builtin_trap();
        return file.get(name);
      });
}
