// Remote addresses in the verbs that read headers (info, dump, get, check): http://, https://,
// hf://. The header is fetched (ggufkit/remote.h) and read as a header view; the options are
// shared by those verbs.
#include <unistd.h>

#include <fmt/format.h>

#include "ggufkit/remote.h"
#include "output.h"

namespace gguf_cli {

namespace {

ggufkit::RemoteOptions& remote_options() {
  static ggufkit::RemoteOptions options;
  return options;
}

}  // namespace

void add_remote_options(CLI::App& verb) {
  ggufkit::RemoteOptions& o = remote_options();
  verb.add_option("--token", o.token,
                  "For http(s):// and hf:// addresses: the bearer token (default $HF_TOKEN, sent to the hub's host "
                  "only; never to a host a redirect leads to)");
  verb.add_option("--timeout", o.timeout_seconds, "For remote addresses: seconds to connect and without a byte (default 30)")
      ->check(CLI::PositiveNumber);
  verb.add_flag("--no-cache", [&o](int64_t) { o.use_cache = false; },
                "For hf:// and hub addresses that pin a commit: neither read nor write the header cache");
  verb.add_option("--max-header", o.max_header_bytes,
                  "For remote addresses: the largest header read, in bytes (default 268435456, 256 MiB)");
}

std::optional<ggufkit::GgufFile> open_remote_or_report(const std::string& address, const ggufkit::OpenOptions& options) {
  ggufkit::RemoteOptions o = remote_options();
  o.open = options;
  o.open.allow_metadata_only = true;
  const bool terminal = ::isatty(STDERR_FILENO) == 1 && progress_enabled();
  if (terminal) fmt::print(stderr, "reading the header of {} ...", terminal_safe(address));
  auto f = ggufkit::open_remote(address, o);
  if (terminal) fmt::print(stderr, "\r\033[K");
  if (!f) {
    report_error(address, f.error());
    return std::nullopt;
  }
  return std::move(f).value();
}

std::optional<ggufkit::GgufFile> fetch_remote_tensor_or_report(const std::string& address, const ggufkit::GgufFile& header,
                                                               const ggufkit::TensorInfo& tensor) {
  auto f = ggufkit::fetch_remote_tensor(address, header, tensor, remote_options());
  if (!f) {
    report_error(address, f.error());
    return std::nullopt;
  }
  return std::move(f).value();
}

ggufkit::Expected<ggufkit::SplitModel> open_model(const std::string& path, const ggufkit::OpenOptions& options) {
  if (!ggufkit::is_remote_address(path)) return ggufkit::SplitModel::open(path, options);
  ggufkit::RemoteOptions o = remote_options();
  o.open = options;
  o.open.allow_metadata_only = true;
  auto f = ggufkit::open_remote(path, o);
  if (!f) return std::move(f).error();
  return ggufkit::SplitModel::of_file(std::move(f).value(), path);
}

}  // namespace gguf_cli
