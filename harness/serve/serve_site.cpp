// What `sweep serve` answers (serve_site.h).
#include "serve_site.h"

#include <sys/stat.h>

#include <algorithm>  // max
#include <cstdlib>    // strtoull
#include <ctime>      // time
#include <filesystem>
#include <set>

#include "compare.h"        // compare_records
#include "config_error.h"   // ConfigError
#include "record_view.h"    // view_record
#include "report.h"         // html_escape, json_string
#include "run_files.h"      // check_run_entries, rank_log_path, RunRefused
#include "run_pages.h"      // render_run_html, render_compare_html, report_page_start
#include "run_status.h"     // status_is
#include "sweep_records.h"  // log_tail, read_run_record_or_partial
#include "text.h"           // printable

namespace fs = std::filesystem;

namespace sweep {
namespace {

/// The sweep page's script: asks status.json (a long poll: the server answers when the
/// status changes), writes the counts and each running run's step into the page, and when
/// the server has a newer report (its generation), fetches the page and swaps the report in
/// place. Nothing is reloaded; on an error it asks again after 5 s.
constexpr const char* kLiveScript = R"JS(
(function () {
  var body = document.body, url = body.getAttribute("data-status");
  var generation = Number(body.getAttribute("data-report")), version = 0, updates = 0;
  function set(id, text) {
    var e = document.getElementById(id);
    if (e && e.textContent !== text) e.textContent = text;
  }
  function swap() {
    fetch(location.pathname, {cache: "no-store"}).then(function (r) { return r.text(); }).then(function (text) {
      var doc = new DOMParser().parseFromString(text, "text/html");
      var fresh = doc.getElementById("report"), old = document.getElementById("report");
      if (!fresh || !old) return;
      old.replaceWith(document.importNode(fresh, true));
      generation = Number(doc.body.getAttribute("data-report"));
      body.setAttribute("data-report", String(generation));
    });
  }
  function apply(s) {
    set("live-counts", s.counts_text);
    set("live-running", s.running.length ? s.running.map(function (r) {
      return r.id + " at step " + r.step + " of " + r.steps + r.stall;
    }).join("; ") : "none");
    s.running.forEach(function (r) {
      document.querySelectorAll('span.step[data-run="' + CSS.escape(r.id) + '"]').forEach(function (e) {
        if (r.step >= 0) e.textContent = String(r.step);
      });
    });
    set("live-updates", String(++updates));
    set("live-time", new Date().toLocaleTimeString());
    if (s.report > 0 && s.report !== generation) swap();
  }
  function poll() {
    fetch(url + "?after=" + version, {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error("status " + r.status);
      return r.json();
    }).then(function (s) {
      var changed = s.version !== version;  // (unchanged: a long poll that waited its time out)
      version = s.version;
      if (changed) apply(s);
      setTimeout(poll, 1000);
    }, function () { setTimeout(poll, 5000); });
  }
  poll();
})();
)JS";

/// A running run's page's script: asks the run's status.json (a long poll), writes its step,
/// loss and progress (the live line's and the progress row's: step of steps, time into the
/// attempt) in place, and when the run no longer runs fetches the page once,
/// swaps the run's part in (its final record) and asks no more.
constexpr const char* kRunScript = R"JS(
(function () {
  var url = document.body.getAttribute("data-run-status"), version = 0, updates = 0, step = null;
  function set(id, text) {
    var e = document.getElementById(id);
    if (e && e.textContent !== text) e.textContent = text;
  }
  function ended() {
    set("run-state", "ended");
    fetch(location.pathname, {cache: "no-store"}).then(function (r) { return r.text(); }).then(function (text) {
      var doc = new DOMParser().parseFromString(text, "text/html");
      var fresh = doc.getElementById("run"), old = document.getElementById("run");
      if (fresh && old) old.replaceWith(document.importNode(fresh, true));
    });
  }
  function apply(s) {
    set("run-updates", String(++updates));
    // The progress row on every answer: its elapsed time moves while the step does not.
    var progress = document.querySelector('tr[data-key="progress"] td:last-child');
    if (progress && s.progress && progress.textContent !== s.progress) progress.textContent = s.progress;
    if (s.progress) set("run-progress", s.progress);
    if (s.step === step) return;
    step = s.step;
    set("run-step", String(s.step));
    set("run-loss", s.loss === null ? "-" : String(s.loss));
  }
  function poll() {
    fetch(url + "?after=" + version, {cache: "no-store"}).then(function (r) {
      if (!r.ok) throw new Error("status " + r.status);
      return r.json();
    }).then(function (s) {
      version = s.version;
      if (s.ready && !s.running) return ended();
      if (s.running) apply(s);
      setTimeout(poll, 1000);
    }, function () { setTimeout(poll, 5000); });
  }
  poll();
})();
)JS";

ServeResponse page(int status, const std::string& body) { return {status, "text/html; charset=utf-8", body}; }

ServeResponse error_page(int status, const std::string& message) {
  return page(status, report_page_start(std::to_string(status)) + "<p class=\"failure\">" + html_escape(message) +
                          "</p>\n<p><a href=\"/\">all sweeps</a></p>\n</body>\n</html>\n");
}

/// A name a URL carries as it is.
bool url_safe(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

std::string param(const std::multimap<std::string, std::string>& params, const std::string& key) {
  const auto it = params.find(key);
  return it == params.end() ? "" : it->second;
}

/// The served pages' navigation: to the index, the sweep, a run.
std::string nav(const ServedSweep* s, const std::string& run_id = "") {
  std::string h = "<nav class=\"serve\"><a href=\"/\">all sweeps</a>";
  if (s) h += " &rsaquo; <a href=\"/s/" + s->name() + "/\">" + html_escape(s->name()) + "</a>";
  if (!run_id.empty()) h += " &rsaquo; run " + html_escape(run_id);
  return h + "</nav>\n";
}

/// `html` (a page of the report's: one <body> and one </body>, every record string in it
/// escaped) with `head` after its <body> tag, and `body_attrs` on it.
std::string around(const std::string& html, const std::string& body_attrs, const std::string& head,
                   const std::string& tail) {
  const size_t open = html.find("<body>\n"), close = html.rfind("</body>");
  if (open == std::string::npos || close == std::string::npos || close < open) return html;
  return html.substr(0, open) + "<body" + body_attrs + ">\n" + head + html.substr(open + 7, close - open - 7) + tail +
         html.substr(close);
}

/// `v`'s progress line (show's, read from the partial record a moment ago) as the served
/// sweep's last look says it, with the elapsed time; put after its status line when the
/// record could not be read for one.
void set_progress(RecordView* v, const std::string& words) {
  for (auto& [key, value] : v->lines)
    if (key == "progress") return void(value = words);
  for (size_t i = 0; i < v->lines.size(); ++i)
    if (v->lines[i].first == "status")
      return void(v->lines.insert(v->lines.begin() + static_cast<std::ptrdiff_t>(i) + 1, {"progress", words}));
}

}  // namespace

std::string servable_run_dir(const std::string& dir, const std::string& id, int* status, std::string* why) {
  *status = 404;
  why->clear();
  if (!url_safe(id)) return "";
  const std::string runs = dir + "/runs";
  std::string run = runs + "/" + id;
  struct stat st {};
  if (::lstat(run.c_str(), &st) != 0) return "";
  *status = 403;
  if (!S_ISDIR(st.st_mode)) {
    *why = run + " is not a directory of its own (a symbolic link, or a file): not served";
    return "";
  }
  std::error_code ec;
  if (fs::canonical(run, ec).parent_path() != fs::canonical(runs, ec) || ec) {
    *why = run + " leads outside " + runs + ": not served";
    return "";
  }
  try {
    check_run_entries(run);  // a record or log that is a link would be read from elsewhere
  } catch (const RunRefused& e) {
    *why = std::string("not served: ") + e.what();
    return "";
  }
  *status = 200;
  return run;
}

ServeSite::ServeSite(const std::vector<std::string>& dirs, double test_build_pause_s) {
  std::set<std::string> names;
  for (const std::string& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d, ec))
      throw ConfigError(printable(d) + ": " + (fs::exists(d, ec) ? "not a directory" : "no such directory") +
                        "; expected a sweep directory (one `sweep run` wrote)");
    if (!fs::is_directory(fs::path(d) / "runs", ec) && !fs::exists(fs::path(d) / "points.tsv", ec))
      throw ConfigError(printable(d) + ": not a sweep directory (no runs/ or points.tsv in it)");
    const fs::path real = fs::canonical(d, ec);
    std::string name = real.filename().string();
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    if (!url_safe(name)) name = "sweep";
    const std::string base = name;
    for (int n = 2; names.count(name); ++n) name = base + "-" + std::to_string(n);
    names.insert(name);
    sweeps_.push_back(std::make_unique<ServedSweep>(real.string(), name, "/s/" + name + "/run/", test_build_pause_s));
  }
}

ServeResponse ServeSite::get(const std::string& path, const std::multimap<std::string, std::string>& params,
                             const std::string& nonce) {
  // Split into segments; a ".." anywhere (written out or percent-encoded, which the path
  // has been decoded from) is refused outright, whatever it would lead to.
  std::vector<std::string> parts;
  for (size_t at = 1; at <= path.size();) {
    size_t end = path.find('/', at);
    if (end == std::string::npos) end = path.size();
    parts.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  for (const auto& p : parts)
    if (p == ".." || p == ".") return error_page(403, "a path with '.' or '..' in it is not served");
  if (path.empty() || path[0] != '/') return error_page(404, "no such page");
  if (path == "/") return index_page();
  if (path == "/compare") return compare_page(nullptr, params);
  if (parts.size() < 2 || parts[0] != "s") return error_page(404, "no such page");
  ServedSweep* s = nullptr;
  for (const auto& sw : sweeps_)
    if (sw->name() == parts[1]) s = sw.get();
  if (!s) return error_page(404, "no sweep is served as '" + parts[1] + "'");
  if (parts.size() == 2 || (parts.size() == 3 && parts[2].empty())) return sweep_page(*s, nonce);
  if (parts.size() == 3 && parts[2] == "status.json") return status(*s, params);
  if (parts.size() == 3 && parts[2] == "compare") return compare_page(s, params);
  if (parts.size() == 4 && parts[2] == "run") return run_page(*s, parts[3], nonce);
  if (parts.size() == 5 && parts[2] == "run" && parts[4] == "status.json") return run_status(*s, parts[3], params);
  return error_page(404, "no such page");
}

ServeResponse ServeSite::index_page() {
  std::string h = report_page_start("sweeps") + nav(nullptr);
  h += "<table id=\"sweeps\">\n<thead><tr><th>sweep</th><th>directory</th><th>runs</th><th>count</th><th>running "
       "now</th></tr></thead>\n<tbody>\n";
  for (const auto& s : sweeps_) {
    const SweepCounts c = s->counts();
    h += "<tr><td class=\"id\"><a href=\"/s/" + s->name() + "/\">" + html_escape(s->name()) + "</a></td><td>" +
         html_escape(s->dir()) + "</td><td class=\"counts\">" +
         html_escape(c.ready ? counts_words(c) : "reading the run directories") + "</td><td class=\"num\">" +
         (c.ready ? std::to_string(c.total()) : "-") + "</td><td class=\"num\">" + std::to_string(c.live.size()) +
         "</td></tr>\n";
  }
  h += "</tbody>\n</table>\n";
  // Two runs of any served sweeps, one of each or both of one.
  h += "<form class=\"compare\" method=\"get\" action=\"/compare\">compare run <input name=\"a\" size=\"30\" "
       "placeholder=\"SWEEP/ID\" required> with run <input name=\"b\" size=\"30\" placeholder=\"SWEEP/ID\" required> "
       "<button>compare</button></form>\n";
  return page(200, h + "</body>\n</html>\n");
}

ServeResponse ServeSite::sweep_page(ServedSweep& s, const std::string& nonce) {
  uint64_t generation = 0;
  const auto report = s.report(&generation);
  const SweepCounts c = s.counts();
  const std::string base = "/s/" + s.name() + "/";
  const std::string live =
      "<p class=\"live\" id=\"live\">live: <span id=\"live-counts\">" +
      html_escape(c.ready ? counts_words(c) : "reading the run directories") +
      "</span>; running now: <span id=\"live-running\">-</span>; <span id=\"live-updates\">0</span> updates, the last "
      "at <span id=\"live-time\">-</span></p>\n<form class=\"compare\" method=\"get\" action=\"" +
      base +
      "compare\">compare run <input name=\"a\" size=\"18\" required> with run <input name=\"b\" size=\"18\" "
      "placeholder=\"ID, or SWEEP/ID\" required> "
      "<button>compare</button></form>\n<div id=\"report\">\n";
  const std::string script = "</div>\n<script nonce=\"" + nonce + "\">" + kLiveScript + "</script>\n";
  const std::string attrs =
      " data-status=\"" + base + "status.json\" data-report=\"" + std::to_string(generation) + "\"";
  if (!report)  // the first build has not ended: the script swaps the report in when it has
    return page(200, around(report_page_start(s.name()) + "<p>the report of " + std::to_string(c.total()) +
                                " runs is being read</p>\n</body>\n</html>\n",
                            attrs, nav(&s) + live, script));
  return page(200, around(*report, attrs, nav(&s) + live, script));
}

ServeResponse ServeSite::status(ServedSweep& s, const std::multimap<std::string, std::string>& params) {
  const std::string after = param(params, "after");
  const uint64_t since = after.empty() ? 0 : std::strtoull(after.c_str(), nullptr, 10);
  // (?after=0, or none: at once; a version the page has: when the status changes.)
  return {200, "application/json", s.status(since, since == 0 ? 0 : kLongPollS).second};
}

ServeResponse ServeSite::run_page(ServedSweep& s, const std::string& id, const std::string& nonce) {
  int code = 0;
  std::string why;
  const std::string run = servable_run_dir(s.dir(), id, &code, &why);
  if (run.empty()) return error_page(code, why.empty() ? "no run '" + id + "' in this sweep" : why);
  try {
    // The sweep-level flags as the served sweep's last scan found them: no other record is read.
    RecordView v = view_record(
        run, [&s](const std::string&, const std::string& run_id) { return s.sweep_flags(run_id, kFirstScanWaitS); });
    const bool running = status_is(v.record.status, RunStatus::running);
    LiveRun l;
    uint64_t version = 0;
    const bool live = running && s.live_run(id, 0, 0, &l, &version);
    const std::string progress = live ? progress_words(l, std::time(nullptr)) : "not known yet";
    if (live) set_progress(&v, progress);
    const std::string html = render_run_html(v, log_tail(rank_log_path(run, 0)), "/s/" + s.name() + "/compare");
    if (!running) return page(200, around(html, "", nav(&s, id) + "<div id=\"run\">\n", "</div>\n"));
    // Still training (as its partial record says): its step, loss and progress kept up to
    // date in place.
    const std::string line =
        "<p class=\"live\" id=\"run-live\">live: <span id=\"run-state\">training</span>, step <span "
        "id=\"run-step\">" +
        std::to_string(live ? l.step : -1) + "</span> of " + std::to_string(live ? l.steps : -1) +
        ", loss <span id=\"run-loss\">-</span>; <span id=\"run-updates\">0</span> updates</p>\n" +
        // (Outside the run's part, which is swapped for the final page's when it ends: the
        // last progress stays in sight.)
        "<p class=\"live\">progress: <span id=\"run-progress\">" + html_escape(progress) +
        "</span></p>\n<div id=\"run\">\n";
    const std::string attrs = " data-run-status=\"/s/" + s.name() + "/run/" + id + "/status.json\"";
    return page(200, around(html, attrs, nav(&s, id) + line,
                            "</div>\n<script nonce=\"" + nonce + "\">" + kRunScript + "</script>\n"));
  } catch (const RecordError& e) {
    return error_page(404, e.what());
  }
}

ServeResponse ServeSite::run_status(ServedSweep& s, const std::string& id,
                                    const std::multimap<std::string, std::string>& params) {
  int code = 0;
  std::string why;
  if (servable_run_dir(s.dir(), id, &code, &why).empty())
    return {code, "application/json", "{\"error\":" + json_string(why.empty() ? "no such run" : why) + "}\n"};
  const std::string after = param(params, "after");
  const uint64_t since = after.empty() ? 0 : std::strtoull(after.c_str(), nullptr, 10);
  LiveRun l;
  uint64_t version = 0;
  const bool running = s.live_run(id, since, since == 0 ? 0 : kLongPollS, &l, &version);
  const bool ready = s.counts().ready;
  std::string body = "{\"version\":" + std::to_string(version) + ",\"ready\":" + (ready ? "true" : "false") +
                     ",\"running\":" + (running ? "true" : "false");
  // The elapsed time as of this answer (not part of the version: a long poll answers
  // when the run moves, and each answer carries the time then).
  const std::time_t now = std::time(nullptr);
  if (running)
    body += "," + live_fields_json(l) +
            ",\"elapsed_s\":" + std::to_string(l.started > 0 ? std::max<long long>(0, now - l.started) : -1) +
            ",\"progress\":" + json_string(progress_words(l, now));
  return {200, "application/json", body + "}\n"};
}

std::string ServeSite::run_of(const ServedSweep* here, const std::string& spec, int* status, std::string* why) {
  why->clear();
  const size_t slash = spec.find('/');
  if (slash == std::string::npos) {
    if (here) return servable_run_dir(here->dir(), spec, status, why);
    *status = 400;
    *why = "'" + printable(spec) + "' names no sweep: name each run as SWEEP/ID (a served sweep's name, a run id)";
    return "";
  }
  // SWEEP/ID and nothing else: the sweep by its served name, never a path to walk, so that
  // "..", "../other" or an absolute path leads nowhere.
  const std::string name = spec.substr(0, slash), id = spec.substr(slash + 1);
  *status = 403;
  if (id.find('/') != std::string::npos || name == "." || name == ".." || name.empty()) {
    *why = "'" + printable(spec) + "' is a path, not SWEEP/ID: not served";
    return "";
  }
  for (const auto& sw : sweeps_)
    if (sw->name() == name) return servable_run_dir(sw->dir(), id, status, why);
  *status = 404;
  *why = "no sweep is served as '" + printable(name) + "'";
  return "";
}

ServeResponse ServeSite::compare_page(ServedSweep* s, const std::multimap<std::string, std::string>& params) {
  const std::string a = param(params, "a"), b = param(params, "b");
  if (a.empty() || b.empty())
    return error_page(400, s ? "compare needs two runs: ?a=RUN&b=RUN (a run of another served sweep as SWEEP/RUN)"
                             : "compare needs two runs: ?a=SWEEP/RUN&b=SWEEP/RUN");
  std::string dirs[2], unfinished[2];
  for (int k = 0; k < 2; ++k) {
    int code = 0;
    std::string why;
    const std::string& spec = k ? b : a;
    dirs[k] = run_of(s, spec, &code, &why);
    if (dirs[k].empty())
      return error_page(code,
                        why.empty() ? "no run '" + spec + "' in " + (s ? "this sweep" : "the served sweeps") : why);
  }
  try {
    const Record ra = read_run_record_or_partial(dirs[0] + "/record.h5", &unfinished[0]),
                 rb = read_run_record_or_partial(dirs[1] + "/record.h5", &unfinished[1]);
    const RecordComparison c = compare_records(ra, rb);
    const std::string html = render_compare_html(ra, rb, c, a, b, unfinished[0], unfinished[1]);
    return page(200, around(html, "", nav(s), ""));
  } catch (const RecordError& e) {
    return error_page(404, e.what());
  }
}

}  // namespace sweep
