// `sweep serve` over HTTP (serve_http.h).
#include "serve_http.h"

#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>  // strerror
#include <random>
#include <thread>

#include "config_error.h"  // ConfigError
#include "serve_site.h"    // ServeSite
#include "stop_signals.h"  // StopSignals: Ctrl-C stops the server
#include "text.h"          // printable

namespace sweep {
namespace {

/// Long polls hold a thread each while they wait: enough for a few readers' tabs.
constexpr size_t kThreads = 32;

/// The name part of a Host header ("127.0.0.1:8080" -> "127.0.0.1", "[::1]:80" -> "::1").
std::string host_name(const std::string& host) {
  if (!host.empty() && host[0] == '[') return host.substr(1, host.find(']') - 1);
  return host.substr(0, host.find(':'));
}

/// Equal strings, compared in time that does not depend on where they differ.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

/// The token a request carries: ?token=, the cookie, or a bearer header.
std::string given_token(const httplib::Request& req, bool* from_query) {
  *from_query = req.has_param("token");
  if (*from_query) return req.get_param_value("token");
  const std::string auth = req.get_header_value("Authorization");
  if (auth.rfind("Bearer ", 0) == 0) return auth.substr(7);
  const std::string cookies = req.get_header_value("Cookie");
  for (size_t at = 0; at < cookies.size();) {
    size_t end = cookies.find(';', at);
    if (end == std::string::npos) end = cookies.size();
    std::string c = cookies.substr(at, end - at);
    c.erase(0, c.find_first_not_of(' '));
    if (c.rfind("sweep_token=", 0) == 0) return c.substr(12);
    at = end + 1;
  }
  return "";
}

void refuse(httplib::Response& res, int status, const std::string& text) {
  res.status = status;
  res.set_content(text + "\n", "text/plain; charset=utf-8");
}

}  // namespace

bool loopback_address(const std::string& address) {
  return address == "localhost" || address == "::1" || address.rfind("127.", 0) == 0;
}

std::string random_token() {
  std::random_device rd;  // the kernel's random source on Linux
  std::string t;
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    const unsigned v = rd() & 0xff;
    t += hex[v >> 4], t += hex[v & 15];
  }
  return t;
}

int serve(const ServeOptions& o) {
  if (o.port < 0 || o.port > 65535)
    throw ConfigError("--port " + std::to_string(o.port) + ": expected a TCP port from 0 (any free one) to 65535");
  ServeSite site(o.dirs, o.test_build_pause_s);  // ConfigError for a directory that is not a sweep's
  const bool loopback = loopback_address(o.bind);
  const std::string token = loopback ? "" : random_token();

  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  server.set_payload_max_length(size_t{64} * 1024);  // a GET has no body worth reading
  server.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    if (req.method != "GET" && req.method != "HEAD") {
      res.set_header("Allow", "GET, HEAD");
      refuse(res, 405, "sweep serve is read-only: GET only");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (loopback) {
      const std::string host = host_name(req.get_header_value("Host"));
      if (!loopback_address(host)) {
        refuse(res, 403, "Host '" + printable(host) + "' is not this machine's loopback address");
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    }
    bool from_query = false;
    if (!same_secret(given_token(req, &from_query), token)) {
      refuse(res, 401, "sweep serve: this server needs the token it printed at start (?token=T)");
      return httplib::Server::HandlerResponse::Handled;
    }
    // Links and the page's own requests carry no token: the cookie does.
    if (from_query) res.set_header("Set-Cookie", "sweep_token=" + token + "; Path=/; HttpOnly; SameSite=Strict");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server.Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    std::multimap<std::string, std::string> params(req.params.begin(), req.params.end());
    const std::string nonce = random_token();
    ServeResponse r = site.get(req.path, params, nonce);
    res.status = r.status;
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; script-src "
                   "'nonce-" +
                       nonce + "'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    res.set_content(r.body, r.type.c_str());
  });

  errno = 0;
  const int port = o.port == 0 ? server.bind_to_any_port(o.bind) : (server.bind_to_port(o.bind, o.port) ? o.port : -1);
  if (port < 0) {
    const int err = errno;
    throw ConfigError("--bind " + printable(o.bind) + " --port " + std::to_string(o.port) + ": cannot listen there" +
                      (err == EADDRINUSE ? ": the port is in use"
                       : err             ? std::string(": ") + std::strerror(err)
                                         : std::string(": not an address of this machine")) +
                      "; nothing is served");
  }
  StopSignals signals;
  std::thread listener([&] { server.listen_after_bind(); });
  const std::string host = o.bind.find(':') != std::string::npos ? "[" + o.bind + "]" : o.bind;
  std::printf("sweep serve: %zu sweep%s at http://%s:%d/%s (Ctrl-C stops)\n", site.sweeps().size(),
              site.sweeps().size() == 1 ? "" : "s", host.c_str(), port,
              token.empty() ? "" : ("?token=" + token).c_str());
  if (!token.empty())
    std::printf(
        "sweep serve: token %s: every request needs it (?token= once sets a cookie; or Authorization: Bearer)\n",
        token.c_str());
  std::fflush(stdout);
  while (!StopSignals::received()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (const auto& s : site.sweeps()) s->stop();  // long polls answer at once
  server.stop();
  listener.join();
  return 0;
}

}  // namespace sweep
