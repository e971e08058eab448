// Pages of one run and of two runs side by side, drawn with the report's own pieces (its
// style sheet, line charts and tables): what `sweep show` and `sweep compare` say, with
// the curves a terminal cannot draw. Self-contained HTML like the report (inline CSS and
// SVG, no script, nothing fetched, every record string escaped); `sweep serve` shows them.
#pragma once

#include <string>

#include "compare.h"      // RecordComparison
#include "record_view.h"  // RecordView

namespace sweep {

/// The start of a page in the report's style: doctype, generator, title and style sheet,
/// then <body> and an <h1> of `title` (escaped here). The caller closes body and html.
std::string report_page_start(const std::string& title);

/// One run: its show lines (what it is, status, progress, driver, lineage, figures,
/// health with each flag's sentence), a chart per curve (the training loss with the held-out
/// loss, each of the program's own metrics and evaluation metrics, then the telemetry: lr,
/// gradient norm, clipping, loss scale, throughput, step and record time, each rank's step
/// time and gradient norm, the largest tensors' gradient norms), then its config, its
/// environment and the end of its rank-0 log. Each metric's chart is in a <section
/// class="curve" data-curve="NAME">. `compare_href`: when given, a form that opens
/// compare_href + "?a=ID&b=OTHER" (the served compare page).
std::string render_run_html(const RecordView& view, const std::string& log_tail, const std::string& compare_href = "");

/// Two runs as `sweep compare` says them: each one's figures and health, the verdict (its
/// first line: "identical bit-for-bit: ..." or "diverged at step S: ..."), the details
/// (first differing parameter, the largest loss differences, timing metrics, config and
/// environment keys that differ), their losses overlaid, and a table of the config and
/// environment differences. `a_name` and `b_name` say which runs they are; `partial_a`
/// and `partial_b` are the runs' words for a partial record ("" for a completed one).
std::string render_compare_html(const Record& a, const Record& b, const RecordComparison& c, const std::string& a_name,
                                const std::string& b_name, const std::string& partial_a = "",
                                const std::string& partial_b = "");

}  // namespace sweep
