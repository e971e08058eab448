// A grid's `program:` section: any training program (a Python script, a C++ program that
// does not use sweep's trainer) run as an argv, never through a shell, with its own
// model.* keys declared in the grid. Each run's command gets its config file and run
// directory on the command line and in the environment, with the environment that
// numerics depend on; the record names the program that made it (results/SCHEMA.md).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sweep/model_keys.h"  // ModelSchema

namespace sweep {

/// A parsed `program:` section.
struct ProgramSpec {
  /// The command, resolved: argv[0] found on PATH or next to the grid file, and every later
  /// element that holds a '/' and does not start with '-' made absolute next to the grid.
  std::vector<std::string> argv;
  ModelSchema schema;  ///< model.kind it trains and its own model.* keys
  /// Directories it may write besides the ones confine_args grants (`program.writes`,
  /// relative to the grid file; absolute here). Empty with confine off.
  std::vector<std::string> writes;
  bool confine = true;  ///< `program.confine`: run it under sweep-confine (Landlock)
  std::string json;     ///< argv as a JSON array: the record's environment `program`
  std::string digest;   ///< program_digest(argv): the record's environment `program.digest`
  std::string keys;     ///< the schema as describe_models_yaml writes it: `program.keys`
  std::string where;    ///< file:line:col of the section
  bool empty() const { return argv.empty(); }
};

/// Reads a `program:` section of grid file `source`. Throws ConfigError naming the file,
/// line, column and key: a program that is not found or not executable, a path argument
/// that does not exist, a bad key declaration.
ProgramSpec parse_program(const YAML::Node& node, const std::string& source);

/// sweep-confine's arguments for a run of `p` in `run_dir`: it may write its run directory,
/// the entries of /dev, /tmp and /var/tmp (each unless it holds the run directory: then
/// its own run_dir/tmp as TMPDIR instead) and p.writes.
std::vector<std::string> confine_args(const ProgramSpec& p, const std::string& run_dir);

/// A ProgramSpec from what a record's environment says (`program`, `program.keys`,
/// `program.writes`: a JSON array, or "off" when the program ran unconfined);
/// `what` prefixes messages. Throws ConfigError when they do not parse or the program is
/// gone.
ProgramSpec recorded_program(const std::string& json, const std::string& keys, const std::string& writes,
                             const std::string& what);

/// The elements of `argv` that name a regular file by a path (with a '/'), in order: the
/// interpreter and the script, or the executable; what program_digest hashes.
std::vector<std::string> program_files(const std::vector<std::string>& argv);

/// "xxh3:<16 hex digits>" over the bytes of program_files(argv), in order.
std::string program_digest(const std::vector<std::string>& argv);

/// `items` as a JSON array of strings, and back (ConfigError on anything else).
std::string json_string_array(const std::vector<std::string>& items);
std::vector<std::string> parse_json_string_array(const std::string& text);

/// `program.writes` as recorded: the JSON array of p.writes, or "off" without confinement.
std::string recorded_writes(const ProgramSpec& p);

/// The environment one run of `p` gets, as NAME=VALUE: SWEEP_CONFIG, SWEEP_RUN_DIR,
/// SWEEP_RUN_ID, SWEEP_PROGRAM, SWEEP_PROGRAM_DIGEST, SWEEP_PROGRAM_KEYS,
/// SWEEP_PROGRAM_WRITES (recorded_writes), and the numerics
/// settings PYTHONHASHSEED=0, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS
/// (= `threads`, the run's train.threads) and CUBLAS_WORKSPACE_CONFIG=:4096:8.
std::vector<std::string> program_environment(const ProgramSpec& p, const std::string& run_dir,
                                             const std::string& run_id, int64_t threads);

}  // namespace sweep
