// libFuzzer entry for the PNG readers (the images image-to-image and image-to-video start from, and the
// text chunks `inspect` prints): any bytes give pixels and text or a cpdit::Error, never a crash, a
// leak or an allocation past the limits (2^28 pixels, 1 MiB a text chunk). The readers take a path, so
// each input goes through one file in the fuzzer's temporary folder.
#include <cpdit/core/error.hpp>
#include <cpdit/io/png.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/cpdit_fuzz_png_" + std::to_string(getpid()) + ".png";
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    const cpdit::io::RgbImage image = cpdit::io::read_png(path);
    if (image.rgb.size() != size_t(image.width * image.height * 3)) __builtin_trap();
  } catch (const cpdit::Error&) {
  }
  try {
    cpdit::io::read_png_text(path);
  } catch (const cpdit::Error&) {
  }
  return 0;
}
