#include "stop_signals.h"

#include <signal.h>

namespace sweep {
namespace {

volatile sig_atomic_t g_first = 0;
volatile sig_atomic_t g_count = 0;
struct sigaction g_old_int, g_old_term;

void on_stop(int sig) {
  if (!g_first) g_first = sig;
  g_count = g_count + 1;
}

}  // namespace

StopSignals::StopSignals() {
  struct sigaction sa = {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a sleeping wait returns at once with EINTR
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int StopSignals::received() { return g_first; }
int StopSignals::count() { return g_count; }
void StopSignals::reset() { g_first = 0, g_count = 0; }

}  // namespace sweep
