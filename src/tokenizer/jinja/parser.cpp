// Parser: recursive descent over the lexer's tokens, one function per precedence level as in jinja2's own.
#include "tokenizer/jinja/parser.h"

#include <cstdlib>
#include <initializer_list>

#include "tokenizer/jinja/lexer.h"

namespace rwd::tokenizer::jinja {
namespace {

// Deeper nesting than this (brackets, unary chains, blocks) is refused, so the recursion stays on the stack.
constexpr int kMaxNesting = 200;

class TokenParser {
 public:
  explicit TokenParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Program parse_program() {
    Program program;
    std::string_view end_tag;
    program.body = parse_body({}, {}, end_tag);
    return program;
  }

 private:
  // ---- token helpers ----
  const Token& current() const { return tokens_[at_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(at_ + ahead, tokens_.size() - 1)]; }
  Token take() {
    Token token = tokens_[at_];
    if (at_ + 1 < tokens_.size()) ++at_;
    return token;
  }
  bool is_op(std::string_view op) const { return current().kind == TokenKind::op && current().text == op; }
  bool is_name(std::string_view name) const { return current().kind == TokenKind::name && current().text == name; }
  bool accept_op(std::string_view op) {
    if (!is_op(op)) return false;
    take();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!is_name(name)) return false;
    take();
    return true;
  }
  static std::string describe(const Token& token) {
    switch (token.kind) {
      case TokenKind::text: return "template text";
      case TokenKind::variable_begin: return "'{{'";
      case TokenKind::variable_end: return "'}}'";
      case TokenKind::block_begin: return "'{%'";
      case TokenKind::block_end: return "'%}'";
      case TokenKind::string: return "a string";
      case TokenKind::integer:
      case TokenKind::floating: return fmt::format("number {}", token.text);
      case TokenKind::eof: return "the end of the template";
      default: return fmt::format("'{}'", token.text);
    }
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail_at(current().pos, "expected '{}', found {}", op, describe(current()));
  }
  std::string expect_name() {
    if (current().kind != TokenKind::name) fail_at(current().pos, "expected a name, found {}", describe(current()));
    return take().text;
  }
  void expect_block_end() {
    if (current().kind != TokenKind::block_end) {
      fail_at(current().pos, "expected '%}}' to end the tag, found {}", describe(current()));
    }
    take();
  }

  struct DepthGuard {
    DepthGuard(int& depth, SourcePos pos) : depth_(depth) {
      if (++depth_ > kMaxNesting) fail_at(pos, "template nested deeper than {} levels", kMaxNesting);
    }
    ~DepthGuard() { --depth_; }
    int& depth_;
  };

  static ExprPtr make(ExprKind kind, SourcePos pos) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->pos = pos;
    return expr;
  }

  // ---- statements ----

  // Statements until a block tag whose keyword is in `end_tags` (its name is left in `end_tag`, the tag's
  // keyword consumed but not the rest), or until eof when `end_tags` is empty.
  Body parse_body(SourcePos opened_at, std::initializer_list<std::string_view> end_tags, std::string_view& end_tag) {
    Body body;
    DepthGuard guard(depth_, current().pos);
    while (true) {
      const Token& token = current();
      if (token.kind == TokenKind::eof) {
        if (end_tags.size() == 0) return body;
        fail_at(opened_at, "missing '{{% {} %}}' for the block opened here", *end_tags.begin());
      }
      if (token.kind == TokenKind::text) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::text;
        stmt->pos = token.pos;
        stmt->text = take().text;
        body.push_back(std::move(stmt));
      } else if (token.kind == TokenKind::variable_begin) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::output;
        stmt->pos = take().pos;
        stmt->expr = parse_tuple_or_expression();
        if (current().kind != TokenKind::variable_end) {
          fail_at(current().pos, "expected '}}}}' to end the expression, found {}", describe(current()));
        }
        take();
        body.push_back(std::move(stmt));
      } else if (token.kind == TokenKind::block_begin) {
        const SourcePos pos = take().pos;
        if (current().kind != TokenKind::name) {
          fail_at(current().pos, "expected a statement keyword after '{{%', found {}", describe(current()));
        }
        for (std::string_view end : end_tags) {
          if (current().text == end) {
            end_tag = end;
            take();
            return body;
          }
        }
        body.push_back(parse_statement(pos));
      } else {
        fail_at(token.pos, "unexpected {}", describe(token));
      }
    }
  }

  StmtPtr parse_statement(SourcePos pos) {
    const std::string keyword = take().text;
    auto stmt = std::make_unique<Stmt>();
    stmt->pos = pos;
    std::string_view end_tag;
    if (keyword == "if") {
      parse_if(*stmt);
    } else if (keyword == "for") {
      stmt->kind = StmtKind::for_;
      stmt->targets = parse_targets();
      if (!accept_name("in")) fail_at(current().pos, "expected 'in' in for loop, found {}", describe(current()));
      stmt->expr = parse_tuple_or_expression(/*with_condition=*/false);
      if (accept_name("if")) stmt->condition = parse_expression();
      if (is_name("recursive")) fail_at(current().pos, "recursive for loops are not supported");
      expect_block_end();
      stmt->body = parse_body(pos, {"endfor", "else"}, end_tag);
      if (end_tag == "else") {
        expect_block_end();
        stmt->else_body = parse_body(pos, {"endfor"}, end_tag);
      }
      expect_block_end();
    } else if (keyword == "set") {
      parse_set(*stmt);
    } else if (keyword == "macro") {
      stmt->kind = StmtKind::macro;
      stmt->text = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        std::string param = expect_name();
        ExprPtr default_value;
        if (accept_op("=")) default_value = parse_expression();
        stmt->params.emplace_back(std::move(param), std::move(default_value));
        if (!accept_op(",")) break;
      }
      expect_op(")");
      expect_block_end();
      stmt->body = parse_body(pos, {"endmacro"}, end_tag);
      if (current().kind == TokenKind::name) take();  // {% endmacro name %}
      expect_block_end();
    } else if (keyword == "call") {
      stmt->kind = StmtKind::call_block;
      if (is_op("(")) fail_at(current().pos, "call blocks with caller arguments are not supported");
      stmt->expr = parse_expression();
      if (stmt->expr->kind != ExprKind::call) fail_at(pos, "'{{% call %}}' needs a macro call");
      expect_block_end();
      stmt->body = parse_body(pos, {"endcall"}, end_tag);
      expect_block_end();
    } else if (keyword == "filter") {
      stmt->kind = StmtKind::filter_block;
      ExprPtr chain = make(ExprKind::name, current().pos);  // the placeholder the body's text replaces
      chain->name = "";
      do {
        chain = parse_filter(std::move(chain));
      } while (accept_op("|"));
      stmt->expr = std::move(chain);
      expect_block_end();
      stmt->body = parse_body(pos, {"endfilter"}, end_tag);
      expect_block_end();
    } else if (keyword == "generation") {
      // HF transformers' AssistantTracker tag: marks assistant text for training masks; renders its body.
      expect_block_end();
      stmt->kind = StmtKind::if_;
      stmt->expr = make(ExprKind::literal, pos);
      stmt->expr->literal = Value(true);
      stmt->body = parse_body(pos, {"endgeneration"}, end_tag);
      expect_block_end();
    } else if (keyword == "break" || keyword == "continue") {
      stmt->kind = keyword == "break" ? StmtKind::break_ : StmtKind::continue_;
      expect_block_end();
    } else {
      fail_at(pos, "unknown statement '{{% {} %}}'", keyword);
    }
    return stmt;
  }

  void parse_if(Stmt& stmt) {
    stmt.kind = StmtKind::if_;
    stmt.expr = parse_tuple_or_expression();
    expect_block_end();
    std::string_view end_tag;
    stmt.body = parse_body(stmt.pos, {"endif", "elif", "else"}, end_tag);
    if (end_tag == "elif") {
      auto elif = std::make_unique<Stmt>();
      elif->pos = tokens_[at_ - 1].pos;
      parse_if(*elif);  // consumes through the shared endif
      stmt.else_body.push_back(std::move(elif));
      return;
    }
    if (end_tag == "else") {
      expect_block_end();
      stmt.else_body = parse_body(stmt.pos, {"endif"}, end_tag);
    }
    expect_block_end();
  }

  void parse_set(Stmt& stmt) {
    stmt.kind = StmtKind::set;
    if (current().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == ".") {
      stmt.target_object = make(ExprKind::name, current().pos);
      stmt.target_object->name = take().text;
      take();
      stmt.attribute = expect_name();
    } else {
      stmt.targets = parse_targets();
    }
    if (accept_op("=")) {
      stmt.expr = parse_tuple_or_expression();
      expect_block_end();
      return;
    }
    if (stmt.target_object || stmt.targets.size() != 1) {
      fail_at(current().pos, "expected '=' in set, found {}", describe(current()));
    }
    if (is_op("|")) fail_at(current().pos, "filtered block set is not supported");
    expect_block_end();
    stmt.kind = StmtKind::set_block;
    std::string_view end_tag;
    stmt.body = parse_body(stmt.pos, {"endset"}, end_tag);
    expect_block_end();
  }

  // `a` or `a, b` or `(a, b)`.
  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    const bool parenthesised = accept_op("(");
    do {
      names.push_back(expect_name());
    } while (accept_op(","));
    if (parenthesised) expect_op(")");
    return names;
  }

  // ---- expressions ----

  // `a, b` without brackets is a tuple (a list here) where jinja2 allows one: {{ }}, if, for, set.
  ExprPtr parse_tuple_or_expression(bool with_condition = true) {
    const SourcePos pos = current().pos;
    ExprPtr first = with_condition ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto tuple = make(ExprKind::list, pos);
    tuple->name = "tuple";
    tuple->args.push_back(std::move(first));
    while (accept_op(",")) {
      if (current().kind == TokenKind::block_end || current().kind == TokenKind::variable_end) break;
      tuple->args.push_back(with_condition ? parse_expression() : parse_or());
    }
    return tuple;
  }

  ExprPtr parse_expression() {
    DepthGuard guard(depth_, current().pos);
    ExprPtr value = parse_or();
    while (is_name("if")) {
      const SourcePos pos = take().pos;
      auto conditional = make(ExprKind::conditional, pos);
      ExprPtr condition = parse_or();
      ExprPtr otherwise = accept_name("else") ? parse_expression() : nullptr;
      conditional->args.push_back(std::move(value));
      conditional->args.push_back(std::move(condition));
      conditional->args.push_back(std::move(otherwise));
      value = std::move(conditional);
    }
    return value;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, SourcePos pos) {
    auto node = make(ExprKind::binary, pos);
    node->name = std::move(op);
    node->target = std::move(left);
    node->args.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const SourcePos pos = take().pos;
      left = binary("or", std::move(left), parse_and(), pos);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const SourcePos pos = take().pos;
      left = binary("and", std::move(left), parse_not(), pos);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(depth_, current().pos);
      auto node = make(ExprKind::unary, take().pos);
      node->name = "not";
      node->target = parse_not();
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const SourcePos pos = current().pos;
    ExprPtr left = parse_math1();
    ExprPtr compare;
    while (true) {
      std::string op;
      if (current().kind == TokenKind::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
        op = take().text;
      } else if (is_name("in")) {
        take();
        op = "in";
      } else if (is_name("not") && peek().kind == TokenKind::name && peek().text == "in") {
        take();
        take();
        op = "not in";
      } else {
        break;
      }
      if (!compare) {
        compare = make(ExprKind::compare, pos);
        compare->target = std::move(left);
      }
      compare->ops.push_back(op);
      compare->args.push_back(parse_math1());
    }
    return compare ? std::move(compare) : std::move(left);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token op = take();
      left = binary(op.text, std::move(left), parse_concat(), op.pos);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token op = take();
      left = binary(op.text, std::move(left), parse_math2(), op.pos);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token op = take();
      left = binary(op.text, std::move(left), parse_pow(), op.pos);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token op = take();
      left = binary(op.text, std::move(left), parse_unary(true), op.pos);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(depth_, current().pos);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token op = take();
      node = make(ExprKind::unary, op.pos);
      node->name = op.text;
      node->target = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filters_and_tests(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    switch (token.kind) {
      case TokenKind::name: {
        const Token name = take();
        auto node = make(ExprKind::literal, name.pos);
        if (name.text == "true" || name.text == "True") {
          node->literal = Value(true);
        } else if (name.text == "false" || name.text == "False") {
          node->literal = Value(false);
        } else if (name.text == "none" || name.text == "None") {
          node->literal = Value::none();
        } else {
          node->kind = ExprKind::name;
          node->name = name.text;
        }
        return node;
      }
      case TokenKind::string: {
        auto node = make(ExprKind::literal, token.pos);
        std::string text;
        while (current().kind == TokenKind::string) text += take().text;  // adjacent literals join
        node->literal = Value(std::move(text));
        return node;
      }
      case TokenKind::integer: {
        const Token number = take();
        auto node = make(ExprKind::literal, number.pos);
        errno = 0;
        const long long parsed = std::strtoll(number.text.c_str(), nullptr, 10);
        if (errno == ERANGE) fail_at(number.pos, "integer literal {} does not fit 64 bits", number.text);
        node->literal = Value(static_cast<int64_t>(parsed));
        return node;
      }
      case TokenKind::floating: {
        const Token number = take();
        auto node = make(ExprKind::literal, number.pos);
        node->literal = Value(std::strtod(number.text.c_str(), nullptr));
        return node;
      }
      case TokenKind::op: {
        if (is_op("(")) {
          const SourcePos pos = take().pos;
          if (accept_op(")")) {
            auto empty = make(ExprKind::list, pos);  // ()
            empty->name = "tuple";
            return empty;
          }
          ExprPtr inner = parse_expression();
          if (is_op(",")) {
            auto tuple = make(ExprKind::list, pos);
            tuple->name = "tuple";
            tuple->args.push_back(std::move(inner));
            while (accept_op(",")) {
              if (is_op(")")) break;
              tuple->args.push_back(parse_expression());
            }
            inner = std::move(tuple);
          }
          expect_op(")");
          return inner;
        }
        if (is_op("[")) {
          auto list = make(ExprKind::list, take().pos);
          while (!is_op("]")) {
            list->args.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("]");
          return list;
        }
        if (is_op("{")) {
          auto dict = make(ExprKind::dict, take().pos);
          while (!is_op("}")) {
            dict->args.push_back(parse_expression());
            expect_op(":");
            dict->args.push_back(parse_expression());
            if (!accept_op(",")) break;
          }
          expect_op("}");
          return dict;
        }
        break;
      }
      default: break;
    }
    fail_at(token.pos, "expected an expression, found {}", describe(token));
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    while (!is_op(")")) {
      if (current().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == "=") {
        std::string name = take().text;
        take();
        call.kwargs.emplace_back(std::move(name), parse_expression());
      } else {
        if (!call.kwargs.empty()) fail_at(current().pos, "positional argument after a keyword argument");
        call.args.push_back(parse_expression());
      }
      if (!accept_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const SourcePos pos = take().pos;
        auto attribute = make(ExprKind::attribute, pos);
        if (current().kind == TokenKind::integer) {
          attribute->kind = ExprKind::subscript;  // foo.0 is foo[0]
          auto index = make(ExprKind::literal, current().pos);
          index->literal = Value(static_cast<int64_t>(std::strtoll(take().text.c_str(), nullptr, 10)));
          attribute->args.push_back(std::move(index));
        } else {
          attribute->name = expect_name();
        }
        attribute->target = std::move(node);
        node = std::move(attribute);
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        auto call = make(ExprKind::call, current().pos);
        call->target = std::move(node);
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const SourcePos pos = take().pos;  // [
    ExprPtr parts[3];
    int n_colons = 0;
    while (!is_op("]")) {
      if (accept_op(":")) {
        if (++n_colons > 2) fail_at(pos, "a slice has at most two ':'");
        continue;
      }
      if (parts[n_colons]) fail_at(current().pos, "expected ':' or ']' in subscript, found {}", describe(current()));
      parts[n_colons] = parse_expression();
    }
    expect_op("]");
    auto subscript = make(n_colons > 0 ? ExprKind::slice : ExprKind::subscript, pos);
    subscript->target = std::move(node);
    if (n_colons == 0) {
      if (!parts[0]) fail_at(pos, "empty subscript");
      subscript->args.push_back(std::move(parts[0]));
    } else {
      for (ExprPtr& part : parts) subscript->args.push_back(std::move(part));
    }
    return subscript;
  }

  ExprPtr parse_filter(ExprPtr node) {
    auto filter = make(ExprKind::filter, current().pos);
    filter->name = expect_name();
    filter->target = std::move(node);
    if (is_op("(")) parse_call_args(*filter);
    return filter;
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (accept_op("|")) {
        node = parse_postfix(parse_filter(std::move(node)));
      } else if (is_name("is")) {
        auto test = make(ExprKind::test, take().pos);
        test->negated = accept_name("not");
        test->name = expect_name();
        test->target = std::move(node);
        if (is_op("(")) {
          parse_call_args(*test);
        } else if (current().kind == TokenKind::string || current().kind == TokenKind::integer ||
                   current().kind == TokenKind::floating || is_op("[") || is_op("{") ||
                   (current().kind == TokenKind::name && current().text != "else" && current().text != "or" &&
                    current().text != "and" && current().text != "if")) {
          test->args.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`, `x is in list`
        }
        node = std::move(test);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  int depth_ = 0;
};

}  // namespace

Program Parser::parse(std::string_view source) { return TokenParser(Lexer::tokenize(source)).parse_program(); }

}  // namespace rwd::tokenizer::jinja
