// Interpreter: a tree walk over the Program. Python semantics for operators (floor division and modulo,
// int/float promotion, str and list concatenation), jinja2's for-loop object and macro argument binding.
#include "tokenizer/jinja/interpreter.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "tokenizer/jinja/filters.h"
#include "tokenizer/jinja/methods.h"

namespace rwd::tokenizer::jinja {

struct Interpreter::Scope {
  std::vector<std::pair<std::string, Value>> vars;
  ScopePtr parent;
  bool captured = false;  // a macro or caller() defined here refers to it

  Value* find(std::string_view name) {
    for (auto& [key, value] : vars) {
      if (key == name) return &value;
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) {
    Value* existing = find(name);
    if (existing != nullptr) {
      *existing = std::move(value);
    } else {
      vars.emplace_back(name, std::move(value));
    }
  }
  static ScopePtr child_of(const ScopePtr& parent) {
    auto scope = std::make_shared<Scope>();
    scope->parent = parent;
    return scope;
  }
};

namespace {

// Raises jinja2's UndefinedError when an operation needs the value of an undefined one.
void require_defined(const Value& value) {
  if (value.is_undefined()) fail("{}", value.undefined_hint().empty() ? std::string("value is undefined") : value.undefined_hint());
}

[[noreturn]] void fail_operands(std::string_view op, const Value& left, const Value& right) {
  fail("unsupported operand type(s) for {}: '{}' and '{}'", op, left.type_name(), right.type_name());
}

bool add(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }
bool subtract(int64_t a, int64_t b, int64_t* out) { return __builtin_sub_overflow(a, b, out); }
bool multiply(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

// `operation` is add, subtract or multiply: Python's ints do not overflow, so ours must say when they would.
template <typename Operation>
int64_t checked(Operation operation, int64_t left, int64_t right) {
  int64_t result = 0;
  if (operation(left, right, &result)) fail("integer overflow: the result does not fit 64 bits");
  return result;
}

Value arithmetic(const std::string& op, const Value& left, const Value& right, size_t max_bytes) {
  require_defined(left);
  require_defined(right);
  const bool both_int = left.is_int() && right.is_int();
  const bool both_number = left.is_number() && right.is_number();
  if (op == "+") {
    if (both_int) return Value(checked(add, left.as_int(), right.as_int()));
    if (both_number) return Value(left.as_double() + right.as_double());
    if (left.is_string() && right.is_string()) {
      if (left.as_string().size() + right.as_string().size() > max_bytes) fail("string longer than {} bytes", max_bytes);
      return Value(left.as_string() + right.as_string());
    }
    if (left.is_array() && right.is_array()) {
      Array joined = left.array();
      joined.insert(joined.end(), right.array().begin(), right.array().end());
      return Value(std::move(joined));
    }
    if (left.is_string()) fail("can only concatenate str (not \"{}\") to str", right.type_name());
    fail_operands(op, left, right);
  }
  if (op == "-") {
    if (both_int) return Value(checked(subtract, left.as_int(), right.as_int()));
    if (both_number) return Value(left.as_double() - right.as_double());
    fail_operands(op, left, right);
  }
  if (op == "*") {
    if (both_int) return Value(checked(multiply, left.as_int(), right.as_int()));
    if (both_number) return Value(left.as_double() * right.as_double());
    const Value& sequence = left.is_int() ? right : left;
    const Value& count = left.is_int() ? left : right;
    if (count.is_int() && (sequence.is_string() || sequence.is_array())) {
      const int64_t n = std::max<int64_t>(0, count.as_int());
      const size_t unit = sequence.is_string() ? sequence.as_string().size() : sequence.array().size() * sizeof(Value);
      if (unit > 0 && static_cast<uint64_t>(n) > max_bytes / unit) fail("repetition result larger than {} bytes", max_bytes);
      if (sequence.is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += sequence.as_string();
        return Value(std::move(out));
      }
      Array out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), sequence.array().begin(), sequence.array().end());
      return Value(std::move(out));
    }
    fail_operands(op, left, right);
  }
  if (!both_number) fail_operands(op, left, right);
  if (op == "/") {
    if (right.as_double() == 0.0) fail("division by zero");
    return Value(left.as_double() / right.as_double());
  }
  if (op == "//" || op == "%") {
    if (both_int) {
      const int64_t a = left.as_int();
      const int64_t b = right.as_int();
      if (b == 0) fail("integer division or modulo by zero");
      if (a == INT64_MIN && b == -1) fail("integer overflow: the result does not fit 64 bits");
      int64_t quotient = a / b;
      int64_t remainder = a % b;
      if (remainder != 0 && ((remainder < 0) != (b < 0))) {  // Python rounds the quotient toward -inf
        quotient -= 1;
        remainder += b;
      }
      return Value(op == "//" ? quotient : remainder);
    }
    const double a = left.as_double();
    const double b = right.as_double();
    if (b == 0.0) fail("float division by zero");
    if (op == "//") return Value(std::floor(a / b));
    double remainder = std::fmod(a, b);
    if (remainder != 0.0 && ((remainder < 0) != (b < 0))) remainder += b;
    return Value(remainder);
  }
  if (op == "**") {
    if (both_int && right.as_int() >= 0) {
      int64_t power = 1;
      for (int64_t i = 0; i < right.as_int(); ++i) {
        power = checked(multiply, power, left.as_int());
        if (power == 0 || power == 1) break;
      }
      return Value(power);
    }
    return Value(std::pow(left.as_double(), right.as_double()));
  }
  fail("unknown operator '{}'", op);
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not {}", item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_object()) return item.is_string() && container.object().find(item.as_string()) != nullptr;
  if (container.is_array()) {
    for (const Value& element : container.array()) {
      if (element.equals(item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  fail("argument of type '{}' is not iterable", container.type_name());
}

// The `loop` variable of a for loop: one object per loop, its fields rewritten in place each iteration
// (cheaper than a fresh dict per item; a template that keeps `loop` past its iteration sees later values).
class LoopVariable {
 public:
  explicit LoopVariable(const Array& items) : items_(items), index_(std::make_shared<size_t>(0)) {
    Object loop;
    for (const char* name : {"index0", "index", "revindex0", "revindex", "first", "last", "length", "depth", "depth0",
                             "previtem", "nextitem"}) {
      loop.set(name, Value());
    }
    std::shared_ptr<size_t> index = index_;
    loop.set("cycle", Value(Function([index](const CallArgs& args) {
               if (args.positional.empty()) fail("loop.cycle: no items given");
               return args.positional[*index % args.positional.size()];
             })));
    value_ = Value(std::move(loop));
  }
  // A loop object stored into a namespace that is one of the loop's items would contain itself; emptying it
  // when the loop ends frees that cycle.
  ~LoopVariable() { value_.object().entries.clear(); }
  LoopVariable(const LoopVariable&) = delete;
  LoopVariable& operator=(const LoopVariable&) = delete;

  const Value& at(size_t index) {
    *index_ = index;
    const auto n = static_cast<int64_t>(items_.size());
    const auto i = static_cast<int64_t>(index);
    auto& fields = value_.object().entries;  // in the order set above
    fields[0].second = Value(i);
    fields[1].second = Value(i + 1);
    fields[2].second = Value(n - i - 1);
    fields[3].second = Value(n - i);
    fields[4].second = Value(i == 0);
    fields[5].second = Value(i == n - 1);
    fields[6].second = Value(n);
    fields[7].second = Value(int64_t{1});
    fields[8].second = Value(int64_t{0});
    fields[9].second = i > 0 ? items_[index - 1] : Value::undefined("there is no previous item");
    fields[10].second = i + 1 < n ? items_[index + 1] : Value::undefined("there is no next item");
    Object& loop = value_.object();  // written past Object::set, so its depth is kept here
    loop.depth = std::max({loop.depth, fields[9].second.depth() + 1, fields[10].second.depth() + 1});
    return value_;
  }

 private:
  const Array& items_;
  std::shared_ptr<size_t> index_;
  Value value_;
};

// `for a, b in ...` and `set a, b = ...`: one name takes the value, several unpack it.
void bind_targets(const std::vector<std::string>& targets, const Value& value, Interpreter::Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], value);
    return;
  }
  const Array items = value.iterate();
  if (items.size() != targets.size()) {
    fail("cannot unpack {} values into {} names", items.size(), targets.size());
  }
  for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], items[i]);
}
}  // namespace

Interpreter::~Interpreter() {
  for (const std::weak_ptr<Object>& weak : namespaces_) {
    if (const std::shared_ptr<Object> object = weak.lock()) object->entries.clear();
  }
}

std::string Interpreter::render(const Program& program, const Object& globals) {
  auto root = std::make_shared<Scope>();
  for (const auto& [name, value] : globals.entries) root->set(name, value);
  std::string out;
  exec_body(program.body, root, out);
  return out;
}

void Interpreter::count_step() {
  if (++n_steps_ > limits_.max_steps) fail("template ran more than {} steps", limits_.max_steps);
}

// Values only grow deeper through literals and set, so checking there bounds every value (see kMaxValueDepth).
void Interpreter::check_depth(const Value& value) const {
  if (value.depth() > kMaxValueDepth) fail("value nested deeper than {} levels", kMaxValueDepth);
}

void Interpreter::check_size(size_t n_bytes) const {
  if (n_bytes > limits_.max_output_bytes) fail("rendered text longer than {} bytes", limits_.max_output_bytes);
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& stmt : body) {
    const Flow flow = exec(*stmt, scope, out);
    if (flow != Flow::normal) return flow;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  count_step();
  if (++depth_ > limits_.max_depth) fail_at(stmt.pos, "template nesting deeper than {} (runaway recursion?)", limits_.max_depth);
  const SourcePos saved = pos_;
  pos_ = stmt.pos;
  Flow flow = Flow::normal;
  switch (stmt.kind) {
    case StmtKind::text: out += stmt.text; break;
    case StmtKind::output: out += eval(*stmt.expr, scope).str(); break;
    case StmtKind::if_:
      flow = exec_body(eval(*stmt.expr, scope).truthy() ? stmt.body : stmt.else_body, scope, out);
      break;
    case StmtKind::for_: flow = exec_for(stmt, scope, out); break;
    case StmtKind::set: exec_set(stmt, scope); break;
    case StmtKind::set_block: {
      std::string captured;
      exec_body(stmt.body, scope, captured);
      scope->set(stmt.targets[0], Value(std::move(captured)));
      break;
    }
    case StmtKind::macro: scope->set(stmt.text, make_macro(stmt, scope)); break;
    case StmtKind::call_block: {
      const Stmt* body_stmt = &stmt;
      scope->captured = true;
      const std::weak_ptr<Scope> weak = scope;
      const Value caller(Function([this, body_stmt, weak](const CallArgs&) {
        const ScopePtr locked = weak.lock();
        if (!locked) fail("caller() used after its block ended");
        std::string text;
        exec_body(body_stmt->body, Scope::child_of(locked), text);
        return Value(std::move(text));
      }));
      out += eval_call(*stmt.expr, scope, &caller).str();
      break;
    }
    case StmtKind::filter_block: {
      std::string captured;
      exec_body(stmt.body, scope, captured);
      ScopePtr inner = Scope::child_of(scope);
      inner->set("", Value(std::move(captured)));
      out += eval(*stmt.expr, inner).str();
      break;
    }
    case StmtKind::break_: flow = Flow::break_loop; break;
    case StmtKind::continue_: flow = Flow::continue_loop; break;
  }
  check_size(out.size());
  pos_ = saved;
  --depth_;
  return flow;
}

Interpreter::Flow Interpreter::exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  const Value iterable = eval(*stmt.expr, scope);
  Array items = iterable.iterate();
  if (stmt.condition) {
    Array kept;
    for (const Value& item : items) {
      count_step();
      ScopePtr probe = Scope::child_of(scope);
      bind_targets(stmt.targets, item, *probe);
      if (eval(*stmt.condition, probe).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  LoopVariable loop(items);
  ScopePtr iteration = Scope::child_of(scope);
  for (size_t i = 0; i < items.size(); ++i) {
    count_step();
    // Each iteration starts with no variables of its own, as in jinja2; the scope object is reused unless a
    // macro or caller defined in it still holds it.
    if (iteration->captured) iteration = Scope::child_of(scope);
    iteration->vars.clear();
    bind_targets(stmt.targets, items[i], *iteration);
    iteration->set("loop", loop.at(i));
    if (exec_body(stmt.body, iteration, out) == Flow::break_loop) break;
  }
  if (items.empty()) return exec_body(stmt.else_body, scope, out);
  return Flow::normal;
}

void Interpreter::exec_set(const Stmt& stmt, const ScopePtr& scope) {
  Value value = eval(*stmt.expr, scope);
  check_depth(value);
  if (stmt.target_object) {
    const Value object = eval(*stmt.target_object, scope);
    if (!object.is_object() || !object.object().is_namespace) {
      fail("cannot assign attribute on non-namespace object '{}'", stmt.target_object->name);
    }
    object.object().set(stmt.attribute, std::move(value));
    check_depth(object);
    return;
  }
  bind_targets(stmt.targets, value, *scope);
}

Value Interpreter::make_macro(const Stmt& stmt, const ScopePtr& scope) {
  // The macro sees its defining scope as it is when called (jinja2 closures); a weak reference, since the
  // scope holds the macro.
  const Stmt* macro = &stmt;
  scope->captured = true;
  std::weak_ptr<Scope> defining = scope;
  return Value(Function([this, macro, defining](const CallArgs& args) { return call_macro(*macro, defining, args); }));
}

Value Interpreter::call_macro(const Stmt& stmt, const std::weak_ptr<Scope>& defining, const CallArgs& args) {
  const ScopePtr parent = defining.lock();
  if (!parent) fail("macro '{}' called after the scope that defined it ended", stmt.text);
  ScopePtr scope = Scope::child_of(parent);
  Array varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < stmt.params.size()) {
      scope->set(stmt.params[i].first, args.positional[i]);
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Object kwargs;
  for (const auto& [name, value] : args.keyword) {
    bool is_param = false;
    for (const auto& param : stmt.params) is_param = is_param || param.first == name;
    if (is_param || name == "caller") {
      scope->set(name, value);
    } else {
      kwargs.set(name, value);
    }
  }
  for (size_t i = args.positional.size(); i < stmt.params.size(); ++i) {
    const auto& [name, default_value] = stmt.params[i];
    if (scope->find(name) != nullptr) continue;
    scope->set(name, default_value ? eval(*default_value, scope)
                                   : Value::undefined(fmt::format("parameter '{}' was not provided", name)));
  }
  scope->set("varargs", Value::tuple(std::move(varargs)));
  scope->set("kwargs", Value(std::move(kwargs)));
  std::string out;
  exec_body(stmt.body, scope, out);
  return Value(std::move(out));
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) {
  for (Scope* at = scope.get(); at != nullptr; at = at->parent.get()) {
    if (Value* found = at->find(name)) return *found;
  }
  Value builtin = global_function(name);
  if (!builtin.is_undefined()) return builtin;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Value Interpreter::global_function(const std::string& name) {
  if (name == "raise_exception") {
    return Value(Function([](const CallArgs& args) -> Value {
      const Value* message = args.get(0, "message");
      fail("{}", message != nullptr ? message->str() : std::string("raise_exception() called"));
    }));
  }
  if (name == "namespace" || name == "dict") {
    const bool is_namespace = name == "namespace";
    return Value(Function([this, is_namespace](const CallArgs& args) {
      Object object;
      object.is_namespace = is_namespace;
      for (const Value& positional : args.positional) {
        if (!positional.is_object()) fail("namespace()/dict() take a mapping or keyword arguments");
        for (const auto& [key, value] : positional.object().entries) object.set(key, value);
      }
      for (const auto& [key, value] : args.keyword) object.set(key, value);
      Value made(std::move(object));
      if (is_namespace) namespaces_.push_back(made.object_ptr());
      return made;
    }));
  }
  if (name == "range") {
    Interpreter* self = this;  // range's items count as steps of this render
    const int64_t max_range = limits_.max_range;
    return Value(Function([self, max_range](const CallArgs& args) {
      for (const Value& arg : args.positional) {
        if (!arg.is_int()) fail("range() takes integers, not '{}'", arg.type_name());
      }
      const size_t n_args = args.positional.size();
      if (n_args == 0 || n_args > 3) fail("range() takes 1 to 3 arguments, got {}", n_args);
      const int64_t start = n_args == 1 ? 0 : args.positional[0].as_int();
      const int64_t stop = n_args == 1 ? args.positional[0].as_int() : args.positional[1].as_int();
      const int64_t step = n_args == 3 ? args.positional[2].as_int() : 1;
      if (step == 0) fail("range() arg 3 must not be zero");
      Array items;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(items.size()) >= max_range) fail("range() longer than {} items", max_range);
        self->count_step();
        items.emplace_back(i);
      }
      return Value(std::move(items));
    }));
  }
  if (name == "strftime_now") {
    return Value(Function([](const CallArgs& args) {
      const Value* format = args.get(0, "format");
      if (format == nullptr || !format->is_string()) fail("strftime_now() takes a format string");
      const std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buffer[256];
      const size_t n = std::strftime(buffer, sizeof(buffer), format->as_string().c_str(), &local);
      return Value(std::string(buffer, n));
    }));
  }
  return Value();
}

Value Interpreter::eval(const Expr& expr, const ScopePtr& scope) {
  count_step();
  if (++depth_ > limits_.max_depth) fail_at(expr.pos, "template nesting deeper than {} (runaway recursion?)", limits_.max_depth);
  const SourcePos saved = pos_;
  pos_ = expr.pos;
  Value value = eval_impl(expr, scope);
  pos_ = saved;
  --depth_;
  return value;
}

CallArgs Interpreter::eval_args(const Expr& expr, const ScopePtr& scope) {
  CallArgs args;
  for (const ExprPtr& arg : expr.args) args.positional.push_back(eval(*arg, scope));
  for (const auto& [name, arg] : expr.kwargs) args.keyword.emplace_back(name, eval(*arg, scope));
  return args;
}

Value Interpreter::eval_call(const Expr& expr, const ScopePtr& scope, const Value* caller) {
  const Value callee = eval(*expr.target, scope);
  CallArgs args = eval_args(expr, scope);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  require_defined(callee);
  if (!callee.is_function()) fail("'{}' object is not callable", callee.type_name());
  return callee.function()(args);
}

Value Interpreter::eval_impl(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case ExprKind::literal: return expr.literal;
    case ExprKind::name: return lookup(expr.name, scope);
    case ExprKind::list: {
      Array items;
      for (const ExprPtr& item : expr.args) items.push_back(eval(*item, scope));
      Value list = expr.name == "tuple" ? Value::tuple(std::move(items)) : Value(std::move(items));
      check_depth(list);
      return list;
    }
    case ExprKind::dict: {
      Object object;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        const Value key = eval(*expr.args[i], scope);
        if (!key.is_string()) fail("dict keys must be strings here, not '{}'", key.type_name());
        object.set(key.as_string(), eval(*expr.args[i + 1], scope));
      }
      Value dict(std::move(object));
      check_depth(dict);
      return dict;
    }
    case ExprKind::attribute: return get_attribute(eval(*expr.target, scope), expr.name);
    case ExprKind::subscript: {
      const Value object = eval(*expr.target, scope);
      return get_item(object, eval(*expr.args[0], scope));
    }
    case ExprKind::slice: {
      const Value object = eval(*expr.target, scope);
      Value bounds[3];
      const Value* parts[3] = {nullptr, nullptr, nullptr};
      for (size_t i = 0; i < 3; ++i) {
        if (expr.args[i]) {
          bounds[i] = eval(*expr.args[i], scope);
          parts[i] = &bounds[i];
        }
      }
      return get_slice(object, parts[0], parts[1], parts[2]);
    }
    case ExprKind::call: return eval_call(expr, scope, nullptr);
    case ExprKind::filter: {
      const Value input = eval(*expr.target, scope);
      Value result = apply_filter(expr.name, input, eval_args(expr, scope));
      if (result.is_string()) check_size(result.as_string().size());
      return result;
    }
    case ExprKind::test: {
      // `x is defined` must not fail on x.missing.attr's parent being undefined only at the last step.
      const Value input = eval(*expr.target, scope);
      const bool passed = apply_test(expr.name, input, eval_args(expr, scope));
      return Value(passed != expr.negated);
    }
    case ExprKind::unary: {
      const Value operand = eval(*expr.target, scope);
      if (expr.name == "not") return Value(!operand.truthy());
      require_defined(operand);
      if (!operand.is_number()) fail("bad operand type for unary {}: '{}'", expr.name, operand.type_name());
      if (expr.name == "+") return operand.is_int() ? Value(operand.as_int()) : operand;
      if (operand.is_int()) return Value(checked(subtract, 0, operand.as_int()));
      return Value(-operand.as_double());
    }
    case ExprKind::binary: return eval_binary(expr, scope);
    case ExprKind::compare: return eval_compare(expr, scope);
    case ExprKind::conditional: {
      if (eval(*expr.args[1], scope).truthy()) return eval(*expr.args[0], scope);
      if (expr.args[2]) return eval(*expr.args[2], scope);
      return Value::undefined("the conditional expression had no else branch");
    }
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& expr, const ScopePtr& scope) {
  const std::string& op = expr.name;
  Value left = eval(*expr.target, scope);
  if (op == "and") return left.truthy() ? eval(*expr.args[0], scope) : left;
  if (op == "or") return left.truthy() ? left : eval(*expr.args[0], scope);
  const Value right = eval(*expr.args[0], scope);
  if (op == "~") {
    std::string joined = left.str() + right.str();
    check_size(joined.size());
    return Value(std::move(joined));
  }
  return arithmetic(op, left, right, limits_.max_output_bytes);
}

Value Interpreter::eval_compare(const Expr& expr, const ScopePtr& scope) {
  Value left = eval(*expr.target, scope);
  for (size_t i = 0; i < expr.ops.size(); ++i) {
    Value right = eval(*expr.args[i], scope);
    const std::string& op = expr.ops[i];
    bool holds = false;
    if (op == "==") {
      holds = left.equals(right);
    } else if (op == "!=") {
      holds = !left.equals(right);
    } else if (op == "in" || op == "not in") {
      holds = contains(right, left) == (op == "in");
    } else {
      require_defined(left);
      require_defined(right);
      holds = op == "<" ? left.less(right) : op == ">" ? right.less(left) : op == "<=" ? !right.less(left) : !left.less(right);
    }
    if (!holds) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

}  // namespace rwd::tokenizer::jinja
