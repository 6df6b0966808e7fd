// The Python methods hub templates call on strings, dicts and lists, bound at attribute access.
#include "tokenizer/jinja/methods.h"

#include <algorithm>
#include <cctype>

#include "tokenizer/jinja/error.h"

namespace rwd::tokenizer::jinja {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\v\f";

std::string object_description(const Value& object) {
  if (object.is_none()) return "'None'";
  return fmt::format("'{} object'", object.type_name());
}

[[noreturn]] void fail_undefined(const Value& object) {
  fail("{}", object.undefined_hint().empty() ? std::string("value is undefined") : object.undefined_hint());
}

// By value: the fallback is often a temporary.
Value arg_or(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
  const Value* value = args.get(index, name);
  return value != nullptr ? *value : fallback;
}

std::string string_arg(const CallArgs& args, size_t index, std::string_view name, std::string_view method) {
  const Value* value = args.get(index, name);
  if (value == nullptr || !value->is_string()) fail("str.{}: argument {} must be a string", method, index + 1);
  return value->as_string();
}

std::vector<std::string> split(const std::string& text, const Value& separator, int64_t max_split) {
  std::vector<std::string> parts;
  if (separator.is_none() || separator.is_undefined()) {
    size_t at = 0;
    while (true) {
      at = text.find_first_not_of(kWhitespace, at);
      if (at == std::string::npos) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split) {
        std::string rest = text.substr(at);
        parts.push_back(strip_chars(rest, "", false, true));
        break;
      }
      const size_t end = text.find_first_of(kWhitespace, at);
      parts.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
      if (end == std::string::npos) break;
      at = end;
    }
    return parts;
  }
  if (!separator.is_string()) fail("str.split: separator must be a string or None");
  const std::string& sep = separator.as_string();
  if (sep.empty()) fail("str.split: empty separator");
  size_t at = 0;
  while (true) {
    const size_t found = text.find(sep, at);
    if (found == std::string::npos || (max_split >= 0 && static_cast<int64_t>(parts.size()) == max_split)) {
      parts.push_back(text.substr(at));
      return parts;
    }
    parts.push_back(text.substr(at, found - at));
    at = found + sep.size();
  }
}

bool affix_matches(const std::string& text, const Value& affix, bool prefix) {
  const auto one = [&](const Value& candidate) {
    if (!candidate.is_string()) fail("str.{}: argument must be a string or a tuple of strings", prefix ? "startswith" : "endswith");
    const std::string& part = candidate.as_string();
    if (part.size() > text.size()) return false;
    return prefix ? text.compare(0, part.size(), part) == 0 : text.compare(text.size() - part.size(), part.size(), part) == 0;
  };
  if (affix.is_array()) {
    return std::any_of(affix.array().begin(), affix.array().end(), one);
  }
  return one(affix);
}

std::string change_case(std::string text, bool upper) {
  for (char& c : text) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Value string_method(const std::string& text, std::string_view name, const CallArgs& args) {
  static const Value kNone = Value::none();
  if (name == "startswith" || name == "endswith") {
    const Value* affix = args.get(0, "prefix");
    if (affix == nullptr) fail("str.{}: takes at least 1 argument", name);
    return Value(affix_matches(text, *affix, name == "startswith"));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value& chars = arg_or(args, 0, "chars", kNone);
    const std::string set = chars.is_string() ? chars.as_string() : std::string();
    if (chars.is_string() && set.empty()) return Value(text);
    return Value(strip_chars(text, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "split") {
    const Value& max_split = arg_or(args, 1, "maxsplit", Value(int64_t{-1}));
    Array parts;
    for (std::string& part : split(text, arg_or(args, 0, "sep", kNone), max_split.as_int())) parts.emplace_back(std::move(part));
    return Value(std::move(parts));
  }
  if (name == "splitlines") {
    Array lines;
    size_t at = 0;
    while (at < text.size()) {
      const size_t end = text.find('\n', at);
      if (end == std::string::npos) {
        lines.emplace_back(text.substr(at));
        break;
      }
      lines.emplace_back(text.substr(at, end - at));
      at = end + 1;
    }
    return Value(std::move(lines));
  }
  if (name == "upper" || name == "lower") return Value(change_case(text, name == "upper"));
  if (name == "replace") {
    const Value& count = arg_or(args, 2, "count", Value(int64_t{-1}));
    return Value(replace_all(text, string_arg(args, 0, "old", name), string_arg(args, 1, "new", name), count.as_int()));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const std::string needle = string_arg(args, 0, "sub", name);
    if (name == "count") {
      if (needle.empty()) return Value(static_cast<int64_t>(split_characters(text).size() + 1));
      int64_t n = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
      return Value(n);
    }
    const size_t found = name == "find" ? text.find(needle) : text.rfind(needle);
    if (found == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(split_characters(text.substr(0, found)).size()));
  }
  if (name == "join") {
    const Value* items = args.get(0, "iterable");
    if (items == nullptr) fail("str.join: takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& item : items->iterate()) {
      if (!item.is_string()) fail("str.join: expected str instance, {} found", item.type_name());
      if (!first) out += text;
      out += item.as_string();
      first = false;
    }
    return Value(std::move(out));
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
    if (text.empty()) return Value(false);
    return Value(std::all_of(text.begin(), text.end(), [&](char c) {
      const auto byte = static_cast<unsigned char>(c);
      return name == "isdigit" ? std::isdigit(byte) != 0
             : name == "isalpha" ? std::isalpha(byte) != 0
             : name == "isspace" ? std::isspace(byte) != 0
                                 : std::isalnum(byte) != 0;
    }));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string affix = string_arg(args, 0, name == "removeprefix" ? "prefix" : "suffix", name);
    if (affix_matches(text, Value(affix), name == "removeprefix")) {
      return Value(name == "removeprefix" ? text.substr(affix.size()) : text.substr(0, text.size() - affix.size()));
    }
    return Value(text);
  }
  fail("'str object' has no attribute '{}'", name);
}

bool is_string_method(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "startswith", "endswith", "strip", "lstrip",  "rstrip",  "split",   "splitlines",   "upper",       "lower",
      "replace",    "find",     "rfind", "count",   "join",    "isdigit", "isalpha",      "isspace",     "isalnum",
      "removeprefix", "removesuffix"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value dict_method(const Value& dict, std::string_view name, const CallArgs& args) {
  const Object& object = dict.object();
  if (name == "items") {
    Array items;
    for (const auto& [key, value] : object.entries) items.push_back(Value::tuple(Array{Value(key), value}));
    return Value(std::move(items));
  }
  if (name == "keys" || name == "values") {
    Array items;
    for (const auto& [key, value] : object.entries) items.push_back(name == "keys" ? Value(key) : value);
    return Value(std::move(items));
  }
  if (name == "get") {
    const Value* key = args.get(0, "key");
    if (key == nullptr) fail("dict.get: takes at least 1 argument");
    const Value* found = key->is_string() ? object.find(key->as_string()) : nullptr;
    if (found != nullptr) return *found;
    const Value* fallback = args.get(1, "default");
    return fallback != nullptr ? *fallback : Value::none();
  }
  fail("'dict object' has no attribute '{}'", name);
}

bool is_dict_method(std::string_view name) { return name == "items" || name == "keys" || name == "values" || name == "get"; }

bool is_unsafe_method(const Value& object, std::string_view name) {
  static constexpr std::string_view kList[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
  static constexpr std::string_view kDict[] = {"update", "pop", "popitem", "setdefault", "clear"};
  if (object.is_array()) return std::find(std::begin(kList), std::end(kList), name) != std::end(kList);
  if (object.is_object() && !object.object().is_namespace) {
    return std::find(std::begin(kDict), std::end(kDict), name) != std::end(kDict);
  }
  return false;
}

Value list_method(const Value& list, std::string_view name, const CallArgs& args) {
  const Value* needle = args.get(0, "value");
  if (needle == nullptr) fail("list.{}: takes exactly one argument", name);
  int64_t n = 0;
  for (size_t i = 0; i < list.array().size(); ++i) {
    if (!list.array()[i].equals(*needle)) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index") fail("list.index: {} is not in list", needle->repr());
  return Value(n);
}

int64_t normalize_index(int64_t index, int64_t size) { return index < 0 ? index + size : index; }

}  // namespace

std::string strip_chars(std::string_view text, std::string_view chars, bool left, bool right) {
  // Character sets with non-ASCII characters strip whole code points.
  const std::vector<std::string> set = split_characters(chars.empty() ? kWhitespace : chars);
  std::vector<std::string> characters = split_characters(text);
  const auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t begin = 0;
  size_t end = characters.size();
  if (left) {
    while (begin < end && in_set(characters[begin])) ++begin;
  }
  if (right) {
    while (end > begin && in_set(characters[end - 1])) --end;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i) out += characters[i];
  return out;
}

std::string replace_all(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  int64_t n_done = 0;
  if (old_text.empty()) {
    // Python inserts `new` before every character and at the end.
    for (const std::string& c : split_characters(text)) {
      if (count < 0 || n_done < count) {
        out += new_text;
        ++n_done;
      }
      out += c;
    }
    if (count < 0 || n_done < count) out += new_text;
    return out;
  }
  size_t at = 0;
  while (count < 0 || n_done < count) {
    const size_t found = text.find(old_text, at);
    if (found == std::string_view::npos) break;
    out += text.substr(at, found - at);
    out += new_text;
    at = found + old_text.size();
    ++n_done;
  }
  out += text.substr(at);
  return out;
}

Value get_attribute(const Value& object, std::string_view name) {
  if (object.is_undefined()) fail_undefined(object);
  if (is_unsafe_method(object, name)) {
    const std::string message = fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, object.type_name());
    return Value(Function([message](const CallArgs&) -> Value { fail("{}", message); }));
  }
  if (object.is_string() && is_string_method(name)) {
    const std::string text = object.as_string();
    const std::string method(name);
    return Value(Function([text, method](const CallArgs& args) { return string_method(text, method, args); }));
  }
  if (object.is_object()) {
    if (!object.object().is_namespace && is_dict_method(name)) {
      const std::string method(name);
      return Value(Function([object, method](const CallArgs& args) { return dict_method(object, method, args); }));
    }
    const Value* found = object.object().find(name);
    if (found != nullptr) return *found;
  }
  if (object.is_array() && (name == "index" || name == "count")) {
    const std::string method(name);
    return Value(Function([object, method](const CallArgs& args) { return list_method(object, method, args); }));
  }
  return Value::undefined(fmt::format("{} has no attribute '{}'", object_description(object), name));
}

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined()) fail_undefined(object);
  if (object.is_object()) {
    if (key.is_string()) {
      const Value* found = object.object().find(key.as_string());
      if (found != nullptr) return *found;
      return get_attribute(object, key.as_string());
    }
  } else if ((object.is_array() || object.is_string()) && key.is_int() && !key.is_bool()) {
    if (object.is_array()) {
      const auto size = static_cast<int64_t>(object.array().size());
      const int64_t index = normalize_index(key.as_int(), size);
      if (index >= 0 && index < size) return object.array()[static_cast<size_t>(index)];
    } else {
      const std::vector<std::string> characters = split_characters(object.as_string());
      const int64_t index = normalize_index(key.as_int(), static_cast<int64_t>(characters.size()));
      if (index >= 0 && index < static_cast<int64_t>(characters.size())) return Value(characters[static_cast<size_t>(index)]);
    }
  } else if (key.is_string()) {
    return get_attribute(object, key.as_string());
  }
  // jinja2 words this one without quotes around the type: "list object has no element 0".
  const std::string type = object.is_none() ? std::string("None") : fmt::format("{} object", object.type_name());
  return Value::undefined(fmt::format("{} has no element {}", type, key.repr()));
}

Value get_slice(const Value& object, const Value* start, const Value* stop, const Value* step) {
  if (object.is_undefined()) fail_undefined(object);
  if (!object.is_array() && !object.is_string()) fail("'{}' object is not subscriptable", object.type_name());
  const auto bound = [](const Value* value) -> const Value* {
    return value == nullptr || value->is_none() ? nullptr : value;
  };
  start = bound(start);
  stop = bound(stop);
  step = bound(step);
  for (const Value* part : {start, stop, step}) {
    if (part != nullptr && (!part->is_int() || part->is_bool())) fail("slice indices must be integers or None");
  }
  const int64_t stride = step != nullptr ? step->as_int() : 1;
  if (stride == 0) fail("slice step cannot be zero");
  std::vector<Value> items;
  if (object.is_array()) {
    items = object.array();
  } else {
    for (std::string& c : split_characters(object.as_string())) items.emplace_back(std::move(c));
  }
  const auto size = static_cast<int64_t>(items.size());
  // Python's PySlice_AdjustIndices.
  const auto adjust = [&](const Value* value, int64_t fallback) {
    if (value == nullptr) return fallback;
    int64_t index = value->as_int();
    if (index < 0) {
      index += size;
      if (index < 0) index = stride < 0 ? -1 : 0;
    } else if (index >= size) {
      index = stride < 0 ? size - 1 : size;
    }
    return index;
  };
  const int64_t first = adjust(start, stride < 0 ? size - 1 : 0);
  const int64_t last = adjust(stop, stride < 0 ? -1 : size);
  Array out;
  for (int64_t i = first; stride > 0 ? i < last : i > last; i += stride) out.push_back(items[static_cast<size_t>(i)]);
  if (object.is_array()) return Value(std::move(out));
  std::string text;
  for (const Value& c : out) text += c.as_string();
  return Value(std::move(text));
}

}  // namespace rwd::tokenizer::jinja
