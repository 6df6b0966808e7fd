// Template: the Status boundary around the lexer, parser and interpreter.
#include "tokenizer/jinja/template.h"

#include "tokenizer/jinja/parser.h"

namespace rwd::tokenizer::jinja {
namespace {

Status to_status(const Error& error, SourcePos fallback) {
  const SourcePos pos = error.has_pos() ? error.pos() : fallback;
  if (pos.line == 0) return Status::error(error.message());
  return Status::errorf("line {}, column {}: {}", pos.line, pos.column, error.message());
}

}  // namespace

Result<Template> Template::compile(std::string_view source) {
  try {
    return Template(std::make_shared<const Program>(Parser::parse(source)));
  } catch (const Error& error) {
    return to_status(error, {});
  } catch (const std::exception& error) {  // e.g. std::bad_alloc: still never past this boundary
    return Status::errorf("template could not be compiled: {}", error.what());
  }
}

Result<std::string> Template::render(const Object& globals, const RenderLimits& limits) const {
  Interpreter interpreter(limits);
  try {
    return interpreter.render(*program_, globals);
  } catch (const Error& error) {
    return to_status(error, interpreter.position());
  } catch (const std::exception& error) {
    return Status::errorf("template could not be rendered: {}", error.what());
  }
}

}  // namespace rwd::tokenizer::jinja
