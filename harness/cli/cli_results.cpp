// `sweep report`, `sweep compare` and `sweep reproduce`: commands over records.
#include <algorithm>
#include <cctype>  // tolower
#include <cmath>
#include <cstdio>
#include <cstdlib>  // getenv for PATH
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>  // unique_ptr: the sweeps a command read, kept to its exit
#include <set>

#include "atomic_file.h"  // write_file_atomically, replace_directory
#include "cli.h"
#include "compare.h"             // compare_records, compare_sweeps
#include "config_error.h"        // ConfigError
#include "diagnose.h"            // newest_diagnosis: show's line
#include "export.h"              // render_export_csv
#include "export_tensorboard.h"  // render_tensorboard
#include "lineage_run.h"         // resume_run, fork_run
#include "process.h"             // SpawnRunner, executable_dir
#include "record_view.h"         // view_record: what `sweep show` prints
#include "report.h"              // load_sweep, build_report, render_report
#include "reproduce.h"           // reproduce, reproduce_lineage
#include "run_files.h"           // read_state_fields
#include "run_health.h"          // run_health, run_figures: each run's figures in compare
#include "sweep_records.h"       // read_run_record
#include "telemetry_summary.h"   // telemetry_table: show --telemetry
#include "text.h"                // printable, did_you_mean

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// load_sweep(dir), kept until the process exits: a command reads its sweeps once and then
/// exits, and the exit frees them at once, where destroying 100,000 records one by one
/// takes ~5% of a report. (Reachable to the end, so no leak checker counts it.)
const SweepRecords& load_sweep_for_process(const std::string& dir, const LoadOptions& opt = {}) {
  static auto* kept = new std::vector<std::unique_ptr<SweepRecords>>;
  kept->push_back(std::make_unique<SweepRecords>(load_sweep(dir, opt)));
  return *kept->back();
}

void print_lines(const std::vector<std::string>& lines, const char* indent = "") {
  for (const auto& l : lines) std::printf("%s%s\n", indent, l.c_str());
}

// ------------------------------------------------------------------ report

struct ReportCliOptions {
  std::string dir;
  std::string output;  // "-" = stdout
  std::string format = "html";
  std::string group_by;
  std::string title;     // "" = the sweep's name its records carry, else the directory's name
  std::string baseline;  // KEY=VALUE, "" = none
};

const char* extension(ReportFormat f) {
  switch (f) {
    case ReportFormat::markdown:
      return "md";
    case ReportFormat::csv:
      return "csv";
    case ReportFormat::json:
      return "json";
    case ReportFormat::html:
      break;
  }
  return "html";
}

const char* format_name(ReportFormat f) {
  switch (f) {
    case ReportFormat::markdown:
      return "Markdown";
    case ReportFormat::csv:
      return "CSV";
    case ReportFormat::json:
      return "JSON";
    case ReportFormat::html:
      break;
  }
  return "HTML";
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// `-o FILE` may replace only a file of the same kind that sweep wrote (`ours` tells from
// its first 64 KiB): a typo such as `-o runs/<id>/record.h5` must not turn a completed
// record into HTML. Special files (/dev/null, a FIFO, a terminal) are written in place.
/// `noun`: "report" or "export"; `what`: "a sweep report (HTML)".
void check_output_file(const std::string& path, const std::string& noun, const std::string& what,
                       const std::string& ext, const std::function<bool(const std::string&)>& ours) {
  const std::string name = "-o " + printable(path);
  std::string lower = path;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (ends_with(lower, ".h5") || ends_with(lower, ".h5.partial"))
    throw ConfigError(name + ": refusing to write a " + noun + " to a record's name (.h5, .h5.partial); expected a ." +
                      ext + " file, or - for stdout");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return;
  if (fs::is_directory(st))
    throw ConfigError(name + ": is a directory; expected a " + noun + " file name, or - for stdout");
  if (!fs::is_regular_file(st)) return;
  std::ifstream in(path, std::ios::binary);
  std::string head(size_t{64} * 1024, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  if (!ours(head))
    throw ConfigError(name + ": exists and is not " + what +
                      "; refusing to replace it (remove it first, or choose "
                      "another name)");
}

void check_report_output(const std::string& path, ReportFormat format) {
  check_output_file(path, "report", std::string("a sweep report (") + format_name(format) + ")", extension(format),
                    [format](const std::string& head) { return looks_like_report(head, format); });
}

// --baseline KEY=VALUE: KEY a config key whose value differs between runs, VALUE one a run has.
void check_baseline(const std::string& arg, const SweepRecords& sweep, ReportOptions* opt) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--baseline '" + printable(arg) + "': expected KEY=VALUE, e.g. train.precision=fp32");
  const std::string key = arg.substr(0, eq), value = arg.substr(eq + 1);
  if (sweep.runs.empty()) throw ConfigError("--baseline '" + printable(arg) + "': the sweep has no completed run");
  std::set<std::string> keys, values;
  for (const auto& r : sweep.runs) {
    for (const auto& kv : r.config) keys.insert(kv.first);
    values.insert(report_value(r, key));
  }
  if (!keys.count(key))
    throw ConfigError("--baseline '" + printable(arg) + "': no run has the config key " + printable(key) +
                      did_you_mean(key, {keys.begin(), keys.end()}));
  std::string listed;
  for (const auto& v : values) listed += (listed.empty() ? "" : ", ") + printable(v);
  if (values.size() < 2)
    throw ConfigError("--baseline '" + printable(arg) + "': " + printable(key) + " is " + listed +
                      " in every run, so there is nothing to compare against it");
  if (!values.count(value))
    throw ConfigError("--baseline '" + printable(arg) + "': no run has " + printable(key) + " = " + printable(value) +
                      " (its values: " + listed + ")");
  opt->baseline_key = key, opt->baseline_value = value;
}

int run_report(const ReportCliOptions& o) {
  if (!fs::is_directory(o.dir)) throw ConfigError(o.dir + ": not a sweep directory");
  ReportFormat format;
  if (!parse_report_format(o.format, &format))
    throw ConfigError("--format '" + printable(o.format) + "': expected html, md, csv or json");
  if (o.output.empty())
    check_sweep_dir_target(o.dir, "");
  else if (o.output != "-")
    check_report_output(o.output, format);
  const SweepRecords& sweep = load_sweep_for_process(o.dir);
  if (!o.group_by.empty() && !sweep.runs.empty()) {
    std::set<std::string> keys;
    for (const auto& r : sweep.runs)
      for (const auto& kv : r.config) keys.insert(kv.first);
    if (!keys.count(o.group_by)) {
      throw ConfigError("--group-by '" + printable(o.group_by) + "': no run has this config key" +
                        did_you_mean(o.group_by, {keys.begin(), keys.end()}));
    }
  }
  ReportOptions opt;
  opt.group_by = o.group_by;
  if (!o.baseline.empty()) check_baseline(o.baseline, sweep, &opt);
  if (!valid_utf8(o.title))
    throw ConfigError("--title " + printable(o.title) +
                      ": not valid UTF-8 (a report's title is shown as text; nothing was written)");
  // The sweep's own name, as `sweep run` titles it; the directory's for records that carry none.
  std::string title = o.title.empty() ? sweep_name(sweep.runs) : o.title;
  if (title.empty()) title = fs::path(o.dir).filename().string();
  if (title.empty()) title = fs::path(o.dir).parent_path().filename().string();  // "dir/" has an empty last part
  const std::string text = render_report(sweep, build_report(title.empty() ? o.dir : title, sweep, opt), format);
  if (o.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const std::string out = o.output.empty() ? o.dir + "/report." + extension(format) : o.output;
  write_file_atomically(out, text);
  std::printf("report: %s\n", out.c_str());
  return 0;
}

// ------------------------------------------------------------------ export

struct ExportCliOptions {
  std::string dir;
  std::string output;  // "-" = stdout
  std::string format = "csv";
};

/// On stderr, what an export left out and why: the runs without a readable record (by
/// `sweep status`'s word for each) and the unverified ones it did export. Nothing when
/// every run was exported and verified.
void note_left_out(const SweepRecords& sweep) {
  std::map<std::string, size_t> words;
  for (const auto& f : sweep.failed)
    if (!f.problem.empty()) ++words[f.status];
  std::string out;
  for (const auto& [word, n] : words) out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + word;
  const size_t unverified =
      size_t(std::count_if(sweep.runs.begin(), sweep.runs.end(), [](const Record& r) { return !r.verified; }));
  if (!out.empty())
    std::fprintf(stderr,
                 "export: %zu runs exported; left out, without a readable record: %s (sweep status lists them)\n",
                 sweep.runs.size(), out.c_str());
  if (unverified)
    std::fprintf(stderr, "export: %zu exported runs are unverified (schema version 1: no digest to check them by)\n",
                 unverified);
}

/// Writes a TensorBoard export into directory `out`: a new or empty directory, or an
/// earlier export (it holds kTensorboardMarker); never through a symbolic link.
int write_tensorboard_export(const std::string& dir, const std::string& out) {
  const std::string name = "-o " + printable(out);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (!ec && fs::exists(st)) {
    if (fs::is_symlink(st)) throw ConfigError(name + ": is a symbolic link; expected a directory");
    if (!fs::is_directory(st)) throw ConfigError(name + ": exists and is not a directory; a TensorBoard export is one");
    if (!fs::is_empty(out, ec) && !fs::exists(fs::path(out) / kTensorboardMarker))
      throw ConfigError(name +
                        ": is a directory that holds other files and no earlier TensorBoard export; refusing "
                        "to write into it (choose a new or empty directory)");
  }
  const SweepRecords& sweep = load_sweep_for_process(dir);
  const auto files = render_tensorboard(sweep);
  note_left_out(sweep);
  // Written aside and swapped in whole: TensorBoard never reads half an export, and a run
  // that is no longer in the sweep leaves nothing behind.
  if (const fs::path parent = fs::path(out).parent_path(); !parent.empty()) fs::create_directories(parent);
  replace_directory(out, [&](const std::string& fresh) {
    for (const auto& [rel, bytes] : files) {
      const fs::path p = fs::path(fresh) / rel;
      fs::create_directories(p.parent_path());
      write_file_atomically(p.string(), bytes);
    }
  });
  std::printf("export: %s (%zu runs)\n", out.c_str(), files.size() - 2);
  return 0;
}

/// Writes a CSV export of `what` ("a sweep export (CSV)") to o.output (a file, or - for
/// stdout) or, without one, to <dir>/<default_name>: `render` hands its text to a sink;
/// `first_line` is what such a file starts with (an earlier export it may replace).
int write_csv_export(const ExportCliOptions& o, const char* what, const std::string& default_name,
                     const std::string& first_line,
                     const std::function<SweepRecords(const std::function<void(const std::string&)>&)>& render) {
  auto ours = [&first_line](const std::string& head) { return head.rfind(first_line, 0) == 0; };
  if (o.output.empty())
    check_sweep_dir_target(o.dir, "");
  else if (o.output != "-")
    check_output_file(o.output, "export", what, "csv", ours);
  // Read a chunk of runs at a time and written run by run as it is rendered: at 100,000
  // runs the records are gigabytes, and so is the text.
  if (o.output == "-") {
    note_left_out(render([](const std::string& chunk) { std::fwrite(chunk.data(), 1, chunk.size(), stdout); }));
    return 0;
  }
  const std::string out = o.output.empty() ? o.dir + "/" + default_name : o.output;
  if (o.output.empty()) check_output_file(out, "export", what, "csv", ours);
  SweepRecords read;
  write_file_atomically_streamed(out, [&](const ChunkSink& put) { read = render(put); });
  note_left_out(read);
  std::printf("export: %s\n", out.c_str());
  return 0;
}

int run_export(const ExportCliOptions& o) {
  if (!fs::is_directory(o.dir)) throw ConfigError(o.dir + ": not a sweep directory");
  if (o.format != "csv" && o.format != "telemetry" && o.format != "tensorboard")
    throw ConfigError("--format '" + printable(o.format) + "': expected csv, telemetry or tensorboard" +
                      did_you_mean(o.format, {"csv", "telemetry", "tensorboard"}));
  if (o.format == "tensorboard") {
    if (o.output == "-") throw ConfigError("-o -: a TensorBoard export is a directory; name one");
    if (o.output.empty()) check_sweep_dir_target(o.dir, "");
    return write_tensorboard_export(o.dir, o.output.empty() ? o.dir + "/tensorboard" : o.output);
  }
  if (o.format == "telemetry")
    return write_csv_export(o, "a telemetry export (CSV)", "telemetry.csv", kTelemetryCsvStart,
                            [&](const auto& sink) { return export_sweep_telemetry_csv(o.dir, sink); });
  return write_csv_export(o, "a sweep export (CSV)", "export.csv", kExportCsvStart,
                          [&](const auto& sink) { return export_sweep_csv(o.dir, sink); });
}

// ------------------------------------------------------------------ compare

struct CompareCliOptions {
  std::string a, b;
  double rtol = 0;
};

enum class Kind { record, sweep };

// A run directory holds record.h5; a sweep directory holds runs/.
Kind classify(const std::string& p) {
  std::error_code ec;
  if (!fs::exists(p, ec)) throw ConfigError(p + ": no such file or directory");
  if (!fs::is_directory(p, ec)) return Kind::record;
  if (fs::is_directory(fs::path(p) / "runs", ec)) return Kind::sweep;
  return Kind::record;  // read_record names what is missing
}

int compare_two_records(const CompareCliOptions& o) {
  // A failed or stopped run's partial record is evidence (where it went wrong): compared
  // as it stands, and said to be partial.
  std::string unfinished[2];
  const Record a = read_run_record_or_partial(resolve_record_path(o.a), &unfinished[0]),
               b = read_run_record_or_partial(resolve_record_path(o.b), &unfinished[1]);
  const RecordComparison c = compare_records(a, b, {o.rtol});
  // Each run's own figures and health first: what the two runs came to, before how they differ.
  for (const Record* r : {&a, &b}) {
    const std::string flags = health_names(run_health(*r));
    const std::string& partial = unfinished[r == &a ? 0 : 1];
    std::printf("%s: %s\n   %s; health: %s\n", r == &a ? "A" : "B", r->path.c_str(),
                figures_text(run_figures(*r)).c_str(), flags.empty() ? "ok" : flags.c_str());
    if (!partial.empty())
      std::printf("   partial: %s; its rows as of the last flush, not verified\n", terminal_text(partial).c_str());
    else if (!r->verified)
      std::printf(
          "   unverified: a record of schema version %lld has no digest; nothing shows it is what its run "
          "wrote\n",
          static_cast<long long>(r->schema_version));
  }
  const bool any_partial = !unfinished[0].empty() || !unfinished[1].empty();
  std::printf("%s%s\n", any_partial ? "over the rows the partial records hold: " : "", verdict_line(c).c_str());
  print_lines(detail_lines(c));
  return c.match() ? 0 : 1;
}

int compare_two_sweeps(const CompareCliOptions& o) {
  const SweepComparison s = compare_sweep_dirs(o.a, o.b, {o.rtol});
  std::printf("A: %s\nB: %s\n", o.a.c_str(), o.b.c_str());
  size_t identical = 0, tolerant = 0, differ = 0;
  for (const auto& p : s.pairs) {
    const RecordComparison& c = p.result;
    c.bitwise() ? ++identical : c.match() ? ++tolerant : ++differ;
    // A record of schema version 1 has no digest: its bits are compared, but nothing
    // shows they are what its run wrote.
    const std::string unverified = !p.a_verified && !p.b_verified ? "A and B"
                                   : !p.a_verified                ? "A"
                                   : !p.b_verified                ? "B"
                                                                  : "";
    std::printf("%s  %s%s\n", p.run_id.c_str(), verdict_line(c).c_str(),
                unverified.empty() ? "" : ("; unverified in " + unverified + " (schema version 1: no digest)").c_str());
    if (!c.match()) print_lines(detail_lines(c), "    ");
  }
  for (const auto& u : s.uncompared)
    std::printf("%s  not compared: %s in A, %s in B: %s\n", u.run_id.c_str(), u.a.c_str(), u.b.c_str(),
                printable(u.cause).c_str());
  for (const auto& id : s.only_a) std::printf("%s  only in A\n", id.c_str());
  for (const auto& id : s.only_b) std::printf("%s  only in B\n", id.c_str());
  for (const auto& p : s.problems) std::printf("problem: %s\n", p.c_str());
  std::printf(
      "%zu pairs: %zu identical, %zu within tolerance, %zu differ; %zu not compared; %zu only in A, %zu only "
      "in B\n",
      s.pairs.size(), identical, tolerant, differ, s.uncompared.size(), s.only_a.size(), s.only_b.size());
  return s.match() ? 0 : 1;
}

int run_compare(const CompareCliOptions& o) {
  if (!(o.rtol >= 0) || !std::isfinite(o.rtol))
    throw ConfigError("--rtol " + g4(o.rtol) + ": expected a finite relative tolerance >= 0 (0 = bit for bit)");
  const Kind ka = classify(o.a), kb = classify(o.b);
  if (ka != kb)
    throw ConfigError("compare needs two records or two sweep directories; got " +
                      std::string(ka == Kind::sweep ? "a sweep directory" : "a record") + " and " +
                      (kb == Kind::sweep ? "a sweep directory" : "a record"));
  return ka == Kind::record ? compare_two_records(o) : compare_two_sweeps(o);
}

// ------------------------------------------------------------------ reproduce

struct ReproduceCliOptions {
  ReproduceOptions opt;
  std::string trainer, mpiexec;
  bool world_size_given = false, accum_given = false, micro_given = false;
  bool lineage = false;  ///< --lineage
};

int run_reproduce(ReproduceCliOptions& o) {
  // 0 inside ReproduceOptions means "as recorded"; given on the command line it is a mistake.
  if (o.world_size_given && o.opt.world_size < 1)
    throw ConfigError("--world-size " + std::to_string(o.opt.world_size) +
                      ": expected a positive number of ranks (leave it out to keep the recorded one)");
  if (o.micro_given && o.opt.micro_batch < 1)
    throw ConfigError("--micro-batch " + std::to_string(o.opt.micro_batch) +
                      ": expected a positive number of sequences (leave it out to keep the recorded one)");
  if (o.accum_given && o.opt.accum < 1)
    throw ConfigError("--accum " + std::to_string(o.opt.accum) +
                      ": expected a positive number of accumulation steps (leave it out to keep the recorded one)");
  o.opt.launch.train_binary = o.trainer.empty() ? executable_dir() + "/sweep-train" : o.trainer;
  o.opt.trainer_given = !o.trainer.empty();
  o.opt.launch.mpiexec = find_in_path(o.mpiexec.empty() ? "mpiexec" : o.mpiexec);
  ContainerSpec& box = o.opt.container;
  if (box.runtime.empty() != box.image.empty())
    throw ConfigError("--container and --image go together: the runtime and the image the re-run's ranks run in");
  if (!box.runtime.empty()) box.command = box.runtime == "charliecloud" ? "ch-run" : box.runtime;
  SpawnRunner runner(executable_dir() + "/sweep-box", 10);  // the re-run ends with all it started
  const ReproduceResult r = o.lineage ? reproduce_lineage(o.opt, runner) : reproduce(o.opt, runner);
  print_lines(r.lines);
  return r.reproduced() ? 0 : 1;
}

struct LineageCliOptions {
  LineageOptions opt;
  std::string trainer, mpiexec;
  bool fork = false;
};

int run_lineage(LineageCliOptions& o) {
  o.opt.launch.train_binary = o.trainer.empty() ? executable_dir() + "/sweep-train" : o.trainer;
  o.opt.trainer_given = !o.trainer.empty();
  o.opt.launch.mpiexec = find_in_path(o.mpiexec.empty() ? "mpiexec" : o.mpiexec);
  SpawnRunner runner(executable_dir() + "/sweep-box", 10);  // the run ends with all it started
  const LineageResult r = o.fork ? fork_run(o.opt, runner) : resume_run(o.opt, runner);
  print_lines(r.lines);
  return r.completed ? 0 : 1;
}

}  // namespace

// posix_spawn does not search PATH, so a bare program name is resolved here.
std::string find_in_path(const std::string& name) {
  const std::string found = resolve_program(name);  // an executable file on PATH
  return found.empty() ? name : found;
}

CliAction setup_report(CLI::App& app) {
  auto o = std::make_shared<ReportCliOptions>();
  auto* cmd = app.add_subcommand("report", "write the report of a sweep directory (HTML, Markdown, CSV or JSON)");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  cmd->add_option("-o,--output", o->output, "output file, - for stdout (default <dir>/report.<format>)");
  cmd->add_option("--format", o->format, "html (default), md, csv or json");
  cmd->add_option("--group-by", o->group_by,
                  "config key: one loss chart per value of it (seeds are averaged unless it is train.seed)");
  cmd->add_option("--title", o->title,
                  "the report's title (default: the sweep's name, as its records have it; else the directory's name)");
  cmd->add_option("--baseline", o->baseline,
                  "KEY=VALUE: every group with another KEY minus its partner at VALUE, paired by seed "
                  "(e.g. train.precision=fp32)");
  return [o, cmd]() { return cmd->parsed() ? run_report(*o) : -1; };
}

CliAction setup_export(CLI::App& app) {
  auto o = std::make_shared<ExportCliOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "write every run's per-step figures in long format (run_id, status, varying keys, step, metric, "
      "value) for pandas and other tools");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  cmd->add_option("-o,--output", o->output,
                  "csv, telemetry: output file, - for stdout (default <dir>/export.csv, <dir>/telemetry.csv); "
                  "tensorboard: output directory (default <dir>/tensorboard)");
  cmd->add_option("--format", o->format,
                  "csv (the default: long format for pandas), telemetry (the gradient telemetry in long format: "
                  "run_id, status, step, why, kind, name, rank, layer, expert, value) or tensorboard (event files: "
                  "scalars and telemetry per run, hparams)");
  return [o, cmd]() { return cmd->parsed() ? run_export(*o) : -1; };
}

// ------------------------------------------------------------------ show

struct ShowOptions {
  std::string path;
  bool telemetry = false;  ///< the gradient telemetry of one step as a table, instead of the record
  int64_t step = 0;        ///< with telemetry: the step (0: the last telemetry row)
};

/// `sweep show --telemetry`: one step's gradient telemetry as a table (telemetry_table);
/// a record without telemetry, or a step without it, is bad input (exit 2), named.
int show_telemetry(const ShowOptions& o, const RecordView& v) {
  if (const std::string why = telemetry_step_problem(v.record, o.step); !why.empty())
    throw ConfigError(printable(v.path) +
                      (o.step ? ": --step " + std::to_string(o.step) : std::string(": --telemetry")) + ": " + why);
  std::printf("record:  %s%s\n", terminal_text(v.path).c_str(), v.partial ? " (partial: as of its last flush)" : "");
  for (const std::string& line : telemetry_table(v.record, o.step)) std::printf("%s\n", terminal_text(line).c_str());
  return 0;
}

/// One record in the terminal, without Python: what it is (completed, verified or not;
/// damaged and why; a partial record and the run's word for it), its figures and health,
/// its own metrics, summary, config and what its environment holds (record_view.h, which
/// the served run page shows too).
int run_show(const ShowOptions& o) {
  const RecordView v = view_record(o.path, sweep_level_flags);  // RecordError (exit 2) when there is none
  if (o.telemetry) return show_telemetry(o, v);
  for (const auto& [key, value] : v.lines) std::printf("%-12s %s\n", (key + ":").c_str(), terminal_text(value).c_str());
  // `sweep diagnose`'s newest verdict on the run (diagnose/<n>/verdict.txt beside the record).
  std::error_code ec;
  const fs::path run = fs::is_directory(o.path, ec) ? fs::path(o.path) : fs::path(o.path).parent_path();
  if (const std::string d = newest_diagnosis(run.string()); !d.empty())
    std::printf("%-12s %s\n", "diagnosis:", terminal_text(d).c_str());
  return 0;
}

CliAction setup_show(CLI::App& app) {
  auto o = std::make_shared<ShowOptions>();
  auto* cmd = app.add_subcommand("show",
                                 "print one record: what it is (verified, unverified, damaged, partial), status, "
                                 "figures, health, its own metrics, summary, config and environment");
  cmd->add_option("record", o->path, "record.h5, a partial record, or a run directory")->required();
  auto* telemetry =
      cmd->add_flag("--telemetry", o->telemetry,
                    "print the gradient telemetry of one step instead: each rank's gradient norm, the largest tensor "
                    "gradient norms and each MoE layer's expert load");
  cmd->add_option("--step", o->step, "with --telemetry: the step (default: the last telemetry row)")
      ->check(whole_number(1))
      ->needs(telemetry);
  return [o, cmd]() { return cmd->parsed() ? run_show(*o) : -1; };
}

CliAction setup_compare(CLI::App& app) {
  auto o = std::make_shared<CompareCliOptions>();
  auto* cmd = app.add_subcommand("compare",
                                 "compare two records (or two sweep directories, runs paired by id) step by step; "
                                 "exit 0 match, 1 differ, 2 usage");
  cmd->add_option("a", o->a, "record.h5, run directory or sweep directory")->required();
  cmd->add_option("b", o->b, "record.h5, run directory or sweep directory")->required();
  cmd->add_option("--rtol", o->rtol, "relative tolerance on losses; default 0 = bit-for-bit");
  return [o, cmd]() { return cmd->parsed() ? run_compare(*o) : -1; };
}

CliAction setup_reproduce(CLI::App& app) {
  auto o = std::make_shared<ReproduceCliOptions>();
  auto* cmd = app.add_subcommand("reproduce",
                                 "re-run a recorded run into <run dir>/reproduce/<n>/ and compare it bit for bit; "
                                 "exit 0 reproduced, 1 diverged, 2 usage");
  cmd->add_option("source", o->opt.source, "record.h5 or a run directory (sweep-dir/runs/ID)")->required();
  auto* world = cmd->add_option("--world-size", o->opt.world_size,
                                "ranks for the re-run (the global batch world_size x accum must hold)")
                    ->check(whole_number());
  auto* accum = cmd->add_option("--accum", o->opt.accum, "accumulation steps for the re-run")->check(whole_number());
  auto* micro = cmd->add_option("--micro-batch", o->opt.micro_batch,
                                "sequences per micro-batch for the re-run: a multiple of the recorded train.leaf "
                                "(a run without one keeps its micro-batch)")
                    ->check(whole_number());
  cmd->add_option("--from-step", o->opt.from_step,
                  "resume the re-run from the original's checkpoint after step S (on any layout: checkpoints are "
                  "layout-free); the steps after S are recomputed and compared")
      ->check(whole_number(1));
  cmd->add_flag("--lineage", o->lineage,
                "a forked run (a pbt member, sweep fork) with every run it descends from: the first re-run from step "
                "0 and each child from its parent's re-run, so no checkpoint of the originals is read; bit-for-bit "
                "only when every part is");
  cmd->add_option("--set", o->opt.set,
                  "test only: KEY=VALUE override of the re-run's config, repeatable (e.g. train.threads=2, or "
                  "fault.desync_step=3 with fault.desync_rank=0 to perturb one parameter by one ulp after step 3)")
      ->allow_extra_args(false);  // one KEY=VALUE per --set: a source after it stays the source
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep)");
  cmd->add_flag("--allow-program", o->opt.allow_program,
                "run the program the record names although no grid run in its sweep directory declared it (a "
                "record copied from elsewhere): check the command first");
  cmd->add_option("--mpiexec", o->mpiexec, "mpiexec for re-runs on more than one rank (default: from PATH)");
  cmd->add_option("--container", o->opt.container.runtime,
                  "run each rank in a container, as launch.container.runtime does (a warning says when it is not "
                  "the record's image)")
      ->check(CLI::IsMember({"apptainer", "singularity", "docker", "podman", "charliecloud"}));
  cmd->add_option("--image", o->opt.container.image, "the container's image (with --container)");
  cmd->add_option("--container-trainer", o->opt.container.trainer,
                  "sweep-train's path inside the image (default: sweep-train)");
  cmd->add_option("--bind", o->opt.container.binds, "host[:container] to bind besides the sweep directory, repeatable")
      ->allow_extra_args(false);
  return [o, cmd, world, accum, micro]() {
    if (!cmd->parsed()) return -1;
    o->world_size_given = world->count() > 0;
    o->accum_given = accum->count() > 0;
    o->micro_given = micro->count() > 0;
    return run_reproduce(*o);
  };
}

namespace {

// The options resume and fork share, and their action.
CliAction lineage_action(CLI::App* cmd, const std::shared_ptr<LineageCliOptions>& o) {
  cmd->add_option("--trainer", o->trainer, "sweep-train binary (default: beside sweep, or the record's own trainer)");
  cmd->add_option("--mpiexec", o->mpiexec, "mpiexec for more than one rank (default: from PATH)");
  return [o, cmd]() { return cmd->parsed() ? run_lineage(*o) : -1; };
}

}  // namespace

CliAction setup_resume(CLI::App& app) {
  auto o = std::make_shared<LineageCliOptions>();
  auto* cmd = app.add_subcommand("resume",
                                 "continue an unfinished run of a sweep from its newest checkpoint: in place, or on "
                                 "another layout of the same global batch as a new run whose record names it; exit 0 "
                                 "completed, 1 not, 2 usage");
  cmd->add_option("run", o->opt.run_dir, "the run's directory (sweep-dir/runs/ID)")->required();
  cmd->add_option("--world-size", o->opt.world_size, "ranks to continue on (the global batch must hold)")
      ->check(whole_number(1));
  cmd->add_option("--accum", o->opt.accum, "accumulation steps to continue with")->check(whole_number(1));
  cmd->add_option("--micro-batch", o->opt.micro_batch,
                  "sequences per micro-batch: a multiple of the run's train.leaf (a run without one keeps its own)")
      ->check(whole_number(1));
  return lineage_action(cmd, o);
}

CliAction setup_fork(CLI::App& app) {
  auto o = std::make_shared<LineageCliOptions>();
  o->fork = true;
  auto* cmd = app.add_subcommand("fork",
                                 "start a new run of the sweep from a run's checkpoint with changed keys (a lower lr "
                                 "after a spike); its record names the parent and the step; exit 0 completed, 1 not, "
                                 "2 usage");
  cmd->add_option("run", o->opt.run_dir, "the parent run's directory (sweep-dir/runs/ID)")->required();
  cmd->add_option("--from-step", o->opt.from_step, "the parent's checkpoint after this step")
      ->required()
      ->check(whole_number(1));
  cmd->add_option("changes", o->opt.set, "KEY=VALUE, one or more (any key but model.*)")->required();
  return lineage_action(cmd, o);
}

}  // namespace sweep
