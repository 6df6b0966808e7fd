// Value: the dynamic value a template computes with, modelled on the Python objects jinja2 sees (None, bool,
// int, float, str, list, dict, callables, and jinja2's Undefined), with Python's str(), repr(), truthiness,
// equality and ordering. Lists and dicts are shared by reference, as in Python, so a namespace() set inside a
// loop is seen after it. Filters, tests and methods live in filters.h and methods.h; JSON in json_value.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rwd::tokenizer::jinja {

class Value;
using Array = std::vector<Value>;

// Values nest at most this deep (lists in dicts in ...): the interpreter refuses deeper ones, and str(), ==,
// < and tojson stop there, so neither a deep nor a self-containing value can exhaust the stack.
inline constexpr int kMaxValueDepth = 256;

// A Python dict with string keys, in insertion order (what json.loads and dict literals give).
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // made by namespace(): the only object `{% set ns.attr = ... %}` may change
  int depth = 1;              // 1 + the deepest value ever set in it

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

// Arguments of a call: positional, then keyword, as written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index` or named `name`, or nullptr when neither was given.
  const Value* get(size_t index, std::string_view name) const;
  // The argument named `name` (keyword-only), or nullptr.
  const Value* keyword_arg(std::string_view name) const;
};

using Function = std::function<Value(const CallArgs&)>;

class Value {
 public:
  enum class Kind { undefined, none, boolean, integer, floating, string, array, object, function };

  Value() = default;  // undefined
  static Value undefined(std::string hint) {
    Value value;
    value.string_ = std::move(hint);
    return value;
  }
  static Value none() { return Value(Kind::none); }
  // A Python tuple: a list that prints as (a, b); dict.items() pairs, varargs, `(a, b)` literals.
  static Value tuple(Array items) {
    Value value(std::move(items));
    value.tuple_ = true;
    return value;
  }
  Value(bool boolean) : kind_(Kind::boolean), int_(boolean ? 1 : 0) {}  // NOLINT(google-explicit-constructor)
  Value(int64_t integer) : kind_(Kind::integer), int_(integer) {}        // NOLINT(google-explicit-constructor)
  Value(int integer) : kind_(Kind::integer), int_(integer) {}            // NOLINT(google-explicit-constructor)
  Value(double floating) : kind_(Kind::floating), float_(floating) {}    // NOLINT(google-explicit-constructor)
  Value(std::string text) : kind_(Kind::string), string_(std::move(text)) {}  // NOLINT(google-explicit-constructor)
  Value(const char* text) : kind_(Kind::string), string_(text) {}            // NOLINT(google-explicit-constructor)
  Value(Array array);  // NOLINT(google-explicit-constructor)
  Value(Object object) : kind_(Kind::object), object_(std::make_shared<Object>(std::move(object))) {}  // NOLINT
  Value(Function function)  // NOLINT(google-explicit-constructor)
      : kind_(Kind::function), function_(std::make_shared<Function>(std::move(function))) {}

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::undefined; }
  bool is_none() const { return kind_ == Kind::none; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_int() const { return kind_ == Kind::integer || kind_ == Kind::boolean; }  // Python: bool is an int
  bool is_number() const { return is_int() || kind_ == Kind::floating; }
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }
  bool is_function() const { return kind_ == Kind::function; }
  bool is_tuple() const { return tuple_; }
  // Nesting: 0 for scalars, 1 for a list or dict of scalars, and so on.
  int depth() const;

  int64_t as_int() const { return int_; }
  double as_double() const { return kind_ == Kind::floating ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return string_; }
  // Why an undefined value is undefined, as jinja2 words it ("'x' is undefined").
  const std::string& undefined_hint() const { return string_; }
  Array& array() const { return *array_; }
  Object& object() const { return *object_; }
  const std::shared_ptr<Object>& object_ptr() const { return object_; }
  const Function& function() const { return *function_; }

  // Python's bool(), str() (what {{ }} prints; undefined prints nothing), repr() and type name.
  bool truthy() const;
  std::string str() const;
  std::string repr() const;
  std::string type_name() const;

  // Python ==: 1 == 1.0 == True, lists and dicts by content; undefined equals only undefined.
  bool equals(const Value& other) const;
  // Python <: numbers, strings (by code point), lists lexicographically; other pairs throw Error.
  bool less(const Value& other) const;
  // len(): strings in code points; throws Error for values without a length.
  int64_t length() const;
  // The items `for` walks: list items, dict keys, string characters; throws Error otherwise.
  Array iterate() const;

 private:
  explicit Value(Kind kind) : kind_(kind) {}
  std::string repr_at(int depth) const;
  bool equals_at(const Value& other, int depth) const;
  bool less_at(const Value& other, int depth) const;

  Kind kind_ = Kind::undefined;
  bool tuple_ = false;
  int array_depth_ = 0;  // a list's depth(), fixed at construction (lists are never changed in place)
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string string_;  // a string's text, or an undefined value's hint
  std::shared_ptr<Array> array_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<Function> function_;
};

// Python's repr() of a float: the shortest text that reads back the same, "1.0", "1e+16", "1e-05".
std::string python_float_repr(double value);

// A string's characters (code points) as separate UTF-8 strings; bytes that are not valid UTF-8 count one each.
std::vector<std::string> split_characters(std::string_view text);

}  // namespace rwd::tokenizer::jinja
