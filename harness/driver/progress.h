// Progress of a sweep: on a terminal a live bar (done / running / failed, ETA) that run
// lines scroll above; elsewhere (CI logs, files) plain lines plus a summary line every
// `every_s` seconds, so a log never fills with carriage returns.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace sweep {

class Progress {
 public:
  /// `total` points, of which `done` are already complete and `failed` already failed
  /// for good (diverged records). `tty`: draw the live bar.
  Progress(size_t total, size_t done, size_t failed, bool tty, std::FILE* out, double every_s = 30);

  /// A line about one run (started, finished, retried); printed above the bar.
  void line(const std::string& text);
  /// Counts changed: a run started or ended this session (`ok`), or was retried.
  void started();
  void ended(bool ok);
  void retried();
  /// One more run to do (an asynchronous search feeds them one at a time).
  void add() { ++total_; }
  /// Redraws the bar (tty) or prints the periodic line when it is due.
  void tick();
  /// Clears the bar before the final summary.
  void finish();

  /// "[#####.....] 3/6 done, 2 running, 1 failed, ETA 1m05s".
  std::string status() const;

 private:
  double elapsed() const;
  void draw();

  size_t total_, done_, failed_ = 0, running_ = 0, ended_now_ = 0;
  bool tty_;
  std::FILE* out_;
  double every_s_, last_print_ = 0;
  bool bar_shown_ = false;
  std::string last_drawn_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

/// "45s", "3m05s", "2h10m".
std::string format_duration(double seconds);

}  // namespace sweep
