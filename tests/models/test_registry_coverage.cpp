// The registry (model/arch/list.h) is the one list of architectures: every row has a generator whose tiny model
// is written as that architecture, and a llama.cpp golden in tests/data, which test_golden checks for each
// row. A row missing any of these fails here with the architecture named.
// links: rewind_runtime rewind_synthetic
#include <gtest/gtest.h>

#include <filesystem>

#include "common/registry.h"
#include "gguf/gguf_file.h"
#include "synthetic/synthetic_model.h"

namespace rwd {
namespace {

TEST(RegistryCoverage, GeneratorsAreTheRegistry) {
  EXPECT_EQ(synthetic_arch_names(), test::all_archs());
}

TEST(RegistryCoverage, EveryArchitectureHasAGeneratorAndAGolden) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rewind_registry_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const std::string& arch : test::all_archs()) {
    const std::string path = (dir / (arch + ".gguf")).string();
    const Status made = make_synthetic_model({arch, "tiny", "q8_0", 3, path});
    ASSERT_TRUE(made.is_ok()) << arch << ": " << made.message();
    auto file = gguf::GgufFile::open(path);
    ASSERT_TRUE(file.is_ok()) << file.status().message();
    EXPECT_EQ((*file)->get_string("general.architecture").value(), arch);
    std::filesystem::remove(path);
    for (const char* suffix : {"-tiny-f32.gguf", "-tiny-f32.json"}) {
      EXPECT_TRUE(std::filesystem::exists(std::string(REWIND_TEST_DATA) + "/" + arch + suffix))
          << "architecture '" << arch << "' has no llama.cpp golden " << arch << suffix << " in tests/data";
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rwd
