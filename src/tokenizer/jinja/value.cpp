// Value: Python semantics of str(), repr(), bool(), ==, < and len() for template values.
#include "tokenizer/jinja/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tokenizer/jinja/error.h"

namespace rwd::tokenizer::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  depth = std::max(depth, value.depth() + 1);
  for (auto& [name, existing] : entries) {
    if (name == key) {
      existing = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

const Value* CallArgs::keyword_arg(std::string_view name) const {
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  // Shortest round-trip digits in scientific form, e.g. "-1.2345e+02", then Python's layout rules.
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string scientific(buffer, end);
  const bool negative = scientific[0] == '-';
  if (negative) scientific.erase(0, 1);
  const size_t e_pos = scientific.find('e');
  std::string digits = scientific.substr(0, e_pos);
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  const int exponent = std::atoi(scientific.c_str() + e_pos + 1);
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out;
  }
  if (exponent < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exponent - 1), '0');
    out += digits;
    return out;
  }
  const size_t n_int = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= n_int) {
    out += digits;
    out.append(n_int - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, n_int);
    out += '.';
    out.append(digits, n_int);
  }
  return out;
}

std::vector<std::string> split_characters(std::string_view text) {
  std::vector<std::string> characters;
  size_t at = 0;
  while (at < text.size()) {
    const auto lead = static_cast<unsigned char>(text[at]);
    size_t n_bytes = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xe ? 3 : (lead >> 3) == 0x1e ? 4 : 1;
    if (at + n_bytes > text.size()) n_bytes = 1;
    for (size_t k = 1; k < n_bytes; ++k) {
      if ((static_cast<unsigned char>(text[at + k]) & 0xc0) != 0x80) n_bytes = 1;
    }
    characters.emplace_back(text.substr(at, n_bytes));
    at += n_bytes;
  }
  return characters;
}

namespace {

// Python's repr() of a str: single quotes unless the text holds ' and no ", escapes for control characters.
std::string string_repr(const std::string& text) {
  const bool use_double = text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += fmt::format("\\x{:02x}", byte);
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

}  // namespace

Value::Value(Array array) : kind_(Kind::array), array_(std::make_shared<Array>(std::move(array))) {
  array_depth_ = 1;
  for (const Value& item : *array_) array_depth_ = std::max(array_depth_, item.depth() + 1);
}

int Value::depth() const {
  if (kind_ == Kind::array) return array_depth_;
  if (kind_ == Kind::object) return object_->depth;
  return 0;
}

namespace {

void check_walk_depth(int depth) {
  if (depth > kMaxValueDepth) fail("value nested deeper than {} levels (or containing itself)", kMaxValueDepth);
}

}  // namespace

bool Value::truthy() const {
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean:
    case Kind::integer: return int_ != 0;
    case Kind::floating: return float_ != 0.0;
    case Kind::string: return !string_.empty();
    case Kind::array: return !array_->empty();
    case Kind::object: return !object_->entries.empty();
    case Kind::function: return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::string: return string_;
    default: return repr();
  }
}

std::string Value::repr() const { return repr_at(0); }

std::string Value::repr_at(int depth) const {
  check_walk_depth(depth);
  switch (kind_) {
    case Kind::undefined: return "";
    case Kind::none: return "None";
    case Kind::boolean: return int_ ? "True" : "False";
    case Kind::integer: return fmt::format("{}", int_);
    case Kind::floating: return python_float_repr(float_);
    case Kind::string: return string_repr(string_);
    case Kind::array: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < array_->size(); ++i) {
        if (i > 0) out += ", ";
        out += (*array_)[i].repr_at(depth + 1);
      }
      if (tuple_) return out + (array_->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::object: {
      std::string out = object_->is_namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < object_->entries.size(); ++i) {
        if (i > 0) out += ", ";
        out += string_repr(object_->entries[i].first);
        out += ": ";
        out += object_->entries[i].second.repr_at(depth + 1);
      }
      return out + (object_->is_namespace ? "}>" : "}");
    }
    case Kind::function: return "<function>";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::array: return tuple_ ? "tuple" : "list";
    case Kind::object: return object_->is_namespace ? "Namespace" : "dict";
    case Kind::function: return "function";
  }
  return "object";
}

bool Value::equals(const Value& other) const { return equals_at(other, 0); }

bool Value::equals_at(const Value& other, int depth) const {
  check_walk_depth(depth);
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::floating || other.kind_ == Kind::floating) return as_double() == other.as_double();
    return int_ == other.int_;
  }
  if (kind_ != other.kind_) return false;
  switch (kind_) {
    case Kind::undefined:
    case Kind::none: return true;
    case Kind::string: return string_ == other.string_;
    case Kind::array: {
      if (array_->size() != other.array_->size()) return false;
      for (size_t i = 0; i < array_->size(); ++i) {
        if (!(*array_)[i].equals_at((*other.array_)[i], depth + 1)) return false;
      }
      return true;
    }
    case Kind::object: {
      if (object_->entries.size() != other.object_->entries.size()) return false;
      for (const auto& [key, value] : object_->entries) {
        const Value* found = other.object_->find(key);
        if (found == nullptr || !value.equals_at(*found, depth + 1)) return false;
      }
      return true;
    }
    case Kind::function: return function_ == other.function_;
    default: return false;
  }
}

bool Value::less(const Value& other) const { return less_at(other, 0); }

bool Value::less_at(const Value& other, int depth) const {
  check_walk_depth(depth);
  if (is_number() && other.is_number()) {
    if (kind_ == Kind::floating || other.kind_ == Kind::floating) return as_double() < other.as_double();
    return int_ < other.int_;
  }
  if (is_string() && other.is_string()) return string_ < other.string_;  // UTF-8 byte order is code point order
  if (is_array() && other.is_array()) {
    const size_t n = std::min(array_->size(), other.array_->size());
    for (size_t i = 0; i < n; ++i) {
      if ((*array_)[i].less_at((*other.array_)[i], depth + 1)) return true;
      if ((*other.array_)[i].less_at((*array_)[i], depth + 1)) return false;
    }
    return array_->size() < other.array_->size();
  }
  fail("'<' not supported between instances of '{}' and '{}'", type_name(), other.type_name());
}

int64_t Value::length() const {
  switch (kind_) {
    case Kind::undefined: return 0;
    case Kind::string: return static_cast<int64_t>(split_characters(string_).size());
    case Kind::array: return static_cast<int64_t>(array_->size());
    case Kind::object: return static_cast<int64_t>(object_->entries.size());
    default: fail("object of type '{}' has no len()", type_name());
  }
}

Array Value::iterate() const {
  switch (kind_) {
    case Kind::undefined: return {};
    case Kind::array: return *array_;
    case Kind::object: {
      Array keys;
      for (const auto& entry : object_->entries) keys.emplace_back(entry.first);
      return keys;
    }
    case Kind::string: {
      Array characters;
      for (std::string& character : split_characters(string_)) characters.emplace_back(std::move(character));
      return characters;
    }
    default: fail("'{}' object is not iterable", type_name());
  }
}

}  // namespace rwd::tokenizer::jinja
