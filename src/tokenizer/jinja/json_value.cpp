// JSON conversion for template values: nlohmann::ordered_json in, Python json.dumps text out.
#include "tokenizer/jinja/json_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja/error.h"

namespace rwd::tokenizer::jinja {

namespace {

Value from_json_at(const nlohmann::ordered_json& json, int depth) {
  if (depth > kMaxValueDepth) fail("JSON nested deeper than {} levels", kMaxValueDepth);
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: return Value(static_cast<int64_t>(json.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array array;
      array.reserve(json.size());
      for (const auto& item : json) array.push_back(from_json_at(item, depth + 1));
      return Value(std::move(array));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object object;
      for (const auto& [key, item] : json.items()) object.set(key, from_json_at(item, depth + 1));
      return Value(std::move(object));
    }
    default: return Value::none();  // binary and discarded values do not occur in parsed JSON text
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) { return from_json_at(json, 0); }

namespace {

// Decodes one UTF-8 code point at `at` (advancing it); invalid bytes come back as themselves.
uint32_t next_code_point(const std::string& text, size_t& at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  int n_bytes = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 1;
  if (at + static_cast<size_t>(n_bytes) > text.size()) n_bytes = 1;
  uint32_t code = n_bytes == 1 ? lead : n_bytes == 2 ? (lead & 0x1fu) : n_bytes == 3 ? (lead & 0x0fu) : (lead & 0x07u);
  for (int k = 1; k < n_bytes; ++k) code = (code << 6) | (static_cast<unsigned char>(text[at + k]) & 0x3fu);
  at += static_cast<size_t>(n_bytes);
  return code;
}

void dump_string(const std::string& text, bool ensure_ascii, std::string& out) {
  out += '"';
  size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\b') {
      out += "\\b";
    } else if (c == '\f') {
      out += "\\f";
    } else if (byte < 0x20) {
      out += fmt::format("\\u{:04x}", byte);
    } else if (byte >= 0x80 && ensure_ascii) {
      const uint32_t code = next_code_point(text, at);
      if (code >= 0x10000) {
        const uint32_t offset = code - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", 0xd800 + (offset >> 10), 0xdc00 + (offset & 0x3ff));
      } else {
        out += fmt::format("\\u{:04x}", code);
      }
      continue;
    } else {
      out += c;
    }
    ++at;
  }
  out += '"';
}

void dump(const Value& value, const JsonDumpOptions& options, int depth, std::string& out) {
  if (depth > kMaxValueDepth) fail("tojson: value nested deeper than {} levels (or containing itself)", kMaxValueDepth);
  const std::string& item_separator =
      options.item_separator.empty() ? (options.indent >= 0 ? std::string(",") : std::string(", ")) : options.item_separator;
  const auto newline = [&](int level) {
    if (options.indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(options.indent * level), ' ');
  };
  switch (value.kind()) {
    case Value::Kind::none: out += "null"; return;
    case Value::Kind::boolean: out += value.as_int() ? "true" : "false"; return;
    case Value::Kind::integer: out += fmt::format("{}", value.as_int()); return;
    case Value::Kind::floating: {
      const double number = value.as_double();
      out += std::isnan(number) ? "NaN" : std::isinf(number) ? (number < 0 ? "-Infinity" : "Infinity")
                                                              : python_float_repr(number);
      return;
    }
    case Value::Kind::string: dump_string(value.as_string(), options.ensure_ascii, out); return;
    case Value::Kind::array: {
      const Array& array = value.array();
      if (array.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < array.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        dump(array[i], options, depth + 1, out);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::object: {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.object().entries) entries.push_back(&entry);
      if (options.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      }
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        dump_string(entries[i]->first, options.ensure_ascii, out);
        out += options.key_separator;
        dump(entries[i]->second, options, depth + 1, out);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::undefined: fail("tojson: Object of type Undefined is not JSON serializable");
    case Value::Kind::function: fail("tojson: Object of type function is not JSON serializable");
  }
}

}  // namespace

std::string dump_json(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  dump(value, options, 0, out);
  return out;
}

}  // namespace rwd::tokenizer::jinja
