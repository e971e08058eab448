// A grid's `program:` section: any training program (a Python script, a C++ program that
// does not use sweep's trainer) run as an argv, never through a shell, with its own
// model.* keys declared in the grid. Each run's command gets its config file and run
// directory on the command line and in the environment, with the environment that
// numerics depend on; the record names the program that made it (results/SCHEMA.md).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sweep/model_keys.h"  // ModelSchema
#include "text.h"              // json_string_array

namespace sweep {

/// A parsed `program:` section.
struct ProgramSpec {
  /// The command, resolved: argv[0] found on PATH or next to the grid file, and every later
  /// element that holds a '/' and does not start with '-' made absolute next to the grid.
  /// A later element without a '/' stays as written, even when it names a file in `cwd`
  /// (program_files hashes that file): the run starts there, so it names the same file, and
  /// the program sees its own spelling (sys.argv, __file__).
  std::vector<std::string> argv;
  ModelSchema schema;  ///< model.kind it trains and its own model.* keys
  /// Directories it may write besides the ones confine_args grants (`program.writes`,
  /// relative to the grid file; absolute here). Empty with confine off.
  std::vector<std::string> writes;
  bool confine = true;  ///< `program.confine`: run it under sweep-confine (Landlock)
  /// `program.cwd`: the directory each run starts in (absolute). Default: the grid file's
  /// directory, so a script's relative paths mean what they mean next to its grid.
  std::string cwd;
  /// `program.files`: its source beyond argv (globs and directories, relative to the grid
  /// file), expanded to regular files, sorted; hashed into the digest with argv's files.
  std::vector<std::string> files;
  /// The `program.files` entries that are a directory or a glob (absolute): expanded again
  /// by the stale check, so a file added there makes runs stale. The record's
  /// `program.trees` (a JSON array; empty for none).
  std::vector<std::string> trees;
  /// `program.data`: the data files it reads (relative to the grid file; absolute here),
  /// hashed like data.path: a changed one makes its completed runs stale.
  std::vector<std::string> data;
  /// `program.stop`: it honours a search's rung (the run directory's stop_at file, and
  /// its checkpoint on resume: python's run.should_stop/save/restore), so a halving search
  /// may run it.
  bool stop = false;
  /// `program.pass_args`: each run's command ends with `--config FILE --out DIR` (and
  /// `--resume` on a retry), the trainer contract. False for a script with its own
  /// arguments: it reads SWEEP_CONFIG and SWEEP_RUN_DIR instead (python's sweep.init()).
  bool pass_args = true;
  /// `program.honours`: the built-in keys (train.*, data.*, dist.*) it reads; empty with
  /// `honours_declared` false: every key. A grid that sets another is warned, and the key
  /// is left out of the runs' configs (points that differ only there are one run).
  std::vector<std::string> honours;
  bool honours_declared = false;
  /// `program.timing_metrics`: metrics of the program's own that it derives from the clock
  /// (mfu), never compared bit for bit (results/analysis/timing_metrics.h). Passed as
  /// SWEEP_PROGRAM_TIMING_METRICS (space-separated), which the writers record as
  /// `program.timing_metrics`.
  std::vector<std::string> timing_metrics;
  /// `program.accum`: what its accumulation key counts. "per_rank" (sweep's train.accum:
  /// micro-batches each rank adds up) or "global" (micro-batches of the whole world, divided
  /// by the world size inside the script, as nanoGPT's gradient_accumulation_steps): then
  /// python's sweep.init hands it train.accum x dist.world_size.
  std::string accum = "per_rank";
  /// `program.steps`: what its step-count key says. "count" (it trains that many steps) or
  /// "plus_one" (it trains iterations 0 to the key inclusive, nanoGPT's max_iters): then
  /// sweep.init hands it train.steps - 1.
  std::string steps = "count";
  /// `program.single_rank_env`: torch.distributed's env:// variables (RANK, WORLD_SIZE,
  /// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) for a run of one rank too. Off,
  /// a run of one rank gets none of them, so a script that detects DDP from RANK runs plain.
  bool single_rank_env = false;
  /// accum, steps and single_rank_env as SWEEP_PROGRAM_CONVENTIONS carries them and the
  /// record keeps them (`program.conventions`): "accum=per_rank steps=count rank_env=ranks".
  std::string conventions() const;
  std::string json;    ///< argv as a JSON array: the record's environment `program`
  std::string digest;  ///< program_digest(argv): the record's environment `program.digest`
  /// "<hash> <path>" per source file (argv's and `files`), as a JSON array: the record's
  /// `program.files`; the stale check and reproduce name a changed file from it.
  std::string file_hashes;
  /// The same for `data`: the record's `program.data`.
  std::string data_hashes;
  std::string keys;   ///< the schema as describe_models_yaml writes it: `program.keys`
  std::string where;  ///< file:line:col of the section
  bool empty() const { return argv.empty(); }
};

/// The keys a program's run config holds (RunConfig::given): `set`, what its grid or a
/// re-run sets (train.min_lr_ratio as the train.min_lr it derives), and the keys sweep or the
/// record writer act on themselves: model.kind, dist.world_size, train.threads,
/// train.checksum_every and train.telemetry_every.
std::set<std::string> program_given_keys(std::set<std::string> set);

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
/// `files`, `data` and `cwd`, when given, are the record's `program.files`,
/// `program.data` (JSON arrays of "<hash> <path>") and `program.cwd`: the re-run digests
/// and hashes the same files and starts in the same directory (when it is still there).
ProgramSpec recorded_program(const std::string& json, const std::string& keys, const std::string& writes,
                             const std::string& what, const std::string& files = "", const std::string& data = "",
                             const std::string& cwd = "", const std::string& pass_args = "");

/// The regular files a `program.files` entry (absolute: a file, a directory walked
/// without hidden entries and __pycache__, or a glob) names now, sorted.
std::vector<std::string> files_of_pattern(const std::string& pattern);

/// The files a recorded `program.trees` (its directories and globs) names now that its
/// `program.files` (`recorded`) did not hold: "<path> (added since the run, in <tree>)".
std::vector<std::string> added_files(const std::string& trees, const std::string& recorded);

/// The files `argv` names, in order: the interpreter and the script, or the executable;
/// what program_digest hashes. An element names a file when it holds a '/' and is a
/// regular file, or (after argv[0]) when it has no '/', does not start with '-' and is a
/// regular file in `cwd`, the directory the run starts in (`python3 train.py`): then as
/// `cwd`/element. Without `cwd` only paths count.
std::vector<std::string> program_files(const std::vector<std::string>& argv, const std::string& cwd = "");

/// "xxh3:<16 hex digits>" over the bytes of program_files(argv, cwd), then of `files`, in
/// order.
std::string program_digest(const std::vector<std::string>& argv, const std::vector<std::string>& files = {},
                           const std::string& cwd = "");

/// Changes of program files accepted as cosmetic (`sweep accept`, accepted_changes.h): a
/// file's recorded hash, by path, and the hash taken in its place. Chains are followed (A
/// accepted as B, later B as C: A counts as C).
struct AcceptedHashes {
  std::map<std::pair<std::string, std::string>, std::string> to;  ///< (path, recorded hash) -> accepted hash
  /// What `hash` of `path` counts as now: `hash` itself when nothing was accepted for it.
  std::string current(const std::string& path, const std::string& hash) const;
};

/// A file of a recorded `program.files` or `program.data` whose contents are no longer the
/// recorded hash.
struct FileChange {
  std::string path;
  std::string was;       ///< the recorded hash
  std::string accepted;  ///< the hash `was` was accepted as (AcceptedHashes), or ""
  std::string now;       ///< its hash now ("unreadable"; "" when it was removed)
  /// "path (was H, now H')", "path (was H, accepted as H2, now H')" or "path (removed since
  /// the run)".
  std::string text() const;
};

/// The files of a recorded `program.files` or `program.data` (a JSON array of "<hash>
/// <path>") whose contents are no longer that hash (or the hash `accepted` takes in its
/// place); empty when all are as recorded. A file gone from a directory that is here is
/// removed since the run; one whose directory is not here either is left out (a compute
/// node's path: the run checks it). Throws ConfigError when `recorded` does not parse.
std::vector<FileChange> changed_files(const std::string& recorded, const AcceptedHashes& accepted = {});

/// A JSON array of strings (text.h's json_string_array) read back; ConfigError on anything else.
std::vector<std::string> parse_json_string_array(const std::string& text);

/// `program.writes` as recorded: the JSON array of p.writes, or "off" without confinement.
std::string recorded_writes(const ProgramSpec& p);

/// Where rank 0 of a run listens for torch.distributed's rendezvous (MASTER_ADDR,
/// MASTER_PORT); a run of one rank gets RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
/// too (sweep-rank sets those of each rank of a bigger run).
struct Rendezvous {
  std::string addr = "127.0.0.1";
  std::string port;  ///< "" = none given
  int64_t world = 1;
};

/// The environment one run of `p` gets, as NAME=VALUE: SWEEP_CONFIG, SWEEP_RUN_DIR,
/// SWEEP_RUN_ID, SWEEP_PROGRAM, SWEEP_PROGRAM_DIGEST, SWEEP_PROGRAM_KEYS,
/// SWEEP_PROGRAM_WRITES (recorded_writes), SWEEP_PROGRAM_FILES and SWEEP_DATA_FILES (the
/// hashes), SWEEP_PROGRAM_CWD, SWEEP_PROGRAM_TIMING_METRICS, torch.distributed's variables (`rendezvous`), and the
/// numerics settings PYTHONHASHSEED=0, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
/// MKL_NUM_THREADS (= `threads`, the run's train.threads) and CUBLAS_WORKSPACE_CONFIG=:4096:8.
std::vector<std::string> program_environment(const ProgramSpec& p, const std::string& run_dir,
                                             const std::string& run_id, int64_t threads,
                                             const Rendezvous& rendezvous = {});

/// A free TCP port on this machine for a run's rendezvous ("" when none could be had).
std::string free_port();

}  // namespace sweep
