// `sweep serve` over HTTP: cpp-httplib (Debian's libcpp-httplib) listens, and each GET is
// answered by ServeSite (serve_site.h). Read-only: any other method is refused (405).
// Bound to 127.0.0.1 by default, where the Host header must name the loopback (a page of
// another site cannot reach it by DNS rebinding); bound to any other address, every
// request must carry the token printed at start (?token=T once, which sets a cookie, or
// "Authorization: Bearer T"). Every page is sent with a Content-Security-Policy that
// admits nothing from the network and only the page's own inline script.
#pragma once

#include <string>
#include <vector>

namespace sweep {

/// What `sweep serve` is asked to do.
struct ServeOptions {
  std::vector<std::string> dirs;   ///< the sweep directories served
  std::string bind = "127.0.0.1";  ///< the address to listen on
  int port = 8080;                 ///< 0: a free port the system picks (printed)
  /// Tests only (SWEEP_TEST_SERVE_BUILD_PAUSE_MS): seconds a report build pauses after each
  /// run it loads (ServedSweep), so that a test can stop the server during a build.
  double test_build_pause_s = 0;
};

/// Whether `address` is a loopback address (127.0.0.0/8, ::1, localhost): no token needed.
bool loopback_address(const std::string& address);

/// 32 hexadecimal digits from the system's random source.
std::string random_token();

/// Serves until SIGINT, SIGTERM or SIGHUP, and ends within about a second of one (a scan or
/// a report build in progress stops at its next run); returns 0. Throws ConfigError (exit 2, nothing
/// served) for a directory that is not a sweep's, or an address and port it cannot
/// listen on (in use, not this machine's). Prints the address (and the token) on stdout.
int serve(const ServeOptions& o);

}  // namespace sweep
