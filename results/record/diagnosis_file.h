// A run's `sweep diagnose` verdicts on disk: <run>/diagnose/<n>/verdict.txt, one per
// diagnosis, kept beside the record (a completed record is never rewritten). The driver
// writes them (harness/driver/diagnose.h); show, status and the report read the newest.
#pragma once

#include <string>

namespace sweep {

/// The first line of verdict.txt; the lines after it are "KEY VALUE": step, checkpoint,
/// verdict, line (the one line said), then one "evidence ..." line each.
inline constexpr const char* kVerdictMagic = "sweep-diagnose-verdict 1";

/// The newest verdict under `run_dir`/diagnose ("diagnose step S: ..." and, in brackets,
/// the verdict file), or "" when there is none or it is not a verdict file. Never throws.
std::string newest_diagnosis(const std::string& run_dir);

}  // namespace sweep
