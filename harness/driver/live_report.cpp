#include "live_report.h"

#include <algorithm>
#include <csignal>
#include <stdexcept>
#include <thread>
#include <utility>

namespace sweep {

LiveReport::LiveReport(std::vector<std::string> argv, std::string log_path, double every_s, double backoff)
    : argv_(std::move(argv)), log_(std::move(log_path)), every_s_(every_s), backoff_(backoff) {
  // The first rewrite after one interval: a sweep's first seconds have nothing to show.
  next_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every_s_));
}

LiveReport::~LiveReport() { stop(0); }

void LiveReport::ended(const ExitStatus& st, const std::function<void(const std::string&)>& warn) {
  child_ = -1;
  const double took = std::chrono::duration<double>(Clock::now() - started_).count();
  const double wait = std::max(every_s_, backoff_ * took);
  next_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait));
  if (st.ok()) {
    ++done_;
    return;
  }
  if (warned_) return;
  warned_ = true;
  warn("sweep: warning: live report not rewritten: the rewrite ended with " + st.describe() + " (see " + log_ +
       "; the sweep goes on; further failures are not reported; the report is written at the end)");
}

void LiveReport::tick(const std::function<void(const std::string&)>& warn) {
  if (child_ >= 0)
    for (const auto& [id, st] : runner_.wait_some(0))
      if (id == child_) ended(st, warn);
  if (child_ >= 0 || Clock::now() < next_) return;
  started_ = Clock::now();
  try {
    child_ = runner_.start(argv_, log_);
  } catch (const std::exception& e) {
    child_ = -1;
    next_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every_s_));
    if (!warned_) {
      warned_ = true;
      warn(std::string("sweep: warning: live report not rewritten: ") + e.what() +
           " (the sweep goes on; further failures are not reported; the report is written at the end)");
    }
  }
}

void LiveReport::stop(double patience_s) {
  if (child_ < 0) return;
  const auto until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(patience_s));
  auto quiet = [](const std::string&) {};
  while (child_ >= 0) {
    for (const auto& [id, st] : runner_.wait_some(0.05))
      if (id == child_) ended(st, quiet);
    if (child_ >= 0 && Clock::now() >= until) {
      runner_.signal_group(child_, SIGKILL);
      for (int i = 0; i < 200 && child_ >= 0; ++i)
        for (const auto& [id, st] : runner_.wait_some(0.05))
          if (id == child_) child_ = -1;
      child_ = -1;
    }
  }
}

}  // namespace sweep
