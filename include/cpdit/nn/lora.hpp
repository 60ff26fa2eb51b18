#pragma once
// LoRA adapters: low-rank updates W + s·up·down of a model's Linear layers, read from the files users
// download and applied at run time beside the base weights (nn::Linear::set_delta), so the base stays as
// loaded — mapped, bf16 or GGUF-quantised — and switching adapters copies nothing of it.
//
// A file's layout is told by its tensor names: diffusers / PEFT (`transformer.<module>.lora_A.weight`,
// `lora_B`, the rank and alpha in the safetensors metadata), kohya / sd-scripts and musubi-tuner
// (`lora_unet_<module, dots as underscores>.lora_down.weight`, `lora_up`, `.alpha`), ComfyUI and the
// original releases (`diffusion_model.<module>.lora_down.weight` or `lora_A`, `.alpha`). Modules are
// named as the model names them (diffusers) or as its release does (models::LoadedModel::original_names),
// a fused layer of the release (FLUX.1's qkv, the single blocks' linear1) cut into its parts by rows.
#include <cpdit/core/tensor.hpp>
#include <cpdit/nn/layers.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cpdit::io {
class SafetensorsFile;
}

namespace cpdit::nn {

struct KeyLayout;

// One module's update as its file gives it: W + scale·up·down.
struct LoraModule {
  std::string name;  // as the file names it, its prefix (transformer., diffusion_model.) removed
  Tensor down;       // (rank, in) f32
  Tensor up;         // (out, rank) f32
  double scale = 1;  // alpha / rank (rank-stabilised: alpha / sqrt(rank)); 1 when the file gives no alpha
};

struct LoraFile {
  std::string path;
  std::string layout;  // "diffusers/PEFT (lora_A, lora_B)", "kohya (lora_down, lora_up, alpha)", ...
  std::vector<LoraModule> modules;
};

// Reads and checks a LoRA safetensors file: every tensor a module's down, up or alpha, the two ranks
// equal, every value finite. Anything else (a LoCon mid tensor, DoRA's magnitudes, a full-weight diff)
// is refused in one line naming the tensor.
LoraFile read_lora(const std::string& path);
// The same over a file already open (the fuzzer's bytes).
LoraFile read_lora(const io::SafetensorsFile& file);

// An adapter and the weight it is applied with (diffusers' set_adapters weights, `--lora FILE:WEIGHT`),
// beside the weights or merged into them (`--lora-merge`, diffusers' fuse_lora).
struct LoraUse {
  std::shared_ptr<const LoraFile> file;
  double weight = 1;
  bool merge = false;
};

// How a file's modules meet a model: the Linear layers each names, by module path.
struct LoraMatch {
  std::map<std::string, std::vector<std::string>> layers;  // module name -> the model's Linear paths
  std::vector<std::string> unmatched;                      // module names that name no Linear
};
LoraMatch match_lora(Module& model, const LoraFile& file, const KeyLayout* original_names);

// The deltas `uses` put on `model`'s Linear layers, by layer path: the ranks of every adapter that
// touches a layer side by side, each adapter's scale times its weight in its up columns. Refused in one
// line naming the file: a module that names no layer of the model (how many of how many, and the first
// such name), or whose shape is not its layer's (a LoRA for another family or size).
using LoraDeltas = std::map<std::string, LowRankDelta>;
LoraDeltas lora_deltas(Module& model, const std::vector<LoraUse>& uses, const KeyLayout* original_names,
                       const std::string& model_name);

// The adapters merged into the weights they touch (`--lora-merge`, diffusers' fuse_lora): W + up·down for
// each delta's layer, in f32 and stored in W's own dtype (f32, bf16, f16), computed once and shared by
// every replica. A block-quantised weight (GGUF) is refused naming it: merging would requantise it, so
// an adapter on such a base runs unmerged.
using MergedWeights = std::map<std::string, Weight>;
MergedWeights merged_weights(Module& model, const LoraDeltas& deltas, const std::string& model_name);

// What a run puts on each replica's layers (a replica is bound afresh to the loaded weights every run):
// unmerged deltas beside their weights, merged weights in their place; every other layer's delta cleared.
struct LoraApplication {
  LoraDeltas deltas;
  MergedWeights merged;
};
void apply_lora(Module& model, const LoraApplication& lora);

// `uses` on `model`: the unmerged ones' deltas and the merged ones' weights (lora_deltas, merged_weights),
// charged to weight_memory_counter() (held once for every replica, as the model's weights are).
LoraApplication lora_application(Module& model, const std::vector<LoraUse>& uses, const KeyLayout* original_names,
                                 const std::string& model_name);

}  // namespace cpdit::nn
