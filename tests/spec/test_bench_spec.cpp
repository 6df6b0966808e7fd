// `rewind bench spec` end to end on the tiny hybrid test model: the grid's rows must say that every speculative
// configuration reproduced plain decoding's greedy output (the binary compares them itself, so this also checks
// that it compares: the oracle drafts wrong tokens at a set rate and --fixed-draft keeps it drafting, so
// rollbacks happen), that rollback policy
// 'none' is refused on a recurrent model with a reason, that the state memory the rows report orders as the
// policies' designs say (snapshots grow with depth, replay keeps records and no snapshots), and that --out
// writes the report files (with the acceptance-by-position plot), and that --interleave measures the same runs.
// Sampled grids (--temp) are measured but not compared token by token. Bad prompt files and lists end with exit status 1 and a message naming them.
// links: rewind_runtime rewind_app
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/run_command.h"

namespace {

using nlohmann::json;

using rwd::test::CommandResult;
using rwd::test::run_command;

class BenchSpec : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::filesystem::temp_directory_path() / ("rewind_bench_spec_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream prompts(prompts_path());
    prompts << R"({"prompt": "abc abc abc abc"})" << "\n" << R"({"prompt": "The cat sat on the mat. The cat"})" << "\n";
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  static std::string prompts_path() { return (dir_ / "tiny.jsonl").string(); }
  static std::string command(const std::string& args) {
    return std::string(REWIND_BINARY) + " bench spec -m " + REWIND_TEST_DATA + "/qwen35-tiny-f32.gguf -t 2 -c 256 " +
           args;
  }

  static std::filesystem::path dir_;
};

std::filesystem::path BenchSpec::dir_;

TEST_F(BenchSpec, EverySpeculativeRowReproducesPlainDecoding) {
  const CommandResult r = run_command(command("--prompts " + prompts_path() +
                                              " --spec ngram,oracle --rollback replay,snapshot,checkpoint,none "
                                              "--draft-max 1,3 --slots 1,2 --reps 1 -n 12 --fixed-draft --json"),
                                      /*stdout_only=*/true);
  ASSERT_EQ(r.status, 0) << r.out;
  const json results = json::parse(r.out);
  const json& rows = results["rows"];
  // Per slot count: the plain baseline and 2 proposers x 4 policies x 2 depths.
  ASSERT_EQ(rows.size(), 2u * (1 + 2 * 4 * 2));
  int compared = 0;
  int64_t oracle_rollbacks = 0;
  for (const json& row : rows) {
    const std::string label = row.dump();
    if (row["rollback"] == "none") {
      ASSERT_TRUE(row["error"].is_string()) << label;
      EXPECT_NE(row["error"].get<std::string>().find("recurrent"), std::string::npos) << label;
      continue;
    }
    ASSERT_TRUE(row["error"].is_null()) << label;
    if (row["spec"] == "none") {
      EXPECT_EQ(row["rounds"], 0) << label;
      continue;
    }
    ASSERT_TRUE(row["identical_to_plain"].is_boolean()) << label;
    EXPECT_TRUE(row["identical_to_plain"].get<bool>()) << label;
    ++compared;
    if (row["spec"] == "oracle") {
      EXPECT_GT(row["drafted"].get<int64_t>(), 0) << label;
      oracle_rollbacks += row["rollbacks"].get<int64_t>();
    }
    const json& state = row["state_bytes"];
    if (row["rollback"] == "replay") {
      EXPECT_GT(state["records"].get<int64_t>(), 0) << label;
      EXPECT_EQ(state["snapshots"].get<int64_t>(), 0) << label;
    }
    if (row["rollback"] == "snapshot") {
      EXPECT_GT(state["snapshots"].get<int64_t>(), 0) << label;
    }
    if (row["rollback"] == "checkpoint") {
      EXPECT_GT(state["checkpoint_copies"].get<int64_t>(), 0) << label;
    }
  }
  EXPECT_EQ(compared, 2 * 2 * 3 * 2);
  EXPECT_GT(oracle_rollbacks, 0) << "the oracle's wrong drafts must have been rolled back";

  // Snapshot memory grows with the draft depth (one state copy per verified token); replay's barely does.
  const auto state_total = [&](const std::string& policy, int depth) {
    for (const json& row : rows) {
      if (row["spec"] == "oracle" && row["rollback"] == policy && row["draft_max"] == depth && row["slots"] == 2) {
        return row["state_bytes"]["total"].get<int64_t>();
      }
    }
    return int64_t{-1};
  };
  EXPECT_GT(state_total("snapshot", 3), state_total("snapshot", 1));
  EXPECT_GT(state_total("snapshot", 3), state_total("replay", 3));
}

// --interleave runs the configurations of a workload and slot count rep by rep in turn: the same rows with
// the same drafts and outputs as one after another (with fixed drafts nothing depends on timing), the oracle
// drafting from the plain run's output all the same, and a refused configuration in the group leaves the
// others running.
TEST_F(BenchSpec, InterleavedRepsMeasureTheSameRuns) {
  const std::string args = "--prompts " + prompts_path() +
                           " --spec ngram,oracle --rollback replay,none --draft-max 3 --slots 1,2 --reps 2 -n 12 "
                           "--fixed-draft --json";
  const CommandResult one_after_another = run_command(command(args), /*stdout_only=*/true);
  const CommandResult interleaved = run_command(command(args + " --interleave"), /*stdout_only=*/true);
  ASSERT_EQ(one_after_another.status, 0) << one_after_another.out;
  ASSERT_EQ(interleaved.status, 0) << interleaved.out;
  const json sequential_rows = json::parse(one_after_another.out)["rows"];
  const json results = json::parse(interleaved.out);
  EXPECT_TRUE(results["settings"]["interleave"].get<bool>());
  EXPECT_NE(results["command"].get<std::string>().find("--interleave"), std::string::npos);
  const json& rows = results["rows"];
  ASSERT_EQ(rows.size(), 2u * (1 + 2 * 2));
  ASSERT_EQ(rows.size(), sequential_rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const json& sequential = sequential_rows[i];
    const std::string label = row.dump();
    for (const char* key : {"spec", "rollback", "slots"}) EXPECT_EQ(row[key], sequential[key]) << label;
    if (row["rollback"] == "none") {
      ASSERT_TRUE(row["error"].is_string()) << label;
      continue;
    }
    ASSERT_TRUE(row["error"].is_null()) << label;
    for (const char* key : {"rounds", "drafted", "accepted", "rollbacks"}) {
      EXPECT_EQ(row[key], sequential[key]) << key << " of " << label;
    }
    if (row["spec"] == "none") continue;
    EXPECT_TRUE(row["identical_to_plain"].get<bool>()) << label;
    if (row["spec"] == "oracle") {
      EXPECT_GT(row["drafted"].get<int64_t>(), 0) << label;
    }
  }
}

// Costs assumed at which rounds pay, so that the policy drafts and the acceptance plot has data on any machine
// (timed, a sanitizer build's rounds of the tiny model never pay).
TEST_F(BenchSpec, OutWritesTheReport) {
  const std::filesystem::path out = dir_ / "report dir";
  const CommandResult r = run_command(command("--prompts " + prompts_path() +
                                              " --spec oracle --rollback replay,snapshot --draft-max 2 --slots 1 "
                                              "--assume-costs 0.1 --reps 1 -n 8 --out '" + out.string() + "'"),
                                      /*stdout_only=*/false);
  const bool have_gnuplot = std::system("command -v gnuplot > /dev/null 2>&1") == 0;
  if (have_gnuplot) {
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(std::filesystem::exists(out / "state_memory.png"));
    EXPECT_TRUE(std::filesystem::exists(out / "acceptance_by_position_tiny.png"));
  } else {
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("gnuplot-nox"), std::string::npos) << r.out;
  }
  std::ifstream results_file(out / "results.json");
  const json results = json::parse(results_file);
  EXPECT_EQ(results["settings"]["assumed_costs"]["verify_token"], 0.1);
  EXPECT_NE(results["command"].get<std::string>().find("--assume-costs 0.1,0"), std::string::npos);
  EXPECT_EQ(results["rows"].size(), 3u);
  std::ifstream csv(out / "results.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 1 + 3);  // header and one line per row
  EXPECT_TRUE(std::filesystem::exists(out / "report.html"));
}

// Sampled speculation keeps the target's distribution, not its random stream: the rows are measured, and
// not compared token by token with plain decoding (tests/spec's chi-square tests check the distribution).
TEST_F(BenchSpec, SampledRowsAreMeasuredWithoutTheGreedyComparison) {
  const CommandResult r = run_command(command("--prompts " + prompts_path() +
                                              " --spec ngram --rollback replay --draft-max 2 --slots 1 --reps 1 -n 10 "
                                              "--temp 0.7 --seed 5 --json"),
                                      /*stdout_only=*/true);
  ASSERT_EQ(r.status, 0) << r.out;
  const json results = json::parse(r.out);
  EXPECT_EQ(results["settings"]["temperature"], 0.7);
  EXPECT_EQ(results["settings"]["seed"], 5);
  EXPECT_NE(results["command"].get<std::string>().find("--temp 0.7 --seed 5"), std::string::npos);
  ASSERT_EQ(results["rows"].size(), 2u);
  for (const json& row : results["rows"]) {
    EXPECT_TRUE(row["error"].is_null()) << row.dump();
    EXPECT_TRUE(row["identical_to_plain"].is_null()) << row.dump();
    EXPECT_GT(row["tokens_per_second"]["median"].get<double>(), 0.0) << row.dump();
  }
}

TEST_F(BenchSpec, BadInputIsRefusedWithAMessage) {
  const std::filesystem::path broken = dir_ / "broken.jsonl";
  std::ofstream(broken) << R"({"prompt": "fine"})" << "\n" << "{not json\n";
  const struct {
    std::string args;
    std::string message;
  } cases[] = {
      {"--prompts /nonexistent/p.jsonl", "cannot open '/nonexistent/p.jsonl'"},
      {"--prompts " + broken.string(), "line 2"},
      {"--prompts " + prompts_path() + " --draft-max 0", "--draft-max"},
      {"--prompts " + prompts_path() + " --spec none", "baseline"},
      {"--prompts " + prompts_path() + " --slots 1,x", "--slots"},
      {"--prompts " + prompts_path() + " --spec oracle --temp 0.7", "needs --temp 0"},
      {"--prompts " + prompts_path() + " --ngram-min 5 --ngram-max 4", "--ngram-min/--ngram-max must satisfy"},
      {"--prompts " + prompts_path() + " --assume-costs 0,0.1", "assumed_draft_token 0.1 needs"},
  };
  for (const auto& c : cases) {
    const CommandResult r = run_command(command(c.args), /*stdout_only=*/false);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
  // Refused while the command line is parsed (CLI11's exit status for a bad value).
  for (const char* costs : {"0.1,x", "17", "-1", "nan"}) {
    const CommandResult r = run_command(command("--prompts " + prompts_path() + " --assume-costs " + costs),
                                        /*stdout_only=*/false);
    EXPECT_NE(r.status, 0) << costs << "\n" << r.out;
    EXPECT_NE(r.out.find(std::string("--assume-costs: expected VERIFY[,DRAFT] with each in [0, 16] plain steps, got '") +
                         costs + "'"),
              std::string::npos)
        << costs << "\n" << r.out;
  }
}

}  // namespace
