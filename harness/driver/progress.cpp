#include "progress.h"

#include <cmath>

#include "text.h"  // printable_lines

namespace sweep {

std::string format_duration(double s) {
  char buf[32];
  long long t = (long long)std::llround(std::max(0.0, s));
  if (t < 60)
    std::snprintf(buf, sizeof buf, "%llds", t);
  else if (t < 3600)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, (t % 3600) / 60);
  return buf;
}

Progress::Progress(size_t total, size_t done, size_t failed, bool tty, std::FILE* out, double every_s)
    : total_(total), done_(done), failed_(failed), tty_(tty), out_(out), every_s_(every_s) {}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string Progress::status() const {
  const int width = 24;
  size_t finished = done_ + failed_;
  int fill = total_ ? int(width * finished / total_) : width;
  std::string bar = "[" + std::string(fill, '#') + std::string(width - fill, '.') + "] ";
  std::string s = bar + std::to_string(done_) + "/" + std::to_string(total_) + " done, " + std::to_string(running_) +
                  " running, " + std::to_string(failed_) + " failed";
  // Throughput so far this session: it already accounts for runs going in parallel.
  size_t left = total_ > finished ? total_ - finished : 0;
  if (ended_now_ > 0 && left > 0) s += ", ETA " + format_duration(elapsed() / double(ended_now_) * double(left));
  return s;
}

void Progress::draw() {
  std::fprintf(out_, "\r\033[K%s", status().c_str());
  std::fflush(out_);
  bar_shown_ = true;
}

void Progress::line(const std::string& text) {
  if (tty_ && bar_shown_) std::fprintf(out_, "\r\033[K");
  // A run's line can quote what its program printed: an ESC sequence or a bidi override
  // there must show as text, not act on the terminal.
  std::fprintf(out_, "%s\n", printable_lines(text).c_str());
  if (tty_) draw();
  std::fflush(out_);
}

void Progress::started() { ++running_; }

void Progress::ended(bool ok) {
  if (running_) --running_;
  ++ended_now_;
  ++(ok ? done_ : failed_);
}

void Progress::retried() {
  if (running_) --running_;
}

void Progress::tick() {
  if (tty_) {
    // Redraw when something changed, and once a second for the ETA; no flicker in between.
    std::string now = status();
    if (now == last_drawn_ && elapsed() - last_print_ < 1) return;
    last_drawn_ = now, last_print_ = elapsed();
    return draw();
  }
  double now = elapsed();
  if (now - last_print_ >= every_s_) {  // every_s 0: every tick
    last_print_ = now;
    std::fprintf(out_, "progress: %s\n", status().substr(status().find(']') + 2).c_str());
    std::fflush(out_);
  }
}

void Progress::finish() {
  if (tty_ && bar_shown_) std::fprintf(out_, "\r\033[K");
  std::fflush(out_);
}

}  // namespace sweep
