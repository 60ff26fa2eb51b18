// WanPipeline, WanImageToVideoPipeline (I2V, FLF2V) and Wan 2.2 A14B's two experts: UniPC (Wan 2.1's
// flow_shift 3 without a scheduler config), guidance on the negative prompt.
#include "pipeline/families/wan_families.hpp"

#include <cpdit/core/error.hpp>
#include <cpdit/io/json.hpp>
#include <cpdit/io/model_files.hpp>
#include <cpdit/pipeline/family.hpp>

#include <filesystem>

namespace cpdit::pipeline {
namespace {

namespace fs = std::filesystem;

const models::wan::WanConfig& wan_config(const Transformer& t) { return config_of<models::wan::WanConfig>(t.model); }

// Wan 2.2 A14B's folders hand the timesteps below model_index.json's boundary_ratio x the scheduler's
// num_train_timesteps to transformer_2/: opened into `t` when the folder has one, so that no step runs
// on the wrong expert.
void open_low_noise_expert(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions& load) {
  if (folder.model.empty()) return;
  const std::optional<std::string> expert = io::pipeline_component(folder.model, "transformer_2");
  if (!expert) return;
  const std::string index = (fs::path(folder.model) / "model_index.json").string();
  const nlohmann::json j = io::read_json(index);
  CPDIT_CHECK(j.contains("boundary_ratio") && j["boundary_ratio"].is_number() && j["boundary_ratio"].get<double>() > 0 &&
                  j["boundary_ratio"].get<double>() <= 1,
              invalid_argument, folder.model, " has a transformer_2/: generate runs it as Wan 2.2's low-noise expert, "
              "which needs a WanTransformer3DModel and a boundary_ratio in (0, 1] in ", index);
  t.low_noise = models::open_model(*expert, std::nullopt, load);
  const auto& high = wan_config(t);
  const auto* low = std::any_cast<models::wan::WanConfig>(&t.low_noise->config);
  CPDIT_CHECK(low && low->in_channels == high.in_channels && low->out_channels == high.out_channels &&
                  low->patch_size == high.patch_size && low->text_dim == high.text_dim &&
                  low->image_dim == high.image_dim,
              invalid_argument, *expert, " is not a WanTransformer3DModel that takes what transformer/ takes");
  t.boundary_timestep = j["boundary_ratio"].get<double>() * double(wan_schedule(t, 3.0).num_train_timesteps);
}

class WanFamily final : public Family {
 public:
  std::string name() const override { return "wan"; }
  std::string transformer_class() const override { return "WanTransformer3DModel"; }
  std::string preset_prefix() const override { return "wan-"; }
  FamilyDefaults defaults() const override {
    return {.steps = 50, .height = 480, .width = 832, .frames = 81, .preset_frames = 5};
  }
  bool takes_first_image() const override { return true; }
  bool takes_step_cache() const override { return true; }
  std::vector<std::string> taylor_seer_modules() const override { return wan_taylor_seer_modules(); }
  std::string scheduler_name() const override { return "UniPC"; }
  std::vector<std::string> scheduler_choices() const override { return {"unipc", "dpm++2m"}; }
  std::string latents_layout() const override { return "wan latents (B, 16, F, H/8, W/8)"; }

  std::vector<std::string> pipeline_classes() const override { return {"WanPipeline", "WanImageToVideoPipeline"}; }
  std::vector<TextSlot> text_slots() const override {
    return {{"tokenizer", "text_encoder", "UMT5EncoderModel", tokenizers::TokenizerKind::sentencepiece, "--umt5"}};
  }
  nn::TensorMap encode_prompt(const TextComponents& c, const PromptEncoding& r) const override {
    return encode_wan_prompt(c, r);
  }

  void configure(Transformer& t, const PipelineFolder& folder, const nn::LoadOptions& load) const override {
    read_wan_vae(t, folder);
    open_low_noise_expert(t, folder, load);
  }

  void check(const Request& r, const Transformer& t) const override {
    const models::wan::WanConfig& config = wan_config(t);
    check_first_image_taken(r, t, config, wan_takes_image(config));
    if (wan_takes_image(config)) check_image_to_video(r, t, config);
  }

  void check_fits(const Request& r, const Transformer& t) const override { check_video_fits(r, t, wan_config(t)); }

  // The default of WanPipeline and WanImageToVideoPipeline.
  void fill_guidance(Request& r, const Transformer& t) const override { fill_wan_guidance(r, t, 5.0f); }

  RankLoop loop(const LoopInputs& in) const override { return wan_loop(in, wan_config(in.transformer), 3.0); }
};

}  // namespace

const Family& wan_family() {
  static const WanFamily family;
  return family;
}

}  // namespace cpdit::pipeline
