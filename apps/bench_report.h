// The files a person reads after `rewind bench spec`: results.json, results.csv, gnuplot plots (PNG, with their
// .dat and .gp kept beside them so they can be restyled) and a self-contained report.html, plus the markdown
// table printed on the terminal. It formats and compares measurements that are already made; it runs no
// benchmark and never changes a number.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "rewind/engine.h"

namespace rwd::apps {

// Writes results.json, results.csv, one PNG per plot (drawn by gnuplot) and report.html into `dir` (created if
// missing). Without gnuplot on PATH it writes everything else and returns an error that says to install Debian's
// gnuplot-nox and which files are missing.
Status write_bench_report(const nlohmann::json& results, const std::string& dir);

// The terminal table (markdown) of the rows.
std::string bench_table(const nlohmann::json& results);

}  // namespace rwd::apps
