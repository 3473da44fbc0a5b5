// Remote headers (ggufkit/remote.h, `gguf info|dump|get URL`) against real servers on loopback:
// nginx answering as the Hugging Face hub does (web_servers.h), Python's http.server (which
// ignores Range) and a socket that never answers. The access log is the witness of the requests,
// the ranges and the bytes; the served files are headers extended to real sizes as sparse files.

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ggufkit/conventions.h"
#include "ggufkit/reader.h"
#include "ggufkit/remote.h"
#include "ggufkit/sink.h"
#include "ggufkit/writer.h"
#include "test_support.h"
#include "web_servers.h"

namespace ggufkit {
namespace {

namespace fs = std::filesystem;
using test::AccessLine;

const fs::path kGemma4 = "/work/llama.cpp-src/models/ggml-vocab-gemma-4.gguf";

// A Llama-3.1-8B-shaped file: the llama-bpe vocabulary (128k tokens, 280k merges), llama's
// hyperparameters and its 292 tensors (Q4_K and Q6_K), the header written and the file extended
// with a hole to its full 4.9 GB.
uint64_t write_llama_8b(const fs::path& out) {
  auto vocab = GgufFile::open(*test::shared_dir() / "corpus/vocab/ggml-vocab-llama-bpe.gguf");
  EXPECT_TRUE(vocab);
  GgufBuilder b = GgufBuilder::from_file(*vocab);
  const auto u32 = [&](std::string_view k, uint32_t v) { EXPECT_TRUE(b.set(k, MetadataValue::of(v))); };
  EXPECT_TRUE(b.set("general.name", MetadataValue::string("Meta Llama 3.1 8B Instruct")));
  u32("llama.block_count", 32);
  u32("llama.context_length", 131072);
  u32("llama.embedding_length", 4096);
  u32("llama.feed_forward_length", 14336);
  u32("llama.attention.head_count", 32);
  u32("llama.attention.head_count_kv", 8);
  u32("llama.rope.dimension_count", 128);
  u32("llama.vocab_size", 128256);
  u32("general.file_type", 15);
  EXPECT_TRUE(b.set("llama.rope.freq_base", MetadataValue::of(500000.0f)));
  EXPECT_TRUE(b.set("llama.attention.layer_norm_rms_epsilon", MetadataValue::of(1e-5f)));
  const auto never = [](uint64_t, std::span<std::byte>) -> Expected<void> {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "not written");
  };
  const auto add = [&](const std::string& name, TensorType type, std::vector<int64_t> shape) {
    EXPECT_TRUE(b.add_tensor(name, type, shape, never)) << name;
  };
  add("rope_freqs.weight", TensorType::F32, {64});
  add("token_embd.weight", TensorType::Q4_K, {4096, 128256});
  for (int i = 0; i < 32; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    add(p + "attn_norm.weight", TensorType::F32, {4096});
    add(p + "attn_q.weight", TensorType::Q4_K, {4096, 4096});
    add(p + "attn_k.weight", TensorType::Q4_K, {4096, 1024});
    add(p + "attn_v.weight", TensorType::Q6_K, {4096, 1024});
    add(p + "attn_output.weight", TensorType::Q4_K, {4096, 4096});
    add(p + "ffn_norm.weight", TensorType::F32, {4096});
    add(p + "ffn_gate.weight", TensorType::Q4_K, {4096, 14336});
    add(p + "ffn_up.weight", TensorType::Q4_K, {4096, 14336});
    add(p + "ffn_down.weight", TensorType::Q6_K, {14336, 4096});
  }
  add("output_norm.weight", TensorType::F32, {4096});
  add("output.weight", TensorType::Q6_K, {4096, 128256});
  MemorySink header;
  EXPECT_TRUE(b.write_header(header));
  test::write_bytes(out, header.data);
  fs::resize_file(out, b.file_bytes());
  return header.data.size();
}

// The servers and files every test shares: started once (about 0.3 s).
struct World {
  fs::path files;
  uint64_t llama_header = 0;  // the 8B file's header (tensor infos included), padded
  std::unique_ptr<test::Nginx> nginx;
  std::string skip;

  World() {
    if (!test::shared_dir()) {
      skip = test::no_shared_message();
      return;
    }
    if (std::system("command -v nginx >/dev/null 2>&1") != 0) {
      skip = "nginx is not installed (scripts/install-deps.sh test installs nginx-light)";
      return;
    }
    files = test::temp_dir("remote-files");
    llama_header = write_llama_8b(files / "llama-8b.gguf");
    fs::create_directories(files / "sub");
    if (fs::exists(kGemma4)) fs::create_symlink(kGemma4, files / "gemma-4.gguf");
    fs::copy_file(test::sample_model(), files / "tiny.gguf");
    std::ofstream(files / "page.html") << "<!DOCTYPE html><html><body>Sign in</body></html>\n";
    nginx = std::make_unique<test::Nginx>(files);
    if (!nginx->error.empty()) skip = nginx->error;
    ::setenv("HF_ENDPOINT", nginx->hub().c_str(), 1);
    ::unsetenv("HF_TOKEN");
    ::setenv("XDG_CACHE_HOME", test::temp_dir("remote-cache").c_str(), 1);
  }
};

World& world() {
  static World w;
  return w;
}

#define REQUIRE_WORLD()                                   \
  do {                                                    \
    if (!world().skip.empty()) GTEST_SKIP() << world().skip; \
    world().nginx->take_log();                            \
  } while (false)

// Every line of the text but the first (the file's name).
std::vector<std::string> without_name_line(const std::string& text) {
  auto lines = test::lines_of(text);
  if (!lines.empty()) lines.erase(lines.begin());
  return lines;
}

uint64_t bytes_sent(const std::vector<AccessLine>& log) {
  uint64_t n = 0;
  for (const AccessLine& a : log) n += a.bytes;
  return n;
}

// The goal of issue 31: at most 1.05 x the header + 256 KiB.
uint64_t byte_budget(uint64_t header) { return header + header / 20 + (256 << 10); }

// ---- addresses ----

TEST(RemoteAddress, HfAndBlobAddressesResolveOnTheEndpoint) {
  ::setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
  EXPECT_EQ(*resolve_address("hf://meta/llama/model.gguf"), "http://127.0.0.1:9/meta/llama/resolve/main/model.gguf");
  EXPECT_EQ(*resolve_address("hf://meta/llama@v1.0/q/model.gguf"),
            "http://127.0.0.1:9/meta/llama/resolve/v1.0/q/model.gguf");
  EXPECT_EQ(*resolve_address("http://127.0.0.1:9/meta/llama/blob/main/model.gguf"),
            "http://127.0.0.1:9/meta/llama/resolve/main/model.gguf");
  EXPECT_EQ(*resolve_address("https://huggingface.co/meta/llama/blob/abc/model.gguf"),
            "https://huggingface.co/meta/llama/resolve/abc/model.gguf");
  EXPECT_EQ(*resolve_address("https://example.com/blob/a/b/c.gguf"), "https://example.com/blob/a/b/c.gguf");
  ::unsetenv("HF_ENDPOINT");
  EXPECT_EQ(*resolve_address("hf://a/b/c.gguf"), "https://huggingface.co/a/b/resolve/main/c.gguf");
  const auto bad = resolve_address("hf://a/b");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "'hf://a/b' is not hf://OWNER/REPO[@REV]/PATH");
  EXPECT_TRUE(is_remote_address("HTTPS://x/y"));
  EXPECT_TRUE(is_remote_address("hf://a/b/c"));
  EXPECT_FALSE(is_remote_address("model.gguf"));
  EXPECT_FALSE(is_remote_address("./http:/x"));
  if (!world().skip.empty()) return;
  ::setenv("HF_ENDPOINT", world().nginx->hub().c_str(), 1);
}

// ---- the hub: redirect, few requests, few bytes ----

TEST(RemoteHub, InfoThroughTheRedirectEqualsTheLocalFile) {
  REQUIRE_WORLD();
  World& w = world();
  const auto local = test::run_gguf({"info", (w.files / "llama-8b.gguf").string()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const auto remote = test::run_gguf({"info", "hf://meta-llama/Llama-3.1-8B/llama-8b.gguf"});
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.err, "");
  EXPECT_EQ(without_name_line(remote.out), without_name_line(local.out));
  EXPECT_EQ(test::lines_of(remote.out).at(0).find("hf://meta-llama/Llama-3.1-8B/llama-8b.gguf") != std::string::npos, true)
      << remote.out;

  const auto log = w.nginx->take_log();
  ASSERT_GE(log.size(), 2u);
  // One request to the hub, answered with the redirect; the ranges go to the second host.
  EXPECT_EQ(log[0].port, w.nginx->hub_port);
  EXPECT_EQ(log[0].request, "GET /meta-llama/Llama-3.1-8B/resolve/main/llama-8b.gguf HTTP/1.1");
  EXPECT_EQ(log[0].status, 302);
  EXPECT_EQ(log[0].range, "bytes=0-1048575");
  EXPECT_LE(log.size(), 4u) << "at most 3 ranges after the redirect";
  uint64_t next = 0;
  for (size_t i = 1; i < log.size(); ++i) {
    EXPECT_EQ(log[i].port, w.nginx->cdn_port);
    EXPECT_EQ(log[i].request, "GET /blobs/llama-8b.gguf HTTP/1.1");
    EXPECT_EQ(log[i].status, 206);
    EXPECT_FALSE(log[i].authorization);
    // Contiguous ranges: no byte is asked for twice.
    EXPECT_EQ(log[i].range.substr(0, log[i].range.find('-') + 1), "bytes=" + std::to_string(next) + "-");
    next += log[i].bytes;
  }
  EXPECT_GE(next, w.llama_header - 31);
  EXPECT_LE(bytes_sent(log), byte_budget(w.llama_header)) << "header " << w.llama_header;
}

TEST(RemoteHub, LibraryStatsAndTheVersion) {
  REQUIRE_WORLD();
  RemoteStats stats;
  auto f = open_remote("hf://meta-llama/Llama-3.1-8B@0123abc/llama-8b.gguf", {}, &stats);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_TRUE(f->header_only());
  EXPECT_FALSE(f->has_tensor_data());
  EXPECT_EQ(f->file_size(), fs::file_size(world().files / "llama-8b.gguf"));
  EXPECT_EQ(f->tensors().size(), 292u);
  EXPECT_EQ(stats.url, world().nginx->hub() + "/meta-llama/Llama-3.1-8B/resolve/0123abc/llama-8b.gguf");
  EXPECT_EQ(stats.final_url, "http://127.0.0.2:" + std::to_string(world().nginx->cdn_port) + "/blobs/llama-8b.gguf");
  EXPECT_EQ(stats.redirects, 1);
  EXPECT_EQ(stats.commit, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_FALSE(stats.etag.empty());
  const auto log = world().nginx->take_log();
  EXPECT_EQ(stats.requests, static_cast<int>(log.size()));
  EXPECT_EQ(stats.bytes, bytes_sent(log));
  EXPECT_LE(stats.requests, 4);
}

TEST(RemoteHub, DumpOfTheGemma4VocabularyEqualsTheLocalFile) {
  REQUIRE_WORLD();
  if (!fs::exists(kGemma4)) GTEST_SKIP() << kGemma4 << " is absent";
  const std::string url = world().nginx->hub() + "/files/gemma-4.gguf";
  const auto local = test::run_gguf({"dump", kGemma4.string()});
  const auto remote = test::run_gguf({"dump", url});
  ASSERT_EQ(local.exit_code, 0);
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.err, "");
  EXPECT_EQ(without_name_line(remote.out), without_name_line(local.out));
  const auto log = world().nginx->take_log();
  EXPECT_LE(log.size(), 3u);
  EXPECT_LE(bytes_sent(log), byte_budget(fs::file_size(kGemma4)));
  for (const AccessLine& a : log) EXPECT_EQ(a.status, 206);
}

TEST(RemoteHub, GetFromABlobUrl) {
  REQUIRE_WORLD();
  const auto r = test::run_gguf({"get", world().nginx->hub() + "/meta/x/blob/main/llama-8b.gguf", "llama.context_length"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "131072\n");
  EXPECT_EQ(r.err, "");
  const auto log = world().nginx->take_log();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log[0].request, "GET /meta/x/resolve/main/llama-8b.gguf HTTP/1.1");
}

// check reads the header as check_file does, without the tensor data's bytes: on a vocabulary
// (no tensors) the report is the local one.
TEST(RemoteHub, CheckOfAVocabularyEqualsTheLocalReport) {
  REQUIRE_WORLD();
  if (!fs::exists(kGemma4)) GTEST_SKIP() << kGemma4 << " is absent";
  const std::string url = world().nginx->hub() + "/files/gemma-4.gguf";
  const auto local = test::run_gguf({"check", kGemma4.string()});
  const auto remote = test::run_gguf({"check", url});
  EXPECT_EQ(remote.exit_code, local.exit_code) << remote.err;
  EXPECT_EQ(remote.err, local.err);
  std::string expected = local.out;
  for (size_t at; (at = expected.find(kGemma4.string())) != std::string::npos;) expected.replace(at, kGemma4.string().size(), url);
  EXPECT_EQ(remote.out, expected);
  EXPECT_LE(world().nginx->take_log().size(), 3u);
}

// A verb that needs the tensor data says so for an address.
TEST(RemoteHub, VerbsThatNeedTheDataSaySo) {
  REQUIRE_WORLD();
  const std::string url = world().nginx->hub() + "/files/llama-8b.gguf";
  const auto r = test::run_gguf({"hash", url});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + url +
                       ": this command needs the file's tensor data, which is not read from remote addresses (info, "
                       "dump, get and check read their headers, extract single tensors); download the file first [invalid_argument]\n");
  EXPECT_TRUE(world().nginx->take_log().empty());
}

// A commit-pinned address is read once: the second read makes no request (the header cache, under
// $XDG_CACHE_HOME), and gives the same output; --no-cache reads it again.
TEST(RemoteHub, ACommitPinnedHeaderIsCached) {
  REQUIRE_WORLD();
  const std::string address = "hf://meta-llama/Llama-3.1-8B@0123456789abcdef0123456789abcdef01234567/llama-8b.gguf";
  const auto first = test::run_gguf({"info", address});
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_GE(world().nginx->take_log().size(), 2u);
  const auto second = test::run_gguf({"info", address});
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_EQ(second.err, "");
  EXPECT_TRUE(world().nginx->take_log().empty());
  const auto fresh = test::run_gguf({"info", address, "--no-cache"});
  EXPECT_EQ(fresh.out, first.out);
  EXPECT_GE(world().nginx->take_log().size(), 2u);
  RemoteStats stats;
  auto f = open_remote(address, {}, &stats);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_TRUE(stats.from_cache);
  EXPECT_EQ(stats.requests, 0);
  EXPECT_EQ(f->tensors().size(), 292u);
}

// extract URL TENSOR reads the header, then that tensor's bytes alone in one range: the .npy is
// the local file's, byte for byte.
TEST(RemoteHub, ExtractFetchesTheTensorsRangeAlone) {
  REQUIRE_WORLD();
  const fs::path out = test::temp_dir("remote-extract");
  auto local_file = GgufFile::open(world().files / "tiny.gguf");
  ASSERT_TRUE(local_file);
  const TensorInfo& t = local_file->tensors().back();
  const std::string name(t.name);
  const auto local = test::run_gguf({"extract", (world().files / "tiny.gguf").string(), name, "-o", (out / "local.npy").string()});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  world().nginx->take_log();
  const std::string url = "hf://ggufkit/tiny/tiny.gguf";
  const auto remote = test::run_gguf({"extract", url, name, "-o", (out / "remote.npy").string(), "--type", "raw"});
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, (out / "remote.npy").string() + "\n");
  const auto raw_local = test::run_gguf({"extract", (world().files / "tiny.gguf").string(), name, "-o", (out / "raw.npy").string(), "--type", "raw"});
  EXPECT_EQ(test::read_bytes(out / "remote.npy"), test::read_bytes(out / "raw.npy"));
  const auto log = world().nginx->take_log();
  ASSERT_GE(log.size(), 4u);
  // The last two: the tensor's redirect and its one range.
  const AccessLine& range = log.back();
  const uint64_t start = local_file->data_offset() + t.offset;
  EXPECT_EQ(range.range, "bytes=" + std::to_string(start) + "-" + std::to_string(start + t.size - 1));
  EXPECT_EQ(range.status, 206);
  EXPECT_EQ(range.bytes, t.size);
  EXPECT_EQ(log[log.size() - 2].status, 302);
  fs::remove_all(out);
}

// ---- the token ----

TEST(RemoteAuth, TheTokenGoesToTheHubOnlyNeverThroughTheRedirect) {
  REQUIRE_WORLD();
  const std::string address = "hf://gated/model/llama-8b.gguf";
  const auto r = test::run_gguf({"get", address, "general.name", "--token", "t0ken"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Meta Llama 3.1 8B Instruct");
  auto log = world().nginx->take_log();
  ASSERT_GE(log.size(), 2u);
  EXPECT_EQ(log[0].port, world().nginx->hub_port);
  EXPECT_EQ(log[0].status, 302);
  EXPECT_TRUE(log[0].authorization);
  for (size_t i = 1; i < log.size(); ++i) {
    EXPECT_EQ(log[i].port, world().nginx->cdn_port);
    EXPECT_FALSE(log[i].authorization) << "the token went to 127.0.0.2";
  }

  // HF_TOKEN is the hub's token, sent to the hub's host.
  ::setenv("HF_TOKEN", "t0ken", 1);
  const auto env = test::run_gguf({"get", address, "general.name"});
  ::unsetenv("HF_TOKEN");
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_EQ(env.out, "Meta Llama 3.1 8B Instruct");
  log = world().nginx->take_log();
  ASSERT_GE(log.size(), 2u);
  EXPECT_TRUE(log[0].authorization);
  for (size_t i = 1; i < log.size(); ++i) EXPECT_FALSE(log[i].authorization);
}

TEST(RemoteAuth, WithoutTheToken401IsOneLine) {
  REQUIRE_WORLD();
  const std::string address = "hf://gated/model/llama-8b.gguf";
  const auto r = test::run_gguf({"info", address});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + address + ": authentication required (set HF_TOKEN or --token) [http_error]\n");
  const auto log = world().nginx->take_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].status, 401);
  EXPECT_FALSE(log[0].authorization);
}

// ---- errors ----

TEST(RemoteErrors, NotFoundAndNotGguf) {
  REQUIRE_WORLD();
  const std::string missing = world().nginx->hub() + "/files/missing.gguf";
  const auto r = test::run_gguf({"info", missing});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + missing + ": not found on 127.0.0.1 (HTTP 404) [http_error]\n");

  const std::string page = world().nginx->hub() + "/files/page.html";
  const auto html = test::run_gguf({"dump", page});
  EXPECT_EQ(html.exit_code, 2);
  EXPECT_EQ(html.out, "");
  EXPECT_EQ(html.err, "gguf: " + page +
                          ": offset 0: not a GGUF file: 127.0.0.1 sent an HTML page (text/html) starting with "
                          "'<!DOCTYPE html><' [bad_magic]\n");
  const auto log = world().nginx->take_log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].status, 404);
  EXPECT_EQ(log[1].status, 206);
}

// A certificate the system does not trust: one line naming the host, nothing read.
TEST(RemoteErrors, ATlsFailureNamesTheHost) {
  REQUIRE_WORLD();
  if (world().nginx->tls_port == 0) GTEST_SKIP() << "openssl could not make a certificate";
  const std::string url = "https://127.0.0.1:" + std::to_string(world().nginx->tls_port) + "/files/llama-8b.gguf";
  const auto r = test::run_gguf({"info", url});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const std::string head = "gguf: " + url + ": TLS failure with 127.0.0.1: ";
  EXPECT_EQ(r.err.substr(0, head.size()), head) << r.err;
  EXPECT_NE(r.err.find("certificate"), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.ends_with(" [network_error]\n")) << r.err;
  EXPECT_EQ(test::lines_of(r.err).size(), 1u);
  EXPECT_TRUE(world().nginx->take_log().empty());
}

TEST(RemoteErrors, AServerThatNeverAnswersTimesOut) {
  test::SilentServer silent;
  ASSERT_NE(silent.port, 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(silent.port) + "/model.gguf";
  const auto start = std::chrono::steady_clock::now();
  const auto r = test::run_gguf({"info", url, "--timeout", "1"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + url + ": no answer from 127.0.0.1 within 1 s (--timeout) [network_error]\n");
  EXPECT_LT(seconds, 3.0);
}

TEST(RemoteErrors, ARangeIgnoringServerIsReadOnlyAsFarAsTheHeader) {
  REQUIRE_WORLD();
  test::PythonServer python(world().files);
  ASSERT_EQ(python.error, "");
  const std::string url = "http://127.0.0.1:" + std::to_string(python.port) + "/llama-8b.gguf";
  RemoteStats stats;
  auto f = open_remote(url, {}, &stats);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors().size(), 292u);
  EXPECT_EQ(f->file_size(), fs::file_size(world().files / "llama-8b.gguf"));
  EXPECT_EQ(stats.requests, 1);
  EXPECT_LE(stats.bytes, byte_budget(world().llama_header));
  EXPECT_GE(stats.bytes, world().llama_header - 31);

  const auto local = test::run_gguf({"info", (world().files / "llama-8b.gguf").string()});
  const auto remote = test::run_gguf({"info", url});
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(without_name_line(remote.out), without_name_line(local.out));
}

// A file whose version changes between two ranges is read again once, then refused; a 503 is
// retried.
TEST(RemoteErrors, AFileThatChangesWhileReadIsRefused) {
  REQUIRE_WORLD();
  test::PythonServer changing("changing", world().files / "llama-8b.gguf");
  ASSERT_EQ(changing.error, "");
  const std::string url = "http://127.0.0.1:" + std::to_string(changing.port) + "/llama-8b.gguf";
  RemoteStats stats;
  auto f = open_remote(url, {}, &stats);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().code, ErrorCode::remote_changed);
  EXPECT_EQ(f.error().message, "the file on 127.0.0.1 changed while it was read (\"v3\", then \"v4\")");
  EXPECT_EQ(stats.requests, 4);  // two reads of two ranges each, the second range of each refused
  const auto r = test::run_gguf({"info", url});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + url + ": the file on 127.0.0.1 changed while it was read (\"v7\", then \"v8\") [remote_changed]\n");
}

TEST(RemoteErrors, AServerErrorIsRetried) {
  REQUIRE_WORLD();
  test::PythonServer flaky("flaky", world().files / "llama-8b.gguf");
  ASSERT_EQ(flaky.error, "");
  RemoteStats stats;
  auto f = open_remote("http://127.0.0.1:" + std::to_string(flaky.port) + "/llama-8b.gguf", {}, &stats);
  ASSERT_TRUE(f) << f.error().describe();
  EXPECT_EQ(f->tensors().size(), 292u);
  EXPECT_GE(stats.requests, 2);
  EXPECT_LE(stats.requests, 4);
}

}  // namespace
}  // namespace ggufkit
