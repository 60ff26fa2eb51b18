#include <cpdit/core/error.hpp>
#include <cpdit/io/image.hpp>
#include <cpdit/io/png.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/family.hpp>
#include <cpdit/pipeline/vae_decode.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace cpdit::pipeline {

namespace fs = std::filesystem;

bool is_picture_name(const std::string& path) {
  return path.ends_with(".png") || path.ends_with(".jpg") || path.ends_with(".jpeg") || path.ends_with(".webp");
}

std::vector<std::string> picture_paths(const std::string& path, int64_t batch) {
  if (batch == 1) return {path};
  const fs::path p(path);
  std::vector<std::string> paths;
  for (int64_t b = 0; b < batch; ++b)
    paths.push_back(
        (p.parent_path() / (p.stem().string() + "_" + std::to_string(b) + p.extension().string())).string());
  return paths;
}

std::string scheduler_that_ran(const Result& result) {
  const std::string& name = result.request.scheduler.name;
  return name.empty() ? result.family->scheduler_name() : scheduler_description(name);
}

io::PictureText generation_parameters(const Result& result) {
  const Request& r = result.request;
  std::string text = r.prompt.value_or("");
  char number[32];
  // Adapters as A1111 and stable-diffusion.cpp write them into the prompt: <lora:NAME:WEIGHT>, NAME the
  // file's stem.
  for (const LoraChoice& lora : r.loras) {
    std::snprintf(number, sizeof number, "%g", lora.weight);
    text += (text.empty() ? "<lora:" : " <lora:") + std::filesystem::path(lora.path).stem().string() + ":" + number + ">";
  }
  if (r.negative_prompt && !r.negative_prompt->empty()) text += "\nNegative prompt: " + *r.negative_prompt;
  auto scale = [&](const char* name, float value) {
    if (std::isnan(value)) return std::string();
    std::snprintf(number, sizeof number, "%g", double(value));
    return std::string(", ") + name + ": " + number;
  };
  text += "\nSteps: " + std::to_string(r.steps) + ", Sampler: " + scheduler_that_ran(result) +
          ", Seed: " + std::to_string(r.seed) + ", Size: " + std::to_string(r.width) + "x" + std::to_string(r.height) +
          scale("Guidance", r.guidance) + scale("True CFG scale", r.true_cfg_scale) + ", Model: " + result.model_name +
          ", Version: cpdit " CPDIT_VERSION;
  return {{"parameters", text}};
}

void write_pictures(const std::string& path, const Tensor& image, const io::PictureText& text) {
  CPDIT_CHECK(image.dim() == 4 && image.size(3) == 3, invalid_argument, "pictures need pixels (B, H, W, 3), got ",
              image.describe());
  const bool jpeg = path.ends_with(".jpg") || path.ends_with(".jpeg"), webp = path.ends_with(".webp");
  std::string parameters;
  for (const auto& [key, value] : text)
    if (key == "parameters") parameters = value;
  const std::vector<std::string> paths = picture_paths(path, image.size(0));
  for (int64_t b = 0; b < image.size(0); ++b) {
    const std::vector<uint8_t> rgb = pixels_to_rgb8(image, b);
    const std::string& file = paths[size_t(b)];
    if (jpeg) io::write_jpeg(file, rgb, image.size(2), image.size(1), parameters);
    else if (webp) io::write_webp(file, rgb, image.size(2), image.size(1), parameters);
    else io::write_png(file, rgb, image.size(2), image.size(1), text);
  }
}

namespace {
// A folder reused from a longer clip keeps none of its frames: the frame_NNNNN.png files from `frames` on
// are removed (names of that form only; any other file stays).
void remove_frames_past(const fs::path& folder, int64_t frames) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() != 15 || name.rfind("frame_", 0) != 0 || !name.ends_with(".png") ||
        name.find_first_not_of("0123456789", 6) != 11 || !entry.is_regular_file(error))
      continue;
    if (std::stoll(name.substr(6, 5)) >= frames) fs::remove(entry.path(), error);
  }
}
}  // namespace

void write_frame_pngs(const std::string& dir, const Tensor& video) {
  CPDIT_CHECK(video.dim() == 5 && video.size(4) == 3, invalid_argument,
              "PNG frames need video pixels (B, F, H, W, 3), got ", video.describe());
  const int64_t batch = video.size(0), frames = video.size(1);
  for (int64_t b = 0; b < batch; ++b) {
    const fs::path folder = batch == 1 ? fs::path(dir) : fs::path(dir) / std::to_string(b);
    std::error_code error;
    fs::create_directories(folder, error);
    CPDIT_CHECK(fs::is_directory(folder), io, "cannot create the frames folder ", folder.string(),
                error ? " (" + error.message() + ")" : "");
    for (int64_t f = 0; f < frames; ++f) {
      char name[32];
      std::snprintf(name, sizeof name, "frame_%05lld.png", (long long)f);
      io::write_png((folder / name).string(), pixels_to_rgb8(video, b * frames + f), video.size(3), video.size(2));
    }
    remove_frames_past(folder, frames);
  }
}

}  // namespace cpdit::pipeline
