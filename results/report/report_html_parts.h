// Pieces the HTML report's files share: a table cell, and the sections drawn in files of
// their own (report_html_search.cpp). Internal to sweep_results.
#pragma once

#include <string>
#include <vector>

#include "report.h"
#include "report_plots.h"  // ParallelAxis

namespace sweep::report_html {

/// A table cell of escaped text, with a class.
inline std::string td(const std::string& escaped, const char* cls = nullptr) {
  return cls ? "<td class=\"" + std::string(cls) + "\">" + escaped + "</td>" : "<td>" + escaped + "</td>";
}

/// The report's style sheet (CSS): every page drawn from the report's pieces uses it.
const char* style();

/// Every table in a box that scrolls sideways, so a wide one does not widen the page.
std::string wrap_tables_in_boxes(std::string escaped_html);

/// A run id's table cell (class "id"); a link to run_href + id when run_href is given.
std::string run_cell(const std::string& run_id, const std::string& run_href);

/// A run's spike decisions as marks on its loss curve (run_health.h's spike_marks): a
/// rewind shaded from the state it went back to through the spiking step, a skipped
/// update as a line at its step; each titled `who` and the decision's sentence.
std::vector<report_plot::StepMark> spike_step_marks(const Record& r, const std::string& who = "");

/// A key's values as a plot axis named `name`: numbers on a numeric axis (over decades
/// when they span more than a factor of 20, as a log-uniform draw does) when the effect
/// binned them or there are more than kMaxLevels; else its effect's values as categories.
report_plot::ParallelAxis key_axis(const SweepRecords& sweep, const AxisEffect& e, const std::string& name);

/// A value's place on an axis of key_axis: its number, or its category's index.
double axis_value(const report_plot::ParallelAxis& a, const std::string& v);

/// A search: its best result against the compute it spent; for random and tpe the
/// objective against each parameter (slices); for halving each trial through its rungs and
/// the steps each rung spent; then every decision of search.log.
std::string search_section(const SweepRecords& sweep, const ReportModel& m);

/// The runs started from another run's checkpoint (sweep resume, sweep fork): each family's
/// losses on one chart, a child's from the step it branched off, with what it changed;
/// empty when no run has a lineage (report_html_lineage.cpp).
std::string lineage_section(const SweepRecords& sweep);

}  // namespace sweep::report_html
