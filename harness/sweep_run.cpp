#include "sweep_run.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "launch.h"  // train_argv
#include "record.h"  // read_record
#include "report.h"  // load_sweep, render_html

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// Writes `text` to `path` through a temporary file and a rename, so a reader never
/// sees half a file.
void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error(tmp + ": cannot write");
    out << text;
    if (!out.flush()) throw std::runtime_error(tmp + ": write failed");
  }
  fs::rename(tmp, path);
}

std::string describe_point(const GridPoint& p) {
  std::string s;
  for (const auto& [k, v] : p.values) s += (s.empty() ? "" : " ") + k + "=" + v;
  return s.empty() ? "(base)" : s;
}

/// Status of an existing record, or a description of why it cannot be read.
std::string record_status(const std::string& path) {
  try {
    return read_record(path).status;
  } catch (const RecordError& e) {
    return std::string("unreadable (") + e.what() + ")";
  }
}

}  // namespace

std::string record_path(const std::string& dir, const std::string& id) { return dir + "/runs/" + id + "/record.h5"; }

void write_report(const std::string& dir, const std::string& title, const std::string& out_path) {
  write_file_atomically(out_path, render_html(title, load_sweep(dir)));
}

SweepSummary run_sweep(const SweepSpec& spec, const std::vector<GridPoint>& points, const SweepRunOptions& opt,
                       ProcessRunner& runner) {
  SweepSummary sum;
  fs::create_directories(opt.out_dir + "/runs");
  const size_t total = points.size();
  for (size_t i = 0; i < total; ++i) {
    const GridPoint& p = points[i];
    const std::string run_dir = opt.out_dir + "/runs/" + p.id;
    const std::string label = "[" + std::to_string(i + 1) + "/" + std::to_string(total) + "] " + p.id + " " + describe_point(p);
    if (fs::exists(record_path(opt.out_dir, p.id))) {
      // A record is never overwritten, so a diverged run is not re-run either; but it is
      // still a failure of the sweep, not a completed point.
      std::string status = record_status(record_path(opt.out_dir, p.id));
      if (status == "completed") {
        ++sum.skipped;
        if (!opt.quiet) std::printf("%s: already completed, skipped\n", label.c_str());
      } else {
        ++sum.failed;
        if (!opt.quiet) std::printf("%s: already recorded as %s, skipped\n", label.c_str(), status.c_str());
      }
      continue;
    }
    fs::create_directories(run_dir + "/logs");
    write_file_atomically(run_dir + "/config.yaml", to_yaml(p.config));
    LocalLaunch launch;
    launch.train_binary = opt.train_binary;
    std::vector<std::string> argv = train_argv(launch, int(p.config.dist.world_size), run_dir + "/config.yaml", run_dir,
                                               spec.name, /*resume=*/false);
    auto t0 = std::chrono::steady_clock::now();
    ExitStatus st = runner.run(argv, run_dir + "/logs/rank0.log");
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string outcome;
    Record r;
    std::string read_error;
    if (st.ok() && fs::exists(record_path(opt.out_dir, p.id))) {
      try {
        r = read_record(record_path(opt.out_dir, p.id));
      } catch (const RecordError& e) {
        read_error = e.what();
      }
    }
    if (st.ok() && r.status == "completed") {
      ++sum.completed;
      char buf[64];
      std::snprintf(buf, sizeof buf, "final loss %.6g", r.steps.empty() ? 0.0 : r.steps.back().loss);
      outcome = std::string("completed, ") + buf;
    } else if (st.ok()) {
      ++sum.failed;
      outcome = "FAILED (exit code 0 but " +
                (!read_error.empty() ? read_error : r.status.empty() ? std::string("no record") : "status " + r.status) +
                "), log: " + run_dir + "/logs/rank0.log";
    } else {
      ++sum.failed;
      outcome = "FAILED (" + st.describe() + "), log: " + run_dir + "/logs/rank0.log";
    }
    if (!opt.quiet) std::printf("%s: %s in %.1fs\n", label.c_str(), outcome.c_str(), secs);
    std::fflush(stdout);
  }
  sum.report_path = opt.out_dir + "/report.html";
  write_report(opt.out_dir, spec.name, sum.report_path);
  return sum;
}

}  // namespace sweep
