// Interpreter: renders a parsed Program against global variables, with jinja2's scoping (a fresh scope per
// loop iteration and per macro call, `set` binding in the current one, namespace() objects shared), loop
// controls, macros and HF's globals (raise_exception, strftime_now). Work, nesting and output are bounded
// so a hostile template fails with an Error instead of hanging or exhausting the stack or memory.
// Parsing is parser.h's; filters and tests filters.h's; the Status boundary template.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"

namespace rwd::tokenizer::jinja {

struct RenderLimits {
  int64_t max_steps = 2'000'000;          // statements run, expressions evaluated, loop and range items
  int max_depth = 500;                     // nested evaluation (expressions, blocks, macro calls)
  size_t max_output_bytes = 64u << 20;     // the rendered text, and any one string built on the way
  int64_t max_range = 1'000'000;           // items range() may make
};

class Interpreter {
 public:
  explicit Interpreter(RenderLimits limits = {}) : limits_(limits) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Throws Error on failure; position() then tells the innermost construct being run.
  std::string render(const Program& program, const Object& globals);
  SourcePos position() const { return pos_; }

  struct Scope;  // variables of one block level; defined in interpreter.cpp
  using ScopePtr = std::shared_ptr<Scope>;

 private:
  enum class Flow { normal, break_loop, continue_loop };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  void exec_set(const Stmt& stmt, const ScopePtr& scope);
  Value make_macro(const Stmt& stmt, const ScopePtr& scope);
  Value call_macro(const Stmt& stmt, const std::weak_ptr<Scope>& defining, const CallArgs& args);

  Value eval(const Expr& expr, const ScopePtr& scope);
  Value eval_impl(const Expr& expr, const ScopePtr& scope);
  Value eval_binary(const Expr& expr, const ScopePtr& scope);
  Value eval_compare(const Expr& expr, const ScopePtr& scope);
  Value eval_call(const Expr& expr, const ScopePtr& scope, const Value* caller);
  CallArgs eval_args(const Expr& expr, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope);
  Value global_function(const std::string& name);

  void count_step();
  void check_size(size_t n_bytes) const;
  void check_depth(const Value& value) const;

  RenderLimits limits_;
  int64_t n_steps_ = 0;
  int depth_ = 0;
  SourcePos pos_;  // the innermost construct being run, for error messages
  // Every namespace() made: the only objects changed after they are made, so the only way a value can come
  // to contain itself. Emptied when the render ends, which frees such cycles.
  std::vector<std::weak_ptr<Object>> namespaces_;
};

}  // namespace rwd::tokenizer::jinja
