#include "stop_signals.h"

#include <signal.h>

namespace sweep {
namespace {

volatile sig_atomic_t g_first = 0;
volatile sig_atomic_t g_count = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_old[3];
bool g_installed = false;

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
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_old[i]);
  g_installed = true;
}

StopSignals::~StopSignals() { release(); }

void StopSignals::release() {
  if (!g_installed) return;
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_old[i], nullptr);
  g_installed = false;
}

int StopSignals::received() { return g_first; }
int StopSignals::count() { return g_count; }
void StopSignals::reset() { g_first = 0, g_count = 0; }

const char* StopSignals::name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace sweep
