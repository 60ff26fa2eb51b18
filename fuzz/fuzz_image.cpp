// libFuzzer entry for the picture readers (the images image-to-image and image-to-video start from, and
// the settings `inspect` prints: PNG text chunks, EXIF UserComments): any bytes, PNG, JPEG or WebP, give pixels and text or a
// cpdit::Error, never a crash, a leak or an allocation past the limits. The readers take a path, so
// each input goes through one file in the fuzzer's temporary folder.
#include <cpdit/core/error.hpp>
#include <cpdit/io/image.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

// 2^22 pixels (2048 x 2048) instead of 2^28: a few bytes can claim a valid picture that large (a
// constant WebP costs no bits a pixel), and decoding one to 768 MiB at each try would leave the fuzzer
// no time for anything else. The limit itself is tested in tests/io/test_image_read.cpp.
constexpr int64_t kFuzzMaxPixels = int64_t(1) << 22;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/cpdit_fuzz_image_" + std::to_string(getpid());
  FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    const cpdit::io::RgbImage image = cpdit::io::read_image(path, kFuzzMaxPixels);
    if (image.width * image.height > kFuzzMaxPixels || image.rgb.size() != size_t(image.width * image.height * 3))
      __builtin_trap();
  } catch (const cpdit::Error&) {
  }
  try {
    cpdit::io::read_picture_text(path);
  } catch (const cpdit::Error&) {
  }
  return 0;
}
