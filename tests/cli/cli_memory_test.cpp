// Bounded memory on hostile inputs, measured: the CLI's peak resident memory (wait4's ru_maxrss) is
// a constant where the input is refused (set --from-file of a device, a FIFO, a directory or more
// than a GGUF string holds; a config.json or a manifest over its cap), and under 4 times the input
// where it is read (a hash manifest of hundreds of thousands of entries the model lacks, streamed
// line by line and its report written as it is made).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ggufkit/format.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::run_gguf;
using ggufkit::test::run_gguf_measured;

// What a refused input may cost: the process itself, whatever the input's size.
constexpr long kRefusalKib = 32 * 1024;

// Under AddressSanitizer memory is the sanitizer's (shadow, quarantine): the figures are not checked.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kMeasured = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kMeasured = false;
#else
constexpr bool kMeasured = true;
#endif
#else
constexpr bool kMeasured = true;
#endif
// The peak of a run is under `kib` (when memory is measured).
#define EXPECT_PEAK_UNDER(r, kib) \
  if (kMeasured) EXPECT_LT((r).max_rss_kib, (kib)) << (r).max_rss_kib << " KiB at the peak"

class CliMemory : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = ggufkit::test::temp_dir("cli-memory");
    model_ = (dir_ / "model.gguf").string();
    fs::copy_file(ggufkit::test::sample_model(), model_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `size` bytes that takes no disk space (nothing in it is read).
  std::string sparse(const std::string& name, uint64_t size) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary).put('x');
    fs::resize_file(path, size);
    return path;
  }
  fs::path dir_;
  std::string model_;
};

TEST_F(CliMemory, SetFromFileRefusesWhatIsNotAFileOrTooLargeAtOnce) {
  const auto before = ggufkit::test::read_bytes(model_);
  fs::create_directory(dir_ / "d");
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0644), 0);
  const std::string over = sparse("over", ggufkit::kMaxStringLength + 1);
  for (const auto& [path, why] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "a character device, not a regular file: --from-file reads a file's bytes"},
           {(dir_ / "fifo").string(), "a FIFO, not a regular file: --from-file reads a file's bytes"},
           {(dir_ / "d").string(), "a directory, not a regular file: --from-file reads a file's bytes"},
           {over, "1073741825 bytes, over the 1073741824 byte limit of a GGUF string"},
           {(dir_ / "none").string(), "cannot open: No such file or directory"}}) {
    SCOPED_TRACE(path);
    const CommandResult r = run_gguf_measured({"set", model_, "tokenizer.chat_template", "--from-file", path});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "gguf: " + path + ": " + why + "\n");
    EXPECT_PEAK_UNDER(r, kRefusalKib);
  }
  EXPECT_EQ(ggufkit::test::read_bytes(model_), before);
  // A regular file's bytes, exactly.
  std::string text = "{{ bos_token }}\n";
  for (int i = 0; i < 1000; ++i) text += fmt::format("{{% if i == {} %}}\x01\xff{{% endif %}}\n", i);
  std::ofstream(dir_ / "t.jinja", std::ios::binary) << text;
  CommandResult r = run_gguf({"set", model_, "tokenizer.chat_template", "--from-file", (dir_ / "t.jinja").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_gguf({"get", model_, "tokenizer.chat_template"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, text);
}

// A manifest of 16 MB listing tensors the model lacks: streamed, its report written as it is made.
TEST_F(CliMemory, HashCheckStreamsAHugeManifest) {
  for (const bool gguf_hash : {false, true}) {
    SCOPED_TRACE(gguf_hash ? "gguf-hash" : "ggufkit");
    const std::string path = (dir_ / "huge.manifest").string();
    size_t entries = 0;
    {
      std::string text = gguf_hash ? "" : "algorithm xxh64\n";
      while (text.size() < (size_t{16} << 20)) {
        text += gguf_hash ? fmt::format("xxh64     {:016x}  {}:blk.{}.not_in_model.weight\n", entries, model_, entries)
                          : fmt::format("tensor {:016x} {} blk.{}.not_in_model.weight\n", entries, entries, entries);
        ++entries;
      }
      if (gguf_hash) text += fmt::format("xxh64     {:016x}  {}\n", 0, model_);  // the model's line
      std::ofstream(path, std::ios::binary) << text;
    }
    const uint64_t size = fs::file_size(path);
    const CommandResult r = run_gguf_measured({"hash", model_, "--check", path});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "");
    const auto lines = ggufkit::test::lines_of(r.out);
    // Each listed tensor is missing, each of the model's 20 unexpected, the model's digest (gguf-hash)
    // or the file count (ggufkit) differs; then the verdict.
    ASSERT_EQ(lines.size(), entries + 22);
    EXPECT_EQ(lines.front(), gguf_hash ? "unexpected_tensor token_embd.weight: the file has it, the manifest has no xxh64 line for it"
                                       : "missing_tensor blk.0.not_in_model.weight: the manifest lists it, the model does not have it");
    EXPECT_EQ(lines.back(),
              gguf_hash ? fmt::format("{}: FAILED (20 tensors and the model digest checked with xxh64 against a gguf-hash "
                                      "manifest, {} mismatches)",
                                      model_, entries + 21)
                        : fmt::format("{}: FAILED (20 tensors and 1 file checked with xxh64, {} mismatches)", model_,
                                      entries + 21));
    EXPECT_PEAK_UNDER(r, static_cast<long>(4 * size / 1024));
    EXPECT_GT(r.max_rss_kib, 0);
  }
  // One line of 16 MB of terminal controls: the error quotes 100 bytes of it, escaped.
  for (const std::string& head : {std::string("algorithm xxh64\ntensor "), std::string("xxh64  ")}) {
    const std::string path = (dir_ / "line.manifest").string();
    std::ofstream(path, std::ios::binary) << head << std::string(size_t{16} << 20, '\x1b') << " 1 n\n";
    const CommandResult r = run_gguf_measured({"hash", model_, "--check", path});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    std::string shown;
    for (int i = 0; i < 100; ++i) shown += "\\x1b";
    EXPECT_EQ(r.err, fmt::format("gguf: {}: manifest line {}: '{}…' is not a xxh64 digest (16 lower-case hex digits)\n",
                                 path, head.size() > 10 ? 2 : 1, shown));
    EXPECT_PEAK_UNDER(r, static_cast<long>(4 * fs::file_size(path) / 1024));
  }
  // Over the cap: refused before it is read.
  const std::string over = sparse("over.manifest", (uint64_t{256} << 20) + 1);
  const CommandResult r = run_gguf_measured({"hash", model_, "--check", over});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + over + ": 268435457 bytes, too large for a manifest (the limit is 268435456)\n");
  EXPECT_PEAK_UNDER(r, kRefusalKib);
}

// config.json has its own cap (real ones are kilobytes): one just over it is refused, read or not.
TEST_F(CliMemory, ConvertRefusesAnOversizedConfigJson) {
  fs::create_directory(dir_ / "hf");
  {
    std::ofstream config(dir_ / "hf" / "config.json", std::ios::binary);
    config << "{\"architectures\": [\"LlamaForCausalLM\"], \"pad\": \"" << std::string((size_t{4} << 20) - 40, 'x')
           << "\"}";
  }
  const uint64_t size = fs::file_size(dir_ / "hf" / "config.json");
  ASSERT_GT(size, uint64_t{4} << 20);
  const CommandResult r = run_gguf_measured({"convert", (dir_ / "hf").string(), (dir_ / "out.gguf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, fmt::format("gguf: config.json: {} bytes, over the limit of 4194304 bytes for config.json: not read "
                               "[io_error]\n",
                               size));
  EXPECT_PEAK_UNDER(r, kRefusalKib);
  EXPECT_FALSE(fs::exists(dir_ / "out.gguf"));
}

}  // namespace
