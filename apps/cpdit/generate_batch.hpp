#pragma once
// `cpdit generate --prompts FILE`: many requests on one opened pipeline. A .txt file holds one prompt a
// line; a .jsonl file one JSON object a line whose fields are generate's long flags (prompt,
// negative_prompt, seed, steps, width, height, ...: request_fields.hpp); either way each line
// takes the command line's other settings and the i-th request writes each output named on the command
// line with `{index}` replaced by i, or with _i before its extension (out.png: out_0.png, out_1.png, ...).
#include <cpdit/pipeline/request.hpp>
#include <cpdit/pipeline/stages.hpp>

#include <string>
#include <vector>

namespace cpdit::app {

struct Outputs {
  std::string out, preview, image, frames_dir, video;  // latents (safetensors), FLUX.1 preview, PNG, frames, MP4
  bool any() const { return !out.empty() || !preview.empty() || !image.empty() || !frames_dir.empty() || !video.empty(); }
};

struct BatchItem {
  pipeline::Request request;
  Outputs outputs;
};

// The requests of `path`, each `base` with the line's fields, and their outputs. Refuses an empty
// batch, a line that is not a JSON object of known fields, and a batch without outputs, naming the line.
std::vector<BatchItem> read_batch(const std::string& path, const pipeline::Request& base, const Outputs& outputs);

// `name` for request `index`: {index} replaced, else _index before the extension (a folder: name_index).
std::string indexed_name(const std::string& name, size_t index);

// The batch's closing line: the load once, how many requests ran, wall time in all.
void print_batch_line(int requests, const std::vector<pipeline::StageStats>& load, bool resident,
                      double load_seconds, double wall_seconds, bool json);

}  // namespace cpdit::app
