// What `sweep serve` answers, apart from HTTP (serve_http.h): the pages of the served
// sweep directories, by path. Every page is drawn from what a reader of records already
// draws (the report, `sweep show`'s lines, `sweep compare`'s verdict) and is
// self-contained: inline CSS and SVG, and on a sweep's page one inline script that asks the
// status endpoint and updates the page in place. No path of a request names a file: a
// request names a served sweep and a run id, checked against what the sweep's runs/ holds.
//   /                          the sweeps, with their counts
//   /s/NAME/                   the sweep's report, updated in place while runs train
//   /s/NAME/status.json        counts and each running run's step (?after=VERSION: a long poll)
//   /s/NAME/run/ID             one run: show's lines, every curve, config, environment, log;
//                              while it trains, its step and loss updated in place
//   /s/NAME/run/ID/status.json the run's step, steps, loss and stall words while it runs
//                              (?after=VERSION: a long poll, as the sweep's)
//   /s/NAME/compare?a=ID&b=ID  two runs as `sweep compare` says them; either may be another
//                              served sweep's, as SWEEP/ID
//   /compare?a=SWEEP/ID&b=SWEEP/ID  two runs of any served sweeps (the index's form)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "served_sweep.h"  // ServedSweep

namespace sweep {

/// One answer: status code, content type, body.
struct ServeResponse {
  int status = 200;
  std::string type = "text/html; charset=utf-8";
  std::string body;
};

/// Seconds a long poll of status.json waits for a change before it answers unchanged.
inline constexpr double kLongPollS = 20;
/// Seconds a run page waits for the sweep's first scan (its sweep-level flags) before it
/// is drawn without them.
inline constexpr double kFirstScanWaitS = 5;

class ServeSite {
 public:
  /// Serves each of `dirs`, named by its last path component (made unique, and spelled
  /// with [A-Za-z0-9._-] only). Throws ConfigError (exit 2) for a path that is not a
  /// directory or not a sweep's (no runs/ and no points.tsv in it). A run page's
  /// sweep-level health flags come from its served sweep's scan (ServedSweep::sweep_flags).
  /// `test_build_pause_s`: ServedSweep's (tests only).
  ServeSite(const std::vector<std::string>& dirs, double test_build_pause_s = 0);

  /// The answer to GET `path` (percent-decoded) with `params` (the query). `nonce` is put
  /// on a page's inline script (the Content-Security-Policy admits only it).
  ServeResponse get(const std::string& path, const std::multimap<std::string, std::string>& params,
                    const std::string& nonce);

  const std::vector<std::unique_ptr<ServedSweep>>& sweeps() const { return sweeps_; }

 private:
  ServeResponse index_page();
  ServeResponse sweep_page(ServedSweep& s, const std::string& nonce);
  ServeResponse status(ServedSweep& s, const std::multimap<std::string, std::string>& params);
  ServeResponse run_page(ServedSweep& s, const std::string& id, const std::string& nonce);
  ServeResponse run_status(ServedSweep& s, const std::string& id,
                           const std::multimap<std::string, std::string>& params);
  /// `s`: the sweep whose compare page it is (a bare run id is its run); null for /compare.
  ServeResponse compare_page(ServedSweep* s, const std::multimap<std::string, std::string>& params);
  /// The run directory of compare's `spec`: "ID", a run of `here` (none when null), or
  /// "SWEEP/ID", a run of the sweep served as SWEEP (its served name, never a path). ""
  /// with `*status` (400 no sweep named, 403 a path or a run leading outside its sweep,
  /// 404 no such sweep or run) and `*why` ("" for a plain 404 of a run).
  std::string run_of(const ServedSweep* here, const std::string& spec, int* status, std::string* why);

  std::vector<std::unique_ptr<ServedSweep>> sweeps_;
};

/// The run directory of run `id` of sweep directory `dir` when a request may read it: ""
/// with `*status` 404 for a name that is not a run's (empty, ".", "..", a character
/// outside [A-Za-z0-9._-], no such directory), 403 with `*why` for one that leads outside
/// `dir`/runs (a symbolic link, or an entry of the run that is one: check_run_entries).
std::string servable_run_dir(const std::string& dir, const std::string& id, int* status, std::string* why);

}  // namespace sweep
