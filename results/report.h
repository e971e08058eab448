// Reports over the runs of a sweep: which values vary, final losses, loss curves.
#pragma once

#include <string>
#include <vector>

#include "record.h"

namespace sweep {

/// The completed records of a sweep directory and what could not be read.
struct SweepRecords {
  std::vector<Record> runs;           ///< completed records, ordered by run id
  std::vector<std::string> problems;  ///< one sentence per run dir without a readable record
};

/// Reads `<dir>/runs/*/record.h5`. Missing or partial records become problems.
SweepRecords load_sweep(const std::string& dir);

/// Config keys whose canonical value differs between at least two runs, in key order.
std::vector<std::string> varying_keys(const std::vector<Record>& runs);

/// A self-contained HTML page (inline CSS and SVG, nothing fetched, every user string
/// escaped): a table of the runs with the varying values and the final loss, and one
/// SVG chart of all loss curves.
std::string render_html(const std::string& title, const SweepRecords& sweep);

/// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string html_escape(const std::string& s);

}  // namespace sweep
