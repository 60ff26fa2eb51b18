#pragma once
// Checkpoint keys in a layout other than diffusers' — the original releases' names, as the single files
// and the GGUF conversions of ComfyUI-GGUF and stable-diffusion.cpp carry them — renamed to diffusers
// keys. The mechanics every family shares live here; each family's names are data in its own
// checkpoint.cpp.
#include <cpdit/nn/load.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cpdit::io {
class Checkpoint;
}

namespace cpdit::nn {

// The prefix ComfyUI and stable-diffusion.cpp put before a diffusion model's tensors (a whole-pipeline
// file also holds the text encoders' and the VAE's under other prefixes).
extern const std::string kDiffusionModelPrefix;

// True when the checkpoint holds `name`, bare or behind kDiffusionModelPrefix.
bool contains_key(const io::Checkpoint& checkpoint, const std::string& name);
// The same for a state dict.
bool contains_key(const StateDict& state, const std::string& name);

// When some key starts with kDiffusionModelPrefix: those keys without it, and no others (the rest
// belong to other models of the file). Otherwise the state unchanged.
StateDict without_prefix(const StateDict& state);

// (original stem, diffusers stem): a tensor named stem, stem.weight or stem.bias is renamed, keeping
// its suffix.
using StemRenames = std::vector<std::pair<std::string, std::string>>;

// A tensor of the original that diffusers holds as several (FLUX.1's fused qkv): its rows are the
// parts' rows one after another.
struct FusedStem {
  std::string stem;                // "img_attn.qkv"
  std::vector<std::string> parts;  // diffusers stems, in row order: "attn.to_q", "attn.to_k", ...
};

// Renames inside numbered blocks: "<from>.N.<stem>" -> "<to>.N.<renamed stem>"; fused stems are cut by
// the family's own code (the parts' rows), named here for the files that address them whole (LoRA).
struct BlockRenames {
  std::string from, to;
  StemRenames stems;
  std::vector<FusedStem> fused;
};

// A family's original names: the stems outside blocks, and each kind of block's.
struct KeyLayout {
  StemRenames top;
  std::vector<BlockRenames> blocks;
};

// The diffusers name of an original `name`, or nullopt when no table names its stem.
std::optional<std::string> renamed_key(const std::string& name, const KeyLayout& layout);

// The original name of a diffusers module path (no .weight suffix), the inverse of renamed_key, and
// for a part of a fused stem that stem's name and the part's index; nullopt when no table names it.
struct OriginalName {
  std::string name;
  int part = -1;  // -1: renamed whole
  int parts = 1;
};
std::optional<OriginalName> original_name(const std::string& module, const KeyLayout& layout);

// Every key renamed by `layout` (keys it does not name kept as they are, for the loader to report).
StateDict renamed_keys(const StateDict& state, const KeyLayout& layout);

// Puts the rows of a fused tensor into `out` as parts of `rows` rows each, named names[i] (views, no
// copies); `what` names the tensor in the error when the rows do not add up.
void cut_rows(StateDict& out, const Weight& fused, const std::vector<std::string>& names,
              const std::vector<int64_t>& rows, const std::string& what);

}  // namespace cpdit::nn
