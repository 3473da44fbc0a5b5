#include <algorithm>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "format/checked_math.h"
#include "ggufkit/quant.h"
#include "quant/kernels.h"

namespace ggufkit {
namespace quant {

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t{};
    register_float_kernels(t);
    register_legacy_kernels(t);
    register_kquant_kernels(t);
    register_iquant_kernels(t);
    register_fp4_kernels(t);
    register_ternary_kernels(t);
    register_iq3s_quantizer(t);
    return t;
  }();
  return table;
}

}  // namespace quant

namespace {

// Runs work(begin, end) over [0, units) split into contiguous runs, one per thread.
template <class Work>
void run_split(int64_t units, Threads threads, int64_t min_units_per_thread, Work work) {
  unsigned n = threads.count == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads.count;
  n = static_cast<unsigned>(std::min<int64_t>(n, std::max<int64_t>(1, units / std::max<int64_t>(1, min_units_per_thread))));
  if (n <= 1) {
    work(int64_t{0}, units);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t per = (units + n - 1) / n;
  for (unsigned i = 0; i < n; ++i) {
    const int64_t begin = std::min<int64_t>(units, per * i), end = std::min<int64_t>(units, begin + per);
    if (begin < end) pool.emplace_back(work, begin, end);
  }
  for (std::thread& t : pool) t.join();
}

const quant::TypeKernels* kernels_of(TensorType type) {
  const auto id = static_cast<uint32_t>(type);
  return id < kTensorTypeIdLimit ? &quant::kernel_table()[id] : nullptr;
}
}  // namespace

QuantCapabilities quant_capabilities(TensorType type) {
  const quant::TypeKernels* k = kernels_of(type);
  if (k == nullptr) return {};
  return {k->dequantize != nullptr, k->quantize != nullptr, k->accepts_imatrix, k->requires_imatrix};
}

Expected<void> dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst, Threads threads) {
  const quant::TypeKernels* k = kernels_of(type);
  if (k == nullptr || k->dequantize == nullptr) {
    return make_error(ErrorCode::invalid_argument, 0, {}, fmt::format("cannot dequantize type {}", static_cast<uint32_t>(type)));
  }
  const TypeTraits& traits = type_traits(type);
  const auto need = row_size(type, static_cast<int64_t>(dst.size()));
  if (!need || *need != src.size()) {
    return make_error(ErrorCode::invalid_argument, 0, {},
                      fmt::format("{} bytes of {} do not hold {} elements", src.size(), traits.name, dst.size()));
  }
  // Blocks are independent: each thread decodes its own run of them.
  const int64_t blocks = static_cast<int64_t>(dst.size() / traits.block_size);
  run_split(blocks, threads, 4096, [&](int64_t begin, int64_t end) {
    k->dequantize(src.data() + begin * traits.block_bytes, dst.data() + begin * traits.block_size,
                  (end - begin) * traits.block_size);
  });
  return {};
}

Expected<void> quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst, int64_t n_per_row,
                        std::span<const float> imatrix, Threads threads) {
  const quant::TypeKernels* k = kernels_of(type);
  if (k == nullptr || k->quantize == nullptr) {
    return make_error(ErrorCode::invalid_argument, 0, {}, fmt::format("cannot quantize to type {}", static_cast<uint32_t>(type)));
  }
  const TypeTraits& traits = type_traits(type);
  if (n_per_row <= 0 || src.size() % static_cast<uint64_t>(n_per_row) != 0) {
    return make_error(ErrorCode::invalid_argument, 0, {}, "the input is not a whole number of rows");
  }
  const auto row = row_size(type, n_per_row);
  if (!row) {
    return make_error(ErrorCode::block_size_mismatch, 0, {},
                      fmt::format("rows of {} are not a multiple of {}'s block size {}", n_per_row, traits.name,
                                  traits.block_size));
  }
  const uint64_t nrows = src.size() / static_cast<uint64_t>(n_per_row);
  const auto need = checked::mul(nrows, *row);
  if (!need || *need != dst.size()) {
    return make_error(ErrorCode::invalid_argument, 0, {}, "the output does not have the size of the quantized rows");
  }
  if (!imatrix.empty() && imatrix.size() != static_cast<uint64_t>(n_per_row)) {
    return make_error(ErrorCode::invalid_argument, 0, {}, "the importance matrix must have one weight per column");
  }
  if (imatrix.empty() && k->requires_imatrix) {
    return make_error(ErrorCode::invalid_argument, 0, {}, fmt::format("{} needs an importance matrix", traits.name));
  }
  const float* weights = imatrix.empty() || !k->accepts_imatrix ? nullptr : imatrix.data();
  // Rows are independent (ggml quantizes row by row too): each thread takes its own run of rows.
  run_split(static_cast<int64_t>(nrows), threads, std::max<int64_t>(1, 65536 / n_per_row), [&](int64_t begin, int64_t end) {
    k->quantize(src.data() + begin * n_per_row, dst.data() + static_cast<uint64_t>(begin) * *row, end - begin, n_per_row,
                weights);
  });
  return {};
}

}  // namespace ggufkit
