// The subcommands of `sweep`. Each is an options struct (in its .cpp), a setup_* that
// declares its flags on the app and returns the action to run when it was chosen.
// main() only wires them. Actions return the exit code; see main.cpp for the codes.
#pragma once

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace sweep {

struct HealthFlag;  // run_health.h

/// Runs the chosen subcommand; returns -1 when it was not the one chosen.
using CliAction = std::function<int()>;

CliAction setup_run(CLI::App& app);        // cli_sweep.cpp
CliAction setup_plan(CLI::App& app);       // cli_sweep.cpp
CliAction setup_status(CLI::App& app);     // cli_sweep.cpp
CliAction setup_verify(CLI::App& app);     // cli_sweep.cpp
CliAction setup_accept(CLI::App& app);     // cli_sweep.cpp
CliAction setup_report(CLI::App& app);     // cli_results.cpp
CliAction setup_compare(CLI::App& app);    // cli_results.cpp
CliAction setup_export(CLI::App& app);     // cli_results.cpp
CliAction setup_reproduce(CLI::App& app);  // cli_results.cpp
CliAction setup_resume(CLI::App& app);     // cli_results.cpp
CliAction setup_fork(CLI::App& app);       // cli_results.cpp
CliAction setup_show(CLI::App& app);       // cli_results.cpp
CliAction setup_diagnose(CLI::App& app);   // cli_diagnose.cpp
CliAction setup_blas(CLI::App& app);       // cli_blas.cpp
CliAction setup_keys(CLI::App& app);       // cli_keys.cpp
CliAction setup_serve(CLI::App& app);      // cli_serve.cpp

/// `name` as a path: itself when it holds a '/', else the first match on PATH (posix_spawn
/// does not search it), else itself (cli_results.cpp).
std::string find_in_path(const std::string& name);

/// Text from disk shown on a terminal, escaped with printable()'s rules and never cut
/// (cli_sweep.cpp).
std::string terminal_text(const std::string& s);

/// The sweep-level health flags (throughput_outlier) of run `run_id` of the sweep directory
/// `dir`, judged as `sweep status` judges them (cli_sweep.cpp); none outside a sweep.
std::vector<HealthFlag> sweep_level_flags(const std::string& dir, const std::string& run_id);

/// Throws ConfigError (exit 2) when `dir` exists but is a file, or a directory that holds
/// something yet no points.tsv, runs/ or sweep.lock: a sweep must not write into someone
/// else's directory. A missing or empty directory passes. `option` prefixes the message
/// ("--out " or ""). In cli_sweep.cpp.
void check_sweep_dir_target(const std::string& dir, const std::string& option);

/// A validator for an integer option: the text must be a whole decimal number that fits
/// in int64_t and is at least `min`. CLI11 alone would turn 99999999999999999999 into
/// INT64_MAX without a word, and its number ranges print as doubles.
inline CLI::Validator whole_number(int64_t min = std::numeric_limits<int64_t>::min()) {
  const bool any = min == std::numeric_limits<int64_t>::min();
  const std::string want =
      any ? "a whole number that fits in 64 bits"
          : "a whole number from " + std::to_string(min) + " to " + std::to_string(std::numeric_limits<int64_t>::max());
  return CLI::Validator(
      [min, want](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || v < min) return "got '" + text + "': expected " + want;
        return "";
      },
      any ? "INT" : "INT>=" + std::to_string(min));
}

}  // namespace sweep
