#pragma once
// A request's settings as JSON fields named as generate's long flags (prompt, negative_prompt, seed,
// steps, width, height, frames, ...): the lines of `generate --prompts FILE.jsonl` and the bodies of the
// server's jobs (serve/) read them through this one table, so a field means the same everywhere.
#include <cpdit/pipeline/request.hpp>

#include <nlohmann/json.hpp>

#include <string>

namespace cpdit::app {

// Sets field `key` of `r` from `value`; false for a name the table does not hold. A value of the wrong
// type or range is a one-line Error (invalid_argument) "WHERE: FIELD must be ...".
bool apply_request_field(const std::string& key, const nlohmann::json& value, const std::string& where,
                         pipeline::Request& r);

// The names apply_request_field takes, comma-separated, for the message that refuses another.
const std::string& request_field_names();

}  // namespace cpdit::app
