// Real web servers on loopback for the remote tests: nginx (Debian's nginx-light) started from
// the test with a generated configuration and free ports, answering as the Hugging Face hub does
// (a resolve URL redirects to a second host that serves the bytes), with an access log that says
// what was asked and sent; Python's http.server (which ignores Range); and a socket that never
// answers. Every server is stopped when its object is destroyed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ggufkit::test {

// A port free on `address` now (bound and released).
uint16_t free_port(const std::string& address);

// One line of the access log.
struct AccessLine {
  uint16_t port = 0;     // the server that answered
  std::string request;   // "GET /path HTTP/1.1"
  std::string range;     // the Range header, empty when none
  int status = 0;
  uint64_t bytes = 0;    // body bytes sent
  bool authorization = false;  // whether an Authorization header came
};

class Nginx {
 public:
  // Serves `files` at http://127.0.0.1:hub_port/files/NAME (directly) and as the hub's
  // /OWNER/REPO/resolve/REV/NAME, which answers 302 to http://127.0.0.2:cdn_port/blobs/NAME with
  // X-Repo-Commit, X-Linked-Etag and X-Linked-Size; /gated/REPO/resolve/REV/NAME answers 401
  // without "Authorization: Bearer t0ken" and redirects with it.
  explicit Nginx(const std::filesystem::path& files);
  ~Nginx();
  Nginx(const Nginx&) = delete;
  Nginx& operator=(const Nginx&) = delete;

  std::string hub() const;  // http://127.0.0.1:PORT
  uint16_t hub_port = 0, cdn_port = 0;
  // HTTPS on 127.0.0.1 with a self-signed certificate made at start (0 when openssl is missing):
  // /files/ as on hub_port.
  uint16_t tls_port = 0;
  // The log lines written since the last call.
  std::vector<AccessLine> take_log();
  std::string error;  // why it did not start; empty when it runs

 private:
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  uint64_t log_read_ = 0;
};

// python3 -m http.server in `files` on 127.0.0.1: a server that ignores Range.
class PythonServer {
 public:
  explicit PythonServer(const std::filesystem::path& files);
  // tests/remote/fault_server.py MODE FILE: "changing" (a new ETag for every request), "flaky"
  // (503 for the first request).
  PythonServer(const std::string& fault, const std::filesystem::path& file);
  ~PythonServer();
  uint16_t port = 0;
  std::string error;

 private:
  pid_t pid_ = -1;
};

// A socket that listens on 127.0.0.1 and never accepts nor reads: connections complete (the
// kernel's backlog) and then nothing answers.
class SilentServer {
 public:
  SilentServer();
  ~SilentServer();
  uint16_t port = 0;

 private:
  int fd_ = -1;
};

}  // namespace ggufkit::test
