// JSON at the edge of the template world: conversation and tool lists arrive as nlohmann::ordered_json and
// become Values (key order kept, as Python's json.loads keeps it); the `tojson` filter writes a Value the way
// Python's json.dumps does with HF transformers' arguments. Parsing JSON text is not done here.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tokenizer/jinja/value.h"

namespace rwd::tokenizer::jinja {

// Throws Error for JSON nested deeper than kMaxValueDepth.
Value value_from_json(const nlohmann::ordered_json& json);

struct JsonDumpOptions {
  int indent = -1;               // -1: one line; otherwise newline + this many spaces per level
  std::string item_separator;    // empty: ", " on one line, "," when indented (json.dumps' defaults)
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;     // HF passes False: non-ASCII text stays as it is
};

// json.dumps(value, ...): floats as Python's repr, control characters as \uXXXX. Throws Error for values JSON
// cannot hold (undefined, functions), as json.dumps raises TypeError.
std::string dump_json(const Value& value, const JsonDumpOptions& options);

}  // namespace rwd::tokenizer::jinja
