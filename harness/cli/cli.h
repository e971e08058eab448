// The subcommands of `sweep`. Each is an options struct (in its .cpp), a setup_* that
// declares its flags on the app and returns the action to run when it was chosen.
// main() only wires them. Actions return the exit code; see main.cpp for the codes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace sweep {

/// Runs the chosen subcommand; returns -1 when it was not the one chosen.
using CliAction = std::function<int()>;

CliAction setup_run(CLI::App& app);        // cli_sweep.cpp
CliAction setup_plan(CLI::App& app);       // cli_sweep.cpp
CliAction setup_status(CLI::App& app);     // cli_sweep.cpp
CliAction setup_report(CLI::App& app);     // cli_results.cpp
CliAction setup_compare(CLI::App& app);    // cli_results.cpp
CliAction setup_export(CLI::App& app);     // cli_results.cpp
CliAction setup_reproduce(CLI::App& app);  // cli_results.cpp
CliAction setup_blas(CLI::App& app);       // cli_blas.cpp
CliAction setup_keys(CLI::App& app);       // cli_keys.cpp

/// Throws ConfigError (exit 2) when `dir` exists but is a file, or a directory that holds
/// something yet no points.tsv, runs/ or sweep.lock: a sweep must not write into someone
/// else's directory. A missing or empty directory passes. `option` prefixes the message
/// ("--out " or ""). In cli_sweep.cpp.
void check_sweep_dir_target(const std::string& dir, const std::string& option);

}  // namespace sweep
