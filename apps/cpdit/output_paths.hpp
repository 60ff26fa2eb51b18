#pragma once
// An output that would replace an input (--out naming the model's weights, --output = --inputs, or
// two outputs on one file) is refused before anything runs, so a good file is never overwritten.
#include <optional>
#include <string>
#include <vector>

namespace cpdit::app {

struct NamedPath {
  std::string flag;  // "--out"
  std::string path;  // empty: not given
};

// One-line Error when an output is the same file as an input or as another output (same path after
// resolving links and "..", or the same inode through a hard link).
void refuse_overwrite(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// What a command wrote, one "wrote PATH" line on stdout per output given (an empty path: not given).
void print_written(const std::vector<NamedPath>& outputs);

// `path` and, for a folder, every file under it: what any stage may read from it (a pipeline
// folder's VAE, text encoders, tokenizers, scheduler config and model_index.json; a tokenizer folder).
std::vector<NamedPath> folder_inputs(const std::string& flag, const std::string& path);

// An output folder (--frames-dir) is replaced whole: one-line Error when one of `paths` (an input, or
// another output) lies inside it.
void refuse_paths_inside(const NamedPath& folder, const std::vector<NamedPath>& paths);

// The files a --model path is read from: every file of a folder (folder_inputs), and the weights and
// config io::resolve_model finds (with every file beside a sharded index).
std::vector<NamedPath> model_inputs(const std::string& flag, const std::string& path, const std::string& component,
                                    const std::optional<std::string>& config);

}  // namespace cpdit::app
