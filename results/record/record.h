// The run record: one versioned HDF5 file per run (layout in results/SCHEMA.md).
// Rank 0 writes `record.h5.partial`; only a finished run is renamed to `record.h5`,
// and a completed record is never opened for writing again.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "record_error.h"         // RecordError
#include "sweep/record_format.h"  // StepMetrics, RecordHeader, RecordWriter, ...

namespace sweep {

struct HangForensics;  // collective_ring.h

/// Version of the on-disk layout; readers refuse newer files. Version 2 added the
/// root attribute `digest` (results/SCHEMA.md, "Integrity"); version 3 the optional
/// group /eval (held-out loss) and the /summary attributes `health*`; version 4 the
/// groups /metrics/extra and /eval/extra (a program's own figures; a record without them
/// is written as version 3); version 5 /ranks/grad_norm and /telemetry (gradient
/// telemetry: written as version 5 once either has a row). Versions 1 and 2 are still read
/// (version 1 unverified).
/// Version 6: the root attributes lineage, parent_run_id and parent_step of a run that
/// started from another run's checkpoint (written as version 6 only by such a run).
inline constexpr int64_t kSchemaVersion = 6;

/// A record read back.
struct Record {
  std::string path;
  int64_t schema_version = 0;
  std::string run_id, sweep_id, status, failure;
  std::string config_yaml;
  std::map<std::string, std::string> config;
  std::map<std::string, std::string> environment;
  /// environment[key], or "" when the record has no such key (later versions add keys).
  std::string env(const std::string& key) const {
    const auto it = environment.find(key);
    return it == environment.end() ? std::string() : it->second;
  }
  std::vector<StepMetrics> steps;
  std::vector<EvalRow> evals;  ///< /eval rows; empty when the run did not evaluate
  /// /metrics/extra and /eval/extra: a program's own figures by name, one value per step
  /// (per evaluation), NaN where a row lacked it. Sorted by name.
  std::map<std::string, std::vector<double>> step_extra, eval_extra;
  std::vector<ChecksumRow> checksums;
  std::vector<ParamInfo> params;
  int64_t world_size = 1;
  RecordLineage lineage;                              ///< the parent run and step (version 6); empty kind: none
  std::vector<std::vector<double>> rank_step_time_s;  ///< [step][rank]
  /// /ranks/grad_norm: [step][rank] each rank's own gradient norm (NaN where a step gave
  /// none); empty when the record has none (before version 5, or a writer that kept none).
  std::vector<std::vector<double>> rank_grad_norm;
  std::vector<TelemetryRow> telemetry;      ///< /telemetry rows, in step order (version 5)
  int64_t moe_layers = 0, moe_experts = 0;  ///< the shape of TelemetryRow::routed_tokens
  RankMemory memory;
  std::map<std::string, std::string> summary;  ///< /summary attributes (self-tests, flags)
  std::string digest;                          ///< the `digest` attribute written at completion ("" in version 1)
  std::string computed_digest;                 ///< the digest of the contents as read now
  bool verified = false;                       ///< the two agree (read_record checks it for version >= 2)
};

/// Reads a completed record and verifies its digest; throws RecordError for a partial,
/// truncated, unreadable, damaged (digest mismatch), special or newer-version file.
Record read_record(const std::string& path);

/// Reads the record at `path` whatever its name and status, without checking the digest
/// (Record::computed_digest holds what it should be). For the writer and for tools that
/// look at a damaged file.
Record read_record_unverified(const std::string& path);

/// How read_record and read_record_unverified parse a file: `parse_here` parses it in
/// this process (the default when no hook is set); a hook may run it elsewhere (sweep's
/// commands: a helper process, results/record/record_parse.h).
using RecordParseHook = Record (*)(const std::string& path, Record (*parse_here)(const std::string&));
void set_record_parse_hook(RecordParseHook hook);

/// The stored `digest` attribute of the record at `path`, or "" when it has none.
std::string read_record_digest(const std::string& path);

/// What a record's root attributes say about its run; readable from a `.partial` file,
/// so reports can show why a run did not finish.
struct RecordStatus {
  std::string path;  ///< the file that was read (record.h5 or record.h5.partial)
  std::string run_id, sweep_id, status, failure;
  bool partial = false;  ///< true when only the `.partial` file exists
};

/// Reads the status attributes of `path`, or of `path` + ".partial" when only that
/// exists. Takes no file lock, so a run still writing its partial reads as "running".
/// Throws RecordError when neither can be opened (absent, corrupt, or caught in the
/// middle of a flush).
RecordStatus read_record_status(const std::string& path);

/// How far a run still writing its record has come: the last step flushed to
/// record.h5.partial (the writer flushes every ~2 s), its loss, and train.steps.
struct RecordProgress {
  int64_t step = 0;   ///< last recorded step; 0 before the first flush
  double loss = 0;    ///< its loss
  int64_t steps = 0;  ///< the run's train.steps; 0 when the config does not say
  /// When the writer last flushed the file (its modification time, seconds since the
  /// epoch): a flush comes with a step, so the time `step` was recorded, within a flush
  /// interval (~2 s).
  double written_at = 0;
  double step_time_s = 0;  ///< median of the last (up to) 20 steps' /metrics/step_time_s; 0 without steps
};

/// Reads `path` + ".partial" without taking HDF5's file lock (the writer holds it) and
/// without writing anything. Throws RecordError when it cannot be read right now (absent,
/// or caught between the writer's updates: ask again).
RecordProgress read_partial_progress(const std::string& path);

/// The sweep driver's post-mortem, once every process of the run is gone: marks the
/// partial record of `path` failed with `failure` (which should keep what the run wrote,
/// e.g. the launcher's finding followed by the old cause). A completed record, or a
/// partial whose run already finished writing, is left alone. Returns whether it wrote.
/// With `hang`, also writes the group /hang (results/SCHEMA.md): the verdict on the ranks'
/// merged collective rings, and the rings.
bool mark_partial_failed(const std::string& path, const std::string& failure, const HangForensics* hang = nullptr);

/// Library version of HDF5 this build links, e.g. "1.10.8".
std::string hdf5_version();

}  // namespace sweep
