// libFuzzer entry: any bytes must either open as a GGUF file or be refused with cpdit::Error; every
// tensor of a file that opens must be handed out (or refused) without touching memory out of range
// (a quantised weight's blocks are exactly the bytes its decoder reads: Weight::blocks checks that).
#include <cpdit/core/error.hpp>
#include <cpdit/io/gguf.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

// Reads every byte a weight holds so the sanitizers see any out-of-range view.
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
    auto file = cpdit::io::GgufFile::from_bytes(std::vector<std::byte>(bytes, bytes + size), "fuzz input");
    volatile unsigned sink = 0;
    for (const std::string& name : file.names()) {
      try {
        cpdit::Weight w = file.get(name);
        sink = sink + touch(w.codes());
      } catch (const cpdit::Error&) {
        // a type cpdit does not compute with: refused, fine
      }
    }
  } catch (const cpdit::Error&) {
    // refused with a message: the expected outcome for most inputs
  }
  return 0;
}
