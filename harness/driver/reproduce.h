// `sweep reproduce`: re-run a recorded run from the config in its record, beside the
// original (never over it), and say bit for bit whether it came out the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compare.h"     // RecordComparison
#include "launch.h"      // LocalLaunch
#include "process.h"     // ProcessRunner
#include "run_config.h"  // RunConfig

namespace sweep {

/// What to re-run and how.
struct ReproduceOptions {
  std::string source;            ///< record.h5, or a run directory holding one
  int64_t world_size = 0;        ///< ranks for the re-run; 0 = as recorded (or derived from accum)
  int64_t accum = 0;             ///< accumulation for the re-run; 0 = as recorded (or derived from world_size)
  int64_t micro_batch = 0;       ///< micro-batch for the re-run (a run with train.leaf); 0 = as recorded
  std::vector<std::string> set;  ///< test-only KEY=VALUE overrides of the re-run's config, applied last
  int64_t from_step = 0;         ///< > 0: resume the re-run from the original's checkpoint after this step
                                 ///< (any layout: checkpoints are layout-free); steps after it are recomputed
  int64_t stop_at = 0;           ///< > 0: the re-run stops after this step (`sweep diagnose`'s one step) and
                                 ///< is compared with the original as it stood after it
  /// A forked run's re-run starts from this checkpoint (a step_N directory) instead of its
  /// parent's own: reproduce_lineage's replay of the parent. "" = the parent's.
  std::string fork_from;
  std::string out_dir;  ///< where the re-run goes; "" = the next <run dir>/reproduce/<n>
  LocalLaunch launch;   ///< sweep-train binary and mpiexec (an absolute path when world > 1)
  /// A re-run on more than one rank starts its ranks on these hosts (mpiexec --host, in
  /// order: rank 0 on the first), with these extra mpiexec arguments (an rsh agent, the
  /// interfaces), as the mpirun launcher does for launch.hosts; empty = on this host.
  std::vector<std::string> hosts;
  std::vector<std::string> mpi_args;
  /// The image the re-run's ranks run in (its trainer, binds); runtime "" = on the host.
  /// A re-run elsewhere than the record's container is run, with a warning line.
  ContainerSpec container;
  /// launch.train_binary was chosen (--trainer). Otherwise a record of a model kind other
  /// than the built-in decoder is re-run by the program that trained it (its environment
  /// names it), and the decoder by launch.train_binary.
  bool trainer_given = false;
  /// Run the program the record names even when no grid run in its sweep directory
  /// declared it (`--allow-program`): a record can name any command.
  bool allow_program = false;
};

/// Puts config `c` on another layout (0 = derived or unchanged) that keeps its bits: the
/// same global batch (world_size x accum x micro_batch sequences) and, without
/// train.leaf, the same micro-batch. Throws ConfigError "cannot <verb> with ..." saying
/// why another layout is refused.
void change_layout(RunConfig& c, int64_t world, int64_t accum, int64_t micro, const std::string& verb);

/// Sets `launch` up to run as the record `original` ran: its OpenBLAS kernel (each kernel
/// has its own bits: as the run set it, or pinned when this machine's OpenBLAS would choose
/// another), oneDNN off when it was, and a CUDA device when it had one. Returns a line
/// about the kernel worth saying ("" when none): pinned against another choice, or one
/// this CPU cannot run.
std::string launch_as_recorded(const Record& original, LocalLaunch& launch);

/// KEY=VALUE items (`sweep reproduce --set`, `sweep fork`) as config overrides, each
/// value's `where` "<origin> KEY=VALUE". ConfigError "<origin> 'ITEM': expected KEY=VALUE,
/// e.g. <example>" for an item without a key and '='.
FlatConfig config_changes(const std::vector<std::string>& items, const std::string& origin, const std::string& example);

/// The checkpoint after step `step` of the run in `run_dir` (checkpoint_dir), complete;
/// else ConfigError "--from-step S: DIR is not a complete checkpoint (complete ones kept:
/// ...)".
std::string checkpoint_from_step(const std::string& run_dir, int64_t step);

/// The record a source names: the file itself, or `<dir>/record.h5` for a run directory.
std::string resolve_record_path(const std::string& source);

/// The re-run's config: the recorded one, on a new layout (0 = derived or as recorded)
/// only when the global batch (world_size x accum x micro_batch sequences) holds and, for a
/// run without train.leaf, the micro-batch stays as recorded; then the `set` overrides.
/// Throws ConfigError with a sentence that says why a change is refused.
RunConfig reproduce_config(const Record& original, int64_t world_size, int64_t accum, int64_t micro_batch,
                           const std::vector<std::string>& set);

/// Creates the first unused `<run_dir>/reproduce/<n>` (n = 1, 2, ...) and returns it.
std::string next_reproduce_dir(const std::string& run_dir);

/// What a re-run gave.
struct ReproduceResult {
  std::string out_dir;             ///< <run dir>/reproduce/<n>
  bool ran = false;                ///< the re-run left a record to compare
  RecordComparison comparison;     ///< original (A) against the re-run (B), bitwise
  std::vector<std::string> lines;  ///< verdict first, then the details; the CLI prints them
  bool reproduced() const { return ran && comparison.bitwise(); }
};

/// Reads the original (RecordError when partial, damaged or newer), plans the re-run,
/// starts it through `runner` and compares the records step by step.
ReproduceResult reproduce(const ReproduceOptions& opt, ProcessRunner& runner);

/// `sweep reproduce --lineage`: a forked run (a pbt member, `sweep fork`) re-run with its
/// whole lineage and no checkpoint of the originals. The first run of the chain of parents
/// is re-run from step 0 and stopped at the step its child forked from it; each child is
/// re-run from that re-run's checkpoint, and so on down to the run named. Each part is
/// compared with its original as it stood where the next one forked: the verdict is
/// bit-for-bit only when every part is, and otherwise names the first run of the chain
/// that differs. A run that was not forked is reproduced as `reproduce` does. The parts go
/// to <out>/lineage/<k>-<run id>/, the named run's re-run to <out> itself. ConfigError when
/// a parent's record is missing, or with from_step or fork_from.
ReproduceResult reproduce_lineage(const ReproduceOptions& opt, ProcessRunner& runner);

}  // namespace sweep
