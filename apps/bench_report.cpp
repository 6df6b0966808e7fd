// The report files of `rewind bench spec` (see bench_report.h). Every field is read defensively: an error row
// may lack any field, and a missing number shows as "-" or an empty cell and drops out of plots and summaries,
// never as an exception or a zero. The plots are gnuplot scripts run through std::system; nothing is drawn
// here, so users can restyle a plot by editing its .gp file and running gnuplot again.
#include "bench_report.h"
#include "commands.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace rwd::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kKiB = 1024.0;

// Rollback policies take these colours in plots 2 and 3; slot counts take the second set in plot 1 so a bar
// colour never suggests a policy.
constexpr const char* kPolicyColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#17becf", "#e377c2"};
constexpr const char* kSlotColors[] = {"#6a3d9a", "#b15928", "#1b9e77", "#e7298a", "#666666", "#a6761d"};

template <size_t N>
const char* pick(const char* const (&colors)[N], size_t index) {
  return colors[index % N];
}

// The columns of results.csv and of the report's full table, in reading order; fields the rows carry beyond
// these are appended, sorted, so a new field shows up without a change here.
constexpr const char* kCanonicalColumns[] = {
    "workload", "spec", "rollback", "draft_max", "tree_nodes", "slots",
    "tokens_per_second_median", "tokens_per_second_min", "tokens_per_second_max", "speedup_vs_plain",
    "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99",
    "acceptance_rate", "acceptance_by_position", "accepted_per_round", "rounds", "plain_steps", "mostly_plain",
    "drafted", "accepted",
    "state_bytes_kv", "state_bytes_conv", "state_bytes_recurrent", "state_bytes_records", "state_bytes_snapshots",
    "state_bytes_checkpoint_copies", "state_bytes_scratch", "state_bytes_rewind", "state_bytes_draft_model",
    "state_bytes_total", "rollback_bytes_written_per_round", "rollback_bytes_copied_per_round",
    "identical_to_plain", "error"};

// Nullopt when any key on the path is missing, null or not a number.
std::optional<double> number_at(const json& value, std::initializer_list<const char*> keys) {
  const json* node = &value;
  for (const char* key : keys) {
    if (!node->is_object()) return std::nullopt;
    auto it = node->find(key);
    if (it == node->end()) return std::nullopt;
    node = &*it;
  }
  if (!node->is_number()) return std::nullopt;
  return node->get<double>();
}

std::string string_at(const json& value, const char* key) {
  if (!value.is_object()) return "";
  auto it = value.find(key);
  if (it == value.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

// One entry of results.rows with the fields that identify it pulled out once.
struct BenchRow {
  const json* fields = nullptr;
  std::string workload;
  std::string spec;
  std::string rollback;
  std::string error;  // empty: the row was measured
  int draft_max = 0;
  int n_slots = 0;
  int tree_nodes = 0;  // > 0: tree drafts of this budget

  bool plain() const { return spec == "none"; }
  bool failed() const { return !error.empty(); }
  std::optional<double> number(std::initializer_list<const char*> keys) const { return number_at(*fields, keys); }
  std::string label() const {
    if (plain()) return "plain";
    return tree_nodes > 0 ? fmt::format("{} {} k{} tree {}", spec, rollback, draft_max, tree_nodes)
                          : fmt::format("{} {} k{}", spec, rollback, draft_max);
  }
};

// The rollback-relevant state of a row in bytes: what a policy keeps to undo rejected draft tokens, plus the
// recurrent and conv state it protects. The KV cache rolls back by moving its end and keeps no rollback data;
// it, scratch and the draft model are left out so they do not bury the differences between policies.
std::optional<double> rollback_state_bytes(const BenchRow& row) {
  if (!row.number({"state_bytes", "total"}) && !row.number({"state_bytes", "recurrent"})) return std::nullopt;
  double bytes = 0;
  for (const char* part : {"recurrent", "conv", "records", "snapshots", "checkpoint_copies"}) {
    bytes += row.number({"state_bytes", part}).value_or(0.0);
  }
  return bytes;
}

struct ReportInput {
  std::vector<BenchRow> rows;
  std::vector<std::string> workloads;                  // in order of first appearance
  std::map<std::string, std::string> workload_stems;  // workload → file-name-safe stem, unique
  std::vector<std::string> rollbacks;                  // in order of first appearance; index = colour
  std::vector<std::string> specs;                      // in order of first appearance; index = dash type
  std::string model_name;
  std::string reps;                                    // "" when settings.reps is absent
};

size_t index_of(const std::vector<std::string>& values, const std::string& value) {
  return static_cast<size_t>(std::find(values.begin(), values.end(), value) - values.begin());
}

void add_unique(std::vector<std::string>& values, const std::string& value) {
  if (index_of(values, value) == values.size()) values.push_back(value);
}

// Workload names come from prompt files and may hold spaces or quotes; file names get [A-Za-z0-9_-] only.
std::string file_stem(const std::string& name) {
  std::string stem;
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (keep) {
      stem += c;
    } else if (!stem.empty() && stem.back() != '_') {
      stem += '_';
    }
  }
  while (!stem.empty() && stem.back() == '_') stem.pop_back();
  return stem.empty() ? "workload" : stem;
}

ReportInput read_input(const json& results) {
  ReportInput input;
  const json& rows = results["rows"];
  for (const json& fields : rows) {
    BenchRow row;
    row.fields = &fields;
    row.workload = string_at(fields, "workload");
    row.spec = string_at(fields, "spec");
    row.rollback = string_at(fields, "rollback");
    row.draft_max = static_cast<int>(number_at(fields, {"draft_max"}).value_or(0));
    row.n_slots = static_cast<int>(number_at(fields, {"slots"}).value_or(0));
    row.tree_nodes = static_cast<int>(number_at(fields, {"tree_nodes"}).value_or(0));
    if (fields.is_object() && fields.contains("error") && !fields["error"].is_null()) {
      row.error = fields["error"].is_string() ? fields["error"].get<std::string>() : dump_json(fields["error"]);
    }
    if (!fields.is_object()) row.error = "row is not a JSON object: " + dump_json(fields);
    add_unique(input.workloads, row.workload);
    if (!row.plain()) {
      add_unique(input.rollbacks, row.rollback);
      add_unique(input.specs, row.spec);
    }
    input.rows.push_back(std::move(row));
  }
  std::set<std::string> used;
  for (const std::string& workload : input.workloads) {
    std::string stem = file_stem(workload);
    for (int n = 2; used.count(stem); ++n) stem = fmt::format("{}_{}", file_stem(workload), n);
    used.insert(stem);
    input.workload_stems[workload] = stem;
  }
  input.model_name = string_at(results.value("model", json::object()), "name");
  if (input.model_name.empty()) input.model_name = string_at(results.value("model", json::object()), "path");
  if (input.model_name.empty()) input.model_name = "model";
  if (auto reps = number_at(results, {"settings", "reps"})) input.reps = fmt::format("{}", *reps);
  return input;
}

std::vector<const BenchRow*> measured_rows(const ReportInput& input, const std::string& workload) {
  std::vector<const BenchRow*> rows;
  for (const BenchRow& row : input.rows) {
    if (!row.failed() && row.workload == workload) rows.push_back(&row);
  }
  return rows;
}

std::vector<int> slot_counts(const std::vector<const BenchRow*>& rows) {
  std::set<int> counts;
  for (const BenchRow* row : rows) counts.insert(row->n_slots);
  return {counts.begin(), counts.end()};
}

std::string slots_text(int n_slots) { return fmt::format("{} slot{}", n_slots, n_slots == 1 ? "" : "s"); }

// Three significant digits or so: enough to compare, short enough for a table cell.
std::string format_short(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude >= 100) return fmt::format("{:.0f}", value);
  if (magnitude >= 10) return fmt::format("{:.1f}", value);
  return fmt::format("{:.2f}", value);
}

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// ---- the compact table (terminal markdown and the report's first table) ----

struct CompactColumn {
  const char* title;
  bool numeric;
};
constexpr CompactColumn kCompactColumns[] = {
    {"workload", false}, {"spec", false}, {"rollback", false}, {"k", true}, {"slots", true},
    {"tok/s (min–max)", true}, {"vs plain", true}, {"TPOT p50/p90/p99 ms", true}, {"TTFT p50 ms", true},
    {"acceptance", true}, {"accepted/round", true}, {"spec/plain steps", true}, {"state MiB", true},
    {"written KiB/round", true}, {"copied KiB/round", true}, {"identical", false}};
constexpr size_t kIdentityColumns = 5;  // workload … slots; an error row shows these, then its error

std::string or_dash(std::optional<double> value) { return value ? format_short(*value) : "-"; }

std::vector<std::string> compact_cells(const BenchRow& row) {
  std::vector<std::string> cells = {row.workload, row.spec, row.rollback,
                                    row.tree_nodes > 0 ? fmt::format("{} tree {}", row.draft_max, row.tree_nodes)
                                                       : fmt::format("{}", row.draft_max),
                                    fmt::format("{}", row.n_slots)};
  if (row.failed()) {
    cells.push_back("error: " + row.error);
    return cells;
  }
  const auto tps = row.number({"tokens_per_second", "median"});
  const auto tps_min = row.number({"tokens_per_second", "min"});
  const auto tps_max = row.number({"tokens_per_second", "max"});
  std::string tps_text = tps ? fmt::format("{:.1f}", *tps) : "-";
  if (tps && tps_min && tps_max) tps_text += fmt::format(" ({:.1f}–{:.1f})", *tps_min, *tps_max);
  const auto speedup = row.number({"speedup_vs_plain"});
  const auto acceptance = row.number({"acceptance_rate"});
  std::string identical = "-";
  if (row.fields->contains("identical_to_plain") && (*row.fields)["identical_to_plain"].is_boolean()) {
    identical = (*row.fields)["identical_to_plain"].get<bool>() ? "yes" : "NO";
  }
  cells.push_back(tps_text);
  cells.push_back(speedup ? fmt::format("{:.2f}×", *speedup) : "-");
  cells.push_back(fmt::format("{}/{}/{}", or_dash(row.number({"tpot_ms", "p50"})),
                              or_dash(row.number({"tpot_ms", "p90"})), or_dash(row.number({"tpot_ms", "p99"}))));
  cells.push_back(or_dash(row.number({"ttft_ms", "p50"})));
  cells.push_back(acceptance ? fmt::format("{:.0f}%", *acceptance * 100) : "-");
  cells.push_back(or_dash(row.number({"accepted_per_round"})));
  const auto rounds = row.number({"rounds"});
  const auto plain_steps = row.number({"plain_steps"});
  std::string steps = "-";
  if (row.spec != "none" && rounds && plain_steps) {
    steps = fmt::format("{:.0f}/{:.0f}", *rounds, *plain_steps);
    if (*plain_steps > *rounds) steps += " mostly plain";
  }
  cells.push_back(steps);
  const auto total = row.number({"state_bytes", "total"});
  cells.push_back(total ? fmt::format("{:.1f}", *total / kMiB) : "-");
  const auto written = row.number({"rollback_bytes_written_per_round"});
  const auto copied = row.number({"rollback_bytes_copied_per_round"});
  cells.push_back(written ? fmt::format("{:.1f}", *written / kKiB) : "-");
  cells.push_back(copied ? fmt::format("{:.1f}", *copied / kKiB) : "-");
  cells.push_back(identical);
  return cells;
}

// Terminal columns of UTF-8 text, counting code points: the table uses – and ×, never wide characters.
size_t display_width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// ---- flattened rows (results.csv and the report's full table) ----

void flatten(const json& value, const std::string& prefix, std::map<std::string, json>& leaves) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "_" + it.key(), leaves);
    }
    return;
  }
  leaves[prefix] = value;
}

std::vector<std::string> flat_columns(const std::vector<std::map<std::string, json>>& flat_rows) {
  std::vector<std::string> columns(std::begin(kCanonicalColumns), std::end(kCanonicalColumns));
  std::set<std::string> extra;
  for (const auto& leaves : flat_rows) {
    for (const auto& [key, value] : leaves) {
      if (index_of(columns, key) == columns.size()) extra.insert(key);
    }
  }
  columns.insert(columns.end(), extra.begin(), extra.end());
  return columns;
}

// `exact`: every digit a double needs to round-trip (CSV); otherwise short (HTML). Arrays join with ';'.
std::string leaf_text(const json* value, bool exact) {
  if (value == nullptr || value->is_null()) return "";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_boolean()) return value->get<bool>() ? "true" : "false";
  if (value->is_number_integer()) return dump_json(*value);
  if (value->is_number_float()) {
    const double number = value->get<double>();
    if (exact) return fmt::format("{}", number);
    return std::fabs(number) >= 1000 ? fmt::format("{:.0f}", number) : fmt::format("{:.4g}", number);
  }
  if (value->is_array()) {
    std::string out;
    for (const json& item : *value) {
      if (!out.empty()) out += exact ? ";" : "; ";
      out += leaf_text(&item, exact);
    }
    return out;
  }
  return dump_json(*value);
}

std::string csv_field(const std::string& text) {
  const bool plain = text.find_first_of(",\"\r\n") == std::string::npos &&
                     (text.empty() || (text.front() != ' ' && text.back() != ' '));
  if (plain) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

struct FlatTable {
  std::vector<std::string> columns;
  std::vector<std::map<std::string, json>> rows;
};

FlatTable flat_table(const ReportInput& input) {
  FlatTable table;
  for (const BenchRow& row : input.rows) {
    std::map<std::string, json> leaves;
    if (row.fields->is_object()) flatten(*row.fields, "", leaves);
    // One error column whatever shape the error has (a string, or an object that flatten would split).
    for (auto it = leaves.begin(); it != leaves.end();) {
      it = it->first.rfind("error_", 0) == 0 ? leaves.erase(it) : std::next(it);
    }
    leaves["error"] = row.failed() ? json(row.error) : json();
    table.rows.push_back(std::move(leaves));
  }
  table.columns = flat_columns(table.rows);
  return table;
}

std::string results_csv(const FlatTable& table) {
  std::string csv;
  for (size_t i = 0; i < table.columns.size(); ++i) {
    if (i) csv += ',';
    csv += csv_field(table.columns[i]);
  }
  csv += "\n";
  for (const auto& leaves : table.rows) {
    for (size_t i = 0; i < table.columns.size(); ++i) {
      auto it = leaves.find(table.columns[i]);
      if (i) csv += ',';
      csv += csv_field(leaf_text(it == leaves.end() ? nullptr : &it->second, true));
    }
    csv += "\n";
  }
  return csv;
}

// ---- plots ----

struct Plot {
  std::string name;     // file stem of name.dat, name.gp and name.png
  std::string title;    // the report's heading for it
  std::string caption;  // what is drawn and what was left out
};

// A gnuplot single-quoted string: only '' needs escaping, and backslashes stay literal.
std::string gp_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "''";
    } else if (c != '\n' && c != '\r') {
      out += c;
    }
  }
  return out + "'";
}

// Data-file strings are double-quoted and gnuplot has no escape for '"' inside them.
std::string gp_data_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) out += c == '"' ? '\'' : c;
  return out + "\"";
}

std::string gp_number(std::optional<double> value) { return value ? fmt::format("{}", *value) : "NaN"; }

// pngcairo draws smoother text; the libgd png terminal is the fallback for a gnuplot built without cairo.
std::string gp_header(const std::string& name, int width, int height) {
  return fmt::format(
      "# Drawn by rewind bench spec; edit and run `gnuplot {0}.gp` in this directory to restyle.\n"
      "set encoding utf8\n"
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{\n"
      "  set terminal pngcairo size {1},{2} noenhanced font ',10'\n"
      "}} else {{\n"
      "  set terminal png size {1},{2} noenhanced\n"
      "}}\n"
      "set output '{0}.png'\n",
      name, width, height);
}

Status write_text_file(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return Status::errorf("cannot open {} for writing", path.string());
  file << text;
  file.close();
  if (!file) return Status::errorf("cannot write {}", path.string());
  return Status::ok();
}

Status write_plot_files(const fs::path& dir, const Plot& plot, const std::string& data, const std::string& script,
                        std::vector<Plot>& plots) {
  REWIND_RETURN_IF_ERROR(write_text_file(dir / (plot.name + ".dat"), data));
  REWIND_RETURN_IF_ERROR(write_text_file(dir / (plot.name + ".gp"), script));
  plots.push_back(plot);
  return Status::ok();
}

// Plot 1: one cluster of bars per configuration (one bar per slot count, min–max whiskers), plain decoding as
// a dashed line per slot count.
Status write_tokens_plot(const ReportInput& input, const std::string& workload, const fs::path& dir,
                         std::vector<Plot>& plots) {
  const std::vector<const BenchRow*> rows = measured_rows(input, workload);
  const std::vector<int> counts = slot_counts(rows);
  std::vector<std::string> labels;
  std::map<std::pair<std::string, int>, const BenchRow*> by_config;
  std::map<int, double> plain_tps;
  double y_max = 0;
  for (const BenchRow* row : rows) {
    const auto tps = row->number({"tokens_per_second", "median"});
    if (!tps) continue;
    y_max = std::max({y_max, *tps, row->number({"tokens_per_second", "max"}).value_or(0.0)});
    if (row->plain()) {
      plain_tps.emplace(row->n_slots, *tps);
      continue;
    }
    add_unique(labels, row->label());
    by_config.emplace(std::make_pair(row->label(), row->n_slots), row);
  }
  if (labels.empty()) return Status::ok();

  Plot plot{"tokens_per_second_" + input.workload_stems.at(workload), "Tokens per second: " + workload, ""};
  std::string data = "# configuration, then median min max tokens/s for";
  for (int n_slots : counts) data += " " + slots_text(n_slots) + ",";
  data += " NaN where not measured\n";
  for (const std::string& label : labels) {
    data += gp_data_string(label);
    for (int n_slots : counts) {
      auto it = by_config.find({label, n_slots});
      const BenchRow* row = it == by_config.end() ? nullptr : it->second;
      const auto median = row ? row->number({"tokens_per_second", "median"}) : std::nullopt;
      const auto low = median ? row->number({"tokens_per_second", "min"}).value_or(*median) : median;
      const auto high = median ? row->number({"tokens_per_second", "max"}).value_or(*median) : median;
      data += fmt::format(" {} {} {}", gp_number(median), gp_number(low), gp_number(high));
    }
    data += "\n";
  }

  const int width = std::max(900, 140 + static_cast<int>(labels.size() * (14 * counts.size() + 18)));
  std::string script = gp_header(plot.name, width, 500);
  script += "set title " + gp_quote(fmt::format("Tokens/s by configuration — {}, workload {}", input.model_name,
                                                workload)) + "\n";
  script += "set ylabel " + gp_quote(input.reps.empty() ? "tokens/s (median; bars: min–max)"
                                                        : "tokens/s (median of " + input.reps +
                                                              " reps; bars: min–max)") + "\n";
  script += "set style data histogram\nset style histogram errorbars gap 1 lw 1\n";
  script += "set style fill solid 0.85 border -1\nset boxwidth 0.9\n";
  // One key column for the bars, one for the plain lines.
  script += fmt::format("set xtics rotate by 30 right nomirror\nset grid ytics\nset key top left vertical maxrows {}\n",
                        counts.size());
  // Headroom above the tallest bar keeps the key clear of the data.
  script += fmt::format("set yrange [0:{}]\n", y_max > 0 ? y_max * 1.3 : 1.0);
  std::string keys;
  for (size_t i = 0; i < counts.size(); ++i) {
    auto it = plain_tps.find(counts[i]);
    if (it == plain_tps.end()) continue;
    script += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead dt 2 lw 2 lc rgb '{1}' "
                          "front\n", it->second, pick(kSlotColors, i));
    keys += fmt::format(", keyentry with lines dt 2 lw 2 lc rgb '{}' title {}", pick(kSlotColors, i),
                        gp_quote(fmt::format("plain, {} ({:.1f})", slots_text(counts[i]), it->second)));
  }
  script += "plot ";
  for (size_t i = 0; i < counts.size(); ++i) {
    const size_t column = 2 + 3 * i;
    script += fmt::format("{}'{}.dat' using {}:{}:{}{} title {} lc rgb '{}'", i ? ", " : "", plot.name, column,
                          column + 1, column + 2, i ? "" : ":xtic(1)", gp_quote(slots_text(counts[i])),
                          pick(kSlotColors, i));
  }
  script += keys + "\n";
  plot.caption =
      "Median tokens/s of each speculative configuration (proposer, rollback policy, k = draft_max), one bar per "
      "slot count, whiskers from the slowest to the fastest rep. Dashed lines: plain decoding at the same slot "
      "count. Failed configurations are left out.";
  return write_plot_files(dir, plot, data, script, plots);
}

// Plot 2: rollback-relevant state against draft depth, one line per (policy, slot count), plain at x = 0.
Status write_state_plot(const ReportInput& input, const fs::path& dir, std::vector<Plot>& plots) {
  if (input.workloads.empty()) return Status::ok();
  const std::string& workload = input.workloads.front();
  const std::vector<const BenchRow*> rows = measured_rows(input, workload);
  const std::vector<int> counts = slot_counts(rows);
  // (rollback, slots) → draft_max → MiB; the first row wins, since the proposer does not change these bytes.
  std::map<std::pair<std::string, int>, std::map<int, double>> series;
  std::map<int, double> plain_mib;
  std::set<int> depths;
  std::vector<std::string> specs_used;
  for (const BenchRow* row : rows) {
    const auto bytes = rollback_state_bytes(*row);
    if (!bytes || row->tree_nodes > 0) continue;  // a tree's transactions hold its budget, not draft_max tokens
    if (row->plain()) {
      plain_mib.emplace(row->n_slots, *bytes / kMiB);
      continue;
    }
    if (series[{row->rollback, row->n_slots}].emplace(row->draft_max, *bytes / kMiB).second) {
      add_unique(specs_used, row->spec);
    }
    depths.insert(row->draft_max);
  }
  if (series.empty() && plain_mib.empty()) return Status::ok();

  Plot plot{"state_memory", "Rollback state memory", ""};
  std::string data;
  std::string plot_items;
  std::string references;
  size_t block = 0;
  for (const std::string& rollback : input.rollbacks) {
    for (size_t s = 0; s < counts.size(); ++s) {
      auto it = series.find({rollback, counts[s]});
      if (it == series.end()) continue;
      const std::string title = fmt::format("{}, {}", rollback, slots_text(counts[s]));
      data += "# " + title + ": draft_max, MiB\n";
      for (const auto& [depth, mib] : it->second) data += fmt::format("{} {}\n", depth, mib);
      data += "\n\n";
      plot_items += fmt::format("{}'{}.dat' index {} using 1:2 with linespoints lw 2 ps 1.3 lc rgb '{}' dt {} pt {} "
                                "title {}", plot_items.empty() ? "" : ", ", plot.name, block++,
                                pick(kPolicyColors, index_of(input.rollbacks, rollback)), 1 + s, 5 + 2 * s,
                                gp_quote(title));
    }
  }
  for (size_t s = 0; s < counts.size(); ++s) {
    auto it = plain_mib.find(counts[s]);
    if (it == plain_mib.end()) continue;
    const std::string title = fmt::format("plain, {}", slots_text(counts[s]));
    data += fmt::format("# {}: draft_max, MiB\n0 {}\n\n\n", title, it->second);
    // A dotted level from plain's point: what every policy adds on top of the state decoding needs anyway.
    references += fmt::format("set arrow from first 0, first {0} to graph 1, first {0} nohead dt 3 lc rgb 'gray50'\n",
                              it->second);
    plot_items += fmt::format("{}'{}.dat' index {} using 1:2 with points ps 1.8 lc rgb 'black' pt {} title {}",
                              plot_items.empty() ? "" : ", ", plot.name, block++, 5 + 2 * s, gp_quote(title));
  }

  std::string script = gp_header(plot.name, 900, 500);
  script += "set title " + gp_quote(fmt::format("Rollback state vs draft depth — {}, workload {}{}",
                                                input.model_name, workload,
                                                specs_used.size() == 1 ? ", spec " + specs_used.front() : "")) + "\n";
  script += "set xlabel 'draft_max (tokens drafted per round)'\n";
  script += "set ylabel 'rollback-relevant state, MiB (all slots)'\n";
  std::string tics = "set xtics (\"plain\" 0";
  for (int depth : depths) tics += fmt::format(", \"{0}\" {0}", depth);
  script += tics + ")\n";
  script += fmt::format("set xrange [-0.5:{}]\nset yrange [0:*]\nset grid\nset key top left\n",
                        depths.empty() ? 0.5 : *depths.rbegin() + 0.5);
  script += references + "plot " + plot_items + "\n";
  plot.caption = fmt::format(
      "MiB of rollback-relevant state for all slots together (recurrent + conv + replay records + snapshots + "
      "checkpoint copies; the KV cache, scratch and draft model hold no rollback data and are left out), by draft "
      "depth; colour = "
      "rollback policy, line style = slot count, black points and dotted levels = plain decoding. Workload {} "
      "only: the bytes do not depend on the prompts.", workload);
  return write_plot_files(dir, plot, data, script, plots);
}

// The deepest speculative configuration of the rows; 0 when all are plain.
int largest_draft_max(const std::vector<const BenchRow*>& rows) {
  int depth = 0;
  for (const BenchRow* row : rows) {
    if (!row->plain()) depth = std::max(depth, row->draft_max);
  }
  return depth;
}

// Plot 3: TPOT p50 (with a bar up to p90) against slot count, one line per configuration at the largest
// draft_max; every depth at once would put 19 lines on one chart.
Status write_tpot_plot(const ReportInput& input, const std::string& workload, const fs::path& dir,
                       std::vector<Plot>& plots) {
  const std::vector<const BenchRow*> rows = measured_rows(input, workload);
  const std::vector<int> counts = slot_counts(rows);
  const int depth = largest_draft_max(rows);
  std::vector<std::string> labels;
  std::map<std::string, const BenchRow*> first_of_label;
  std::map<std::string, std::map<int, std::pair<double, double>>> points;  // label → slots → (p50, p90)
  for (const BenchRow* row : rows) {
    if (!row->plain() && row->draft_max != depth) continue;
    if (row->tree_nodes > 0) continue;  // the chains' chart
    const auto p50 = row->number({"tpot_ms", "p50"});
    if (!p50) continue;
    add_unique(labels, row->label());
    first_of_label.emplace(row->label(), row);
    points[row->label()].emplace(row->n_slots, std::make_pair(*p50, row->number({"tpot_ms", "p90"}).value_or(*p50)));
  }
  if (labels.empty() || counts.empty()) return Status::ok();
  // Plain first, so it is the first key entry.
  std::stable_partition(labels.begin(), labels.end(), [](const std::string& label) { return label == "plain"; });

  Plot plot{"tpot_vs_slots_" + input.workload_stems.at(workload), "Time per output token vs slots: " + workload, ""};
  std::string data;
  std::string plot_items;
  for (size_t i = 0; i < labels.size(); ++i) {
    // Lines that share a slot count are nudged apart along the log x axis so their p90 bars do not overlap.
    const double nudge = std::exp2((static_cast<double>(i) - 0.5 * static_cast<double>(labels.size() - 1)) * 0.035);
    data += "# " + labels[i] + ": x (slots, nudged), slots, TPOT p50 ms, TPOT p90 ms\n";
    for (const auto& [n_slots, p50_p90] : points[labels[i]]) {
      data += fmt::format("{} {} {} {}\n", n_slots * nudge, n_slots, p50_p90.first, p50_p90.second);
    }
    data += "\n\n";
    const BenchRow& row = *first_of_label.at(labels[i]);
    const std::string color = row.plain() ? "black" : pick(kPolicyColors, index_of(input.rollbacks, row.rollback));
    const size_t dash = row.plain() ? 1 : 1 + index_of(input.specs, row.spec);
    plot_items += fmt::format("{}'{}.dat' index {} using 1:3:3:4 with yerrorlines lw 2 ps 1.2 lc rgb '{}' dt {} pt {} "
                              "title {}", i ? ", " : "", plot.name, i, color, dash, row.plain() ? 7 : 5 + 2 * dash,
                              gp_quote(labels[i]));
  }

  std::string script = gp_header(plot.name, 900, 500);
  script += "set title " + gp_quote(fmt::format("Time per output token vs slots — {}, workload {}, draft_max {}",
                                                input.model_name, workload, depth)) + "\n";
  script += "set xlabel 'slots (concurrent requests)'\n";
  script += "set ylabel 'TPOT ms (points: p50; bars up to p90)'\n";
  std::string tics = "set xtics (";
  for (size_t i = 0; i < counts.size(); ++i) tics += fmt::format("{}\"{}\" {}", i ? ", " : "", counts[i], counts[i]);
  script += tics + ")\n";
  script += fmt::format("set logscale x 2\nset xrange [{}:{}]\nset yrange [0:*]\nset grid\n",
                        counts.front() / 1.4, counts.back() * 1.4);
  script += "set key outside right top\nset bars 2\n";
  script += "plot " + plot_items + "\n";
  plot.caption = fmt::format(
      "Time per output token (p50, with a bar up to p90) against the number of concurrent slots, for plain "
      "decoding and every speculative configuration at the largest draft depth, k = {}, only; other depths are "
      "in the tables. Colour = rollback policy, line style = proposer. Points at the same slot count are spread "
      "slightly sideways so their bars stay apart.", depth);
  return write_plot_files(dir, plot, data, script, plots);
}

// Plot 4: acceptance by draft position, one line per proposer at the largest draft_max, fewest slots and the
// first rollback policy (acceptance does not depend on the policy, and slots change it only through timing).
Status write_acceptance_plot(const ReportInput& input, const std::string& workload, const fs::path& dir,
                             std::vector<Plot>& plots) {
  const std::vector<const BenchRow*> rows = measured_rows(input, workload);
  const std::vector<int> counts = slot_counts(rows);
  const int depth = largest_draft_max(rows);
  if (depth == 0 || counts.empty() || input.rollbacks.empty()) return Status::ok();
  std::vector<std::pair<std::string, std::vector<double>>> lines;  // proposer → rate per position
  for (const std::string& spec : input.specs) {
    for (const BenchRow* row : rows) {
      if (row->spec != spec || row->draft_max != depth || row->n_slots != counts.front() ||
          row->rollback != input.rollbacks.front() || row->tree_nodes > 0) {
        continue;
      }
      const json& rates = row->fields->value("acceptance_by_position", json());
      if (!rates.is_array() || rates.empty()) continue;
      std::vector<double> values;
      for (const json& rate : rates) values.push_back(rate.is_number() ? rate.get<double>() : 0.0);
      lines.emplace_back(spec, std::move(values));
      break;
    }
  }
  if (lines.empty()) return Status::ok();

  Plot plot{"acceptance_by_position_" + input.workload_stems.at(workload), "Acceptance by draft position: " + workload,
            ""};
  std::string data;
  std::string plot_items;
  for (size_t i = 0; i < lines.size(); ++i) {
    data += "# " + lines[i].first + ": draft position, fraction of drafted tokens accepted\n";
    for (size_t p = 0; p < lines[i].second.size(); ++p) data += fmt::format("{} {}\n", p + 1, lines[i].second[p]);
    data += "\n\n";
    plot_items += fmt::format("{}'{}.dat' index {} using 1:2 with linespoints lw 2 ps 1.3 dt {} pt {} title {}",
                              i ? ", " : "", plot.name, i, 1 + index_of(input.specs, lines[i].first),
                              5 + 2 * static_cast<int>(i), gp_quote(lines[i].first));
  }
  std::string script = gp_header(plot.name, 900, 500);
  script += "set title " + gp_quote(fmt::format("Acceptance by draft position — {}, workload {}, draft_max {}, {}",
                                                input.model_name, workload, depth, slots_text(counts.front()))) +
            "\n";
  script += "set xlabel 'draft position (1 = the first drafted token)'\n";
  script += "set ylabel 'drafted tokens accepted at that position'\n";
  script += fmt::format("set xrange [0.5:{}]\nset xtics 1\nset yrange [0:1]\nset grid\nset key top right\n",
                        depth + 0.5);
  script += "plot " + plot_items + "\n";
  plot.caption = fmt::format(
      "For each draft position p, the fraction of tokens drafted at p that the target accepted (a token is accepted "
      "only when every earlier one of its round was), per proposer at draft_max {} with {} and rollback {}; the "
      "adaptive policy drafts fewer positions when acceptance falls, so later positions may rest on fewer rounds.",
      depth, slots_text(counts.front()), input.rollbacks.front());
  return write_plot_files(dir, plot, data, script, plots);
}

// ---- running gnuplot ----

bool gnuplot_on_path() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream entries(path);
  std::string entry;
  while (std::getline(entries, entry, ':')) {
    const fs::path candidate = fs::path(entry.empty() ? "." : entry) / "gnuplot";
    std::error_code error;
    if (fs::is_regular_file(candidate, error) && ::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// A POSIX shell single-quoted word: nothing inside is special except ', closed and reopened around \'.
std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_head(const fs::path& path, size_t n_chars) {
  std::ifstream file(path, std::ios::binary);
  std::string text(n_chars, '\0');
  file.read(text.data(), static_cast<std::streamsize>(n_chars));
  text.resize(static_cast<size_t>(file.gcount()));
  return text;
}

bool png_written(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error) && fs::file_size(path, error) > 0 && !error;
}

// Runs in `dir` so the .gp files name their .dat and .png relatively and still work after the folder moves.
Status run_gnuplot(const fs::path& dir, const Plot& plot) {
  const std::string log = plot.name + ".log";
  const std::string command = fmt::format("cd -- {} && gnuplot {} 2> {}", shell_quote(dir.string()),
                                          shell_quote(plot.name + ".gp"), shell_quote(log));
  const int status = std::system(command.c_str());
  std::error_code error;
  if (status == 0 && png_written(dir / (plot.name + ".png"))) {
    if (fs::file_size(dir / log, error) == 0 && !error) fs::remove(dir / log, error);
    return Status::ok();
  }
  std::string message = read_head(dir / log, 600);
  std::replace(message.begin(), message.end(), '\n', ' ');
  return Status::errorf("{}.gp did not draw {}.png (status {}): {}", plot.name, plot.name, status,
                        message.empty() ? "no message" : message);
}

// ---- report.html ----

std::string ratio_text(double ratio) { return fmt::format("{:.2f}×", ratio); }

// Replay against snapshot at draft depth 7 × 4 slots (the default grid's corner), or at the largest depth and
// slot count that both ran when the grid has no such corner.
std::string memory_summary(const ReportInput& input) {
  if (input.workloads.empty()) return "";
  std::map<std::tuple<std::string, int, int>, std::pair<const BenchRow*, const BenchRow*>> pairs;
  for (const BenchRow* row : measured_rows(input, input.workloads.front())) {
    if (!rollback_state_bytes(*row) || row->tree_nodes > 0) continue;
    auto& pair = pairs[{row->spec, row->draft_max, row->n_slots}];
    if (row->rollback == "replay" && !pair.first) pair.first = row;
    if (row->rollback == "snapshot" && !pair.second) pair.second = row;
  }
  // Ranked by (is the 7 × 4 corner, draft_max, slots); among proposers the first in row order wins.
  const BenchRow* replay = nullptr;
  const BenchRow* snapshot = nullptr;
  std::tuple<bool, int, int> best_rank{false, -1, -1};
  for (const auto& [key, pair] : pairs) {
    if (!pair.first || !pair.second) continue;
    const auto& [spec, depth, n_slots] = key;
    const std::tuple<bool, int, int> rank{depth == 7 && n_slots == 4, depth, n_slots};
    const bool earlier_spec = replay && rank == best_rank &&
                              index_of(input.specs, spec) < index_of(input.specs, replay->spec);
    if (!replay || rank > best_rank || earlier_spec) {
      replay = pair.first;
      snapshot = pair.second;
      best_rank = rank;
    }
  }
  if (!replay) return "";
  const double replay_mib = *rollback_state_bytes(*replay) / kMiB;
  const double snapshot_mib = *rollback_state_bytes(*snapshot) / kMiB;
  std::string text = fmt::format(
      "<b>State memory</b> at draft depth {} × {} (workload {}, {}): replay keeps <b>{:.1f} MiB</b> of "
      "rollback-relevant state, snapshot <b>{:.1f} MiB</b>", replay->draft_max, slots_text(replay->n_slots),
      html_escape(replay->workload), html_escape(replay->spec), replay_mib, snapshot_mib);
  if (replay_mib > 0) text += fmt::format(": snapshot needs <b>{}</b> replay's", ratio_text(snapshot_mib / replay_mib));
  const auto replay_total = replay->number({"state_bytes", "total"});
  const auto snapshot_total = snapshot->number({"state_bytes", "total"});
  if (replay_total && snapshot_total) {
    text += fmt::format(" (all state incl. KV: {:.1f} vs {:.1f} MiB)", *replay_total / kMiB, *snapshot_total / kMiB);
  }
  return text + ".";
}

std::string speed_summary(const ReportInput& input) {
  std::map<std::tuple<std::string, std::string, int, int>, std::pair<double, double>> pairs;
  for (const BenchRow& row : input.rows) {
    const auto tps = row.failed() ? std::nullopt : row.number({"tokens_per_second", "median"});
    if (!tps || (row.rollback != "replay" && row.rollback != "checkpoint") || row.tree_nodes > 0) continue;
    auto& pair = pairs.try_emplace({row.workload, row.spec, row.draft_max, row.n_slots}, NAN, NAN).first->second;
    (row.rollback == "replay" ? pair.first : pair.second) = *tps;
  }
  std::vector<double> ratios;
  for (const auto& [key, pair] : pairs) {
    if (std::isfinite(pair.first) && std::isfinite(pair.second) && pair.second > 0) {
      ratios.push_back(pair.first / pair.second);
    }
  }
  if (ratios.empty()) return "";
  const double median = percentile(ratios, 50);
  return fmt::format(
      "<b>Speed</b>: replay's tokens/s is <b>{}</b> checkpoint's ({:+.1f}%), the median over {} matching "
      "configurations (same workload, proposer, draft_max and slots); range {:.2f}–{:.2f}×.",
      ratio_text(median), (median - 1) * 100, ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()));
}

std::string row_name(const BenchRow& row) {
  return html_escape(fmt::format("{} ({}, {})", row.label(), row.workload, slots_text(row.n_slots)));
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

std::vector<std::string> correctness_summary(const ReportInput& input) {
  std::vector<std::string> differ;
  std::vector<std::string> unchecked;
  size_t n_speculative = 0;
  for (const BenchRow& row : input.rows) {
    if (row.plain() || row.failed()) continue;
    ++n_speculative;
    const json& identical = row.fields->value("identical_to_plain", json());
    if (!identical.is_boolean()) {
      unchecked.push_back(row_name(row));
    } else if (!identical.get<bool>()) {
      differ.push_back(row_name(row));
    }
  }
  std::vector<std::string> lines;
  if (n_speculative == 0) return lines;
  if (differ.empty() && unchecked.empty()) {
    lines.push_back(fmt::format("<b>Output</b>: all {} speculative rows produced exactly plain decoding's tokens.",
                                n_speculative));
  }
  if (!differ.empty()) {
    lines.push_back(fmt::format("<b class=\"bad\">BUG: {} of {} speculative rows differ from plain decoding</b> "
                                "(speculation must not change greedy output): {}", differ.size(), n_speculative,
                                join_names(differ)));
  }
  if (!unchecked.empty()) {
    lines.push_back(fmt::format("<b>Output</b>: {} of {} speculative rows were not compared with plain decoding: {}",
                                unchecked.size(), n_speculative, join_names(unchecked)));
  }
  return lines;
}

std::vector<std::string> other_summaries(const ReportInput& input) {
  std::vector<std::string> lines;
  // The best speedup per workload and slot count: the line a reader looks for first.
  std::map<std::pair<std::string, int>, const BenchRow*> best;
  for (const BenchRow& row : input.rows) {
    const auto speedup = row.failed() || row.plain() ? std::nullopt : row.number({"speedup_vs_plain"});
    if (!speedup) continue;
    const BenchRow*& slot = best[{row.workload, row.n_slots}];
    if (!slot || *speedup > *slot->number({"speedup_vs_plain"})) slot = &row;
  }
  std::vector<std::string> parts;
  for (const std::string& workload : input.workloads) {
    for (const auto& [key, row] : best) {
      if (key.first != workload) continue;
      parts.push_back(fmt::format("{}, {}: {} at {}", html_escape(workload), slots_text(key.second),
                                  html_escape(row->label()), ratio_text(*row->number({"speedup_vs_plain"}))));
    }
  }
  std::string best_text = "<b>Best speedup over plain</b>: ";
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) best_text += "; ";
    best_text += parts[i];
  }
  if (!parts.empty()) lines.push_back(best_text + ".");
  std::vector<std::string> failed;
  for (const BenchRow& row : input.rows) {
    if (row.failed()) failed.push_back(row_name(row) + ": " + html_escape(row.error));
  }
  if (!failed.empty()) {
    lines.push_back(fmt::format("<b>{} configuration{} did not run</b>: {}", failed.size(),
                                failed.size() == 1 ? "" : "s", join_names(failed)));
  }
  return lines;
}

std::string html_key_values(const std::string& title, const json& object) {
  std::string html = "<table class=\"kv\"><caption><b>" + html_escape(title) + "</b></caption>";
  if (object.is_object()) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      html += "<tr><th>" + html_escape(it.key()) + "</th><td>" + html_escape(leaf_text(&it.value(), false)) +
              "</td></tr>";
    }
  }
  return html + "</table>\n";
}

std::string html_compact_table(const ReportInput& input) {
  std::string html = "<div class=\"scroll\"><table class=\"data\"><tr>";
  for (const CompactColumn& column : kCompactColumns) html += "<th>" + html_escape(column.title) + "</th>";
  html += "</tr>\n";
  for (const BenchRow& row : input.rows) {
    const std::vector<std::string> cells = compact_cells(row);
    html += row.failed() ? "<tr class=\"error\">" : "<tr>";
    for (size_t i = 0; i < cells.size(); ++i) {
      if (row.failed() && i == kIdentityColumns) {
        html += fmt::format("<td colspan=\"{}\">{}</td>", std::size(kCompactColumns) - kIdentityColumns,
                            html_escape(cells[i]));
      } else {
        const bool bad = cells[i] == "NO" && i + 1 == std::size(kCompactColumns);
        html += std::string(kCompactColumns[i].numeric ? "<td class=\"num\">" : bad ? "<td class=\"bad\">" : "<td>") +
                html_escape(cells[i]) + "</td>";
      }
    }
    html += "</tr>\n";
  }
  return html + "</table></div>\n";
}

std::string html_full_table(const FlatTable& table, const ReportInput& input) {
  std::string html = "<div class=\"scroll\"><table class=\"data small\"><tr>";
  for (const std::string& column : table.columns) html += "<th>" + html_escape(column) + "</th>";
  html += "</tr>\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    html += input.rows[r].failed() ? "<tr class=\"error\">" : "<tr>";
    for (const std::string& column : table.columns) {
      auto it = table.rows[r].find(column);
      const json* value = it == table.rows[r].end() ? nullptr : &it->second;
      html += std::string(value && value->is_number() ? "<td class=\"num\">" : "<td>") +
              html_escape(leaf_text(value, false)) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</table></div>\n";
}

constexpr const char* kStyle = R"(body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc}
pre{background:#f4f4f4;padding:.6em;white-space:pre-wrap;word-break:break-all}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#eee}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.small{font-size:.8em}table.kv{display:inline-table;margin-right:2em;vertical-align:top}
.scroll{overflow-x:auto}tr.error td{background:#fff3f0}.bad{color:#b00000}
figure{margin:1em 0}figcaption{max-width:900px;font-size:.9em;color:#444}img{max-width:100%;border:1px solid #ddd}
.missing{color:#b00000;font-size:.9em}ul.summary li{margin:.3em 0}
)";

std::string report_html(const json& results, const ReportInput& input, const FlatTable& table,
                        const std::vector<Plot>& plots, const fs::path& dir) {
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                     html_escape("rewind bench spec — " + input.model_name) + "</title>\n<style>" + kStyle +
                     "</style></head><body>\n";
  html += "<h1>Speculative decoding against plain decoding: " + html_escape(input.model_name) + "</h1>\n";
  html += "<pre>" + html_escape(string_at(results, "command")) + "</pre>\n";

  std::vector<std::string> summary;
  for (const std::string& line : {memory_summary(input), speed_summary(input)}) {
    if (!line.empty()) summary.push_back(line);
  }
  for (const std::string& line : correctness_summary(input)) summary.push_back(line);
  for (const std::string& line : other_summaries(input)) summary.push_back(line);
  html += "<h2>Summary</h2>\n<ul class=\"summary\">\n";
  for (const std::string& line : summary) html += "<li>" + line + "</li>\n";
  if (summary.empty()) html += "<li>No measured rows.</li>\n";
  html += "</ul>\n";

  html += "<h2>Run</h2>\n";
  for (const char* section : {"model", "machine", "settings"}) {
    html += html_key_values(section, results.value(section, json::object()));
  }

  html += "<h2>Plots</h2>\n";
  for (const Plot& plot : plots) {
    const std::string png = plot.name + ".png";
    html += "<figure><h3>" + html_escape(plot.title) + "</h3>\n<img src=\"" + html_escape(png) + "\" alt=\"" +
            html_escape(plot.title) + "\">\n<figcaption>" + html_escape(plot.caption);
    if (!png_written(dir / png)) {
      html += " <span class=\"missing\">" + html_escape(png) + " was not drawn: install gnuplot (Debian: gnuplot-nox) "
              "and run <code>gnuplot " + html_escape(plot.name) + ".gp</code> in this folder.</span>";
    }
    html += "</figcaption></figure>\n";
  }

  html += "<h2>Results</h2>\n" + html_compact_table(input);
  html += "<h2>All fields</h2>\n<p>The same rows with every field, as in <a href=\"results.csv\">results.csv</a> "
          "and <a href=\"results.json\">results.json</a>.</p>\n" + html_full_table(table, input);
  return html + "</body></html>\n";
}

Status write_plots(const ReportInput& input, const fs::path& dir, std::vector<Plot>& plots) {
  for (const std::string& workload : input.workloads) {
    REWIND_RETURN_IF_ERROR(write_tokens_plot(input, workload, dir, plots));
  }
  REWIND_RETURN_IF_ERROR(write_state_plot(input, dir, plots));
  for (const std::string& workload : input.workloads) {
    REWIND_RETURN_IF_ERROR(write_tpot_plot(input, workload, dir, plots));
  }
  for (const std::string& workload : input.workloads) {
    REWIND_RETURN_IF_ERROR(write_acceptance_plot(input, workload, dir, plots));
  }
  return Status::ok();
}

bool has_rows(const json& results) {
  return results.is_object() && results.contains("rows") && results["rows"].is_array();
}

}  // namespace

Status write_bench_report(const json& results, const std::string& dir_name) {
  if (!has_rows(results)) return Status::errorf("bench results have no 'rows' array; nothing written to {}", dir_name);
  const fs::path dir(dir_name);
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return Status::errorf("cannot create report directory {}: {}", dir_name, error.message());

  const ReportInput input = read_input(results);
  const FlatTable table = flat_table(input);
  REWIND_RETURN_IF_ERROR(write_text_file(dir / "results.json",
                                         results.dump(2, ' ', false, json::error_handler_t::replace) + "\n"));
  REWIND_RETURN_IF_ERROR(write_text_file(dir / "results.csv", results_csv(table)));
  std::vector<Plot> plots;
  REWIND_RETURN_IF_ERROR(write_plots(input, dir, plots));

  const bool have_gnuplot = gnuplot_on_path();
  std::vector<std::string> missing;
  std::vector<std::string> failures;
  for (const Plot& plot : plots) {
    // A PNG from an earlier run in the same folder would otherwise pass for this run's plot.
    fs::remove(dir / (plot.name + ".png"), error);
    if (have_gnuplot) {
      const Status drawn = run_gnuplot(dir, plot);
      if (!drawn) failures.push_back(drawn.message());
    }
    if (!png_written(dir / (plot.name + ".png"))) missing.push_back(plot.name + ".png");
  }
  REWIND_RETURN_IF_ERROR(write_text_file(dir / "report.html", report_html(results, input, table, plots, dir)));

  if (!have_gnuplot && !missing.empty()) {
    return Status::errorf(
        "gnuplot is not on PATH, so {} in {} were not drawn (the tables, data and scripts were written); install "
        "Debian's gnuplot-nox (apt-get install gnuplot-nox), then run `gnuplot <name>.gp` for each .gp file there",
        join_names(missing), dir_name);
  }
  if (!failures.empty()) {
    return Status::errorf("{} of {} plots in {} failed: {}", failures.size(), plots.size(), dir_name,
                          join_names(failures));
  }
  return Status::ok();
}

std::string bench_table(const json& results) {
  if (!has_rows(results)) return "";
  const ReportInput input = read_input(results);
  constexpr size_t n_columns = std::size(kCompactColumns);
  std::vector<std::vector<std::string>> cell_rows;
  std::vector<size_t> widths(n_columns, 3);  // markdown needs at least --- per column
  for (size_t i = 0; i < n_columns; ++i) widths[i] = std::max(widths[i], display_width(kCompactColumns[i].title));
  for (const BenchRow& row : input.rows) {
    std::vector<std::string> cells = compact_cells(row);
    for (std::string& cell : cells) cell = markdown_cell(cell);
    // An error message would widen its column for every row; it overhangs its own line instead.
    const size_t n_sized = row.failed() ? kIdentityColumns : cells.size();
    for (size_t i = 0; i < n_sized; ++i) widths[i] = std::max(widths[i], display_width(cells[i]));
    cell_rows.push_back(std::move(cells));
  }
  auto line = [&](const std::vector<std::string>& cells, bool overhang_last) {
    std::string out = "|";
    for (size_t i = 0; i < cells.size(); ++i) {
      const size_t pad = overhang_last && i + 1 == cells.size() ? 0 : widths[i] - std::min(widths[i],
                                                                                             display_width(cells[i]));
      const std::string fill(pad, ' ');
      out += kCompactColumns[i].numeric ? fmt::format(" {}{} |", fill, cells[i])
                                        : fmt::format(" {}{} |", cells[i], fill);
    }
    return out + "\n";
  };
  std::vector<std::string> header;
  std::string rule = "|";
  for (size_t i = 0; i < n_columns; ++i) {
    header.push_back(kCompactColumns[i].title);
    rule += kCompactColumns[i].numeric ? " " + std::string(widths[i] - 1, '-') + ": |"
                                       : " " + std::string(widths[i], '-') + " |";
  }
  std::string table = line(header, false) + rule + "\n";
  for (size_t r = 0; r < cell_rows.size(); ++r) table += line(cell_rows[r], input.rows[r].failed());
  return table;
}

}  // namespace rwd::apps
