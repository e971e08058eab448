/* A file system whose flock does nothing (some FUSE and network file systems), for the
   tests: LD_PRELOAD this and every flock() call succeeds without locking anything. */
#include <sys/file.h>

int flock(int fd, int operation) {
  (void)fd;
  (void)operation;
  return 0;
}
