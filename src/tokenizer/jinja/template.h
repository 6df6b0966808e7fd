// Template: the jinja module's entry point. compile() lexes and parses once; render() runs the program with
// the given global variables. Both return Status/Result with "line L, column C: problem"; the Error
// exceptions used inside the module stop here. What variables a chat template gets is chat_template.h's.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tokenizer/jinja/interpreter.h"

namespace rwd::tokenizer::jinja {

class Template {
 public:
  static Result<Template> compile(std::string_view source);
  Result<std::string> render(const Object& globals, const RenderLimits& limits = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}

  std::shared_ptr<const Program> program_;  // shared so copies of a compiled template stay cheap
};

}  // namespace rwd::tokenizer::jinja
