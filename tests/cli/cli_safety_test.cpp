// The CLI never loses data and never fails silently: outputs that would replace an input, a
// directory, a device or (without --force) an existing file are refused before any work; stdout on
// a full disk is an error with one line; a FIFO input is refused without blocking; a split is
// written as a set; file contents cannot reach the terminal as control characters. Each case
// asserts the exit status, both streams and what is left on disk.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "ggufkit/ggufkit.h"
#include "test_support.h"
#include "tiny_checkpoint.h"

namespace {

namespace fs = std::filesystem;
using ggufkit::test::CommandResult;
using ggufkit::test::run_gguf;
using ggufkit::test::run_gguf_with_stdout;

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string refusal(const fs::path& out, const std::string& message, const char* code) {
  return "gguf: " + out.string() + ": " + message + " [" + code + "]\n";
}

class CliSafety : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = ggufkit::test::temp_dir("cli-safety");
    model_ = dir_ / "model.gguf";
    fs::copy_file(ggufkit::test::sample_model(), model_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_, model_;
};

// Every verb that writes a file refuses an existing output without --force (before any work: no
// progress, nothing on stdout, the file untouched) and replaces it with --force.
TEST_F(CliSafety, AnExistingOutputNeedsForce) {
  const fs::path out = dir_ / "out.gguf";
  const auto shard1 = dir_ / "s-00001-of-00003.gguf";
  ASSERT_EQ(run_gguf({"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8"}).exit_code, 0);
  const fs::path npy = dir_ / "t.npy";
  const std::vector<std::pair<std::vector<std::string>, fs::path>> verbs = {
      {{"quantize", model_.string(), out.string(), "q8_0"}, out},
      {{"convert-endian", model_.string(), out.string(), "--to", "big"}, out},
      {{"merge", shard1.string(), out.string()}, out},
      {{"set", model_.string(), "general.name", "x", "-o", out.string()}, out},
      {{"extract", model_.string(), "token_embd.weight", "-o", npy.string()}, npy},
      {{"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8"}, shard1},
  };
  for (const auto& [args, target] : verbs) {
    SCOPED_TRACE(args[0]);
    std::ofstream(target, std::ios::binary | std::ios::trunc) << "keep me";
    const CommandResult r = run_gguf(args);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, refusal(target, "already exists (--force replaces it)", "output_exists"));
    EXPECT_EQ(fs::file_size(target), 7u);
    std::vector<std::string> forced = args;
    forced.push_back("--force");
    const CommandResult f = run_gguf(forced);
    EXPECT_EQ(f.exit_code, 0) << f.err;
    EXPECT_GT(fs::file_size(target), 7u);
  }
}

// An output that is an input is refused even with --force: the model itself (extract -o FILE), and
// a checkpoint's own files (convert DIR DIR/config.json).
TEST_F(CliSafety, AnInputIsNeverAnOutput) {
  const auto before = ggufkit::test::read_bytes(model_);
  CommandResult r = run_gguf({"extract", model_.string(), "token_embd.weight", "-o", model_.string(), "--force"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, refusal(model_, "is an input of this command: refusing to overwrite it", "output_is_input"));
  EXPECT_EQ(ggufkit::test::read_bytes(model_), before);

  ggufkit::test::TinyLlamaConfig config;
  config.vocab_size = 256;
  const fs::path ckpt = dir_ / "ckpt";
  ASSERT_EQ(ggufkit::test::write_checkpoint(ggufkit::test::make_tiny_llama(config), ckpt, {}), "");
  for (const char* name : {"config.json", "model.safetensors"}) {
    SCOPED_TRACE(name);
    const auto input_before = ggufkit::test::read_bytes(ckpt / name);
    r = run_gguf({"convert", ckpt.string(), (ckpt / name).string(), "--no-tokenizer", "--force"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, refusal(ckpt / name, "is an input of this command: refusing to overwrite it", "output_is_input"));
    EXPECT_EQ(ggufkit::test::read_bytes(ckpt / name), input_before);
  }
  // A GGUF in the checkpoint directory is not an input: converting again replaces it with --force.
  r = run_gguf({"convert", ckpt.string(), (ckpt / "model.gguf").string(), "--no-tokenizer"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_gguf({"convert", ckpt.string(), (ckpt / "model.gguf").string(), "--no-tokenizer", "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A directory or a FIFO under the output's name is refused before any work, --force or not.
TEST_F(CliSafety, AnOutputThatIsNotARegularFileIsRefused) {
  fs::create_directory(dir_ / "a-dir");
  ASSERT_EQ(::mkfifo((dir_ / "a-fifo").c_str(), 0644), 0);
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{{"a-dir", "a directory"}, {"a-fifo", "a FIFO"}}) {
    SCOPED_TRACE(name);
    const fs::path out = dir_ / name;
    const CommandResult r = run_gguf({"quantize", model_.string(), out.string(), "q8_0", "--force"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, refusal(out, "is " + kind + ": refusing to replace it with a file", "output_not_regular"));
  }
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"model.gguf", "a-dir", "a-fifo"}));
}

// Results to a full disk: exit 2 and one line naming the reason, for every verb that prints.
TEST_F(CliSafety, AFullDiskOnStdoutIsAnError) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  const std::string m = model_.string();
  const std::vector<std::vector<std::string>> commands = {
      {"info", m},
      {"info", "--json", m},
      {"dump", m},
      {"dump", "--json", m},
      {"get", m, "general.name"},
      {"check", m},
      {"check", "--json", m},
      {"hash", m},
      {"hash", "--json", m},
      {"diff", m, m},
      {"split", "--dry-run", "--max-tensors", "8", m, (dir_ / "s").string()},
      {"quantize", "--dry-run", m, (dir_ / "q.gguf").string(), "q8_0"},
      {"convert-endian", "--dry-run", m, (dir_ / "be.gguf").string(), "--to", "big"},
      {"set", "--dry-run", m, "general.name", "x"},
      {"--help"},
      {"info", "--help"},
  };
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + (args.size() > 1 ? " " + args[1] : ""));
    const CommandResult r = run_gguf_with_stdout(args, "/dev/full");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "gguf: cannot write the output: No space left on device\n");
  }
}

// Every file under `dir`, by its path relative to it, with its bytes.
std::map<std::string, std::vector<std::byte>> tree_of(const fs::path& dir) {
  std::map<std::string, std::vector<std::byte>> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[fs::relative(e.path(), dir).string()] = ggufkit::test::read_bytes(e.path());
  }
  return out;
}

// A verb that has written its output and then cannot print (stdout on a full disk) exits 0 with
// one warning: 2 would tell a script that nothing was written. Each output is the one a run with a
// working stdout writes, and nothing else is left.
TEST_F(CliSafety, AVerbThatWroteItsOutputSucceedsWhenStdoutFails) {
  ASSERT_TRUE(fs::exists("/dev/full"));
  ASSERT_EQ(run_gguf({"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8"}).exit_code, 0);
  ggufkit::test::TinyLlamaConfig config;
  config.vocab_size = 256;
  const fs::path ckpt = dir_ / "ckpt";
  ASSERT_EQ(ggufkit::test::write_checkpoint(ggufkit::test::make_tiny_llama(config), ckpt, {}), "");
  struct Case {
    std::vector<std::string> args;
    std::string verb, output;
  };
  const auto cases = [&](const fs::path& d) {
    const std::string m = model_.string();
    return std::vector<Case>{
        {{"split", m, (d / "p").string(), "--max-tensors", "8"}, "split", (d / "p").string() + "-*-of-00003.gguf"},
        {{"merge", (dir_ / "s-00001-of-00003.gguf").string(), (d / "merged.gguf").string()}, "merge", (d / "merged.gguf").string()},
        {{"convert-endian", m, (d / "be.gguf").string(), "--to", "big"}, "convert-endian", (d / "be.gguf").string()},
        {{"quantize", m, (d / "q.gguf").string(), "q8_0", "--quiet"}, "quantize", (d / "q.gguf").string()},
        {{"convert", ckpt.string(), (d / "c.gguf").string(), "--no-tokenizer"}, "convert", (d / "c.gguf").string()},
        {{"set", m, "general.name", "other", "-o", (d / "o.gguf").string()}, "set", (d / "o.gguf").string()},
        {{"set", (d / "edit.gguf").string(), "general.name", "y"}, "set", (d / "edit.gguf").string()},
        {{"set", (d / "edit.gguf").string(), "general.name", std::string(5000, 'n')}, "set", (d / "edit.gguf").string()},
        {{"rename", (d / "edit.gguf").string(), "general.name", "general.title"}, "rename", (d / "edit.gguf").string()},
        {{"rm", (d / "edit.gguf").string(), "general.title"}, "rm", (d / "edit.gguf").string()},
        {{"extract", m, "token_embd.weight", "-o", (d / "t.npy").string()}, "extract", (d / "t.npy").string()},
        {{"extract", m, "-o", (d / "npy").string()}, "extract", (d / "npy").string()},
    };
  };
  const fs::path reference = dir_ / "reference", full = dir_ / "full";
  for (const fs::path& d : {reference, full}) {
    fs::create_directory(d);
    fs::copy_file(model_, d / "edit.gguf");
  }
  const auto expected = cases(reference);
  const auto on_full_disk = cases(full);
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].verb + " " + expected[i].args[1]);
    const CommandResult ok = run_gguf(expected[i].args);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    ASSERT_NE(ok.out, "");
    const CommandResult r = run_gguf_with_stdout(on_full_disk[i].args, "/dev/full");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.err, "gguf: " + on_full_disk[i].verb + ": warning: " + on_full_disk[i].output +
                         " was written, but stdout failed: No space left on device\n");
  }
  const auto written = tree_of(full);
  EXPECT_EQ(written, tree_of(reference));
  EXPECT_EQ(written.size(), 3u + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 20);  // no temporary among them
}

// A closed pipe (`| head`) ends the verb without a message (the output is larger than a pipe holds).
TEST_F(CliSafety, AClosedPipeEndsQuietly) {
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
  ASSERT_TRUE(b.set("big.text", ggufkit::MetadataValue::string(std::string(size_t{4} << 20, 'x'))));
  const fs::path big = dir_ / "big.gguf";
  ASSERT_TRUE(b.write_file(big, {.sync = false, .progress = {}}));
  const fs::path err = dir_ / "err.txt", status = dir_ / "status.txt";
  const std::string script = "set -o pipefail; '" + std::string(GGUFKIT_CLI_PATH) + "' dump --full '" + big.string() +
                             "' 2>'" + err.string() + "' | head -c 1 >/dev/null; echo $? >'" + status.string() + "'";
  const fs::path script_file = dir_ / "pipe.sh";
  std::ofstream(script_file) << script << "\n";
  ASSERT_EQ(std::system(("bash '" + script_file.string() + "'").c_str()), 0);
  std::ifstream in(status);
  int code = -1;
  in >> code;
  EXPECT_TRUE(code == 141 || code == 2) << code << " " << script;  // killed by SIGPIPE, or EPIPE seen
  EXPECT_EQ(fs::file_size(err), 0u);
}

// A FIFO as input is refused at once (no writer is ever waited for); a helper thread opens it after
// a few seconds so that a regression fails instead of hanging the suite.
TEST_F(CliSafety, AFifoInputIsRefusedWithoutBlocking) {
  const fs::path fifo = dir_ / "input.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::promise<void> done;
  std::thread unblock([&, finished = done.get_future()] {
    if (finished.wait_for(std::chrono::seconds(5)) == std::future_status::ready) return;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  for (const char* verb : {"info", "dump", "check", "hash"}) {
    SCOPED_TRACE(verb);
    const CommandResult r = run_gguf({verb, fifo.string()});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, refusal(fifo, "a FIFO, not a regular file", "io_error"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  done.set_value();
  unblock.join();
}

// split writes its shards as a set: when one shard is refused, none is written.
TEST_F(CliSafety, SplitWritesAllShardsOrNone) {
  fs::create_directory(dir_ / "s-00002-of-00003.gguf");
  const CommandResult r = run_gguf({"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8", "--force"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, refusal(dir_ / "s-00002-of-00003.gguf", "is a directory: refusing to replace it with a file",
                           "output_not_regular"));
  EXPECT_EQ(names_in(dir_), (std::set<std::string>{"model.gguf", "s-00002-of-00003.gguf"}));
}

const std::vector<long> kRenames = ggufkit::test::rename_syscalls();
const std::vector<long> kFsync = ggufkit::test::fsync_syscalls();

// Two writers of one new output, neither with --force: the second to finish refuses to replace the
// file the first put there after the second checked the name (the file is made while the verb is
// stopped just before its rename). Exit 2, the first's file intact, nothing else left.
TEST_F(CliSafety, ASecondWriterNeverReplacesAFileThatAppeared) {
  GGUFKIT_REQUIRE_PTRACE();
  ASSERT_EQ(run_gguf({"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8"}).exit_code, 0);
  const fs::path work = dir_ / "work";
  fs::create_directory(work);
  const std::string m = model_.string();
  const std::vector<std::pair<std::vector<std::string>, fs::path>> cases = {
      {{"convert-endian", m, (work / "out.gguf").string(), "--to", "big"}, work / "out.gguf"},
      {{"merge", (dir_ / "s-00001-of-00003.gguf").string(), (work / "out.gguf").string()}, work / "out.gguf"},
      {{"set", m, "general.name", "x", "-o", (work / "out.gguf").string()}, work / "out.gguf"},
      {{"quantize", m, (work / "out.gguf").string(), "q8_0", "--threads", "1"}, work / "out.gguf"},
      {{"extract", m, "token_embd.weight", "-o", (work / "t.npy").string()}, work / "t.npy"},
      // The set: its second shard appears; the first, renamed already, is taken back.
      {{"split", m, (work / "p").string(), "--max-tensors", "8"}, work / "p-00002-of-00003.gguf"},
  };
  for (const auto& [args, contested] : cases) {
    SCOPED_TRACE(args[0]);
    const auto run = ggufkit::test::run_gguf_stopped_at(args, kRenames, 1, [&, &contested = contested](pid_t) {
      std::ofstream(contested, std::ios::binary) << "the first writer's";
    });
    ASSERT_TRUE(run.stopped);
    EXPECT_EQ(run.result.exit_code, 2);
    EXPECT_EQ(run.result.out, "");
    EXPECT_EQ(run.result.err, refusal(contested, "already exists (--force replaces it): it appeared while this command wrote",
                                      "output_exists"));
    EXPECT_EQ(names_in(work), std::set<std::string>{contested.filename().string()});
    EXPECT_EQ(read_text_file(contested), "the first writer's");
    fs::remove(contested);
  }
}

// Inputs that are not regular files are refused without being opened: opening a FIFO would release
// a writer waiting on it (this test's thread), opening a device can act (a watchdog, a terminal).
// Exit 2, one line naming what it is, nothing on stdout, at once; for info and for an edit, whose
// lock is taken before the file is read.
TEST_F(CliSafety, DevicesFifosAndDirectoriesAreNeverOpened) {
  const fs::path fifo = dir_ / "input.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::atomic<bool> released{false};
  std::thread writer([&] {
    const int fd = ::open(fifo.c_str(), O_WRONLY);  // blocks until someone opens the FIFO to read
    released = true;
    if (fd >= 0) ::close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the writer is waiting in open
  const std::vector<std::pair<std::string, std::string>> inputs = {{"/dev/null", "a character device"},
                                                                   {"/dev/zero", "a character device"},
                                                                   {dir_.string(), "a directory"},
                                                                   {fifo.string(), "a FIFO"}};
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [input, kind] : inputs) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"info", input}, {"set", input, "general.name", "x"}}) {
      SCOPED_TRACE(args[0] + " " + input);
      const CommandResult r = run_gguf(args);
      EXPECT_EQ(r.exit_code, 2);
      EXPECT_EQ(r.out, "");
      EXPECT_EQ(r.err, refusal(input, kind + ", not a regular file", "io_error"));
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(released.load()) << "the FIFO was opened";
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets the writer go
  writer.join();
  ::close(reader);
}

// SIGINT that comes while the output is flushed to disk, before it is renamed into place, still
// stops the verb (the process is stopped at its first fsync and signalled there): exit 130, the one
// line, nothing on stdout, no output and no temporary. One that comes after the rename (at the
// directory's fsync) changes nothing: the output is there, exit 0.
TEST_F(CliSafety, AnInterruptUpToTheRenameWritesNothing) {
  GGUFKIT_REQUIRE_PTRACE();
  ASSERT_EQ(run_gguf({"split", model_.string(), (dir_ / "s").string(), "--max-tensors", "8"}).exit_code, 0);
  ggufkit::test::TinyLlamaConfig config;
  config.vocab_size = 256;
  const fs::path ckpt = dir_ / "ckpt";
  ASSERT_EQ(ggufkit::test::write_checkpoint(ggufkit::test::make_tiny_llama(config), ckpt, {}), "");
  const fs::path work = dir_ / "work";
  fs::create_directory(work);
  const fs::path edited = work / "edit.gguf";
  const std::string m = model_.string(), out = (work / "out.gguf").string();
  struct Case {
    std::vector<std::string> args;
    std::string verb, output;
    std::vector<long> calls;  // where the signal comes (the first of them)
    std::string err;          // empty: the usual "interrupted; OUTPUT was not written"
  };
  const std::vector<Case> cases = {
      {{"split", m, (work / "p").string(), "--max-tensors", "8"}, "split", (work / "p").string() + "-*-of-00003.gguf", kFsync, ""},
      {{"merge", (dir_ / "s-00001-of-00003.gguf").string(), out}, "merge", out, kFsync, ""},
      {{"convert-endian", m, out, "--to", "big"}, "convert-endian", out, kFsync, ""},
      {{"quantize", m, out, "q8_0", "--threads", "1"}, "quantize", out, kFsync, ""},
      {{"convert", ckpt.string(), out, "--no-tokenizer"}, "convert", out, kFsync, ""},
      {{"set", m, "general.name", "x", "-o", out}, "set", out, kFsync, ""},
      {{"set", edited.string(), "general.name", std::string(5000, 'n')}, "set", edited.string(), kFsync, ""},
      // extract does not fsync (its files are copies): the signal comes as it locks its new temporary
      // file, before it writes it (not at a write(2): the sanitizers' runtime makes some of its own).
      {{"extract", m, "token_embd.weight", "-o", (work / "t.npy").string()}, "extract", "", {SYS_flock},
       "gguf: extract: interrupted; 0 of 1 tensors written\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.verb + " " + c.args[1]);
    for (const auto& e : fs::directory_iterator(work)) fs::remove(e.path());
    fs::copy_file(model_, edited);
    const auto run = ggufkit::test::run_gguf_stopped_at(c.args, c.calls, 1, [](pid_t pid) { ::kill(pid, SIGINT); });
    ASSERT_TRUE(run.stopped);
    EXPECT_EQ(run.result.exit_code, 130);
    EXPECT_EQ(run.result.out, "");
    EXPECT_EQ(run.result.err, c.err.empty() ? "gguf: " + c.verb + ": interrupted; " + c.output + " was not written\n" : c.err);
    EXPECT_EQ(names_in(work), std::set<std::string>{"edit.gguf"});
    EXPECT_EQ(ggufkit::test::read_bytes(edited), ggufkit::test::read_bytes(model_));
  }
  fs::remove(edited);
  ASSERT_EQ(run_gguf({"convert-endian", m, (dir_ / "be-reference.gguf").string(), "--to", "big"}).exit_code, 0);
  const auto late = ggufkit::test::run_gguf_stopped_at({"convert-endian", m, out, "--to", "big"}, kFsync, 2,
                                                       [](pid_t pid) { ::kill(pid, SIGINT); });
  ASSERT_TRUE(late.stopped);
  EXPECT_EQ(late.result.exit_code, 0) << late.result.err;
  EXPECT_EQ(late.result.out, m + ": little-endian -> " + out + ": big-endian\n");
  EXPECT_EQ(late.result.err, "");
  EXPECT_EQ(ggufkit::test::read_bytes(out), ggufkit::test::read_bytes(dir_ / "be-reference.gguf"));
}

// A model whose names hold terminal controls: no output of any verb carries a control byte other
// than the newlines of its lines, and extract's file names are made safe.
TEST_F(CliSafety, FileContentsCannotControlTheTerminal) {
  const std::string evil_tensor = "a\x1b[2J\rFAKE: all OK\xe2\x80\xae";  // ESC, CR, RIGHT-TO-LEFT OVERRIDE
  const std::string evil_arch = "llama\x1b]0;pwned\x07\xc2\x9b";         // OSC ... BEL, C1 CSI
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string(evil_arch)));
  ASSERT_TRUE(b.set("evil.\x1b[31mkey", ggufkit::MetadataValue::string("v\nFAKE line")));
  const int64_t shape[] = {32};
  ASSERT_TRUE(b.add_tensor(evil_tensor, ggufkit::TensorType::F32, shape, std::vector<std::byte>(128)));
  ASSERT_TRUE(b.add_tensor("b/c", ggufkit::TensorType::F32, shape, std::vector<std::byte>(128)));
  const fs::path evil = dir_ / "evil.gguf";
  ASSERT_TRUE(b.write_file(evil, {.sync = false, .progress = {}}));
  const auto clean = [](const std::string& s) {
    return std::none_of(s.begin(), s.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return (u < 0x20 && u != '\n') || u == 0x7f;
    }) && s.find("\xc2\x9b") == std::string::npos && s.find("\xe2\x80\xae") == std::string::npos;
  };
  const fs::path out_dir = dir_ / "npy";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"info", evil.string()}, {"dump", evil.string()}, {"check", evil.string()},
        {"quantize", "--dry-run", evil.string(), (dir_ / "q.gguf").string(), "q8_0"},
        {"set", "--dry-run", evil.string(), "evil.\x1b[31mkey", "x"},
        {"extract", evil.string(), "-o", out_dir.string()}}) {
    SCOPED_TRACE(args[0]);
    const CommandResult r = run_gguf(args);
    EXPECT_NE(r.exit_code, 2) << r.err;
    EXPECT_TRUE(clean(r.out)) << r.out;
    EXPECT_TRUE(clean(r.err)) << r.err;
  }
  EXPECT_EQ(names_in(out_dir), (std::set<std::string>{"a_[2J_FAKE: all OK_.npy", "b_c.npy"}));
  const CommandResult info = run_gguf({"info", evil.string()});
  EXPECT_NE(info.out.find("  architecture  llama\\x1b]0;pwned\\x07\\u{009b}\n"), std::string::npos) << info.out;
}

// Two tensors whose names map to one file: refused before anything is written.
TEST_F(CliSafety, ExtractRefusesTwoTensorsForOneFile) {
  ggufkit::GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
  const int64_t shape[] = {32};
  ASSERT_TRUE(b.add_tensor("a/b", ggufkit::TensorType::F32, shape, std::vector<std::byte>(128)));
  ASSERT_TRUE(b.add_tensor("a_b", ggufkit::TensorType::F32, shape, std::vector<std::byte>(128)));
  const fs::path file = dir_ / "clash.gguf";
  ASSERT_TRUE(b.write_file(file, {.sync = false, .progress = {}}));
  const fs::path out = dir_ / "npy";
  const CommandResult r = run_gguf({"extract", file.string(), "-o", out.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gguf: " + file.string() + ": the tensors 'a/b' and 'a_b' would both be written to " +
                       (out / "a_b.npy").string() + ": extract one of them with -o FILE\n");
  EXPECT_TRUE(fs::is_empty(out));
}

// SIGINT or SIGTERM while a verb writes: exit 130 with one line, no temporary file, no output
// (for split: no shard). The signal is sent while the verb's temporary file exists, with the
// process stopped (SIGSTOP) so that it cannot finish first.
class CliInterrupt : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(ggufkit::test::temp_dir("cli-interrupt"));
    ggufkit::GgufBuilder b;
    ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
    for (int i = 0; i < 4; ++i) {
      const int64_t shape[] = {int64_t{4} << 20};  // 16 MiB of float32 each
      ASSERT_TRUE(b.add_tensor(fmt::format("t{}.weight", i), ggufkit::TensorType::F32, shape,
                               ggufkit::TensorProducer([](uint64_t offset, std::span<std::byte> out) {
                                 for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<std::byte>((offset + k) * 7);
                                 return ggufkit::Expected<void>{};
                               })));
    }
    ASSERT_TRUE(b.write_file(*dir_ / "big.gguf", {.sync = false, .progress = {}}));
    ASSERT_EQ(run_gguf({"split", (*dir_ / "big.gguf").string(), (*dir_ / "shard").string(), "--max-tensors", "2"}).exit_code, 0);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static fs::path* dir_;
};
fs::path* CliInterrupt::dir_ = nullptr;

// Starts gguf ARGS with stdout on /dev/null and stderr in `err`, without waiting for it.
pid_t spawn_gguf(const std::vector<std::string>& args, const fs::path& err) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(devnull, 1);
    ::dup2(e, 2);
    std::vector<std::string> store = {GGUFKIT_CLI_PATH};
    store.insert(store.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : store) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

// Runs gguf ARGS in `work`, stops it as soon as a temporary file appears there, sends `signal`,
// lets it go on; returns (exit status, stderr). Status -1 when it finished before it could be
// caught (the caller tries again).
std::pair<int, std::string> interrupt_while_writing(const fs::path& work, const std::vector<std::string>& args, int signal) {
  const fs::path err = work / "stderr.txt";
  const pid_t pid = spawn_gguf(args, err);
  const auto has_temp = [&] {
    for (const auto& e : fs::directory_iterator(work)) {
      if (e.path().filename().string().find(".tmp-") != std::string::npos) return true;
    }
    return false;
  };
  bool caught = false;
  for (int i = 0; i < 20000 && !caught; ++i) {
    if (has_temp()) {
      ::kill(pid, SIGSTOP);
      caught = has_temp();  // still writing: not renamed in between
      if (caught) ::kill(pid, signal);
      ::kill(pid, SIGCONT);
      break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return {-1, ""};
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string text = read_text_file(err);
  fs::remove(err);
  if (!caught) return {-1, text};
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text};
}

TEST_F(CliInterrupt, EveryWritingVerbStopsCleanly) {
  const fs::path big = *dir_ / "big.gguf", first = *dir_ / "shard-00001-of-00002.gguf";
  struct Case {
    std::vector<std::string> args;
    std::string verb, output;
    int signal;
  };
  const fs::path work = *dir_ / "work";
  fs::create_directory(work);
  const fs::path copy = work / "edit.gguf";
  const std::vector<Case> cases = {
      {{"split", big.string(), (work / "part").string(), "--max-tensors", "1"}, "split",
       (work / "part").string() + "-*-of-00004.gguf", SIGINT},
      {{"merge", first.string(), (work / "merged.gguf").string()}, "merge", (work / "merged.gguf").string(), SIGTERM},
      {{"convert-endian", big.string(), (work / "be.gguf").string(), "--to", "big"}, "convert-endian",
       (work / "be.gguf").string(), SIGINT},
      {{"set", copy.string(), "general.name", std::string(8000, 'n'), "--no-sync"}, "set", copy.string(), SIGINT},
      {{"quantize", big.string(), (work / "q.gguf").string(), "q8_0", "--threads", "1"}, "quantize",
       (work / "q.gguf").string(), SIGTERM},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.verb);
    std::pair<int, std::string> result{-1, ""};
    for (int attempt = 0; attempt < 5 && result.first == -1; ++attempt) {
      for (const auto& e : fs::directory_iterator(work)) fs::remove(e.path());
      if (c.verb == "set") fs::copy_file(big, copy);
      result = interrupt_while_writing(work, c.args, c.signal);
    }
    EXPECT_EQ(result.first, 130) << result.second;
    EXPECT_EQ(result.second, "gguf: " + c.verb + ": interrupted; " + c.output + " was not written\n");
    std::set<std::string> expected;
    if (c.verb == "set") expected.insert("edit.gguf");
    EXPECT_EQ(names_in(work), expected);
    if (c.verb == "set") {
      EXPECT_EQ(ggufkit::test::read_bytes(copy), ggufkit::test::read_bytes(big));
    }
  }
}

// An input truncated while a verb reads it (another process, a network file system): exit 2 with
// one line naming it, no temporary file left, instead of death by SIGBUS. The verb is stopped once
// it has mapped the input, the input is truncated, and the verb goes on.
TEST_F(CliInterrupt, AnInputTruncatedWhileReadIsAnError) {
  const fs::path work = *dir_ / "truncated";
  fs::create_directories(work);
  const fs::path in = work / "in.gguf";
  {
    ggufkit::GgufBuilder b;
    ASSERT_TRUE(b.set("general.architecture", ggufkit::MetadataValue::string("llama")));
    const int64_t shape[] = {4096, 4096};  // 64 MiB of float32, quantized by worker threads
    ASSERT_TRUE(b.add_tensor("blk.0.ffn_up.weight", ggufkit::TensorType::F32, shape,
                             ggufkit::TensorProducer([](uint64_t offset, std::span<std::byte> out) {
                               for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<std::byte>((offset + k) % 61);
                               return ggufkit::Expected<void>{};
                             })));
    ASSERT_TRUE(b.write_file(*dir_ / "whole.gguf", {.sync = false, .progress = {}}));
  }
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"hash", in.string(), "--threads", "1"},
        {"quantize", in.string(), (work / "q.gguf").string(), "q8_0", "--pure", "--threads", "1"}}) {
    SCOPED_TRACE(args[0]);
    for (const auto& e : fs::directory_iterator(work)) fs::remove(e.path());
    fs::copy_file(*dir_ / "whole.gguf", in);
    const fs::path err = *dir_ / "stderr.txt";
    const pid_t pid = spawn_gguf(args, err);
    // Stopped once the input is mapped (it shows in /proc/PID/maps).
    bool mapped = false;
    for (int i = 0; i < 20000 && !mapped; ++i) {
      mapped = read_text_file("/proc/" + std::to_string(pid) + "/maps").find(in.string()) != std::string::npos;
      if (!mapped) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(pid, SIGSTOP);
    ASSERT_TRUE(mapped);
    fs::resize_file(in, 4096);
    ::kill(pid, SIGCONT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const std::string text = read_text_file(err);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status << " " << text;
    EXPECT_EQ(text, "gguf: " + in.string() +
                        ": the file was truncated or became unreadable while it was read (bus error); nothing was "
                        "written [io_error]\n");
    EXPECT_EQ(names_in(work), std::set<std::string>{"in.gguf"});
  }
}

}  // namespace
