// Attribute and item access as jinja2 does it under HF's ImmutableSandboxedEnvironment: `obj.name` finds a
// Python method first (str.startswith, dict.items, ...) and then the dict item; `obj[key]` the other way
// round. Missing things are Undefined with jinja2's hint; methods that mutate lists and dicts are refused
// as the sandbox refuses them. Filters and tests are filters.h's.
#pragma once

#include <string_view>

#include "tokenizer/jinja/value.h"

namespace rwd::tokenizer::jinja {

// `object.name`. Throws Error when `object` is undefined (jinja2's UndefinedError).
Value get_attribute(const Value& object, std::string_view name);
// `object[key]`: list and string indices (negative from the end), dict keys. Throws on undefined `object`.
Value get_item(const Value& object, const Value& key);
// `object[start:stop:step]` for lists and strings; null pointers are omitted bounds.
Value get_slice(const Value& object, const Value* start, const Value* stop, const Value* step);

// Python's str.strip family: `chars` empty means whitespace.
std::string strip_chars(std::string_view text, std::string_view chars, bool left, bool right);
// Python's str.replace(old, new, count); count < 0 replaces all.
std::string replace_all(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count);

}  // namespace rwd::tokenizer::jinja
