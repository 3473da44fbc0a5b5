#include "web_servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "test_support.h"

namespace ggufkit::test {

namespace {

int bound_socket(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

bool accepts_connections(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// Starts `argv` with stdout and stderr on `log`; the child's pid.
pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& cwd, const std::filesystem::path& log) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (::chdir(cwd.c_str()) != 0) ::_exit(127);
  if (FILE* f = std::fopen(log.c_str(), "w")) {
    ::dup2(fileno(f), 1);
    ::dup2(fileno(f), 2);
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execvp(args[0], args.data());
  ::_exit(127);
}

void stop(pid_t& pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  pid = -1;
}

bool wait_until_listening(const std::string& address, uint16_t port, pid_t pid) {
  for (int i = 0; i < 400; ++i) {  // 2 s
    if (accepts_connections(address, port)) return true;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

uint16_t free_port(const std::string& address) {
  const int fd = bound_socket(address, 0);
  const uint16_t port = fd >= 0 ? port_of(fd) : 0;
  if (fd >= 0) ::close(fd);
  return port;
}

Nginx::Nginx(const std::filesystem::path& files) : dir_(temp_dir("nginx")) {
  hub_port = free_port("127.0.0.1");
  cdn_port = free_port("127.0.0.2");
  std::filesystem::create_directories(dir_ / "tmp");
  const std::string d = dir_.string(), f = files.string();
  std::string tls_server;
  const std::string openssl = fmt::format(
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout {0}/key.pem -out "
      "{0}/cert.pem -subj /CN=127.0.0.1 -days 1 >/dev/null 2>&1",
      d);
  if (std::system(openssl.c_str()) == 0) {
    tls_port = free_port("127.0.0.1");
    tls_server = fmt::format(
        "server {{ listen 127.0.0.1:{} ssl; ssl_certificate {}/cert.pem; ssl_certificate_key {}/key.pem; "
        "location /files/ {{ alias {}/; }} }}",
        tls_port, d, d, f);
  }
  // $1...: the regex captures. The hub's headers go on its redirect, as huggingface.co sends them.
  const std::string hub_headers =
      "add_header X-Repo-Commit 0123456789abcdef0123456789abcdef01234567 always;\n"
      "      add_header X-Linked-Etag '\"linked-etag\"' always;\n"
      "      add_header X-Linked-Size 4920734720 always;\n";
  const std::string conf = fmt::format(R"(daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
  client_body_temp_path {d}/tmp; proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp;
  uwsgi_temp_path {d}/tmp; scgi_temp_path {d}/tmp;
  map $http_authorization $auth_seen {{ "" no; default yes; }}
  log_format witness '$server_port "$request" range="$http_range" $status $body_bytes_sent auth=$auth_seen';
  access_log {d}/access.log witness;
  types {{ text/html html; }}
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{hub};
    location /files/ {{ alias {f}/; }}
    location ~ ^/gated/[^/]+/resolve/[^/]+/(.+)$ {{
      if ($http_authorization != "Bearer t0ken") {{ return 401; }}
      {hh}      return 302 http://127.0.0.2:{cdn}/blobs/$1;
    }}
    location ~ ^/[^/]+/[^/]+/resolve/[^/]+/(.+)$ {{
      {hh}      return 302 http://127.0.0.2:{cdn}/blobs/$1;
    }}
  }}
  server {{
    listen 127.0.0.2:{cdn};
    location /blobs/ {{ alias {f}/; }}
  }}
  {tls}
}}
)",
                                       fmt::arg("d", d), fmt::arg("f", f), fmt::arg("hub", hub_port),
                                       fmt::arg("cdn", cdn_port), fmt::arg("hh", hub_headers),
                                       fmt::arg("tls", tls_server));
  std::ofstream(dir_ / "nginx.conf") << conf;
  pid_ = spawn({"nginx", "-p", d, "-c", (dir_ / "nginx.conf").string(), "-e", (dir_ / "error.log").string()}, dir_,
               dir_ / "nginx.out");
  if (!wait_until_listening("127.0.0.1", hub_port, pid_) || !wait_until_listening("127.0.0.2", cdn_port, pid_)) {
    error = "nginx did not start: " + read_text(dir_ / "nginx.out") + read_text(dir_ / "error.log");
    stop(pid_);
  }
}

Nginx::~Nginx() {
  stop(pid_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string Nginx::hub() const { return fmt::format("http://127.0.0.1:{}", hub_port); }

std::vector<AccessLine> Nginx::take_log() {
  std::vector<AccessLine> out;
  // nginx writes a line when the request ends; the client has its answer a moment earlier.
  std::string text;
  for (int i = 0; i < 100; ++i) {
    text = read_text(dir_ / "access.log");
    if (text.size() > log_read_ && text.back() == '\n') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const std::string fresh = text.size() > log_read_ ? text.substr(log_read_) : std::string();
  log_read_ = text.size();
  for (const std::string& line : lines_of(fresh)) {
    AccessLine a;
    const auto q1 = line.find('"'), q2 = line.find('"', q1 + 1);
    a.port = static_cast<uint16_t>(std::stoul(line.substr(0, q1)));
    a.request = line.substr(q1 + 1, q2 - q1 - 1);
    const auto r1 = line.find("range=\"", q2) + 7, r2 = line.find('"', r1);
    a.range = line.substr(r1, r2 - r1);
    std::istringstream rest(line.substr(r2 + 1));
    std::string auth;
    rest >> a.status >> a.bytes >> auth;
    a.authorization = auth == "auth=yes";
    out.push_back(a);
  }
  return out;
}

PythonServer::PythonServer(const std::filesystem::path& files) {
  port = free_port("127.0.0.1");
  pid_ = spawn({"python3", "-m", "http.server", "--bind", "127.0.0.1", std::to_string(port)}, files,
               temp_dir("python-http") / "server.log");
  if (!wait_until_listening("127.0.0.1", port, pid_)) {
    error = "python3 -m http.server did not start";
    stop(pid_);
  }
}

PythonServer::PythonServer(const std::string& fault, const std::filesystem::path& file) {
  port = free_port("127.0.0.1");
  const std::string script = std::string(GGUFKIT_SOURCE_DIR) + "/tests/remote/fault_server.py";
  pid_ = spawn({"python3", script, fault, file.string(), std::to_string(port)}, file.parent_path(),
               temp_dir("python-fault") / "server.log");
  if (!wait_until_listening("127.0.0.1", port, pid_)) {
    error = "fault_server.py did not start";
    stop(pid_);
  }
}

PythonServer::~PythonServer() { stop(pid_); }

SilentServer::SilentServer() {
  fd_ = bound_socket("127.0.0.1", 0);
  if (fd_ >= 0 && ::listen(fd_, 16) == 0) port = port_of(fd_);
}

SilentServer::~SilentServer() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ggufkit::test
