// Filters and tests, each a few lines after jinja2's own definitions (jinja2/filters.py, jinja2/tests.py).
#include "tokenizer/jinja/filters.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/json_value.h"
#include "tokenizer/jinja/methods.h"

namespace rwd::tokenizer::jinja {
namespace {

// By value: the fallback is often a temporary.
Value arg_or(const CallArgs& args, size_t index, std::string_view name, const Value& fallback) {
  const Value* value = args.get(index, name);
  return value != nullptr ? *value : fallback;
}

// jinja2 reads `attribute="a.b"` as a path; integer parts index lists.
Value attribute_path(const Value& object, const std::string& path) {
  Value current = object;
  size_t at = 0;
  while (true) {
    const size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = numeric ? get_item(current, Value(static_cast<int64_t>(std::strtoll(part.c_str(), nullptr, 10))))
                      : get_item(current, Value(part));
    if (dot == std::string::npos) return current;
    at = dot + 1;
  }
}

std::string lower_ascii(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string upper_ascii(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The key sort, unique, min and max compare by: strings fold case unless case_sensitive.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = attribute.is_string() ? attribute_path(item, attribute.as_string()) : item;
  if (!case_sensitive && key.is_string()) return Value(lower_ascii(key.as_string()));
  return key;
}

Array as_list(const Value& input) { return input.iterate(); }

std::string title_case(const std::string& text) {
  // jinja2: words start after whitespace or one of -({[<.
  std::string out;
  bool word_start = true;
  for (const char c : text) {
    const bool separator = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
                           c == '[' || c == '<';
    if (separator) {
      out += c;
      word_start = true;
    } else {
      out += static_cast<char>(word_start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      word_start = false;
    }
  }
  return out;
}

Value to_json(const Value& input, const CallArgs& args) {
  // HF's signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  JsonDumpOptions options;
  static const Value kNone = Value::none();
  options.ensure_ascii = arg_or(args, 0, "ensure_ascii", Value(false)).truthy();
  const Value& indent = arg_or(args, 1, "indent", kNone);
  if (indent.is_int()) options.indent = static_cast<int>(std::max<int64_t>(0, indent.as_int()));
  const Value& separators = arg_or(args, 2, "separators", kNone);
  if (separators.is_array() && separators.array().size() == 2) {
    options.item_separator = separators.array()[0].str();
    options.key_separator = separators.array()[1].str();
  }
  options.sort_keys = arg_or(args, 3, "sort_keys", Value(false)).truthy();
  return Value(dump_json(input, options));
}

Value indent_filter(const Value& input, const CallArgs& args) {
  const Value& width = arg_or(args, 0, "width", Value(int64_t{4}));
  const bool first = arg_or(args, 1, "first", Value(false)).truthy();
  const bool blank = arg_or(args, 2, "blank", Value(false)).truthy();
  const std::string indention = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  std::vector<std::string> lines;
  const std::string text = input.str() + "\n";
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (blank || !lines[i].empty())) out += indention;
    out += lines[i];
  }
  if (first) out = indention + out;
  return Value(std::move(out));
}

int64_t to_int(const Value& input, const Value& fallback, int64_t base) {
  if (input.is_int()) return input.as_int();
  if (input.kind() == Value::Kind::floating) return static_cast<int64_t>(std::trunc(input.as_double()));
  if (input.is_string()) {
    std::string text = strip_chars(input.as_string(), "", true, true);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    char* end = nullptr;
    errno = 0;
    const long long parsed = std::strtoll(text.c_str(), &end, static_cast<int>(base));
    if (!text.empty() && end == text.c_str() + text.size() && errno == 0) return parsed;
    const double as_float = std::strtod(text.c_str(), &end);
    if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(as_float)) return static_cast<int64_t>(as_float);
  }
  return fallback.as_int();
}

Value select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
  // select(test, args...), selectattr(attribute, test, args...); no test: truthiness.
  const size_t first_test_arg = by_attribute ? 1 : 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) fail("selectattr/rejectattr need an attribute name");
    attribute = args.positional[0].as_string();
  }
  std::string test;
  CallArgs test_args;
  if (args.positional.size() > first_test_arg) {
    test = args.positional[first_test_arg].str();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(first_test_arg) + 1, args.positional.end());
  }
  Array out;
  for (const Value& item : as_list(input)) {
    const Value subject = by_attribute ? attribute_path(item, attribute) : item;
    const bool passed = test.empty() ? subject.truthy() : apply_test(test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map_items(const Value& input, const CallArgs& args) {
  Array out;
  const Value* attribute = args.keyword_arg("attribute");
  if (attribute != nullptr) {
    const Value* fallback = args.keyword_arg("default");
    for (const Value& item : as_list(input)) {
      Value value = attribute_path(item, attribute->str());
      out.push_back(value.is_undefined() && fallback != nullptr ? *fallback : value);
    }
    return Value(std::move(out));
  }
  if (args.positional.empty()) fail("map: needs a filter name or attribute=");
  const std::string filter = args.positional[0].str();
  CallArgs filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : as_list(input)) out.push_back(apply_filter(filter, item, filter_args));
  return Value(std::move(out));
}

Value sort_items(const Value& input, const CallArgs& args) {
  const bool reverse = arg_or(args, 0, "reverse", Value(false)).truthy();
  const bool case_sensitive = arg_or(args, 1, "case_sensitive", Value(false)).truthy();
  static const Value kNone = Value::none();
  const Value& attribute = arg_or(args, 2, "attribute", kNone);
  Array items = as_list(input);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(items[i], attribute, case_sensitive), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? b.first.less(a.first) : a.first.less(b.first);
  });
  Array out;
  for (const auto& entry : keyed) out.push_back(items[entry.second]);
  return Value(std::move(out));
}

Value unique_items(const Value& input, const CallArgs& args) {
  const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value(false)).truthy();
  static const Value kNone = Value::none();
  const Value& attribute = arg_or(args, 1, "attribute", kNone);
  Array out;
  std::vector<Value> seen;
  for (const Value& item : as_list(input)) {
    Value key = sort_key(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& other) { return other.equals(key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(item);
  }
  return Value(std::move(out));
}

Value min_max(const Value& input, const CallArgs& args, bool want_max) {
  const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value(false)).truthy();
  static const Value kNone = Value::none();
  const Value& attribute = arg_or(args, 1, "attribute", kNone);
  const Array items = as_list(input);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value key = sort_key(items[i], attribute, case_sensitive);
    const Value best_key = sort_key(items[best], attribute, case_sensitive);
    if (want_max ? best_key.less(key) : key.less(best_key)) best = i;
  }
  return items[best];
}

Value add_values(const Value& left, const Value& right) {
  if (left.is_int() && right.is_int()) return Value(left.as_int() + right.as_int());
  if (left.is_number() && right.is_number()) return Value(left.as_double() + right.as_double());
  fail("sum: unsupported operand types '{}' and '{}'", left.type_name(), right.type_name());
}

// Filters of one value: strings, numbers, JSON. nullopt: not one of these.
std::optional<Value> scalar_filter(std::string_view name, const Value& input, const CallArgs& args) {
  static const Value kNone = Value::none();
  if (name == "tojson") return to_json(input, args);
  if (name == "trim") {
    const Value& chars = arg_or(args, 0, "chars", kNone);
    return Value(strip_chars(input.str(), chars.is_string() ? chars.as_string() : "", true, true));
  }
  if (name == "length" || name == "count") return Value(input.length());
  if (name == "lower") return Value(lower_ascii(input.str()));
  if (name == "upper") return Value(upper_ascii(input.str()));
  if (name == "title") return Value(title_case(input.str()));
  if (name == "capitalize") {
    std::string text = lower_ascii(input.str());
    if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
    return Value(std::move(text));
  }
  if (name == "replace") {
    const Value* old_text = args.get(0, "old");
    const Value* new_text = args.get(1, "new");
    if (old_text == nullptr || new_text == nullptr) fail("replace: needs old and new");
    const Value& count = arg_or(args, 2, "count", kNone);
    return Value(replace_all(input.str(), old_text->str(), new_text->str(), count.is_int() ? count.as_int() : -1));
  }
  if (name == "join") {
    const std::string separator = arg_or(args, 0, "d", Value("")).str();
    const Value& attribute = arg_or(args, 1, "attribute", kNone);
    std::string out;
    bool first = true;
    for (const Value& item : as_list(input)) {
      if (!first) out += separator;
      out += attribute.is_string() ? attribute_path(item, attribute.as_string()).str() : item.str();
      first = false;
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    const Array items = as_list(input);
    if (items.empty()) return Value::undefined(fmt::format("{}: sequence is empty", name));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg_or(args, 1, "boolean", Value(false)).truthy();
    if (input.is_undefined() || (boolean && !input.truthy())) return arg_or(args, 0, "default_value", Value(""));
    return input;
  }
  if (name == "string") return Value(input.str());
  if (name == "safe" || name == "escape" || name == "e" || name == "forceescape") {
    if (name == "safe") return input;
    std::string out;
    for (const char c : input.str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value(std::move(out));
  }
  if (name == "int") {
    return Value(to_int(input, arg_or(args, 0, "default", Value(int64_t{0})), arg_or(args, 1, "base", Value(int64_t{10})).as_int()));
  }
  if (name == "float") {
    if (input.is_number()) return Value(input.as_double());
    if (input.is_string()) {
      const std::string text = strip_chars(input.as_string(), "", true, true);
      char* end = nullptr;
      const double parsed = std::strtod(text.c_str(), &end);
      if (!text.empty() && end == text.c_str() + text.size()) return Value(parsed);
    }
    return Value(arg_or(args, 0, "default", Value(0.0)).as_double());
  }
  if (name == "abs") {
    if (input.is_int()) return Value(input.as_int() < 0 ? -input.as_int() : input.as_int());
    if (input.is_number()) return Value(std::fabs(input.as_double()));
    fail("abs: bad operand type '{}'", input.type_name());
  }
  if (name == "round") {
    const int64_t precision = arg_or(args, 0, "precision", Value(int64_t{0})).as_int();
    const std::string method = arg_or(args, 1, "method", Value("common")).str();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double scaled = input.as_double() * scale;
    const double rounded = method == "floor" ? std::floor(scaled) : method == "ceil" ? std::ceil(scaled) : std::nearbyint(scaled);
    return Value(rounded / scale);
  }
  return std::nullopt;
}

// Filters of sequences and mappings. nullopt: not one of these.
std::optional<Value> sequence_filter(std::string_view name, const Value& input, const CallArgs& args) {
  static const Value kNone = Value::none();
  if (name == "list") return Value(as_list(input));
  if (name == "items") {
    if (input.is_undefined()) return Value(Array{});
    if (!input.is_object()) fail("items: can only get items from a mapping, not '{}'", input.type_name());
    Array items;
    for (const auto& [key, value] : input.object().entries) items.push_back(Value::tuple(Array{Value(key), value}));
    return Value(std::move(items));
  }
  if (name == "dictsort") {
    if (!input.is_object()) fail("dictsort: needs a mapping, not '{}'", input.type_name());
    const bool case_sensitive = arg_or(args, 0, "case_sensitive", Value(false)).truthy();
    const bool by_value = arg_or(args, 1, "by", Value("key")).str() == "value";
    const bool reverse = arg_or(args, 2, "reverse", Value(false)).truthy();
    Array items;
    for (const auto& [key, value] : input.object().entries) items.push_back(Value::tuple(Array{Value(key), value}));
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      const Value key_a = sort_key(a.array()[by_value ? 1 : 0], kNone, case_sensitive);
      const Value key_b = sort_key(b.array()[by_value ? 1 : 0], kNone, case_sensitive);
      return reverse ? key_b.less(key_a) : key_a.less(key_b);
    });
    return Value(std::move(items));
  }
  if (name == "selectattr") return select_items(input, args, true, true);
  if (name == "rejectattr") return select_items(input, args, true, false);
  if (name == "select") return select_items(input, args, false, true);
  if (name == "reject") return select_items(input, args, false, false);
  if (name == "map") return map_items(input, args);
  if (name == "unique") return unique_items(input, args);
  if (name == "reverse") {
    if (input.is_string()) {
      std::vector<std::string> characters = split_characters(input.as_string());
      std::string out;
      for (auto it = characters.rbegin(); it != characters.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    Array items = as_list(input);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort") return sort_items(input, args);
  if (name == "min" || name == "max") return min_max(input, args, name == "max");
  if (name == "sum") {
    const Value& attribute = arg_or(args, 0, "attribute", kNone);
    Value total = arg_or(args, 1, "start", Value(int64_t{0}));
    for (const Value& item : as_list(input)) total = add_values(total, attribute.is_string() ? attribute_path(item, attribute.as_string()) : item);
    return total;
  }
  if (name == "indent") return indent_filter(input, args);
  if (name == "attr") {
    const Value* attribute = args.get(0, "name");
    if (attribute == nullptr) fail("attr: needs a name");
    return get_attribute(input, attribute->str());
  }
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (const char c : input.str()) {
      const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (static_cast<unsigned char>(c) >= 0x80);
      if (word && !in_word) ++n;
      in_word = word;
    }
    return Value(n);
  }
  if (name == "center") {
    const int64_t width = arg_or(args, 0, "width", Value(int64_t{80})).as_int();
    const std::string text = input.str();
    const int64_t n_pad = width - static_cast<int64_t>(split_characters(text).size());
    if (n_pad <= 0) return Value(text);
    const int64_t left = n_pad / 2 + (n_pad & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + text + std::string(static_cast<size_t>(n_pad - left), ' '));
  }
  return std::nullopt;
}

}  // namespace

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  if (std::optional<Value> result = scalar_filter(name, input, args)) return std::move(*result);
  if (std::optional<Value> result = sequence_filter(name, input, args)) return std::move(*result);
  fail("no filter named '{}'", name);
}

bool apply_test(std::string_view name, const Value& input, const CallArgs& args) {
  const auto argument = [&]() -> const Value& {
    const Value* value = args.get(0, "value");
    if (value == nullptr) fail("test '{}' needs an argument", name);
    return *value;
  };
  if (name == "defined") return !input.is_undefined();
  if (name == "undefined") return input.is_undefined();
  if (name == "none") return input.is_none();
  if (name == "string") return input.is_string();
  if (name == "mapping") return input.is_object() && !input.object().is_namespace;
  if (name == "sequence") return input.is_string() || input.is_array() || (input.is_object() && !input.object().is_namespace);
  if (name == "iterable") return input.is_string() || input.is_array() || input.is_object() || input.is_undefined();
  if (name == "number") return input.is_number();
  if (name == "integer") return input.kind() == Value::Kind::integer;
  if (name == "float") return input.kind() == Value::Kind::floating;
  if (name == "boolean") return input.is_bool();
  if (name == "true") return input.is_bool() && input.as_int() == 1;
  if (name == "false") return input.is_bool() && input.as_int() == 0;
  if (name == "callable") return input.is_function();
  if (name == "odd" || name == "even") {
    if (!input.is_int()) fail("test '{}' needs an integer, not '{}'", name, input.type_name());
    return (input.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& divisor = argument();
    if (!input.is_int() || !divisor.is_int() || divisor.as_int() == 0) fail("divisibleby needs non-zero integers");
    return input.as_int() % divisor.as_int() == 0;
  }
  if (name == "lower" || name == "upper") {
    const std::string text = input.str();
    bool cased = false;
    for (const char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (std::isalpha(byte)) {
        cased = true;
        if ((name == "lower") != (std::islower(byte) != 0)) return false;
      }
    }
    return cased;
  }
  if (name == "in") {
    const Value& container = argument();
    if (container.is_string()) return input.is_string() && container.as_string().find(input.as_string()) != std::string::npos;
    if (container.is_object()) return input.is_string() && container.object().find(input.as_string()) != nullptr;
    for (const Value& item : container.iterate()) {
      if (item.equals(input)) return true;
    }
    return false;
  }
  if (name == "eq" || name == "equalto" || name == "==") return input.equals(argument());
  if (name == "ne" || name == "!=") return !input.equals(argument());
  if (name == "lt" || name == "lessthan" || name == "<") return input.less(argument());
  if (name == "le" || name == "<=") return !argument().less(input);
  if (name == "gt" || name == "greaterthan" || name == ">") return argument().less(input);
  if (name == "ge" || name == ">=") return !input.less(argument());
  if (name == "sameas") {
    const Value& other = argument();
    if (input.is_array() && other.is_array()) return &input.array() == &other.array();
    if (input.is_object() && other.is_object()) return &input.object() == &other.object();
    return input.kind() == other.kind() && input.equals(other);
  }
  fail("no test named '{}'", name);
}

}  // namespace rwd::tokenizer::jinja
