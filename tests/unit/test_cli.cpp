// The rewind binary end to end on generated models: mkmodel → inspect → run (--json, --prompt-ids,
// --top-logprobs, seeds), and the errors a user gets for bad files and bad arguments (exit status 1 and a
// message that names the problem, never a crash).
// links: rewind_runtime rewind_app
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

namespace {

using rwd::test::CommandResult;
using rwd::test::run_command;

class Cli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("rewind_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    model_ = (dir_ / "qwen3.gguf").string();
    const CommandResult made = run_command(bin() + " mkmodel --arch qwen3 --preset tiny --dtype q8_0 --seed 3 -o " + model_);
    ASSERT_EQ(made.status, 0) << made.out;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string bin() { return REWIND_BINARY; }

  static std::filesystem::path dir_;
  static std::string model_;
};

std::filesystem::path Cli::dir_;
std::string Cli::model_;

TEST_F(Cli, RunJsonReportsIdsTextTimingsAndLogprobs) {
  const CommandResult r = run_command(bin() + " run -m " + model_ +
                                      " --prompt-ids 72,101,108,108,111 -n 12 --temp 0 --ignore-eos --json --top-logprobs 3 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["prompt_ids"], (std::vector<int>{72, 101, 108, 108, 111}));
  ASSERT_EQ(json["ids"].size(), 12u);
  ASSERT_EQ(json["top_logprobs"].size(), 12u);
  std::string text;
  for (size_t i = 0; i < 12; ++i) {
    const auto& top = json["top_logprobs"][i];
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0]["id"], json["ids"][i]) << "greedy picks the most likely token";
    EXPECT_GE(top[0]["logprob"].get<double>(), top[1]["logprob"].get<double>());
    EXPECT_LE(top[0]["logprob"].get<double>(), 0.0);
    text += static_cast<char>(json["ids"][i].get<int>());  // byte-level vocabulary: id = byte
  }
  EXPECT_EQ(json["text"].get<std::string>(), text);
  EXPECT_GT(json["timings"]["generation_tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(json["timings"]["prompt_tokens"], 5);
}

TEST_F(Cli, SameSeedSameTextDifferentSeedDifferentText) {
  auto sample = [&](int seed) {
    const CommandResult r = run_command(bin() + " run -m " + model_ + " -p 'Once upon a time' -n 24 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --ignore-eos --json --seed " +
                                        std::to_string(seed) + " 2>/dev/null");
    EXPECT_EQ(r.status, 0) << r.out;
    return nlohmann::json::parse(r.out)["ids"].get<std::vector<int>>();
  };
  EXPECT_EQ(sample(11), sample(11));
  EXPECT_NE(sample(11), sample(12));
}

TEST_F(Cli, InspectListsMetadataAndTensors) {
  const CommandResult r = run_command(bin() + " inspect " + model_);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("general.architecture"), std::string::npos);
  EXPECT_NE(r.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(r.out.find("runnable: yes"), std::string::npos);
}

// bench decode with --depth: generation is timed after that much context, and the row says so.
TEST_F(Cli, BenchDecodeAtDepthReportsItsRow) {
  const CommandResult r = run_command(bin() + " bench -m " + model_ + " -t 1 -p 8 -n 4 -d 40 -r 1 --json",
                                      /*stdout_only=*/true);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["depth"], 40);
  EXPECT_EQ(rows[0]["n_gen"], 4);
  EXPECT_GT(rows[0]["tg_tokens_per_second"].get<double>(), 0.0);
  EXPECT_GT(rows[0]["pp_tokens_per_second"].get<double>(), 0.0);
}

TEST_F(Cli, BadInputGivesAClearErrorAndExitStatusOne) {
  struct Case {
    std::string args;
    std::string expected;
  };
  const std::string garbage = (dir_ / "garbage.gguf").string();
  std::ofstream(garbage) << "this is not a gguf file at all";
  const std::string missing = (dir_ / "missing.gguf").string();
  const std::vector<Case> cases = {
      {"run -m " + missing + " -p hi", "missing.gguf"},
      {"run -m " + garbage + " -p hi", "garbage.gguf"},
      {"run -m " + model_ + " --prompt-ids 1,x,3", "'x'"},
      {"run -m " + model_ + " --prompt-ids 1,99999", "99999"},
      {"run -m " + model_ + " -c 16 --prompt-ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "does not fit"},
      {"run -m " + model_ + " -p hi -n 0", "-n"},
      {"run -m " + model_ + " -p hi -t 5000", "threads"},
      {"run -m " + model_, "no prompt"},
      {"mkmodel --arch nosuch -o " + (dir_ / "x.gguf").string(), "nosuch"},
      {"mkmodel --arch qwen3 --dtype q3_x -o " + (dir_ / "x.gguf").string(), "q3_x"},
      {"inspect " + garbage, "garbage.gguf"},
      {"bench -m " + model_ + " -d -1", "--depth >= 0"},
      {"run -m " + model_ + " -p hi --spec ngram --draft-vocab 64", "draft-vocab applies to --spec draft"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_command(bin() + " " + c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expected), std::string::npos) << c.args << "\n" << r.out;
    EXPECT_EQ(r.out.find("internal check failed"), std::string::npos) << c.args;
  }
}

// Flag values CLI11 refuses while parsing exit with its own status (not 1), naming the flag and the value.
TEST_F(Cli, DraftVocabTakesAutoOrACount) {
  for (const std::string value : {"some", "-3", "12x"}) {
    const CommandResult r = run_command(bin() + " run -m " + model_ + " -p hi --draft-vocab " + value);
    EXPECT_NE(r.status, 0) << value;
    EXPECT_NE(r.out.find("--draft-vocab: expected auto or a number >= 0, got '" + value + "'"), std::string::npos)
        << r.out;
  }
  EXPECT_EQ(run_command(bin() + " run -m " + model_ + " -p hi -n 2 --draft-vocab auto").status, 0);
}

// --assume-costs reaches the engine and the report; a bad value names the flag and the value, and a draft cost
// without a verify cost is refused by the engine.
TEST_F(Cli, AssumeCostsAreReportedAndBadOnesRefused) {
  const CommandResult r = run_command(bin() + " run -m " + model_ +
                                      " --prompt-ids 72,101,108,108,111 -n 8 --temp 0 --ignore-eos --spec ngram "
                                      "--assume-costs 0.25,0.5 --json 2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["spec"]["policy"]["assumed_costs"]["verify_token"], 0.25) << r.out;
  EXPECT_EQ(json["spec"]["policy"]["assumed_costs"]["draft_token"], 0.5) << r.out;
  for (const std::string value : {"cheap", "0.1,", "16.5", "-0.1"}) {
    const CommandResult bad = run_command(bin() + " run -m " + model_ + " -p hi --spec ngram --assume-costs " + value);
    EXPECT_NE(bad.status, 0) << value;
    EXPECT_NE(bad.out.find("--assume-costs: expected VERIFY[,DRAFT] with each in [0, 16] plain steps, got '" + value +
                           "'"),
              std::string::npos)
        << bad.out;
  }
  const CommandResult draft_only = run_command(bin() + " run -m " + model_ + " -p hi --spec ngram --assume-costs 0,1");
  EXPECT_EQ(draft_only.status, 1) << draft_only.out;
  EXPECT_NE(draft_only.out.find("assumed_draft_token 1 needs assumed_verify_token"), std::string::npos)
      << draft_only.out;
}

}  // namespace
