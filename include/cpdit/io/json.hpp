#pragma once
// JSON files and the one atomic-write helper of cpdit.
#include <nlohmann/json.hpp>

#include <string>

namespace cpdit::io {

// Parses a JSON file; a missing file or bad JSON throws cpdit::Error naming the file (and the
// parse position).
nlohmann::json read_json(const std::string& path);

// Writes `text` to path atomically: a temp file in the same folder, fsync, rename. On failure the
// old file (if any) is untouched and no temp file is left behind.
void write_text_atomic(const std::string& path, const std::string& text);

}  // namespace cpdit::io
