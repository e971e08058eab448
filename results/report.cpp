// Sweep reports: every run record of a sweep, rendered as one static HTML page.
#include "report.h"

#include <algorithm>     // sort, min, max
#include <cinttypes>     // PRIx64
#include <cmath>         // isfinite
#include <cstdio>        // snprintf
#include <exception>     // std::exception for damaged records
#include <filesystem>    // listing runs/
#include <set>           // union of config keys
#include <system_error>  // error_code for non-throwing listing

namespace sweep {
namespace {

namespace fs = std::filesystem;

// Tableau 10: tells ten curves apart on white, also for most colour-vision deficiencies.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

// Chart geometry in SVG units; the legend extends the SVG below the plot area.
constexpr double kWidth = 720, kHeight = 360;
constexpr double kLeft = 70, kRight = 20, kTop = 20, kBottom = 40;
constexpr double kLegendRow = 18;

// Inline so the page stays one file that can be mailed or archived with the sweep.
constexpr const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\n"
    "table{border-collapse:collapse;margin:1em 0}\n"
    "th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\n"
    "th{background:#f4f4f4}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    "td.hash{font-family:monospace}\n"
    ".failure{color:#b00;font-size:smaller}\n"
    ".missing{color:#999}\n"
    "svg{display:block;margin:1em 0;font:12px sans-serif}\n"
    "svg .axis{stroke:#444;stroke-width:1}\n"
    "svg polyline{fill:none;stroke-width:1.5}\n";

std::string g6(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// One decimal is below a pixel and keeps large charts small.
std::string coord(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string hex16(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string plural(size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// The legend names a run by its varying values because the colour alone says nothing.
std::string varying_text(const Record& r, const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys) {
    auto it = r.config.find(k);
    s += (s.empty() ? "" : ", ") + k + "=" + (it == r.config.end() ? "unset" : it->second);
  }
  return s;
}

/// The extent of the plotted values along one axis.
struct Range {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return lo > hi; }
  // A single step or a flat loss has zero width: centre it instead of dividing by zero.
  // Halving first keeps hi - lo finite for values near DBL_MAX.
  double frac(double v) const {
    double f = (v * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5);
    return hi > lo && std::isfinite(f) ? f : 0.5;
  }
};

bool plottable(const StepMetrics& s) { return std::isfinite(s.loss); }

std::string runs_table(const std::vector<Record>& runs, const std::vector<std::string>& keys) {
  std::string t = "<table>\n<thead><tr><th>run</th><th>status</th>";
  for (const auto& k : keys) t += "<th>" + html_escape(k) + "</th>";
  t += "<th>steps</th><th>final loss</th><th>params checksum</th></tr></thead>\n<tbody>\n";
  for (const auto& r : runs) {
    t += "<tr><td>" + html_escape(r.run_id) + "</td><td>" + html_escape(r.status);
    if (!r.failure.empty()) t += "<div class=\"failure\">" + html_escape(r.failure) + "</div>";
    t += "</td>";
    for (const auto& k : keys) {
      auto it = r.config.find(k);
      t += it == r.config.end() ? "<td class=\"missing\">unset</td>" : "<td>" + html_escape(it->second) + "</td>";
    }
    t += "<td class=\"num\">" + std::to_string(r.steps.size()) + "</td>";
    t += "<td class=\"num\">" + (r.steps.empty() ? std::string("-") : g6(r.steps.back().loss)) + "</td>";
    t += "<td class=\"hash\">" + (r.checksums.empty() ? std::string("-") : hex16(r.checksums.back().params)) + "</td></tr>\n";
  }
  return t + "</tbody>\n</table>\n";
}

std::string svg_text(double x, double y, const char* anchor, const std::string& escaped, const std::string& extra = "") {
  return "<text x=\"" + coord(x) + "\" y=\"" + coord(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escaped + "</text>\n";
}

std::string svg_chart(const std::vector<Record>& runs, const std::vector<std::string>& keys) {
  Range xs, ys;
  for (const auto& r : runs)
    for (const auto& s : r.steps)
      if (plottable(s)) xs.add(static_cast<double>(s.step)), ys.add(s.loss);
  if (ys.empty()) return "<p>No finite loss values to plot.</p>\n";

  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom, base = kTop + ph;
  auto px = [&](double x) { return kLeft + xs.frac(x) * pw; };
  auto py = [&](double y) { return base - ys.frac(y) * ph; };
  const double total_h = kHeight + kLegendRow * static_cast<double>(runs.size()) + 8;
  std::string s = "<svg width=\"" + coord(kWidth) + "\" height=\"" + coord(total_h) + "\" viewBox=\"0 0 " + coord(kWidth) + " " +
                  coord(total_h) + "\" role=\"img\" aria-label=\"loss against step for every run\">\n";
  s += "<line class=\"axis\" x1=\"" + coord(kLeft) + "\" y1=\"" + coord(base) + "\" x2=\"" + coord(kLeft + pw) + "\" y2=\"" + coord(base) + "\"/>\n";
  s += "<line class=\"axis\" x1=\"" + coord(kLeft) + "\" y1=\"" + coord(kTop) + "\" x2=\"" + coord(kLeft) + "\" y2=\"" + coord(base) + "\"/>\n";

  // Ticks at the data's own min and max, so the labels are values that were recorded.
  for (double x : {xs.lo, xs.hi}) {
    s += "<line class=\"axis\" x1=\"" + coord(px(x)) + "\" y1=\"" + coord(base) + "\" x2=\"" + coord(px(x)) + "\" y2=\"" + coord(base + 4) + "\"/>\n";
    s += svg_text(px(x), base + 16, "middle", g6(x));
    if (xs.lo == xs.hi) break;
  }
  for (double y : {ys.lo, ys.hi}) {
    s += "<line class=\"axis\" x1=\"" + coord(kLeft - 4) + "\" y1=\"" + coord(py(y)) + "\" x2=\"" + coord(kLeft) + "\" y2=\"" + coord(py(y)) + "\"/>\n";
    s += svg_text(kLeft - 6, py(y) + 4, "end", g6(y));
    if (ys.lo == ys.hi) break;
  }
  s += svg_text(kLeft + pw / 2, kHeight - 6, "middle", "step");
  s += svg_text(16, kTop + ph / 2, "middle", "loss", " transform=\"rotate(-90 16 " + coord(kTop + ph / 2) + ")\"");

  for (size_t i = 0; i < runs.size(); ++i) {
    const Record& r = runs[i];
    const std::string colour = kPalette[i % kPaletteSize];
    // Past ten runs the colours repeat, so the dash pattern keeps the curves apart.
    const std::string dash = i >= kPaletteSize ? " stroke-dasharray=\"6 3\"" : "";
    const std::string vary = varying_text(r, keys);
    const std::string label = html_escape(r.run_id + (vary.empty() ? "" : " (" + vary + ")"));
    std::string points;
    size_t n = 0;
    double last_x = 0, last_y = 0;
    for (const auto& st : r.steps) {
      if (!plottable(st)) continue;  // a NaN or inf point has no place on the axis
      last_x = px(static_cast<double>(st.step)), last_y = py(st.loss);
      points += (n++ ? " " : "") + coord(last_x) + "," + coord(last_y);
    }
    if (n >= 2) {
      s += "<polyline stroke=\"" + colour + "\"" + dash + " points=\"" + points + "\"><title>" + label + "</title></polyline>\n";
    } else if (n == 1) {
      // A one-point polyline draws nothing.
      s += "<circle fill=\"" + colour + "\" r=\"3\" cx=\"" + coord(last_x) + "\" cy=\"" + coord(last_y) + "\"><title>" + label + "</title></circle>\n";
    }
    const double ly = kHeight + 4 + kLegendRow * static_cast<double>(i);
    s += "<line stroke=\"" + colour + "\" stroke-width=\"3\"" + dash + " x1=\"" + coord(kLeft) + "\" y1=\"" + coord(ly + 8) + "\" x2=\"" +
         coord(kLeft + 24) + "\" y2=\"" + coord(ly + 8) + "\"/>\n";
    s += svg_text(kLeft + 30, ly + 12, "start", label + (n ? "" : " &#8212; no finite loss"));
  }
  return s + "</svg>\n";
}

}  // namespace

SweepRecords load_sweep(const std::string& dir) {
  SweepRecords out;
  const fs::path runs_dir = fs::path(dir) / "runs";
  std::error_code ec;
  if (!fs::exists(runs_dir, ec)) return out;  // a sweep that has not started any run yet
  std::vector<fs::path> run_dirs;
  fs::directory_iterator it(runs_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) run_dirs.push_back(it->path());
  }
  if (ec) out.problems.push_back(runs_dir.string() + ": cannot list the run directories (" + ec.message() + ").");
  std::sort(run_dirs.begin(), run_dirs.end());
  for (const auto& d : run_dirs) {
    const std::string path = (d / "record.h5").string();
    try {
      out.runs.push_back(read_record(path));
    } catch (const RecordError& e) {
      out.problems.push_back(e.what());
    } catch (const std::exception& e) {
      // One damaged record must not hide the rest of the sweep.
      out.problems.push_back(path + ": damaged record (" + e.what() + "); re-run the point to replace it");
    }
  }
  std::stable_sort(out.runs.begin(), out.runs.end(), [](const Record& a, const Record& b) { return a.run_id < b.run_id; });
  return out;
}

std::vector<std::string> varying_keys(const std::vector<Record>& runs) {
  std::set<std::string> all;
  for (const auto& r : runs)
    for (const auto& kv : r.config) all.insert(kv.first);
  std::vector<std::string> out;
  for (const auto& k : all) {
    const std::string* first = nullptr;
    bool differs = false;
    for (const auto& r : runs) {
      auto it = r.config.find(k);
      if (it == r.config.end()) {
        differs = true;  // a key only some runs set is a difference in itself
        break;
      }
      if (first && *first != it->second) {
        differs = true;
        break;
      }
      first = &it->second;
    }
    if (differs) out.push_back(k);
  }
  return out;
}

std::string render_html(const std::string& title, const SweepRecords& sweep) {
  const auto keys = varying_keys(sweep.runs);
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + html_escape(title) + "</title>\n<style>\n";
  h += kStyle;
  h += "</style>\n</head>\n<body>\n<h1>" + html_escape(title) + "</h1>\n";
  h += "<p class=\"summary\">" + plural(sweep.runs.size(), "run") + ", " + plural(sweep.problems.size(), "problem") + "</p>\n";
  if (sweep.runs.empty()) {
    h += "<p>no completed runs</p>\n";
  } else {
    h += runs_table(sweep.runs, keys);
    h += svg_chart(sweep.runs, keys);
  }
  if (!sweep.problems.empty()) {
    h += "<h2>Problems</h2>\n<ul>\n";
    for (const auto& p : sweep.problems) h += "<li>" + html_escape(p) + "</li>\n";
    h += "</ul>\n";
  }
  return h + "</body>\n</html>\n";
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace sweep
