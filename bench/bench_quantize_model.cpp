// Whole-model quantization, ggufkit against llama.cpp in one run: per type, the time and peak
// memory of ggufkit::quantize_model (opening the input included) and of llama.cpp's
// llama_model_quantize (the oracle's libllama.v0.4.0.so, loaded with dlopen), both on 1 thread and
// on N threads (all cores by default). A tensor type name (q4_K) quantizes every tensor to it
// (pure = true); a preset name (Q4_K_M) uses the preset's per-tensor rules (pure = false). Every
// output is compared with llama.cpp's byte for byte: a time for a different file is not a result.
//
// Each run happens in a child process of its own, so that its peak resident memory (the kernel's
// ru_maxrss: the mapped input's pages count too, for both sides alike) and its CPU time are its alone.
//
// The model is an F16 llama-architecture file with random weights, written by ggufkit's writer into
// a temporary directory (removed at the end), unless --model gives one.
//   bench_quantize_model [--model F16.gguf] [--layers N] [--embd N] [--ff N] [--vocab N]
//                        [--threads N] [--repeat R] [--keep] [TYPE...]
//
// Neither side flushes the output to the disk (llama.cpp does not; ggufkit's `sync` is off here).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_support.h"
#include "ggufkit/conventions.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/writer.h"
#include "llama_quantize_oracle.h"

namespace {

using namespace ggufkit;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Shape {
  uint32_t layers = 2, embd = 2048, ff = 5632, vocab = 32000, heads = 32, kv_heads = 4, ctx = 2048;
};

using ggufkit::bench::mix;
using ggufkit::bench::to_half;

// Weights about normally distributed (sum of four uniforms), value i of a tensor a function of
// (seed, i) only, so the producer can be called with any chunking.
TensorProducer random_f16(uint64_t seed, float scale) {
  return [seed, scale](uint64_t offset, std::span<std::byte> out) -> Expected<void> {
    for (size_t i = 0; i + 1 < out.size(); i += 2) {
      const uint64_t r = mix(seed * 0x100000001B3ull + (offset + i) / 2);
      const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
      const uint16_t h = to_half((sum / 65536.0f - 2.0f) * scale * 1.7320508f);  // variance of 4 uniforms: 1/3
      std::memcpy(out.data() + i, &h, 2);
    }
    return {};
  };
}

Expected<void> write_model(const fs::path& path, const Shape& s) {
  GgufBuilder b;
  auto u32 = [](uint32_t v) { return MetadataValue::of<uint32_t>(v); };
  (void)b.set("general.architecture", MetadataValue::string("llama"));
  (void)b.set("general.name", MetadataValue::string("ggufkit benchmark model"));
  (void)b.set("general.file_type", u32(1));  // MOSTLY_F16
  (void)b.set("llama.context_length", u32(s.ctx));
  (void)b.set("llama.embedding_length", u32(s.embd));
  (void)b.set("llama.block_count", u32(s.layers));
  (void)b.set("llama.feed_forward_length", u32(s.ff));
  (void)b.set("llama.attention.head_count", u32(s.heads));
  (void)b.set("llama.attention.head_count_kv", u32(s.kv_heads));
  (void)b.set("llama.attention.layer_norm_rms_epsilon", MetadataValue::of<float>(1e-5f));
  (void)b.set("llama.rope.dimension_count", u32(s.embd / s.heads));
  (void)b.set("llama.vocab_size", u32(s.vocab));
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (uint32_t i = 0; i < s.vocab; ++i) {
    std::string token = i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "t";
    if (i > 2) token += std::to_string(i);  // (not "t" + to_string: g++ 12 warns falsely about it)
    tokens.push_back(std::move(token));
    scores.push_back(-static_cast<float>(i));
    types.push_back(i == 0 ? 2 : i < 3 ? 3 : 1);
  }
  (void)b.set("tokenizer.ggml.model", MetadataValue::string("llama"));
  (void)b.set("tokenizer.ggml.tokens", MetadataValue::string_array(tokens));
  (void)b.set("tokenizer.ggml.scores", MetadataValue::array(scores));
  (void)b.set("tokenizer.ggml.token_type", MetadataValue::array(types));
  (void)b.set("tokenizer.ggml.bos_token_id", u32(1));
  (void)b.set("tokenizer.ggml.eos_token_id", u32(2));

  std::vector<std::vector<std::byte>> norms;  // outlive the write
  norms.reserve(2 * s.layers + 1);
  auto ones = [&](int64_t n) -> std::span<const std::byte> {
    std::vector<std::byte> bytes(static_cast<size_t>(n) * 4);
    const float one = 1.0f;
    for (int64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + 4 * i, &one, 4);
    norms.push_back(std::move(bytes));
    return norms.back();
  };
  uint64_t seed = 1;
  auto weight = [&](const std::string& name, int64_t cols, int64_t rows) {
    const std::vector<int64_t> shape = {cols, rows};
    return b.add_tensor(name, TensorType::F16, shape, random_f16(seed++, 1.0f / std::sqrt(static_cast<float>(cols))));
  };
  const int64_t embd = s.embd, kv = int64_t{s.embd} / s.heads * s.kv_heads, ff = s.ff;
  const std::vector<int64_t> norm_shape = {embd};
  if (auto r = weight("token_embd.weight", embd, s.vocab); !r) return r;
  if (auto r = b.add_tensor("output_norm.weight", TensorType::F32, norm_shape, ones(embd)); !r) return r;
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (auto r : {b.add_tensor(p + "attn_norm.weight", TensorType::F32, norm_shape, ones(embd)),
                   weight(p + "attn_q.weight", embd, embd), weight(p + "attn_k.weight", embd, kv),
                   weight(p + "attn_v.weight", embd, kv), weight(p + "attn_output.weight", embd, embd),
                   b.add_tensor(p + "ffn_norm.weight", TensorType::F32, norm_shape, ones(embd)),
                   weight(p + "ffn_gate.weight", embd, ff), weight(p + "ffn_up.weight", embd, ff),
                   weight(p + "ffn_down.weight", ff, embd)}) {
      if (!r) return r;
    }
  }
  WriteOptions options;
  options.sync = false;
  return b.write_file(path, options);
}

bool same_bytes(const fs::path& a, const fs::path& b) {
  if (fs::file_size(a) != fs::file_size(b)) return false;
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  std::vector<char> x(size_t{1} << 20), y(size_t{1} << 20);
  while (fa && fb) {
    fa.read(x.data(), static_cast<std::streamsize>(x.size()));
    fb.read(y.data(), static_cast<std::streamsize>(y.size()));
    if (fa.gcount() != fb.gcount() || std::memcmp(x.data(), y.data(), static_cast<size_t>(fa.gcount())) != 0) {
      return false;
    }
  }
  return true;
}

// The best (smallest) real time, CPU time (all threads) and peak resident memory of `repeat` runs,
// each in a child process; negative when a run fails.
struct Timing {
  double real = 1e30, cpu = 1e30, peak_mib = 1e30;
};
template <class Run>
Timing best_of(int repeat, const Run& run) {
  Timing best;
  for (int i = 0; i < repeat; ++i) {
    std::fflush(nullptr);
    const auto t0 = Clock::now();
    const pid_t pid = ::fork();
    if (pid < 0) return {-1, -1, -1};
    if (pid == 0) ::_exit(run() ? 0 : 1);
    int status = 0;
    rusage usage{};
    if (::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return {-1, -1, -1};
    const double real = std::chrono::duration<double>(Clock::now() - t0).count();
    const auto secs = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; };
    best.real = std::min(best.real, real);
    best.cpu = std::min(best.cpu, secs(usage.ru_utime) + secs(usage.ru_stime));
    best.peak_mib = std::min(best.peak_mib, static_cast<double>(usage.ru_maxrss) / 1024.0);  // KiB on Linux
  }
  return best;
}

std::string seconds(double s) {
  char buf[32];
  if (s < 0) return "failed";
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  Shape shape;
  fs::path model;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  int repeat = 1;
  bool keep = false;
  std::vector<std::string> types;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&]() -> uint32_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_quantize_model: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return static_cast<uint32_t>(std::stoul(argv[++i]));
    };
    if (arg == "--model" && i + 1 < argc) model = argv[++i];
    else if (arg == "--layers") shape.layers = number();
    else if (arg == "--embd") shape.embd = number();
    else if (arg == "--ff") shape.ff = number();
    else if (arg == "--vocab") shape.vocab = number();
    else if (arg == "--threads") cores = std::max(1u, number());
    else if (arg == "--repeat") repeat = static_cast<int>(std::max(1u, number()));
    else if (arg == "--keep") keep = true;
    else if (arg.starts_with("-")) {
      std::fprintf(stderr, "usage: bench_quantize_model [--model F16.gguf] [--layers N] [--embd N] [--ff N] "
                           "[--vocab N] [--threads N] [--repeat R] [--keep] [TYPE...]\n");
      return 2;
    } else types.push_back(arg);
  }
  if (types.empty()) types = {"q4_0", "q8_0", "q4_K", "q6_K", "iq4_nl", "q5_K", "Q4_K_M", "Q3_K_M", "IQ4_XS"};
  if (shape.embd % shape.heads != 0) {
    std::fprintf(stderr, "bench_quantize_model: --embd must be a multiple of %u\n", shape.heads);
    return 2;
  }

  std::string why;
  const LlamaQuantizeOracle* oracle = LlamaQuantizeOracle::get(&why);
  if (oracle == nullptr) {
    std::fprintf(stderr, "bench_quantize_model: %s\n", why.c_str());
    return 2;
  }
  const fs::path dir = fs::temp_directory_path() / ("ggufkit-bench-model-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{dir, keep};

  if (model.empty()) {
    model = dir / "llama-f16.gguf";
    if (auto r = write_model(model, shape); !r) {
      std::fprintf(stderr, "bench_quantize_model: cannot write the model: %s\n", r.error().describe().c_str());
      return 1;
    }
  }
  {
    auto file = GgufFile::open(model);
    if (!file) {
      std::fprintf(stderr, "bench_quantize_model: %s\n", file.error().describe().c_str());
      return 1;
    }
    uint64_t params = 0;
    for (const TensorInfo& t : file->tensors()) params += static_cast<uint64_t>(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    std::printf("model: %s, %.0f MiB, %zu tensors, %.1f M weights\n", model.c_str(),
                static_cast<double>(fs::file_size(model)) / (1 << 20), file->tensors().size(),
                static_cast<double>(params) / 1e6);
  }
  std::printf("real seconds per model (best of %d; ggufkit's include opening the input); ratio = llama.cpp time / "
              "ggufkit time;\ncpu = the same ratio in CPU time (all threads); peak = peak resident MiB (ggufkit / "
              "llama.cpp); lower-case names are one type for every tensor (--pure), upper-case ones presets\n",
              repeat);
  std::printf("%-8s %9s %9s %6s %6s %11s   %9s %9s %6s %6s %11s  %s\n", "type", "ggufkit", "llama.cpp", "ratio", "cpu",
              "peak", "ggufkit", "llama.cpp", "ratio", "cpu", "peak", "output");
  const std::string n_thr = std::to_string(cores) + (cores == 1 ? " thread" : " threads");
  std::printf("%-8s %9s %9s %6s %6s %11s   %9s %9s %6s %6s %11s\n", "", "1 thread", "1 thread", "", "", "",
              n_thr.c_str(), n_thr.c_str(), "", "", "");

  int status = 0;
  for (const std::string& name : types) {
    // A tensor type name: every tensor to it; else a preset (llama_ftype) name.
    const auto type = parse_tensor_type(name);
    const bool pure = type.has_value();
    const auto file_type = pure ? file_type_for_type(*type) : parse_file_type(name);
    const auto default_type = file_type ? file_type_default_type(*file_type) : std::nullopt;
    if (!file_type || !default_type || !quant_capabilities(*default_type).quantize) {
      std::printf("%-8s ggufkit cannot quantize to it: skipped\n", name.c_str());
      continue;
    }
    const fs::path ours = dir / ("ggufkit-" + name + ".gguf"), theirs = dir / ("llama-" + name + ".gguf");
    auto run_ours = [&](unsigned threads) {
      auto input = GgufFile::open(model);
      if (!input) return false;
      QuantizeOptions options;
      options.file_type = *file_type;
      options.pure = pure;
      options.threads = Threads{threads};
      options.sync = false;
      auto r = quantize_model(*input, ours, options);
      if (!r) std::fprintf(stderr, "%s: %s\n", name.c_str(), r.error().describe().c_str());
      return static_cast<bool>(r);
    };
    auto run_theirs = [&](unsigned threads) {
      return oracle->quantize(model.string(), theirs.string(), *file_type, pure, static_cast<int>(threads));
    };
    std::string output = "identical";
    const Timing o1 = best_of(repeat, [&] { return run_theirs(1); });
    const Timing g1 = best_of(repeat, [&] { return run_ours(1); });
    if (o1.real < 0 || g1.real < 0 || !same_bytes(ours, theirs)) output = "DIFFERS (1 thread)";
    const Timing on = best_of(repeat, [&] { return run_theirs(cores); });
    const Timing gn = best_of(repeat, [&] { return run_ours(cores); });
    if (on.real < 0 || gn.real < 0 || !same_bytes(ours, theirs)) {
      output = output == "identical" ? "DIFFERS" : output + ", DIFFERS";
    }
    if (output != "identical") status = 1;
    const auto peak = [](const Timing& g, const Timing& o) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.0f/%.0f", g.peak_mib, o.peak_mib);
      return std::string(buf);
    };
    std::printf("%-8s %9s %9s %5.2fx %5.2fx %11s   %9s %9s %5.2fx %5.2fx %11s  %s\n", name.c_str(),
                seconds(g1.real).c_str(), seconds(o1.real).c_str(), o1.real / g1.real, o1.cpu / g1.cpu,
                peak(g1, o1).c_str(), seconds(gn.real).c_str(), seconds(on.real).c_str(), on.real / gn.real,
                on.cpu / gn.cpu, peak(gn, on).c_str(), output.c_str());
    std::fflush(stdout);
    std::error_code ec;
    fs::remove(ours, ec);
    fs::remove(theirs, ec);
  }
  return status;
}
