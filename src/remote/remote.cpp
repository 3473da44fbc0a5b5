// Remote headers over HTTP(S) with libcurl: range requests sized by the parser
// (GgufFile::parse_prefix), one redirect hop, every range pinned to one version.

#include "ggufkit/remote.h"

#include "ggufkit/atomic_file.h"
#include "ggufkit/sink.h"
#include "ggufkit/writer.h"
#include "io/lazy_library.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#ifdef GGUFKIT_HAVE_CURL
#include <curl/curl.h>
#endif

namespace ggufkit {

namespace {

constexpr std::string_view kDefaultEndpoint = "https://huggingface.co";

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

[[maybe_unused]] std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string hub_endpoint() {
  const char* e = std::getenv("HF_ENDPOINT");
  std::string s = e != nullptr && *e != '\0' ? e : std::string(kDefaultEndpoint);
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// "host:port" as written in the URL (lowercase), without user info: what the token is bound to.
std::string authority_of(std::string_view url) {
  auto p = url.find("://");
  if (p == std::string_view::npos) return {};
  p += 3;
  const auto end = url.find_first_of("/?#", p);
  std::string_view a = url.substr(p, end == std::string_view::npos ? std::string_view::npos : end - p);
  if (const auto at = a.rfind('@'); at != std::string_view::npos) a.remove_prefix(at + 1);
  return lowercase(a);
}

[[maybe_unused]] std::string host_of(std::string_view url) {
  std::string a = authority_of(url);
  if (!a.empty() && a.front() == '[') return a.substr(0, a.find(']') + 1);
  return a.substr(0, a.find(':'));
}

std::vector<std::string_view> segments(std::string_view path) {
  std::vector<std::string_view> out;
  while (!path.empty()) {
    const auto slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

// OWNER/REPO of a hub resolve URL, for the 403 advice; empty for other URLs.
[[maybe_unused]] std::string hub_repo_of(std::string_view url) {
  const std::string hub = hub_endpoint() + "/";
  if (url.substr(0, hub.size()) != hub) return {};
  const auto parts = segments(url.substr(hub.size()));
  if (parts.size() < 5 || parts[2] != "resolve") return {};
  return fmt::format("{}/{}", parts[0], parts[1]);
}

[[maybe_unused]] std::string printable(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    out += std::isprint(u) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return out;
}

[[maybe_unused]] Error network_error(std::string message) {
  return make_error(ErrorCode::network_error, std::nullopt, {}, std::move(message));
}
[[maybe_unused]] Error http_error(std::string message) { return make_error(ErrorCode::http_error, std::nullopt, {}, std::move(message)); }

}  // namespace

bool is_remote_address(std::string_view address) {
  const std::string head = lowercase(address.substr(0, 8));
  return head.starts_with("http://") || head.starts_with("https://") || head.starts_with("hf://");
}

Expected<std::string> resolve_address(std::string_view address) {
  if (lowercase(address.substr(0, 5)) == "hf://") {
    const auto parts = segments(address.substr(5));
    if (parts.size() < 3 || parts[0].empty() || parts[1].empty() || parts.back().empty()) {
      return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                        fmt::format("'{}' is not hf://OWNER/REPO[@REV]/PATH", address));
    }
    std::string_view repo = parts[1], rev = "main";
    if (const auto at = repo.find('@'); at != std::string_view::npos) {
      rev = repo.substr(at + 1);
      repo = repo.substr(0, at);
    }
    std::string path;
    for (size_t i = 2; i < parts.size(); ++i) path += fmt::format("{}{}", i > 2 ? "/" : "", parts[i]);
    return fmt::format("{}/{}/{}/resolve/{}/{}", hub_endpoint(), parts[0], repo, rev, path);
  }
  // A hub page URL (blob/) names the same file as its resolve/ URL.
  for (const std::string& hub : {hub_endpoint() + "/", std::string(kDefaultEndpoint) + "/"}) {
    if (address.substr(0, hub.size()) != hub) continue;
    auto parts = segments(address.substr(hub.size()));
    if (parts.size() >= 5 && parts[2] == "blob") {
      std::string out = hub;
      for (size_t i = 0; i < parts.size(); ++i) out += fmt::format("{}{}", i ? "/" : "", i == 2 ? "resolve" : parts[i]);
      return out;
    }
  }
  return std::string(address);
}

#ifdef GGUFKIT_HAVE_CURL

namespace {

struct Response {
  long status = 0;
  std::string etag, content_range, content_type, commit, linked_etag, linked_size;
  std::optional<uint64_t> content_length;
};

// One transfer's state, shared with libcurl's callbacks.
struct Transfer {
  Response response;
  std::vector<std::byte>* prefix = nullptr;
  uint64_t origin = 0;    // the file offset of prefix[0]
  uint64_t start = 0;     // the offset asked for
  uint64_t stop = 0;      // the prefix wanted (exclusive end); may grow through `more`
  uint64_t body_at = 0;   // body bytes seen
  uint64_t received = 0;
  std::string peek;       // the first bytes of a body that is not file data (messages)
  // A whole-body answer (200) reached `stop`: the new stop, or 0 when the header is complete.
  std::function<uint64_t()> more;
  bool stopped = false;   // the transfer was ended on purpose
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    t->response = Response{};
    const auto sp = line.find(' ');
    if (sp != std::string_view::npos) t->response.status = std::strtol(std::string(line.substr(sp + 1, 3)).c_str(), nullptr, 10);
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * n;
  const std::string name = lowercase(trimmed(line.substr(0, colon)));
  const std::string value = trimmed(line.substr(colon + 1));
  Response& r = t->response;
  if (name == "etag") r.etag = value;
  else if (name == "content-range") r.content_range = value;
  else if (name == "content-type") r.content_type = value;
  else if (name == "x-repo-commit") r.commit = value;
  else if (name == "x-linked-etag") r.linked_etag = value;
  else if (name == "x-linked-size") r.linked_size = value;
  else if (name == "content-length") r.content_length = std::strtoull(value.c_str(), nullptr, 10);
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  t->received += bytes;
  const long status = t->response.status;
  if (status != 200 && status != 206) {
    if (t->peek.size() < 256) t->peek.append(data, std::min(bytes, 256 - t->peek.size()));
    return bytes;
  }
  // The file offset of this chunk: a 206 starts where asked, a 200 at the beginning.
  uint64_t at = (status == 206 ? t->start : 0) + t->body_at;
  t->body_at += bytes;
  std::string_view chunk(data, bytes);
  if (t->peek.size() < 64 && at == 0) t->peek.append(data, std::min<size_t>(bytes, 64));
  for (;;) {
    const uint64_t have = t->origin + t->prefix->size();
    if (at + chunk.size() <= have) return bytes;  // bytes we already hold
    if (at < have) {
      chunk.remove_prefix(static_cast<size_t>(have - at));
      at = have;
    }
    if (at > have) {  // a hole: cannot happen with a correct server; refuse the rest
      t->stopped = true;
      return 0;
    }
    const uint64_t room = t->origin + t->stop > have ? t->origin + t->stop - have : 0;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(room, chunk.size()));
    const auto* p = reinterpret_cast<const std::byte*>(chunk.data());
    t->prefix->insert(t->prefix->end(), p, p + take);
    chunk.remove_prefix(take);
    at += take;
    if (chunk.empty() && t->prefix->size() < t->stop) return bytes;
    // Reached what was asked: a 206 ends here; a 200 asks the parser whether to go on.
    if (status == 200 && t->more) {
      const uint64_t next = t->more();
      if (next > t->stop) {
        t->stop = next;
        if (chunk.empty()) return bytes;
        continue;
      }
    }
    t->stopped = true;
    return 0;
  }
}

// libcurl, loaded by the first remote read (io/lazy_library.h): linked, its 39 libraries would be
// bound at the start of every verb, local ones included.
struct CurlApi {
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_reset) easy_reset = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_perform) easy_perform = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
};

// The bound functions, or nullptr with `why` saying what is missing.
const CurlApi* curl_api(std::string* why) {
  static io::LazyLibrary lib(GGUFKIT_LIBCURL_SONAME);
  static const CurlApi api = [] {
    CurlApi f;
    const bool ok = lib.bind(f.global_init, "curl_global_init") & lib.bind(f.easy_init, "curl_easy_init") &
                    lib.bind(f.easy_cleanup, "curl_easy_cleanup") & lib.bind(f.easy_reset, "curl_easy_reset") &
                    lib.bind(f.easy_setopt, "curl_easy_setopt") & lib.bind(f.easy_perform, "curl_easy_perform") &
                    lib.bind(f.easy_getinfo, "curl_easy_getinfo") & lib.bind(f.easy_strerror, "curl_easy_strerror") &
                    lib.bind(f.slist_append, "curl_slist_append") & lib.bind(f.slist_free_all, "curl_slist_free_all");
    if (!ok || f.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return CurlApi{};
    return f;
  }();
  if (api.easy_init == nullptr) {
    if (why != nullptr) *why = lib.error().empty() ? std::string("libcurl could not be initialised") : lib.error();
    return nullptr;
  }
  return &api;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_api(nullptr)->easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_api(nullptr)->slist_free_all(l); }
};

bool retryable(CURLcode rc) {
  return rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING || rc == CURLE_PARTIAL_FILE;
}

class HeaderReader {
 public:
  HeaderReader(std::string url, const RemoteOptions& options, RemoteStats& stats)
      : url_(std::move(url)), options_(options), stats_(stats) {
    token_ = options.token;
    token_authority_ = authority_of(url_);
    if (token_.empty() && options.token_from_environment) {
      const char* env = std::getenv("HF_TOKEN");
      // The environment's token is the hub's: only for the hub's host.
      if (env != nullptr && *env != '\0' && authority_of(hub_endpoint()) == token_authority_) token_ = env;
    }
  }

  Expected<void> start() {
    std::string why;
    curl_ = curl_api(&why);
    if (curl_ == nullptr) return network_error(why);
    handle_.reset(curl_->easy_init());
    if (!handle_) return network_error("libcurl could not be initialised");
    prefix_ = std::make_shared<std::vector<std::byte>>();
    return {};
  }

  // The bytes [offset, offset + length): one range request (and a redirect).
  Expected<std::shared_ptr<std::vector<std::byte>>> read_range(uint64_t offset, uint64_t length) {
    if (auto s = start(); !s) return std::move(s).error();
    origin_ = offset;
    prefix_->reserve(static_cast<size_t>(length));
    if (auto r = fetch(length); !r) return std::move(r).error();
    if (prefix_->size() != length) {
      return http_error(fmt::format("{} sent {} bytes where {} were asked for", host_of(current_url()), prefix_->size(),
                                    length));
    }
    return prefix_;
  }

  Expected<GgufFile> read() {
    if (auto s = start(); !s) return std::move(s).error();
    uint64_t target = std::max<uint64_t>(options_.first_range, 64);
    int ranges = 0;
    for (;;) {
      if (file_size_) target = std::min(target, *file_size_);
      if (target > options_.max_header_bytes) {
        return make_error(ErrorCode::truncated, std::nullopt, {},
                          fmt::format("the header needs more than the {} byte limit (--max-header)",
                                      options_.max_header_bytes));
      }
      ++ranges;
      auto r = fetch(target);
      if (!r) return std::move(r).error();
      auto parsed = parse();
      if (!parsed) return std::move(parsed).error();
      if (parsed->file) return std::move(*parsed->file);
      if (prefix_->size() < target && (!file_size_ || prefix_->size() < *file_size_) && !streamed_) {
        return http_error(fmt::format("{} sent {} bytes where {} were asked for", host_of(current_url()),
                                      prefix_->size(), target));
      }
      target = next_target(*parsed, ranges);
    }
  }

 private:
  const std::string& current_url() const { return final_url_.empty() ? url_ : final_url_; }

  // The next prefix to ask for: the parser's estimate with a margin that grows with the rounds,
  // within the 5% + 256 KiB the goal allows.
  static uint64_t next_target(const PrefixParse& p, int ranges) {
    const uint64_t margin = ranges <= 1 ? p.estimate / 50 + (64 << 10) : p.estimate / 25 + (192 << 10);
    return std::max(p.needed, p.estimate + margin);
  }

  Expected<PrefixParse> parse() {
    if (prefix_->size() >= 4 && std::memcmp(prefix_->data(), "GGUF", 4) != 0) return not_gguf();
    const uint64_t size = file_size_.value_or(prefix_->size());
    auto r = GgufFile::parse_prefix(*prefix_, std::max<uint64_t>(size, prefix_->size()), options_.open, prefix_);
    if (!r && r.error().code == ErrorCode::bad_magic) return not_gguf();
    return r;
  }

  Error not_gguf() const {
    const std::string_view start(reinterpret_cast<const char*>(prefix_->data()), std::min<size_t>(prefix_->size(), 16));
    const std::string what = lowercase(content_type_).find("html") != std::string::npos ? "an HTML page"
                             : content_type_.empty()                                     ? "a file"
                                                                                         : content_type_;
    return make_error(ErrorCode::bad_magic, 0, {},
                      fmt::format("not a GGUF file: {} sent {} ({}) starting with '{}'", host_of(current_url()), what,
                                  content_type_.empty() ? "no content type" : content_type_, printable(start)));
  }

  // Fetches the prefix up to `target` (from what is held), with one redirect hop and retries.
  Expected<void> fetch(uint64_t target) {
    for (int attempt = 0;; ++attempt) {
      Transfer t;
      auto r = perform(target, t);
      if (r) return r;
      const bool again = r.error().code == ErrorCode::http_error && server_error_ && attempt < options_.retries;
      const bool reset = r.error().code == ErrorCode::network_error && reset_ && attempt < options_.retries;
      if (!again && !reset) return r;
      std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
    }
  }

  Expected<void> perform(uint64_t target, Transfer& t) {
    server_error_ = reset_ = false;
    CURL* c = handle_.get();
    t.prefix = prefix_.get();
    t.origin = origin_;
    t.start = origin_ + prefix_->size();
    t.stop = target;
    t.more = [&]() -> uint64_t {
      if (t.response.content_length) set_size(*t.response.content_length);
      auto p = parse();
      if (!p || p->file) return 0;
      return next_target(*p, 1);
    };
    const std::string url = current_url();
    std::unique_ptr<curl_slist, SlistDeleter> headers;
    const auto add = [&](const std::string& h) { headers.reset(curl_->slist_append(headers.release(), h.c_str())); };
    // The token only for the host it belongs to: never to the one a redirect leads to.
    if (!token_.empty() && authority_of(url) == token_authority_) add("Authorization: Bearer " + token_);
    const bool pinned = !etag_.empty() && !etag_.starts_with("W/");
    if (pinned) add("If-Range: " + etag_);
    const std::string range = fmt::format("{}-{}", t.start, origin_ + target - 1);
    char errors[CURL_ERROR_SIZE] = {};
    curl_->easy_reset(c);
    curl_->easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_->easy_setopt(c, CURLOPT_RANGE, range.c_str());
    curl_->easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_->easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_->easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_->easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_->easy_setopt(c, CURLOPT_USERAGENT, "ggufkit");
    curl_->easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_->easy_setopt(c, CURLOPT_ERRORBUFFER, errors);
    const long timeout = std::max<long>(1, static_cast<long>(options_.timeout_seconds + 0.5));
    curl_->easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::max<long>(1, static_cast<long>(options_.timeout_seconds * 1000)));
    curl_->easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_->easy_setopt(c, CURLOPT_LOW_SPEED_TIME, timeout);
    curl_->easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_->easy_setopt(c, CURLOPT_HEADERDATA, &t);
    curl_->easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_->easy_setopt(c, CURLOPT_WRITEDATA, &t);
    const CURLcode rc = curl_->easy_perform(c);
    ++stats_.requests;
    stats_.bytes += t.received;
    const Response& resp = t.response;
    const std::string host = host_of(url);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && t.stopped)) {
      const std::string detail = errors[0] != '\0' ? std::string(errors) : curl_->easy_strerror(rc);
      reset_ = retryable(rc);
      if (rc == CURLE_OPERATION_TIMEDOUT) {
        return network_error(fmt::format("no answer from {} within {} s (--timeout)", host, timeout));
      }
      if (rc == CURLE_PEER_FAILED_VERIFICATION || rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_SSL_CERTPROBLEM ||
          rc == CURLE_SSL_CACERT_BADFILE || rc == CURLE_SSL_ISSUER_ERROR) {
        return network_error(fmt::format("TLS failure with {}: {}", host, detail));
      }
      if (rc == CURLE_COULDNT_RESOLVE_HOST) return network_error(fmt::format("cannot resolve host {}", host));
      if (rc == CURLE_COULDNT_CONNECT) return network_error(fmt::format("cannot connect to {}: {}", host, detail));
      return network_error(fmt::format("reading from {} failed: {}", host, detail));
    }
    if (!resp.commit.empty()) stats_.commit = resp.commit;
    if (resp.status >= 300 && resp.status < 400) {
      char* location = nullptr;
      curl_->easy_getinfo(c, CURLINFO_REDIRECT_URL, &location);
      if (location == nullptr) return http_error(fmt::format("HTTP {} from {} without a Location", resp.status, host));
      if (!final_url_.empty()) {
        return http_error(fmt::format("{} redirected again (to {}): at most one redirect is followed", host,
                                      host_of(location)));
      }
      if (!resp.linked_etag.empty()) linked_etag_ = resp.linked_etag;
      final_url_ = location;
      stats_.final_url = final_url_;
      ++stats_.redirects;
      return perform(target, t = Transfer{});
    }
    if (resp.status == 401) return http_error("authentication required (set HF_TOKEN or --token)");
    if (resp.status == 403) {
      const std::string repo = hub_repo_of(url_);
      return http_error(repo.empty() ? fmt::format("access denied by {} (HTTP 403)", host)
                                     : fmt::format("access denied (HTTP 403): accept the licence at {}/{}",
                                                   std::string(kDefaultEndpoint), repo));
    }
    if (resp.status == 404) return http_error(fmt::format("not found on {} (HTTP 404)", host));
    if (resp.status >= 500) {
      server_error_ = true;
      return http_error(fmt::format("server error from {} (HTTP {})", host, resp.status));
    }
    if (resp.status == 416 && t.start == 0) return http_error(fmt::format("the file on {} is empty", host));
    if (resp.status != 200 && resp.status != 206) {
      return http_error(fmt::format("HTTP {} from {}", resp.status, host));
    }
    content_type_ = resp.content_type;
    // The version: the first answer's ETag (the hub's X-Linked-Etag when the bytes' host has none).
    const std::string version = !resp.etag.empty() ? resp.etag : linked_etag_;
    if (etag_.empty()) {
      etag_ = version;
      stats_.etag = etag_;
    } else if (!version.empty() && version != etag_) {
      return changed(etag_, version);
    }
    if (resp.status == 200) {
      // The whole body: the server ignored Range, or (after If-Range) the file changed.
      if (pinned && t.start > 0) return changed(etag_, version.empty() ? "a new version" : version);
      if (origin_ > 0) {
        return http_error(fmt::format("{} ignores Range: a part of the file cannot be read without all before it",
                                      host));
      }
      streamed_ = true;
      if (resp.content_length) set_size(*resp.content_length);
      if (auto s = size_check(); !s) return s;
      return {};
    }
    // 206: the range must be the one asked for.
    uint64_t first = 0, last = 0, total = 0;
    if (std::sscanf(resp.content_range.c_str(), "bytes %lu-%lu/%lu", &first, &last, &total) != 3 || first != t.start ||
        last < first) {
      return http_error(fmt::format("{} answered the range {} with Content-Range '{}'", host, range, resp.content_range));
    }
    if (file_size_ && *file_size_ != total) return changed(fmt::format("{} bytes", *file_size_), fmt::format("{} bytes", total));
    set_size(total);
    return size_check();
  }

  void set_size(uint64_t size) {
    if (!file_size_) file_size_ = size;
  }
  Expected<void> size_check() const {
    if (file_size_ && prefix_->size() > *file_size_) return http_error("the server sent more bytes than the file has");
    return {};
  }
  Error changed(const std::string& before, const std::string& after) const {
    return make_error(ErrorCode::remote_changed, std::nullopt, {},
                      fmt::format("the file on {} changed while it was read ({}, then {})", host_of(current_url()),
                                  before, after));
  }

  std::string url_, final_url_;
  uint64_t origin_ = 0;  // read_range: where the bytes asked for start
  const RemoteOptions& options_;
  RemoteStats& stats_;
  std::string token_, token_authority_;
  const CurlApi* curl_ = nullptr;
  std::unique_ptr<CURL, CurlDeleter> handle_;
  std::shared_ptr<std::vector<std::byte>> prefix_;
  std::optional<uint64_t> file_size_;
  std::string etag_, linked_etag_, content_type_;
  bool streamed_ = false, server_error_ = false, reset_ = false;
};

// The cache file of a hub resolve URL whose revision is a commit (40 hex digits): a name made of
// the repository, the commit and the path; nullopt for every other URL (its content may change).
std::optional<std::filesystem::path> cache_file(const std::string& url, const RemoteOptions& options) {
  if (!options.use_cache) return std::nullopt;
  const std::string repo = hub_repo_of(url);
  if (repo.empty()) return std::nullopt;
  const auto parts = segments(std::string_view(url).substr(hub_endpoint().size() + 1));
  const std::string_view rev = parts[3];
  if (rev.size() != 40 || !std::all_of(rev.begin(), rev.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  std::filesystem::path dir = options.cache_dir;
  if (dir.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && *xdg != '\0') dir = std::filesystem::path(xdg) / "ggufkit/headers";
    else if (home != nullptr && *home != '\0') dir = std::filesystem::path(home) / ".cache/ggufkit/headers";
    else return std::nullopt;
  }
  std::string name = fmt::format("{}--{}--{}", authority_of(url), repo, rev);
  for (size_t i = 4; i < parts.size(); ++i) name += fmt::format("--{}", parts[i]);
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_') c = '_';
  }
  return dir / (name + ".header");
}

constexpr std::string_view kCacheMagic = "ggufkit header cache 1\n";

// A cached header: the magic, the file's size (8 bytes), the header. Anything else is no hit.
std::optional<GgufFile> read_cache(const std::filesystem::path& path, const OpenOptions& options) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return std::nullopt;
  auto bytes = std::make_shared<std::vector<std::byte>>();
  std::byte chunk[1 << 16];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, f)) > 0;) bytes->insert(bytes->end(), chunk, chunk + n);
  std::fclose(f);
  const size_t head = kCacheMagic.size() + 8;
  if (bytes->size() < head || std::memcmp(bytes->data(), kCacheMagic.data(), kCacheMagic.size()) != 0) return std::nullopt;
  uint64_t size = 0;
  std::memcpy(&size, bytes->data() + kCacheMagic.size(), 8);
  const std::span<const std::byte> header = std::span<const std::byte>(*bytes).subspan(head);
  if (header.size() > size) return std::nullopt;
  auto r = GgufFile::parse_prefix(header, size, options, bytes);
  if (!r || !r->file) return std::nullopt;
  return std::move(*r->file);
}

void write_cache(const std::filesystem::path& path, const GgufFile& file) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  auto out = AtomicFile::create(path);
  if (!out) return;  // a cache that cannot be written is no cache
  const uint64_t size = file.file_size();
  std::byte size_bytes[8];
  std::memcpy(size_bytes, &size, 8);
  if ((*out)->write(std::as_bytes(std::span(kCacheMagic))) && (*out)->write(size_bytes) && (*out)->write(file.bytes())) {
    (void)(*out)->commit(false);
  }
}

}  // namespace

Expected<GgufFile> open_remote(std::string_view address, const RemoteOptions& options, RemoteStats* stats) {
  auto url = resolve_address(address);
  if (!url) return std::move(url).error();
  RemoteStats local;
  RemoteStats& s = stats != nullptr ? *stats : local;
  s = RemoteStats{};
  s.url = *url;
  const auto cached = cache_file(*url, options);
  if (cached) {
    if (auto f = read_cache(*cached, options.open)) {
      s.from_cache = true;
      return std::move(*f);
    }
  }
  // A file replaced while it was read is read again once from the start, then refused.
  for (int attempt = 0;; ++attempt) {
    HeaderReader reader(*url, options, s);
    auto file = reader.read();
    if (file && cached) write_cache(*cached, *file);
    if (file || file.error().code != ErrorCode::remote_changed || attempt > 0) return file;
  }
}

Expected<GgufFile> fetch_remote_tensor(std::string_view address, const GgufFile& header, const TensorInfo& tensor,
                                       const RemoteOptions& options, RemoteStats* stats) {
  auto url = resolve_address(address);
  if (!url) return std::move(url).error();
  RemoteStats local;
  RemoteStats& s = stats != nullptr ? *stats : local;
  s.url = *url;
  HeaderReader reader(*url, options, s);
  if (tensor.size == 0) return make_error(ErrorCode::invalid_argument, std::nullopt, std::string(tensor.name), "the tensor has no bytes");
  auto bytes = reader.read_range(header.data_offset() + tensor.offset, tensor.size);
  if (!bytes) return std::move(bytes).error();
  // A file of this tensor alone, in the file's byte order.
  GgufBuilder one;
  if (auto r = one.add_tensor(tensor.name, tensor.type, tensor.shape(), std::span<const std::byte>(**bytes)); !r) {
    return std::move(r).error();
  }
  WriteOptions write;
  write.byte_order = header.byte_order();
  MemorySink sink;
  if (auto r = one.write(sink, write); !r) return std::move(r).error();
  auto owned = std::make_shared<std::vector<std::byte>>(std::move(sink.data));
  return GgufFile::parse(*owned, {}, owned);
}

#else

Expected<GgufFile> fetch_remote_tensor(std::string_view, const GgufFile&, const TensorInfo&, const RemoteOptions&,
                                       RemoteStats*) {
  return make_error(ErrorCode::network_error, std::nullopt, {},
                    "this ggufkit was built without HTTP support (GGUFKIT_HTTP=OFF)");
}

Expected<GgufFile> open_remote(std::string_view, const RemoteOptions&, RemoteStats*) {
  return make_error(ErrorCode::network_error, std::nullopt, {},
                    "this ggufkit was built without HTTP support (GGUFKIT_HTTP=OFF)");
}

#endif

}  // namespace ggufkit
