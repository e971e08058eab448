// `sweep accept DIR --files F...`: which runs of a sweep directory recorded an older hash
// of a program's source file, and their acceptance of its hash now, appended to
// <dir>/accepted-changes (accepted_changes.h).
#pragma once

#include <string>
#include <vector>

#include "accepted_changes.h"  // Acceptance

namespace sweep {

/// `sweep accept`: for each of `files` (a path relative to the current directory, or else
/// the end of exactly one path the records name: `train.py`, or `../src/train.py` as a
/// grid file names it), the runs of `dir` whose completed
/// or stopped record holds an older hash of it, grouped by that hash, appended to
/// <dir>/accepted-changes as the file's hash now. Returns what was appended. Throws ConfigError
/// (exit 2), having written nothing, when `dir` is not a sweep directory, a file is part
/// of no run's program (or of several, ambiguously) or is gone, or no run holds an older
/// hash of it; and when another driver holds the directory.
std::vector<Acceptance> accept_changes(const std::string& dir, const std::vector<std::string>& files);

}  // namespace sweep
