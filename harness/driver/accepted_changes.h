// `sweep accept DIR --files F...`: a change of a program's source file (a comment, a
// rename of a local variable) accepted as one that trains the same bits, so the runs that
// recorded the file's older hash stay current instead of running again. Each acceptance is
// a line of <dir>/accepted-changes, an append-only text file written atomically: when, which
// file, the recorded hash and the hash taken in its place, and how many runs it covered.
// `sweep plan`, `sweep run` and `sweep status` read it (a stale check takes the accepted
// hash as the recorded one); plan and status show every acceptance. What `sweep accept`
// accepts: sweep_accept.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "program.h"  // AcceptedHashes

namespace sweep {

/// The first line of <dir>/accepted-changes; a file with another first line is not read.
inline constexpr const char* kAcceptedMagic = "sweep-accepted-changes 1";

/// One line of <dir>/accepted-changes: a JSON array [at, path, from, to, runs].
struct Acceptance {
  std::string at;    ///< UTC time it was accepted, ISO 8601
  std::string path;  ///< the file, as the records name it (absolute)
  std::string from;  ///< the hash the runs recorded
  std::string to;    ///< the hash taken in its place (the file's hash when accepted)
  int64_t runs = 0;  ///< runs whose record held `from` then
  /// "accepted: PATH (2 runs, hash A -> B, at TIME)": what plan and status print.
  std::string line() const;
};

/// The acceptances of sweep directory `dir`, oldest first; none when it has no
/// <dir>/accepted-changes. A file that is not one `sweep accept` wrote, or a line that does not
/// parse, accepts nothing (its runs stay stale: the safe side) and `*problem` says so.
std::vector<Acceptance> read_acceptances(const std::string& dir, std::string* problem = nullptr);

/// The acceptances of `dir` as the stale check takes them (a later one for the same file
/// and hash wins).
AcceptedHashes accepted_hashes(const std::string& dir);

/// What plan and status print: one Acceptance::line() each, and a line when the file is
/// not read.
std::vector<std::string> acceptance_lines(const std::string& dir);

/// Appends `added` to <dir>/accepted-changes (created with its magic line), atomically.
/// Throws ConfigError when the file there is not one sweep wrote.
void append_acceptances(const std::string& dir, const std::vector<Acceptance>& added);

}  // namespace sweep
