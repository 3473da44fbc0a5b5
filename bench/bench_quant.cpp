// Throughput of the conversion kernels, ggufkit against ggml (the oracle libggml-base.so) in one run:
// per type, dequantize (ggml: the type's to_float) and quantize (ggml: ggml_quantize_chunk), on one
// thread and on all cores. On all cores both sides run on the same thread pool (the library's) with
// the same split into runs of rows, so the columns compare the kernels, not the cost of starting
// threads. Every timed ggufkit result is checked against ggml's bytes first: a fast wrong kernel is
// not measured. The default input (4 Mi values, 16 MiB of float32: 64 runs of rows to share out)
// is large enough for the per-call costs to vanish and for the "scaling" columns (1-thread time /
// all-core time) to show; --rows changes it (rows of 4096 values).
//   bench_quant [--seconds S] [--rows N] [--threads N] [TYPE...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ggufkit/quant.h"
#include "quant/thread_pool.h"
#include "quant_oracle.h"

namespace {

using namespace ggufkit;
using Clock = std::chrono::steady_clock;

double seconds_per_run(double budget, const auto& run) {
  run();  // warm up
  double best = 1e30;
  const auto start = Clock::now();
  int runs = 0;
  while (runs < 3 || std::chrono::duration<double>(Clock::now() - start).count() < budget) {
    const auto t0 = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    if (++runs > 1000) break;
  }
  return best;
}

// ggml's side on all cores: runs of rows of about 64 Ki values (as ggufkit's own split) on the pool.
void split_rows(int64_t rows, int64_t n_per_row, unsigned threads, const auto& work) {
  quant::parallel_ranges(rows, threads, std::max<int64_t>(1, 65536 / n_per_row), work);
}

}  // namespace

int main(int argc, char** argv) {
  double budget = 0.5;
  int64_t rows = 1024;  // of 4096 values: 4 Mi values, 16 MiB of float32
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--seconds" && i + 1 < argc) {
      budget = std::stod(argv[++i]);
    } else if (std::string(argv[i]) == "--rows" && i + 1 < argc) {
      rows = std::max<int64_t>(1, std::stoll(argv[++i]));
    } else if (std::string(argv[i]) == "--threads" && i + 1 < argc) {
      cores = std::max(1u, static_cast<unsigned>(std::stoul(argv[++i])));
    } else {
      only.emplace_back(argv[i]);
    }
  }
  std::string why;
  const QuantOracle* oracle = QuantOracle::get(&why);
  if (oracle == nullptr) {
    std::fprintf(stderr, "bench_quant: %s\n", why.c_str());
    return 2;
  }
  const int64_t n_per_row = 4096;
  std::vector<float> src(static_cast<size_t>(n_per_row * rows));
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float& x : src) x = normal(rng);

  std::printf("values per second, in millions (%lld rows of %lld float32); ratio = ggufkit / ggml\n",
              static_cast<long long>(rows), static_cast<long long>(n_per_row));
  std::printf("%-8s %-10s %10s %10s %7s   %10s %10s %7s %8s %8s\n", "type", "op", "ggufkit", "ggml", "ratio",
              "ggufkit", "ggml", "ratio", "scaling", "scaling");
  std::printf("%-8s %-10s %10s %10s %7s   %10s %10s %7s %8s %8s\n", "", "", "1 thread", "1 thread", "",
              (std::to_string(cores) + " thr").c_str(), (std::to_string(cores) + " thr").c_str(), "", "ggufkit",
              "ggml");
  const double values = static_cast<double>(src.size());
  auto rate = [&](double secs) { return values / secs / 1e6; };

  for (const TypeTraits& t : all_type_traits()) {
    const TensorType type = t.type();
    if (t.status != TypeStatus::supported || t.block_size == 0 || n_per_row % t.block_size != 0) continue;
    if (!only.empty() && std::find(only.begin(), only.end(), std::string(t.name)) == only.end()) continue;
    const QuantCapabilities caps = quant_capabilities(type);
    const size_t row_bytes = static_cast<size_t>(*row_size(type, n_per_row));
    std::vector<std::byte> ours(row_bytes * rows), theirs(row_bytes * rows);

    // Quantize: ggml's bytes are the reference; the dequantize rows below decode them.
    // The types ggml_quantize_chunk encodes without an importance matrix (it aborts on the others).
    const bool ggml_quantizes = !oracle->requires_imatrix(static_cast<uint32_t>(type)) && type != TensorType::Q8_1 &&
                                type != TensorType::Q8_K &&
                                (t.quantized || type == TensorType::F16 || type == TensorType::BF16);
    if (ggml_quantizes) oracle->quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), rows, n_per_row, nullptr);
    if (caps.quantize && ggml_quantizes && !caps.requires_imatrix) {
      if (!quantize(type, src, ours, n_per_row) || ours != theirs) {
        std::printf("%-8s %-10s differs from ggml: not measured\n", t.name.data(), "quantize");
      } else {
        const double g1 = seconds_per_run(budget, [&] { (void)quantize(type, src, ours, n_per_row, {}, Threads{1}); });
        const double o1 = seconds_per_run(budget, [&] {
          oracle->quantize_chunk(static_cast<uint32_t>(type), src.data(), theirs.data(), rows, n_per_row, nullptr);
        });
        const double gn = seconds_per_run(budget, [&] { (void)quantize(type, src, ours, n_per_row, {}, Threads{cores}); });
        const double on = seconds_per_run(budget, [&] {
          split_rows(rows, n_per_row, cores, [&](int64_t b, int64_t e) {
            oracle->quantize_chunk(static_cast<uint32_t>(type), src.data() + b * n_per_row,
                                   theirs.data() + static_cast<size_t>(b) * row_bytes, e - b, n_per_row, nullptr);
          });
        });
        std::printf("%-8s %-10s %10.1f %10.1f %6.2fx   %10.1f %10.1f %6.2fx %7.2fx %7.2fx\n", t.name.data(),
                    "quantize", rate(g1), rate(o1), o1 / g1, rate(gn), rate(on), on / gn, g1 / gn, o1 / on);
      }
    }

    const auto to_float = oracle->to_float(static_cast<uint32_t>(type));
    if (caps.dequantize && to_float != nullptr) {
      const std::vector<std::byte>& bytes = ggml_quantizes ? theirs : ours;
      if (!ggml_quantizes) {  // types ggml cannot quantize without an importance matrix: random blocks
        std::mt19937_64 brng(2);
        for (auto& b : ours) b = std::byte(brng() & 0x3F);  // small scales: no NaN or infinity
      }
      std::vector<float> a(src.size()), b(src.size());
      (void)dequantize(type, bytes, a);
      to_float(bytes.data(), b.data(), static_cast<int64_t>(b.size()));
      if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
        std::printf("%-8s %-10s differs from ggml: not measured\n", t.name.data(), "dequantize");
        continue;
      }
      const double g1 = seconds_per_run(budget, [&] { (void)dequantize(type, bytes, a, Threads{1}); });
      const double o1 = seconds_per_run(budget, [&] { to_float(bytes.data(), b.data(), static_cast<int64_t>(b.size())); });
      const double gn = seconds_per_run(budget, [&] { (void)dequantize(type, bytes, a, Threads{cores}); });
      const double on = seconds_per_run(budget, [&] {
        split_rows(rows, n_per_row, cores, [&](int64_t rb, int64_t re) {
          to_float(bytes.data() + static_cast<size_t>(rb) * row_bytes, b.data() + rb * n_per_row, (re - rb) * n_per_row);
        });
      });
      std::printf("%-8s %-10s %10.1f %10.1f %6.2fx   %10.1f %10.1f %6.2fx %7.2fx %7.2fx\n", t.name.data(),
                  "dequantize", rate(g1), rate(o1), o1 / g1, rate(gn), rate(on), on / gn, g1 / gn, o1 / on);
    }
  }
  return 0;
}
