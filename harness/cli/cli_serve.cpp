// `sweep serve`: a read-only web server over sweep directories (harness/serve).
#include <cstdlib>  // getenv: the tests' hook
#include <memory>

#include "cli.h"
#include "serve_http.h"  // serve, ServeOptions

namespace sweep {

CliAction setup_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve",
      "serve sweep directories read-only in the browser: each sweep's report updated in place while runs train, a "
      "page per run, two runs compared (127.0.0.1 only, unless --bind: then with a token)");
  cmd->add_option("dirs", o->dirs, "sweep directories")->required();
  cmd->add_option("--port", o->port, "TCP port (default 8080; 0 = a free one, printed)")->check(whole_number(0));
  cmd->add_option("--bind", o->bind,
                  "address to listen on (default 127.0.0.1; any other needs the token printed at start)");
  return [o, cmd]() {
    if (!cmd->parsed()) return -1;
    // Tests only: a report build slowed, to stop the server in the middle of one.
    if (const char* ms = std::getenv("SWEEP_TEST_SERVE_BUILD_PAUSE_MS")) o->test_build_pause_s = std::atof(ms) / 1000;
    return serve(*o);
  };
}

}  // namespace sweep
