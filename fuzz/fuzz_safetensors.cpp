// libFuzzer entry: any bytes must either open as a safetensors file or be refused with cpdit::Error;
// every tensor of a file that opens must load (or be refused) without touching memory out of range.
#include <cpdit/core/error.hpp>
#include <cpdit/io/safetensors.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// Reads every byte of a loaded tensor so the sanitizers see any out-of-range view.
unsigned touch(const cpdit::Tensor& t) {
  const unsigned char* p = static_cast<const unsigned char*>(t.raw());
  unsigned sum = 0;
  for (size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  try {
    auto file = cpdit::io::SafetensorsFile::from_bytes(std::vector<std::byte>(bytes, bytes + size), "fuzz input");
    volatile unsigned sink = 0;
    for (const std::string& name : file.names()) {
      const cpdit::io::TensorInfo& info = file.info(name);
      if (info.end < info.begin) __builtin_trap();  // validation promised ordered offsets
      try {
        sink = sink + touch(file.get(name));
      } catch (const cpdit::Error&) {
        // unsupported dtype, too many dims, invalid BOOL byte: refused, fine
      }
    }
  } catch (const cpdit::Error&) {
    // refused with a message: the expected outcome for most inputs
  }
  return 0;
}
