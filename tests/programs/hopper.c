/* A hostile helper that tries to outlive its run by never being the same process for
 * long: every generation fork()s and the parent _exit()s at once, so at any moment the
 * tree holds one living process and a trail of zombies. SIGTERM is ignored. Once the
 * process WATCH_PID is gone (the run's command ended) and GRACE_MS more have passed, it
 * rewrites each FILE (appends "FORGED") every 200 ms, still hopping.
 *
 * Usage: test-hopper WATCH_PID GRACE_MS FILE...
 * Used by tests/python/test_process_tree.py: the run's supervisor must end it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: test-hopper WATCH_PID GRACE_MS FILE...\n");
    return 2;
  }
  const pid_t watch = (pid_t)atol(argv[1]);
  const double grace_ms = atof(argv[2]);
  signal(SIGTERM, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  double gone_at = 0, last_write = 0;
  for (;;) {
    const pid_t child = fork();
    if (child > 0) _exit(0); /* the parent leaves at once: only the child lives on */
    if (child < 0) {         /* no fork for now: wait a little, try again */
      usleep(1000);
      continue;
    }
    const double t = now_ms();
    if (gone_at == 0 && kill(watch, 0) != 0) gone_at = t;
    if (gone_at > 0 && t - gone_at > grace_ms && t - last_write > 200) {
      last_write = t;
      for (int i = 3; i < argc; ++i) {
        FILE* f = fopen(argv[i], "ab");
        if (f) {
          fputs("FORGED", f);
          fclose(f);
        }
      }
    }
  }
}
