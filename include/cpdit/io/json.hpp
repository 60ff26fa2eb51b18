#pragma once
// JSON and text files, and the one atomic-write helper of cpdit.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace cpdit::io {

// Parses a JSON file; a missing file or bad JSON throws cpdit::Error naming the file (and the
// parse position).
nlohmann::json read_json(const std::string& path);
// Parses JSON text; bad JSON throws cpdit::Error(format) naming `source` and the parse position.
nlohmann::json parse_json(std::string_view text, const std::string& source);
// The largest text file read whole (a config, a tokenizer's vocabulary or model, a prompts list):
// Qwen2's tokenizer.json, among the largest, is 7 MiB.
inline constexpr int64_t kMaxTextFileBytes = int64_t(256) << 20;
// The whole file as bytes; a missing file, a folder, anything but a regular file (a FIFO, a device)
// and a file over `max_bytes` throw cpdit::Error(io) naming it, before anything is read.
std::string read_text(const std::string& path, int64_t max_bytes = kMaxTextFileBytes);

// Writes `text` to path atomically: a temp file in the same folder, fsync, rename. On failure the
// old file (if any) is untouched and no temp file is left behind.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace cpdit::io
