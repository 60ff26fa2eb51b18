// libFuzzer entry for the safetensors reader (see each_tensor.hpp); a file that opens must also have
// ordered offsets for every tensor, as its validation promises. The same bytes are then read as a LoRA
// file (nn/lora.hpp: its modules grouped and checked), which must be read or refused with cpdit::Error.
#include "each_tensor.hpp"

#include <cpdit/io/safetensors.hpp>
#include <cpdit/nn/lora.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* first = reinterpret_cast<const std::byte*>(data);
  try {
    cpdit::nn::read_lora(cpdit::io::SafetensorsFile::from_bytes(std::vector<std::byte>(first, first + size), "fuzz input"));
  } catch (const cpdit::Error&) {
  }
  return cpdit::fuzz::each_tensor(
      data, size,
      [](std::vector<std::byte> bytes) {
        return cpdit::io::SafetensorsFile::from_bytes(std::move(bytes), "fuzz input");
      },
      [](const cpdit::io::SafetensorsFile& file, const std::string& name) {
        const cpdit::io::TensorInfo& info = file.info(name);
        if (info.end < info.begin) __builtin_trap();
        // An FP8 matrix is also handed out as its 8-bit codes: their bytes must lie in the file too.
        const cpdit::Weight weight = file.weight(name);
        if (weight.is_quantised()) {
          volatile unsigned codes = cpdit::fuzz::touch(weight.codes());
          (void)codes;
        }
        return file.get(name);
      });
}
