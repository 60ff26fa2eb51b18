// `cpdit decode`: latents that `generate` wrote, through the pipeline's VAE, to an image (PNG), a Wan
// or LTX-Video video (MP4) or the decoded sample (safetensors). FLUX.1's latents are unscaled
// (/ scaling_factor + shift_factor), Wan's and LTX-Video's denormalised (* latents_std + latents_mean)
// first, as the pipelines do (LTX-Video's timestep-conditioned VAE at --decode-timestep); the decode
// is split by rows (or, --vae-split frames, a Wan video's latent frames) over the local ranks (or the
// processes of an mpirun launch).
#include "command.hpp"
#include "dry_run.hpp"
#include <cpdit/pipeline/same_across_ranks.hpp>
#include "option_checks.hpp"
#include "output_paths.hpp"
#include "vae_split_option.hpp"

#include <cpdit/comm/launch.hpp>
#include <cpdit/core/error.hpp>
#include <cpdit/io/atomic_file.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/video.hpp>
#include <cpdit/io/safetensors.hpp>
#include <cpdit/models/registry.hpp>
#include <cpdit/models/vae/autoencoder_kl_ltx.hpp>
#include <cpdit/pipeline/ltx_pipeline.hpp>
#include <cpdit/pipeline/picture_files.hpp>
#include <cpdit/pipeline/vae_decode.hpp>
#include <cpdit/pipeline/wan_pipeline.hpp>

#include <filesystem>
#include <memory>

namespace cpdit::app {
namespace {

struct DecodeOptions {
  std::string model, latents, out, video;
  std::string vae_config;  // --vae-config: a VAE file's config.json
  int ranks = 1, threads = 0;
  int fps = 0;  // 0: the pipeline's (Wan 16, LTX-Video 25)
  pipeline::DecodeTimestep ltx;
  models::vae::VideoSplit split = models::vae::VideoSplit::rows;
  bool dry_run = false;
};

// The VAE folder: PIPELINE_DIR/vae when it exists, else the folder itself.
std::string vae_folder(const std::string& model) {
  namespace fs = std::filesystem;
  const fs::path sub = fs::path(model) / "vae";
  return fs::exists(sub / "config.json") ? sub.string() : model;
}

std::optional<std::string> vae_config(const DecodeOptions& o) {
  return o.vae_config.empty() ? std::nullopt : std::optional(o.vae_config);
}

// (B, 3, H, W), or a video of one frame (B, 3, 1, H, W), as pictures (one per batch item).
void write_image(const std::string& path, const Tensor& sample) {
  CPDIT_CHECK(sample.dim() == 4 || (sample.dim() == 5 && sample.size(2) == 1), invalid_argument, "a decoded ",
              sample.describe(), " has several frames; write it to a .safetensors file instead of a picture");
  pipeline::write_pictures(path, pipeline::postprocess_pixels(sample.dim() == 4 ? sample : sample.select(2, 0)));
}

// A video sample (1, 3, F, H, W) as an H.264 MP4 at `fps`, else the pipeline's frame rate.
void write_video(const std::string& path, const models::LoadedModel& vae, const Tensor& sample, int fps) {
  const bool ltx = std::any_cast<models::vae::LtxVaeConfig>(&vae.config) != nullptr;
  CPDIT_CHECK(ltx || std::any_cast<models::vae::WanVaeConfig>(&vae.config) != nullptr, invalid_argument,
              "--video needs a video VAE (AutoencoderKLWan, AutoencoderKLLTXVideo); this one decodes images, use --out "
              "image.png");
  CPDIT_CHECK(sample.dim() == 5 && sample.size(0) == 1, invalid_argument, "--video writes one clip, but the decoded ",
              "sample is ", sample.describe(), "; write a batch to a .safetensors file");
  io::write_mp4(path, pipeline::postprocess_pixels(sample).select(0, 0),
                fps > 0 ? fps : ltx ? pipeline::kLtxFramesPerSecond : pipeline::kWanFramesPerSecond);
}

void run_decode(const DecodeOptions& o) {
  const bool picture = pipeline::is_picture_name(o.out);
  CPDIT_CHECK(!o.out.empty() || !o.video.empty(), invalid_argument, "give --out, --video or both");
  CPDIT_CHECK(o.out.empty() || picture || o.out.ends_with(".safetensors"), invalid_argument,
              "--out must end in .png, .jpg, .jpeg, .webp or .safetensors, got '", o.out, "'");
  CPDIT_CHECK(o.video.empty() || o.video.ends_with(".mp4"), invalid_argument, "--video must end in .mp4, got '",
              o.video, "'");
  CPDIT_CHECK(o.ranks >= 1, invalid_argument, "--ranks must be at least 1, got ", o.ranks);
  pipeline::check_same_model_across_ranks({o.model, o.vae_config});
  std::vector<NamedPath> inputs = folder_inputs("--model", o.model);
  inputs.push_back({"--latents", o.latents});
  inputs.push_back({"--vae-config", o.vae_config});
  refuse_overwrite({{"--out", o.out}, {"--video", o.video}}, inputs);
  if (o.dry_run) {  // the latents' header, not their data nor the VAE's weights
    refuse_missing({{"--model", o.model}, {"--latents", o.latents}, {"--vae-config", o.vae_config}});
    const io::SafetensorsFile latents = io::SafetensorsFile::open(o.latents);
    CPDIT_CHECK(latents.contains("latents"), invalid_argument, o.latents,
                " holds no tensor named `latents` (what generate writes)");
    // The VAE's channels from its config (AutoencoderKL's latent_channels, the Wan and LTX VAEs' z_dim
    // or latent_channels), against the latents' second dimension.
    const Shape& shape = latents.info("latents").shape;
    // A folder's config.json, or what a single file's tensor names and shapes give (their header only).
    if (const std::optional<nlohmann::json> read =
            models::checkpoint_config(io::resolve_model(vae_folder(o.model), "vae", vae_config(o)))) {
      const nlohmann::json& vae = *read;
      for (const char* key : {"latent_channels", "z_dim"})
        if (vae.contains(key) && vae[key].is_number_integer())
          CPDIT_CHECK(shape.size() >= 2 && shape[1] == vae[key].get<int64_t>(), invalid_argument, o.latents,
                      " holds ", shape_string(shape), " latents, but the VAE of ", o.model, " takes ",
                      vae[key].get<int64_t>(), " channels (", key, ")");
    }
    std::vector<std::string> plan{"decode the " + shape_string(shape) + " latents of " +
                                  o.latents + " with the VAE of " + vae_folder(o.model) + " on " +
                                  std::to_string(o.ranks) + " rank" + (o.ranks == 1 ? "" : "s")};
    for (const std::string* file : {&o.out, &o.video})
      if (!file->empty()) plan.push_back("write " + *file);
    return print_dry_run(plan);
  }
  const auto file = io::load_safetensors(o.latents);
  const auto it = file.find("latents");
  CPDIT_CHECK(it != file.end(), invalid_argument, o.latents, " holds no tensor named `latents` (what generate writes)");
  const models::LoadedModel vae = models::open_model(vae_folder(o.model), vae_config(o), {}, "vae");
  CPDIT_CHECK((o.ltx.timestep == 0.0f && !o.ltx.noise_scale) || std::any_cast<models::vae::LtxVaeConfig>(&vae.config),
              invalid_argument, "--decode-timestep and --decode-noise-scale are for LTX-Video's VAE; ", o.model,
              "'s VAE is ", vae.class_name);

  comm::LocalOptions local;
  local.threads_per_rank = o.threads;
  comm::run_ranks(o.ranks, [&](comm::Communicator& world) {
    const Tensor sample = pipeline::decode_latents(vae, it->second, world, o.ltx, o.split);
    if (world.rank() != 0) return;
    io::OutputBatch outputs;  // --video and --out appear together, or neither does
    if (!o.video.empty()) write_video(o.video, vae, sample, o.fps);
    if (picture) {
      write_image(o.out, sample);
    } else if (!o.out.empty()) {
      io::save_safetensors(o.out, {{"sample", sample}});
    }
    outputs.commit();
    print_written({{"--out", o.out}, {"--video", o.video}});
  }, local);
}

void add_decode(CLI::App& parent) {
  auto o = std::make_shared<DecodeOptions>();
  CLI::App* cmd = parent.add_subcommand("decode",
                                        "Decode latents from `generate` with the pipeline's VAE (FLUX.1, Wan, "
                                        "Qwen-Image, LTX-Video) to a PNG, JPEG or WebP picture, an MP4 or "
                                        "safetensors.");
  cmd->add_option("-m,--model", o->model,
                  "diffusers pipeline folder (its vae/ is used), a VAE folder or a VAE .safetensors (diffusers' names, "
                  "FLUX.1's ae.safetensors, Wan 2.1's original names)")
      ->required();
  cmd->add_option("--vae-config", o->vae_config, "config.json of a VAE file (default: read from its tensors' shapes)");
  cmd->add_option("--latents", o->latents, "safetensors holding `latents`, as generate writes them")->required();
  cmd->add_option("-o,--out,--output", o->out,
                  "image.png, .jpg or .webp (JPEG and WebP at quality 90; one file per batch item; one frame) or "
                  "out.safetensors (`sample` in [-1, 1])")
      ->check(output_name());
  cmd->add_option("--video", o->video, "clip.mp4: a Wan or LTX-Video video as H.264 at --fps")
      ->check(output_name());
  cmd->add_option("--fps", o->fps, "--video's frame rate (default: Wan 16, LTX-Video 25)")->check(whole_number<int>());
  cmd->add_option("--decode-timestep", o->ltx.timestep,
                  "LTX-Video's timestep-conditioned VAE: the decode timestep (default 0, as LTXPipeline)")
      ->check(finite_number());
  cmd->add_option("--decode-noise-scale", o->ltx.noise_scale,
                  "LTX-Video's timestep-conditioned VAE: the weight of the noise (default: the decode timestep)")
      ->check(finite_number());
  cmd->add_option("-s,--seed", o->ltx.seed, "LTX-Video's decode noise: generate's --seed (default 0)")
      ->check(whole_number<uint64_t>(0));
  cmd->add_option("--ranks", o->ranks, "local thread ranks splitting the rows (ignored under mpirun)")
      ->capture_default_str()
      ->check(whole_number<int>());
  cmd->add_option("--threads", o->threads, "compute threads per rank (default: cores / ranks)")
      ->check(whole_number<int>());
  add_vae_split_option(cmd, o->split);
  add_dry_run_flag(*cmd, o->dry_run);
  cmd->callback([o] { run_decode(*o); });
}

const bool registered = register_command("decode", add_decode);

}  // namespace
}  // namespace cpdit::app
