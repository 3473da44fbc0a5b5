// No terminal control reaches stdout or stderr from a file's contents, a file name, a manifest or an
// argument: every verb and every error message reached on hostile files (keys, values, tensor
// names and file names holding ESC sequences, C1 controls, a raw 0x9b, U+202E, invalid UTF-8,
// newlines) and hostile manifests. The exceptions are raw data by design (gguf get of a string
// writes its bytes), and JSON, which escapes them as \u00XX. Manifests written with such names
// read back and verify.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "raw_gguf.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::RawGguf;
using ggufkit::test::run_gguf;
namespace gguf_type = ggufkit::test::gguf_type;
namespace ggml_type = ggufkit::test::ggml_type;

// ESC sequences, a C1 CSI as UTF-8 and as a raw byte (not UTF-8), RIGHT-TO-LEFT OVERRIDE, a left-to-
// right isolate, invalid UTF-8, BEL, DEL, CR, and a newline followed by a forged gguf-hash line.
const std::string kHostile =
    "t\x1b[2J\x1b]0;pwned\x07\xc2\x9b\x9b\xe2\x80\xae\xe2\x81\xa6\xff\x7f\r\nxxh64     0000000000000000  FAKE: all OK";
// A tensor name holds at most 63 bytes.
const std::string kHostileTensor = "t\x1b[2J\xc2\x9b\x9b\xe2\x80\xae\xff\x7f\r\nxxh64  0000000000000000  FAKE: all OK";
const std::string kHostileFileName = "m\x1b[31m\x9b\xc2\x9b\xe2\x80\xae\n.gguf";

// The first control found in `s` (a terminal control, or a byte that is not UTF-8), described;
// empty when there is none. \n and \t pass (lines and separators). Its own decoder, not ggufkit's.
std::string first_control(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) return fmt::format("byte {:#04x} at {}", b, i);
      ++i;
      continue;
    }
    const size_t n = b >= 0xF0 && b <= 0xF4 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 && b <= 0xDF ? 2 : 0;
    if (n == 0 || i + n > s.size()) return fmt::format("byte {:#04x} at {} (not UTF-8)", b, i);
    uint32_t cp = b & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xC0) != 0x80) return fmt::format("byte {:#04x} at {} (not UTF-8)", b, i);
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
        (cp >= 0x2066 && cp <= 0x2069)) {
      return fmt::format("U+{:04X} at {}", cp, i);
    }
    i += n;
  }
  return {};
}

// A valid model whose metadata and tensor names are hostile: general.name, a hostile key with a
// hostile value, a string array, a hostile tensor and a plain one.
std::vector<std::byte> hostile_model(std::string_view value, std::string_view tensor, float base) {
  RawGguf g;
  g.header(3, 2, 5);
  g.kv_string("general.architecture", "llama");
  g.kv_string("general.name", value);
  g.kv_string("evil." + kHostile, value);
  g.kv_string_array("tokenizer.ggml.tokens", {value, "b"});
  g.kv_u32("llama.block_count", 1);
  g.tensor_info(tensor, {8}, ggml_type::kF32, 0);
  g.tensor_info("plain.weight", {8}, ggml_type::kF32, 32);
  g.pad_to(32);
  for (int i = 0; i < 16; ++i) g.f32(base + static_cast<float>(i));
  return g.bytes();
}

class CliEscape : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = ggufkit::test::temp_dir("cli-escape");
    evil_ = (dir_ / kHostileFileName).string();
    ggufkit::test::write_bytes(evil_, hostile_model(kHostile, kHostileTensor, 0));
    other_ = (dir_ / ("other" + kHostileFileName)).string();
    ggufkit::test::write_bytes(other_, hostile_model("v\x1b[0m", kHostileTensor + "2", 1));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // Runs the verb and asserts its exit status and that neither stream holds a control.
  CommandResult clean_run(const std::vector<std::string>& args, int status) {
    SCOPED_TRACE(fmt::format("gguf {}", fmt::join(args, " ")));
    CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, status) << r.err;
    EXPECT_EQ(first_control(r.out), "") << r.out;
    EXPECT_EQ(first_control(r.err), "") << r.err;
    return r;
  }

  fs::path dir_;
  std::string evil_, other_;
};

TEST_F(CliEscape, EveryVerbOnAHostileFile) {
  const std::string out = (dir_ / "out.gguf").string();
  for (const auto& [args, status] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{"info", evil_}, 0},
           {{"info", "--layers", evil_}, 0},
           {{"dump", evil_}, 0},
           {{"dump", "--full", evil_}, 0},
           {{"check", evil_}, 1},
           {{"check", "--strict", evil_}, 1},
           {{"diff", evil_, other_}, 1},
           {{"diff", "--data", evil_, other_}, 1},
           {{"get", evil_, "no." + kHostile}, 1},
           {{"get", evil_, "tokenizer.ggml.tokens"}, 0},
           {{"extract", evil_, kHostileTensor + "x", "-o", (dir_ / "x.npy").string()}, 2},
           {{"extract", evil_, "-o", (dir_ / ("npy" + kHostileFileName)).string()}, 0},
           {{"set", "--dry-run", evil_, "evil." + kHostile, "x"}, 0},
           {{"set", "--dry-run", evil_, "general." + kHostile, "x"}, 2},
           {{"set", "--dry-run", evil_, "llama.block_count", kHostile}, 2},
           {{"set", "--dry-run", evil_, "general.name", "--from-file", (dir_ / kHostileFileName).string() + "x"}, 2},
           {{"set", "--dry-run", evil_, "x", "--json", "[\"" + kHostile}, 2},
           {{"set", "--dry-run", evil_, "a", "b", "--rename", kHostile}, 2},
           {{"set", "--type", kHostile, evil_, "a", "b"}, 2},
           {{"rm", "--dry-run", evil_, "no." + kHostile}, 2},
           {{"rename", "--dry-run", evil_, "evil." + kHostile, "evil.renamed" + kHostile}, 0},
           {{"rename", "--dry-run", evil_, "no." + kHostile, "x"}, 2},
           {{"split", "--dry-run", evil_, (dir_ / ("s" + kHostileFileName)).string(), "--max-tensors", "1"}, 0},
           {{"split", evil_, (dir_ / ("s" + kHostileFileName)).string(), "--max-tensors", "1"}, 0},
           {{"split", evil_, (dir_ / "t").string(), "--max-size", kHostile}, 2},
           {{"merge", "--dry-run", (dir_ / ("s" + kHostileFileName)).string() + "-00001-of-00002.gguf", out}, 0},
           {{"merge", (dir_ / ("s" + kHostileFileName)).string() + "-00001-of-00002.gguf", out}, 0},
           {{"merge", evil_, out + "2"}, 2},
           {{"quantize", "--dry-run", evil_, out + "q", "q8_0"}, 0},
           {{"quantize", "--dry-run", evil_, out + "q", kHostile}, 2},
           {{"quantize", "--dry-run", evil_, out + "q", "q8_0", "--tensor-type", kHostile}, 2},
           {{"quantize", "--dry-run", evil_, out + "q", "q8_0", "--output-tensor-type", kHostile}, 2},
           {{"convert-endian", "--dry-run", evil_, (dir_ / ("be" + kHostileFileName)).string(), "--to", "big"}, 0},
           {{"convert-endian", evil_, (dir_ / ("be" + kHostileFileName)).string(), "--to", "big"}, 0},
           {{"convert", (dir_ / kHostileFileName).string() + "dir", out + "c"}, 2},
           {{"convert", dir_.string(), out + "c", "--outtype", kHostile}, 2},
           {{"types"}, 0},
           {{kHostile}, 2},
           {{"info", "--" + kHostile, evil_}, 2},
           {{"split", evil_, (dir_ / "t").string(), "--max-tensors", kHostile}, 2},
           {{"dump", evil_, "--json=" + kHostile}, 2},
           {{"info", (dir_ / kHostileFileName).string() + "missing"}, 2},
       }) {
    clean_run(args, status);
  }
  // The big-endian copy and the merged file read back with the same hostile names, escaped.
  const CommandResult info = clean_run({"dump", (dir_ / ("be" + kHostileFileName)).string()}, 0);
  EXPECT_NE(info.out.find("t\\x1b[2J\\x1b]0;pwned\\x07\\u{009b}\\x9b\\u{202e}\\u{2066}\\xff\\x7f\\r\\nxxh64"),
            std::string::npos)
      << info.out;
  clean_run({"diff", evil_, out}, 0);
}

// Raw data by design: get of a string writes its bytes exactly; JSON escapes every control.
TEST_F(CliEscape, RawDataAndJson) {
  const CommandResult got = run_gguf({"get", evil_, "evil." + kHostile});
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(got.out, kHostile);
  EXPECT_EQ(got.err, "");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"dump", "--json", evil_}, {"info", "--json", evil_}, {"check", "--json", evil_},
        {"diff", "--json", evil_, other_}, {"hash", "--json", evil_}, {"hash", "--all", "--json", evil_},
        {"split", "--dry-run", "--json", evil_, (dir_ / ("s" + kHostileFileName)).string(), "--max-tensors", "1"}}) {
    const CommandResult r = clean_run(args, args[0] == "check" || args[0] == "diff" ? 1 : 0);
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;  // one line of JSON
  }
  const CommandResult dump = clean_run({"dump", "--json", evil_}, 0);
  EXPECT_NE(dump.out.find(R"("t\u001b[2J\u001b]0;pwned\u0007\u009b)" "\xef\xbf\xbd" R"(\u202e\u2066)" "\xef\xbf\xbd" R"(\u007f\r\nxxh64     )"),
            std::string::npos)
      << dump.out;
}

// Manifests of both formats name the hostile tensor and file on one line each, with no control, and
// the tool verifies the file against its own manifest.
TEST_F(CliEscape, ManifestsOfHostileNamesVerify) {
  int n = 0;
  for (const std::vector<std::string>& format :
       {std::vector<std::string>{}, {"--algorithm", "sha256"}, {"--format", "gguf-hash"}, {"--all"}, {"--uuid"},
        {"--all", "--no-layer"}}) {
    SCOPED_TRACE(fmt::format("{}", fmt::join(format, " ")));
    std::vector<std::string> args = {"hash", evil_};
    args.insert(args.end(), format.begin(), format.end());
    const CommandResult made = clean_run(args, 0);
    const auto lines = ggufkit::test::lines_of(made.out);
    for (const std::string& line : lines) EXPECT_EQ(line.find("FAKE: all OK"), line.rfind("FAKE: all OK")) << line;
    const std::string manifest = write(fmt::format("manifest{}", ++n), made.out);
    const CommandResult checked = clean_run({"hash", evil_, "--check", manifest}, 0);
    EXPECT_NE(checked.out.find(": OK ("), std::string::npos) << checked.out;
    // The other model (other data, another hostile tensor) fails, naming the tensors escaped.
    const CommandResult failed = clean_run({"hash", other_, "--check", manifest}, 1);
    const bool per_tensor = format.empty() || format[0] != "--uuid" && format.back() != "--no-layer";
    EXPECT_EQ(failed.out.find("t\\x1b[2J\\u{009b}") != std::string::npos, per_tensor) << failed.out;
  }
  // The gguf-hash lines: an escaped name is marked, the plain tensor's line is gguf-hash's own.
  const CommandResult lines = clean_run({"hash", evil_, "--xxh64"}, 0);
  const std::string escaped_file = "m\\x1b[31m\\x9b\\xc2\\x9b\\xe2\\x80\\xae\\x0a.gguf";
  const auto all = ggufkit::test::lines_of(lines.out);
  ASSERT_EQ(all.size(), 3u) << lines.out;
  EXPECT_TRUE(all[0].starts_with("\\xxh64    ")) << all[0];
  EXPECT_TRUE(all[0].ends_with(escaped_file + ":t\\x1b[2J\\xc2\\x9b\\x9b\\xe2\\x80\\xae\\xff\\x7f\\x0d\\x0axxh64  "
                                               "0000000000000000  FAKE: all OK"))
      << all[0];
  EXPECT_TRUE(all[1].ends_with(escaped_file + ":plain.weight") && all[1].starts_with("\\xxh64    ")) << all[1];
  const std::string plain = (dir_ / "plain.gguf").string();
  fs::copy_file(evil_, plain);
  const CommandResult plain_lines = clean_run({"hash", plain, "--xxh64", "--no-layer"}, 0);
  EXPECT_TRUE(plain_lines.out.starts_with("xxh64     ") && plain_lines.out.ends_with("  " + plain + "\n")) << plain_lines.out;
}

// Every parse error of both manifest formats, on hostile text and a hostile manifest name: one line,
// the text escaped.
TEST_F(CliEscape, HostileManifestsAreReportedEscaped) {
  const std::string name = kHostileFileName + ".manifest";
  const std::string shown = "m\\x1b[31m\\x9b\\u{009b}\\u{202e}\\n.gguf.manifest";
  const std::string digest(16, '0');
  const std::string h = "\x1b[2J\xc2\x9b\x9b\xe2\x80\xae";  // as shown: \x1b[2J\u{009b}\x9b\u{202e}
  const std::string hs = "\\x1b[2J\\u{009b}\\x9b\\u{202e}";
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {"algorithm xxh64\nbogus" + h + "\n", "manifest line 2: expected 'algorithm NAME' or 'KIND DIGEST BYTES NAME'"},
           {"algorithm " + h + "\n", "manifest line 1: unknown algorithm '" + hs + "' (xxh64, sha1, sha256 or uuid)"},
           {"algorithm xxh64\nk" + h + " x\n", "manifest line 2: unknown entry kind 'k" + hs + "'"},
           {"algorithm xxh64\ntensor " + h + " 1 n\n", "manifest line 2: '" + hs + "' is not a xxh64 digest (16 lower-case hex digits)"},
           {"algorithm xxh64\ntensor " + digest + " " + h + " n\n", "manifest line 2: '" + hs + "' is not a byte count"},
           {"algorithm xxh64\ntensor " + digest + " 1 n\\q" + h + "\n",
            "manifest line 2: a name with an invalid escape (\\\\ or \\xNN)"},
           {"xxh64  " + h + "  f\n", "manifest line 1: '" + hs + "' is not a xxh64 digest (16 lower-case hex digits)"},
           {"xxh64  " + digest + "  f\nxxh64  " + digest + "  g" + h + ":t\n",
            "manifest line 2: 'g" + hs + ":t' is neither f nor f:TENSOR (a manifest covers one file)"},
           {"xxh64  " + digest + "  f\nsha1" + h + "  " + digest + "  f\n",
            "manifest line 2: 'sha1" + hs + "' is not an algorithm of gguf-hash (xxh64, sha1, sha256 or uuid)"},
           {"\\xxh64  " + digest + "  f\\z\n", "manifest line 1: a name with an invalid escape (\\\\ or \\xNN)"},
       }) {
    const std::string path = write(name, text);
    const CommandResult r = clean_run({"hash", evil_, "--check", path}, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "gguf: " + (dir_ / shown).string() + ": " + message + "\n");
  }
  // A gguf-hash manifest without the lines asked for, and one that is a directory.
  const std::string path = write(name, "sha1  " + std::string(40, '0') + "  f\n");
  CommandResult r = clean_run({"hash", evil_, "--check", path, "--xxh64"}, 2);
  EXPECT_EQ(r.err, "gguf hash: " + (dir_ / shown).string() + " has no xxh64 lines (it has sha1)\n");
  fs::create_directory(dir_ / (name + "d"));
  r = clean_run({"hash", evil_, "--check", (dir_ / (name + "d")).string()}, 2);
  EXPECT_EQ(r.err, "gguf: " + (dir_ / shown).string() + "d: not a regular file\n");
}

// The reader's errors name a hostile key or tensor: shown escaped.
TEST_F(CliEscape, ReaderErrorsOnHostileFiles) {
  RawGguf dup;
  dup.header(3, 0, 2).kv_u32(kHostile, 1).kv_u32(kHostile, 2);
  RawGguf long_string;
  long_string.header(3, 0, 1).kv_header(kHostile, gguf_type::kString).str_claiming(uint64_t{1} << 40, "x");
  RawGguf bad_type;
  bad_type.header(3, 0, 1).kv_header(kHostile, 99).u32(0);
  RawGguf bad_tensor;
  bad_tensor.header(3, 1, 0).tensor_info(kHostileTensor, {8}, 99, 0).pad_to(32).zeros(32);
  RawGguf two_tensors;
  two_tensors.header(3, 2, 0).tensor_info(kHostileTensor, {8}, ggml_type::kF32, 0);
  two_tensors.tensor_info(kHostileTensor, {8}, ggml_type::kF32, 32);
  two_tensors.pad_to(32).zeros(64);
  for (const RawGguf* g : {&dup, &long_string, &bad_type, &bad_tensor, &two_tensors}) {
    const std::string path = (dir_ / kHostileFileName).string();
    ggufkit::test::write_bytes(path, g->bytes());
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"info", path}, {"dump", path}, {"hash", path}, {"hash", "--all", path}}) {
      const CommandResult r = clean_run(args, 2);
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_TRUE(r.err.starts_with("gguf: " + (dir_ / "m\\x1b[31m\\x9b\\u{009b}\\u{202e}\\n.gguf").string() + ": offset "))
          << r.err;
    }
    const CommandResult checked = clean_run({"check", path}, 1);
    EXPECT_NE(checked.out.find("t\\x1b[2J"), std::string::npos) << checked.out;
  }
}

}  // namespace
