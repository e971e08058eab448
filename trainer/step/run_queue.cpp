#include "run_queue.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>  // NAN
#include <cstdio>

namespace sweep {

RunQueueClock::RunQueueClock() : fd_(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}

RunQueueClock::~RunQueueClock() {
  if (fd_ >= 0) ::close(fd_);
}

double RunQueueClock::wait_s() const {
  if (fd_ < 0) return NAN;
  char buf[128];
  const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);  // the kernel writes it afresh at offset 0
  if (n <= 0) return NAN;
  buf[n] = '\0';
  unsigned long long on_cpu_ns = 0, waited_ns = 0;
  if (std::sscanf(buf, "%llu %llu", &on_cpu_ns, &waited_ns) != 2) return NAN;
  return double(waited_ns) * 1e-9;
}

}  // namespace sweep
