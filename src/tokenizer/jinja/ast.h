// The syntax tree parser.h builds and interpreter.h walks: expressions (Expr) and statements (Stmt), each
// with its source position for error messages. Plain data; no evaluation here.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/value.h"

namespace rwd::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  literal,      // literal
  name,         // name
  list,         // args: the items; name "tuple" for (a, b)
  dict,         // args: key, value, key, value, ...
  attribute,    // target.name
  subscript,    // target[args[0]]
  slice,        // target[args[0]:args[1]:args[2]], each may be null
  call,         // target(args..., kwargs...)
  filter,       // target | name(args..., kwargs...)
  test,         // target is [not] name(args...)
  unary,        // name: "not" or "-" or "+"; target
  binary,       // name: the operator; target, args[0]; "and"/"or" short-circuit
  compare,      // target, then (ops[i], args[i]) pairs: Python's chained comparison
  conditional,  // args[0] if args[1] else args[2] (args[2] null: undefined)
};

struct Expr {
  ExprKind kind = ExprKind::literal;
  SourcePos pos;
  Value literal;
  std::string name;
  ExprPtr target;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // compare
  bool negated = false;          // test: `is not`
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind {
  text,        // text
  output,      // {{ expr }}
  if_,         // expr, body, else_body (an elif is an if_ alone in else_body)
  for_,        // for targets in expr [if condition] body [else else_body]
  set,         // set targets = expr, or set object.attribute = expr (target_object non-null)
  set_block,   // {% set targets[0] %}body{% endset %}
  macro,       // name, params, body
  call_block,  // {% call macro(...) %}body{% endcall %}: expr is the call, body is caller()
  filter_block,  // {% filter f %}body{% endfilter %}: expr is the filter chain applied to a placeholder
  break_,
  continue_,
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  SourcePos pos;
  std::string text;                  // text, or the macro name
  ExprPtr expr;
  ExprPtr condition;                 // for: the filtering `if`
  std::vector<std::string> targets;  // for / set names (several: tuple unpacking)
  ExprPtr target_object;             // set ns.attribute
  std::string attribute;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters and defaults (null: none)
  Body body;
  Body else_body;
};

// A compiled template: its top-level statements.
struct Program {
  Body body;
};

}  // namespace rwd::tokenizer::jinja
