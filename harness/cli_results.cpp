// `sweep report` (and, later, compare and reproduce): commands over records.
#include <cstdio>
#include <filesystem>

#include "cli.h"
#include "run_config.h"
#include "sweep_run.h"

namespace sweep {
namespace {

struct ReportOptions {
  std::string dir;
  std::string output;
};

int run_report(const ReportOptions& o) {
  if (!std::filesystem::is_directory(o.dir)) throw ConfigError(o.dir + ": not a sweep directory");
  std::string out = o.output.empty() ? o.dir + "/report.html" : o.output;
  std::string title = std::filesystem::path(o.dir).filename().string();
  write_report(o.dir, title.empty() ? o.dir : title, out);
  std::printf("report: %s\n", out.c_str());
  return 0;
}

}  // namespace

CliAction setup_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  auto* cmd = app.add_subcommand("report", "write the HTML report of a sweep directory");
  cmd->add_option("dir", o->dir, "sweep directory")->required();
  cmd->add_option("-o,--output", o->output, "output file (default <dir>/report.html)");
  return [o, cmd]() { return cmd->parsed() ? run_report(*o) : -1; };
}

}  // namespace sweep
