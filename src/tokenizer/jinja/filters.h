// jinja2's built-in filters (`x | name(args)`) and tests (`x is name(args)`) that hub chat templates use,
// with `tojson` as HF transformers redefines it (json.dumps, ensure_ascii=False, keys in their order).
// Pure functions of their arguments; statements, macros and globals are the interpreter's.
#pragma once

#include <string_view>

#include "tokenizer/jinja/value.h"

namespace rwd::tokenizer::jinja {

// Throws Error for an unknown filter or unusable arguments.
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
bool apply_test(std::string_view name, const Value& input, const CallArgs& args);

}  // namespace rwd::tokenizer::jinja
