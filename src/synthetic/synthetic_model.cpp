// `rewind mkmodel`: random-weight GGUF models for tests and benchmarks — the shapes of a preset, llama.cpp's
// tensor names and metadata keys, weights scaled so that logits are far from flat, and a byte-level BPE
// vocabulary in which any text is its UTF-8 bytes. Output rows of non-printable tokens are zero (untied
// models), so greedy text is printable ASCII. Speed depends on shapes and types, not values, so a `small`
// model is comparable with a real one of the same shape. This table is the list of generators.
#include "synthetic/synthetic_model.h"

#include <fmt/format.h>

#include "model/arch/architectures.h"
#include "synthetic/parts.h"

namespace rwd {
namespace {

struct Generator {
  const model::ArchInfo& (*arch)();
  Status (*write)(const SyntheticModelOptions&, gguf::GgufWriter&, synthetic::TensorMaker&);
};

#define REWIND_GENERATOR_ROW(id) {model::arch::id, synthetic::write_##id},
constexpr Generator kGenerators[] = {REWIND_ARCHITECTURES(REWIND_GENERATOR_ROW)};
#undef REWIND_GENERATOR_ROW

}  // namespace

std::vector<std::string> synthetic_arch_names() {
  std::vector<std::string> names;
  for (const Generator& generator : kGenerators) names.emplace_back(generator.arch().name);
  return names;
}

Status make_synthetic_model(const SyntheticModelOptions& options) {
  const Generator* generator = nullptr;
  for (const Generator& candidate : kGenerators) {
    if (options.arch == candidate.arch().name) generator = &candidate;
  }
  if (generator == nullptr) {
    return Status::errorf("mkmodel: architecture '{}' has no generator (available: {})", options.arch,
                          fmt::join(synthetic_arch_names(), ", "));
  }
  if (options.preset != "tiny" && options.preset != "small") {
    return Status::errorf("mkmodel: preset '{}' is not 'tiny' or 'small'", options.preset);
  }
  REWIND_ASSIGN_OR_RETURN(tensor::DType dtype, synthetic::parse_dtype(options.dtype));
  gguf::GgufWriter writer;
  synthetic::write_general(writer, options);
  synthetic::TensorMaker maker(writer, dtype, options.seed);
  REWIND_RETURN_IF_ERROR(generator->write(options, writer, maker));
  return writer.write(options.output_path);
}

}  // namespace rwd
