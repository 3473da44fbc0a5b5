// gguf quantize: the plan, the refusals, and what is left on disk when it stops early.
#include <gtest/gtest.h>

#include <regex>

#include <atomic>
#include <cstring>
#include <random>
#include <utility>

#include <fmt/format.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "test_support.h"

namespace {

using namespace ggufkit;
using namespace ggufkit::test;
namespace fs = std::filesystem;

size_t files_in(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(CliQuantize, PureQ8_0ConvertsTheWeightsAndKeepsTheRest) {
  const auto dir = temp_dir("quantize-q8");
  const fs::path out = dir / "q8.gguf";
  const CommandResult r = run_gguf({"quantize", sample_model().string(), out.string(), "Q8_0", "--pure"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, out.string() + "\n");
  // Progress only on a terminal (or with GGUFKIT_PROGRESS=always); llama-quantize's closing figures
  // always, unless --quiet: the sample's 20 tensors, 15 of them quantized (the norms stay f32).
  const std::string sizes = "model size:     0.25 MiB (16.04 bits per weight)\n"
                            "quant size:     0.13 MiB (8.56 bits per weight), 15 of 20 tensors quantized, 5 copied\n";
  EXPECT_TRUE(r.err.starts_with(sizes)) << r.err;
  EXPECT_TRUE(std::regex_match(r.err.substr(std::min(sizes.size(), r.err.size())),
                               std::regex("quantize time: [0-9]+\\.[0-9][0-9] s\n")))
      << r.err;
  const CommandResult quiet = run_gguf({"quantize", sample_model().string(), out.string(), "Q8_0", "--pure", "-f", "-q"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.out, out.string() + "\n");
  EXPECT_EQ(quiet.err, "");
  ::setenv("GGUFKIT_PROGRESS", "always", 1);
  const CommandResult shown = run_gguf({"quantize", sample_model().string(), out.string(), "Q8_0", "--pure", "--force"});
  ::unsetenv("GGUFKIT_PROGRESS");
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out, out.string() + "\n");
  size_t lines = 0;
  for (size_t at = 0; (at = shown.err.find('\n', at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 23u) << shown.err;  // one line per tensor of the sample, then the figures
  EXPECT_NE(shown.err.find("[  20/20] 100.0%"), std::string::npos) << shown.err;
  auto q = GgufFile::open(out);
  ASSERT_TRUE(q) << q.error().describe();
  for (const TensorInfo& t : q->tensors()) {
    const bool weight_matrix = t.n_dims == 2;  // the sample's 2-D tensors are all weights
    EXPECT_EQ(t.type, weight_matrix ? TensorType::Q8_0 : TensorType::F32) << t.name;
  }
  EXPECT_EQ(q->get("general.file_type")->get<uint32_t>(), 7u);  // MOSTLY_Q8_0
  EXPECT_EQ(q->get("general.quantization_version")->get<uint32_t>(), 2u);
  EXPECT_EQ(q->metadata().back().key, "general.file_type");
  fs::remove_all(dir);
}

TEST(CliQuantize, DryRunPrintsThePlanAndWritesNothing) {
  const auto dir = temp_dir("quantize-dry");
  const CommandResult r =
      run_gguf({"quantize", sample_model().string(), (dir / "x.gguf").string(), "q4_K", "--pure", "--dry-run"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Every tensor in llama.cpp's order with its types and size, then the sizes. The sample's rows
  // are 64 wide: q4_K (256 per block) falls back to q5_0, as llama.cpp does.
  EXPECT_EQ(r.out,
            "output_norm.weight                            f32 -> f32           256 B  copied\n"
            "token_embd.weight                             f16 -> q5_0      22.00 KiB  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.attn_k.weight                           f16 -> q5_0         1408 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.attn_norm.weight                        f32 -> f32           256 B  copied\n"
            "blk.0.attn_output.weight                      f16 -> q5_0         2816 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.attn_q.weight                           f16 -> q5_0         2816 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.attn_v.weight                           f16 -> q5_0         1408 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.ffn_down.weight                         f16 -> q5_0         8448 B  rows of 192 do not fit q4_K blocks: q5_0\n"
            "blk.0.ffn_gate.weight                         f16 -> q5_0         8448 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.0.ffn_norm.weight                         f32 -> f32           256 B  copied\n"
            "blk.0.ffn_up.weight                           f16 -> q5_0         8448 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.attn_k.weight                           f16 -> q5_0         1408 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.attn_norm.weight                        f32 -> f32           256 B  copied\n"
            "blk.1.attn_output.weight                      f16 -> q5_0         2816 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.attn_q.weight                           f16 -> q5_0         2816 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.attn_v.weight                           f16 -> q5_0         1408 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.ffn_down.weight                         f16 -> q5_0         8448 B  rows of 192 do not fit q4_K blocks: q5_0\n"
            "blk.1.ffn_gate.weight                         f16 -> q5_0         8448 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "blk.1.ffn_norm.weight                         f32 -> f32           256 B  copied\n"
            "blk.1.ffn_up.weight                           f16 -> q5_0         8448 B  rows of 64 do not fit q4_K blocks: q5_0\n"
            "model size:     0.25 MiB (16.04 bits per weight)\n"
            "quant size:     0.09 MiB (5.56 bits per weight), 15 of 20 tensors quantized, 5 copied\n"
            "tensor data: 89.25 KiB (91392 bytes, padding included)\n");
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

// llama-quantize's numbers name its presets (try_parse_ftype): 15 is Q4_K_M, 7 Q8_0, 0 F32; a number
// that names no preset is refused with the same line as a name that names none.
TEST(CliQuantize, PresetNumbersAreLlamaQuantizes) {
  const auto dir = temp_dir("quantize-numbers");
  const std::string in = sample_model().string(), out = (dir / "x.gguf").string();
  for (const auto& [number, name] : {std::pair{"15", "Q4_K_M"}, std::pair{"7", "q8_0"}, std::pair{"0", "F32"},
                                     std::pair{"30", "IQ4_XS"}}) {
    SCOPED_TRACE(number);
    const CommandResult by_number = run_gguf({"quantize", in, out, number, "--dry-run"});
    const CommandResult by_name = run_gguf({"quantize", in, out, name, "--dry-run"});
    EXPECT_EQ(by_number.exit_code, 0) << by_number.err;
    EXPECT_EQ(by_number.exit_code, by_name.exit_code);
    EXPECT_EQ(by_number.out, by_name.out);
    EXPECT_EQ(by_number.err, by_name.err);
  }
  for (const char* bad : {"999", "4", "1024", "12345"}) {  // undefined, removed, guessed, too long
    SCOPED_TRACE(bad);
    const CommandResult r = run_gguf({"quantize", in, out, bad, "--dry-run"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, fmt::format("gguf: '{}' is not a quantization type (try q4_0, q8_0, q4_K, Q4_K_M, iq4_xs...; gguf types lists them)\n", bad));
  }
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(CliQuantize, Refusals) {
  const auto dir = temp_dir("quantize-refuse");
  const std::string in = sample_model().string(), out = (dir / "o.gguf").string();
  EXPECT_EQ(run_gguf({"quantize", in, out, "q9_9", "--pure"}).exit_code, 2);
  EXPECT_EQ(run_gguf({"quantize", in, in, "q8_0", "--pure"}).exit_code, 2) << "never overwrites its input";
  EXPECT_EQ(run_gguf({"quantize", (dir / "missing.gguf").string(), out, "q8_0", "--pure"}).exit_code, 2);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

// Cancelled (what Ctrl-C does): no output and no temporary file.
TEST(CliQuantize, CancelLeavesNothingBehind) {
  const auto dir = temp_dir("quantize-cancel");
  auto in = GgufFile::open(sample_model());
  ASSERT_TRUE(in);
  std::atomic<bool> cancel{true};
  QuantizeOptions options;
  options.file_type = 7;
  options.cancel = &cancel;
  const auto r = quantize_model(*in, dir / "out.gguf", options);
  EXPECT_FALSE(r);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

// Cancelled half-way (after some tensors are written to the temporary file): nothing is left.
TEST(CliQuantize, CancelHalfWayLeavesNothingBehind) {
  const auto dir = temp_dir("quantize-cancel-later");
  auto in = GgufFile::open(sample_model());
  ASSERT_TRUE(in);
  std::atomic<bool> cancel{false};
  QuantizeOptions options;
  options.file_type = 7;
  options.cancel = &cancel;
  options.threads = Threads{1};
  size_t seen = 0;
  options.progress = [&](size_t done, size_t) {
    seen = done;
    if (done == 3) cancel.store(true);
  };
  const auto r = quantize_model(*in, dir / "out.gguf", options);
  EXPECT_FALSE(r);
  EXPECT_GE(seen, 3u);
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

// Movement inside each tensor: its output bytes after each chunk, in plan order, ending at its
// size just before the tensor's own progress call.
TEST(CliQuantize, TensorProgressMovesInsideEachTensorInPlanOrder) {
  const auto dir = temp_dir("quantize-tensor-progress");
  auto in = GgufFile::open(sample_model());
  ASSERT_TRUE(in);
  QuantizeOptions options;
  options.file_type = 7;
  auto plan = plan_quantize(*in, options);
  ASSERT_TRUE(plan) << plan.error().describe();
  std::vector<std::string> events;
  options.tensor_progress = [&](size_t index, uint64_t done, uint64_t size) {
    if (done == size) events.push_back(std::to_string(index) + " full " + std::to_string(size));
  };
  options.progress = [&](size_t done, size_t all) { events.push_back(std::to_string(done) + "/" + std::to_string(all)); };
  ASSERT_TRUE(quantize_model(*in, dir / "out.gguf", options));
  auto out = GgufFile::open(dir / "out.gguf");
  ASSERT_TRUE(out);
  std::vector<std::string> want;
  for (size_t i = 0; i < plan->tensors.size(); ++i) {
    want.push_back(std::to_string(i) + " full " + std::to_string(out->tensors()[i].size));
    want.push_back(std::to_string(i + 1) + "/" + std::to_string(plan->tensors.size()));
  }
  EXPECT_EQ(events, want);
  fs::remove_all(dir);
}

// A model that takes a while to quantize to IQ3_S on one thread: 32 tensors of 512 x 512.
fs::path write_slow_model(const fs::path& dir) {
  GgufBuilder b;
  (void)b.set("general.architecture", MetadataValue::string("llama"));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int i = 0; i < 32; ++i) {
    std::vector<std::byte> bytes(512 * 512 * sizeof(float));
    for (size_t j = 0; j < bytes.size(); j += 4) {
      const float v = normal(rng);
      std::memcpy(bytes.data() + j, &v, 4);
    }
    (void)b.add_tensor("blk." + std::to_string(i) + ".ffn_up.weight", TensorType::F32, std::vector<int64_t>{512, 512},
                       std::move(bytes));
  }
  const fs::path path = dir / "slow.gguf";
  return b.write_file(path) ? path : fs::path{};
}

// Ctrl-C: the process is interrupted once it reports its first tensor; it says so, exits 130, and
// leaves neither the output nor its temporary file.
TEST(CliQuantize, InterruptLeavesNothingBehind) {
  const auto dir = temp_dir("quantize-sigint");
  const fs::path in = write_slow_model(dir);
  ASSERT_FALSE(in.empty());
  const std::string out = (dir / "out.gguf").string();
  int err_pipe[2];
  ASSERT_EQ(::pipe(err_pipe), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  std::vector<std::string> args = {GGUFKIT_CLI_PATH, "quantize", in.string(), out, "iq3_s", "--pure", "--threads", "1"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ::setenv("GGUFKIT_PROGRESS", "always", 1);  // the progress line tells when the work has begun
  ASSERT_EQ(posix_spawn(&pid, GGUFKIT_CLI_PATH, &actions, nullptr, argv.data(), environ), 0);
  ::unsetenv("GGUFKIT_PROGRESS");
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  std::string err;
  bool interrupted = false;
  char buffer[4096];
  for (ssize_t n; (n = ::read(err_pipe[0], buffer, sizeof buffer)) > 0;) {
    err.append(buffer, static_cast<size_t>(n));
    if (!interrupted && err.find("[   1/32]") != std::string::npos) {
      ::kill(pid, SIGINT);
      interrupted = true;
    }
  }
  ::close(err_pipe[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(interrupted) << err;
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
  EXPECT_EQ(err.find("[  32/32]"), std::string::npos) << "stopped before the end";
  EXPECT_EQ(files_in(dir), 1u) << "only the input is left";
  fs::remove_all(dir);
}

TEST(CliQuantize, ThreadCountDoesNotChangeTheBytes) {
  const auto dir = temp_dir("quantize-threads");
  ASSERT_EQ(run_gguf({"quantize", sample_model().string(), (dir / "a.gguf").string(), "q4_0", "--pure", "--threads", "1"}).exit_code, 0);
  ASSERT_EQ(run_gguf({"quantize", sample_model().string(), (dir / "b.gguf").string(), "q4_0", "--pure", "--threads", "3"}).exit_code, 0);
  EXPECT_TRUE(read_bytes(dir / "a.gguf") == read_bytes(dir / "b.gguf"));
  fs::remove_all(dir);
}

// llama_model_quantize writes each tensor's info with ggml_n_dims dimensions: trailing dimensions
// of 1 go (a qwen2moe ffn_gate_inp_shexp of {n_embd, 1} comes out as {n_embd}), inner ones stay;
// quantized or copied alike.
TEST(CliQuantize, TrailingDimensionsOfOneAreDropped) {
  const auto dir = temp_dir("quantize-dims");
  GgufBuilder b;
  ASSERT_TRUE(b.set("general.architecture", MetadataValue::string("llama")));
  const auto add = [&](const char* name, TensorType type, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    ASSERT_TRUE(b.add_tensor(name, type, shape, std::vector<std::byte>(*row_size(type, n))));
  };
  add("blk.0.ffn_gate_inp_shexp.weight", TensorType::F32, {256, 1});  // 1-D to ggml: copied
  add("blk.0.ffn_up_exps.weight", TensorType::F16, {256, 1, 4});      // 3-D: quantized
  add("blk.0.attn_q.weight", TensorType::F16, {256, 4, 1, 1});        // 2-D: quantized
  add("blk.0.one.weight", TensorType::F32, {1, 1});                    // at least one dimension
  ASSERT_TRUE(b.write_file(dir / "in.gguf"));
  const CommandResult r = run_gguf({"quantize", (dir / "in.gguf").string(), (dir / "q.gguf").string(), "q8_0", "--pure"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto q = GgufFile::open(dir / "q.gguf");
  ASSERT_TRUE(q) << q.error().describe();
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  for (const TensorInfo& t : q->tensors()) shapes.emplace_back(t.name, std::vector<int64_t>(t.shape().begin(), t.shape().end()));
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"blk.0.attn_q.weight", {256, 4}}, {"blk.0.ffn_gate_inp_shexp.weight", {256}},
      {"blk.0.ffn_up_exps.weight", {256, 1, 4}}, {"blk.0.one.weight", {1}}};
  EXPECT_EQ(shapes, expected);
  EXPECT_EQ(q->tensors()[0].type, TensorType::Q8_0);
  EXPECT_EQ(q->tensors()[2].type, TensorType::Q8_0);
  fs::remove_all(dir);
}

}  // namespace

namespace {

// --progress shows progress on a stderr that is not a terminal, --quiet shows none (nor quantize's
// closing figures), and not both; a run shorter than a second gives no time estimate.
TEST(CliProgress, ProgressAndQuietFlagsOnTheLongVerbs) {
  const auto dir = ggufkit::test::temp_dir("progress-flags");
  const std::string in = ggufkit::test::sample_model().string(), out = (dir / "q.gguf").string();
  const auto shown = ggufkit::test::run_gguf({"quantize", in, out, "Q8_0", "--pure", "--progress"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto lines = ggufkit::test::lines_of(shown.err);
  ASSERT_EQ(lines.size(), 23u) << shown.err;
  EXPECT_EQ(lines[19].substr(0, 30), "[  20/20] 100.0%              ");  // no estimate: far below a second
  EXPECT_TRUE(lines[0].starts_with("[   1/20] ")) << lines[0];
  for (size_t i = 0; i < 20; ++i) EXPECT_EQ(lines[i].find("s left"), std::string::npos) << lines[i];
  EXPECT_TRUE(lines[20].starts_with("model size:"));
  const auto quiet = ggufkit::test::run_gguf({"quantize", in, out, "Q8_0", "--pure", "-f", "--quiet"});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(quiet.out, out + "\n");
  EXPECT_EQ(quiet.err, "");
  const auto both = ggufkit::test::run_gguf({"quantize", in, out, "Q8_0", "-f", "--quiet", "--progress"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_EQ(both.out, "");
  EXPECT_EQ(both.err, "--progress excludes --quiet\nRun with --help for more information.\n");
  // Every long verb takes them.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"split", in, (dir / "s").string(), "--max-tensors", "8", "--quiet"},
           {"merge", (dir / "s-00001-of-00003.gguf").string(), (dir / "m.gguf").string(), "--quiet"},
           {"extract", in, "-o", (dir / "x").string(), "--quiet"},
           {"convert-endian", in, (dir / "be.gguf").string(), "--to", "big", "--quiet"},
           {"set", (dir / "m.gguf").string(), "general.name", "x", "--rewrite", "--quiet"},
           {"diff", in, (dir / "m.gguf").string(), "--data", "--quiet"},
           {"hash", in, "--quiet"}}) {
    const auto r = ggufkit::test::run_gguf(args);
    EXPECT_LE(r.exit_code, 1) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err, "") << args[0];
  }
  // hash --progress: quiet for work that ends within a second, like every byte-level display.
  const auto hashed = ggufkit::test::run_gguf({"hash", in, "--progress"});
  EXPECT_EQ(hashed.exit_code, 0);
  EXPECT_EQ(hashed.out, ggufkit::test::run_gguf({"hash", in}).out);
  EXPECT_EQ(hashed.err, "");
  // --no-sync (no fsync before the rename) writes the same bytes.
  const auto synced = ggufkit::test::run_gguf({"quantize", in, out, "Q8_0", "--pure", "-f", "--quiet"});
  ASSERT_EQ(synced.exit_code, 0);
  const auto bytes = ggufkit::test::read_bytes(out);
  const auto unsynced = ggufkit::test::run_gguf({"quantize", in, out, "Q8_0", "--pure", "-f", "--quiet", "--no-sync"});
  EXPECT_EQ(unsynced.exit_code, 0);
  EXPECT_EQ(unsynced.out, out + "\n");
  EXPECT_EQ(unsynced.err, "");
  EXPECT_TRUE(ggufkit::test::read_bytes(out) == bytes);
  fs::remove_all(dir);
}

}  // namespace
