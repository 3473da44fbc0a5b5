// Remote GGUF files: the header of a file on an HTTP(S) server or on the Hugging Face hub, read
// with range requests and parsed as it arrives (GgufFile::parse_prefix), without the tensor data.
//
// Addresses: http:// and https:// URLs; https://HUB/OWNER/REPO/resolve|blob/REV/FILE (blob is
// rewritten to resolve); hf://OWNER/REPO[@REV]/PATH (huggingface_hub's spelling, REV main by
// default). HUB is $HF_ENDPOINT when set, else https://huggingface.co, as huggingface_hub does.
//
// The header is read in at most 3 requests (2 typically): a first range, then one sized from what
// the parser says it needs. One redirect hop is followed, once per file; its target is reused for
// later ranges. Every range is pinned to the first response's version (If-Range with its ETag,
// and the ETag compared on every 206): a file that changes mid-read is read again once, then
// refused. A server that ignores Range (200 and the whole body) is read only as far as the header
// needs, then the transfer is stopped. Built without libcurl (GGUFKIT_HTTP=OFF), every open fails
// with network_error saying so.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "ggufkit/error.h"
#include "ggufkit/reader.h"

namespace ggufkit {

struct RemoteOptions {
  // A bearer token. An explicit one (--token) goes to the address's host; one from the HF_TOKEN
  // environment variable only when that host is the hub's. Never to the host a redirect leads to.
  std::string token;
  bool token_from_environment = true;  // use $HF_TOKEN when `token` is empty
  uint64_t max_header_bytes = uint64_t{256} << 20;
  uint64_t first_range = uint64_t{1} << 20;
  // Connecting, and a transfer that stalls (no byte for this long), fail after these seconds.
  double timeout_seconds = 30;
  // Attempts after the first on 5xx answers and broken connections, with doubling waits from 250 ms.
  int retries = 3;
  OpenOptions open{.allow_metadata_only = true};
  // The header cache: the header of a hub file whose address pins a commit (REV of 40 hex digits)
  // is kept under `cache_dir` (default $XDG_CACHE_HOME/ggufkit/headers, else
  // ~/.cache/ggufkit/headers) and read from there the next time, without a request.
  bool use_cache = true;
  std::filesystem::path cache_dir;
};

// What reading took: tests and benchmarks assert on it.
struct RemoteStats {
  int requests = 0;             // HTTP requests made, redirects included
  int redirects = 0;
  uint64_t bytes = 0;           // body bytes received
  std::string url;              // the address as fetched (after hf:// and blob/ rewriting)
  std::string final_url;        // after the redirect
  std::string etag;             // the version read (ETag, else X-Linked-Etag)
  std::string commit;           // X-Repo-Commit, when the hub sent one
  bool from_cache = false;      // read from the header cache, no request made
};

// Whether `address` is one open_remote reads (http://, https://, hf://), not a local path.
bool is_remote_address(std::string_view address);

// The URL an address is fetched from: hf:// and hub blob/ URLs rewritten to resolve/ URLs on the
// hub ($HF_ENDPOINT). invalid_argument for an hf:// address without OWNER/REPO/PATH.
Expected<std::string> resolve_address(std::string_view address);

// The header of the remote file as a header view (GgufFile::header_only()). Errors, one line each:
// network_error (connection, TLS naming the host, timeout), http_error (401 "authentication
// required (set HF_TOKEN or --token)", 403, 404, other statuses), remote_changed (the file changed
// twice while read), bad_magic naming what arrived when the body is not GGUF, and the parser's.
Expected<GgufFile> open_remote(std::string_view address, const RemoteOptions& options = {},
                               RemoteStats* stats = nullptr);

// One tensor's data from the remote file whose header is `header` (open_remote's): one range
// request for its bytes alone, as a file in memory that holds that tensor only (tensors()[0], its
// tensor_data() the bytes, in the file's byte order). http_error when the server ignores Range.
Expected<GgufFile> fetch_remote_tensor(std::string_view address, const GgufFile& header, const TensorInfo& tensor,
                                       const RemoteOptions& options = {}, RemoteStats* stats = nullptr);

}  // namespace ggufkit
