// Writing a sweep run record from a C++ program that does not use sweep's trainer: the
// record format (results/SCHEMA.md), the layout-independent parameter checksums, and the
// environment every record carries. Link sweep::results (or, in this build tree,
// sweep_results); no LibTorch. tests/programs/linreg.cpp is a whole program written this
// way: it reads its config, trains, and writes record.h5 that `sweep reproduce`, `compare`
// and `report` read like any other.
//
//   sweep::RecordHeader h;
//   h.run_id = sweep::run_id_of_text(config_text);   // the config file's bytes name the run
//   h.config_yaml = config_text;
//   h.config = {{"model.kind", "linreg"}, ...};        // dotted key -> value, as in the file
//   h.environment = sweep::program_environment_defaults();
//   h.params = {{"w", {16}, 0, 16}};
//   h.health_judge = sweep::judge_health_attributes;  // store the health flags readers judge
//   h.eval = true;                                    // held-out rows: append_eval
//   h.flush_every_s = 2;                              // rows reach the disk as it trains
//   sweep::RecordWriter w(out_dir + "/record.h5", h);  // writes record.h5.partial
//   w.append_step(m, {{"accuracy", 0.61}});           // with metrics of its own
//   w.declare_timing_metric("mfu");                   // a metric from the clock: not compared bit for bit
//   w.append_eval({step, loss, tokens, seconds}, {{"accuracy", 0.58}});
//   w.append_checksum(...);
//   w.append_rank_grad_norms({0.41, 0.39});           // each rank's own gradient norm
//   w.append_telemetry({step, "every", norms, {}});    // each tensor's gradient norm (v5)
//   w.finish("completed");                            // renames it to record.h5
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sweep/record_format.h"  // RecordHeader, RecordWriter, StepMetrics, checksums, ...

namespace sweep {

/// The run id of a run config: XXH3-64 of the config file's bytes, 16 hex digits (the
/// file sweep writes is canonical, so this is the id sweep gave the run).
std::string run_id_of_text(const std::string& config_text);

/// Every /environment key results/SCHEMA.md documents, in its order, with what any program
/// can state for sure: hdf5, cpu, hosts, os, the env.<NAME> variables that change
/// numerics, and the program that made the run as sweep passed it (`program`,
/// `program.digest`, `program.keys`, `program.writes`, `program.files`, `program.data`,
/// `program.cwd`, `program.pass_args`, `program.timing_metrics` from SWEEP_PROGRAM*,
/// `data.file` and `data.hash` from SWEEP_DATA_*, and `program.confinement` from
/// SWEEP_CONFINEMENT). A halving search's stop is the file RUN_DIR/stop_at (a step
/// number): a program with program.stop: true reads it, stops after that step with
/// finish("stopped"), and resumes from its own checkpoint when started again. The rest are empty for the program to
/// fill (device, blas, ...): replace a value rather than adding the key twice.
std::vector<std::pair<std::string, std::string>> program_environment_defaults();

/// Where Slurm ran the run: each variable of the job (read by whatever rank writes the
/// record) as its environment key, empty outside Slurm. The one list:
/// python/sweep_record/writer.py's SLURM_ENV is checked against it (test_record_writer.py).
inline constexpr const char* kSlurmEnv[][2] = {{"slurm.job_id", "SLURM_JOB_ID"},
                                               {"slurm.array_job_id", "SLURM_ARRAY_JOB_ID"},
                                               {"slurm.array_task_id", "SLURM_ARRAY_TASK_ID"},
                                               {"slurm.partition", "SLURM_JOB_PARTITION"},
                                               {"slurm.account", "SLURM_JOB_ACCOUNT"},
                                               {"slurm.qos", "SLURM_JOB_QOS"},
                                               {"slurm.nodelist", "SLURM_JOB_NODELIST"},
                                               {"slurm.cluster", "SLURM_CLUSTER_NAME"}};

/// The variables that change numerics or placement, each recorded as env.<NAME>. The one
/// list: python/sweep_record/writer.py's NUMERICS_ENV is checked against it (test_record_writer.py).
inline constexpr const char* kNumericsEnv[] = {"PYTHONHASHSEED",      "OMP_NUM_THREADS",  "OPENBLAS_NUM_THREADS",
                                               "OPENBLAS_CORETYPE",   "MKL_NUM_THREADS",  "CUBLAS_WORKSPACE_CONFIG",
                                               "NCCL_ALGO",           "NCCL_PROTO",       "CUDA_VISIBLE_DEVICES",
                                               "ATEN_CPU_CAPABILITY", "DNNL_MAX_CPU_ISA", "NPY_DISABLE_CPU_FEATURES"};

/// The health flags every reader would judge of `r` (results/SCHEMA.md: /summary health*),
/// as attributes to store: set RecordHeader::health_judge to it, and finish() stores them in
/// a completed or diverged record, so that h5py readers see them too.
std::vector<std::pair<std::string, std::string>> judge_health_attributes(const Record& r);

}  // namespace sweep
