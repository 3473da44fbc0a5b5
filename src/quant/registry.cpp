#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "format/checked_math.h"
#include "ggufkit/quant.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/thread_pool.h"

namespace ggufkit {
namespace quant {

namespace {

// A mistake in the registrations is a programming error: found on the first use of any kernel,
// which every test run makes.
[[noreturn]] void registry_broken(TensorType type, std::string_view what) {
  fmt::print(stderr, "ggufkit: the kernel registry is inconsistent: {} (type id {}): {}\n", type_name(type),
             static_cast<uint32_t>(type), what);
  std::abort();
}

void merge(KernelTable& into, const KernelTable& part) {
  for (uint32_t id = 0; id < kTensorTypeIdLimit; ++id) {
    const auto type = static_cast<TensorType>(id);
    TypeKernels& k = into[id];
    const TypeKernels& p = part[id];
    if (p.dequantize != nullptr) {
      if (k.dequantize != nullptr) registry_broken(type, "two families register a dequantize kernel");
      k.dequantize = p.dequantize;
    }
    if (p.quantize != nullptr) {
      if (k.quantize != nullptr) registry_broken(type, "two families register a quantize kernel");
      k.quantize = p.quantize;
      k.accepts_imatrix = p.accepts_imatrix;
      k.requires_imatrix = p.requires_imatrix;
    } else if (p.accepts_imatrix || p.requires_imatrix) {
      registry_broken(type, "importance-matrix flags without a quantize kernel");
    }
    if (p.block_bytes != 0) {
      if (k.block_bytes != 0 && (k.block_bytes != p.block_bytes || k.block_size != p.block_size)) {
        registry_broken(type, "two families state different blocks");
      }
      k.block_size = p.block_size;
      k.block_bytes = p.block_bytes;
    }
  }
}

void check_against_type_table(const KernelTable& table) {
  for (const TypeTraits& traits : all_type_traits()) {
    const TypeKernels& k = table[traits.id];
    const bool any = k.dequantize != nullptr || k.quantize != nullptr;
    if (traits.status != TypeStatus::supported) {
      if (any) registry_broken(traits.type(), "kernels for a type the table does not support");
      continue;
    }
    if (k.dequantize == nullptr) registry_broken(traits.type(), "a supported type without a dequantize kernel");
    if (k.block_bytes != 0 && (k.block_bytes != traits.block_bytes || k.block_size != traits.block_size)) {
      registry_broken(traits.type(), fmt::format("the kernels' block is {} values in {} bytes, the type table's {} in {}",
                                                 k.block_size, k.block_bytes, traits.block_size, traits.block_bytes));
    }
  }
}

}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t{};
    for (auto family : {register_float_kernels, register_legacy_kernels, register_kquant_kernels,
                        register_iquant_kernels, register_fp4_kernels, register_ternary_kernels,
                        register_iq3s_quantizer, register_iq2_quantizers, register_iq3xxs_quantizer}) {
      KernelTable part{};
      family(part);
      merge(t, part);
    }
    check_against_type_table(t);
    return t;
  }();
  return table;
}

}  // namespace quant

namespace {

// Work handed to one thread at a time: small enough to balance the load when a core is busy with
// something else, large enough that taking it costs nothing measurable.
constexpr int64_t kValuesPerTask = 65536;

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
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("cannot dequantize type {}", static_cast<uint32_t>(type)));
  }
  const TypeTraits& traits = type_traits(type);
  const auto need = row_size(type, static_cast<int64_t>(dst.size()));
  if (!need || *need != src.size()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {},
                      fmt::format("{} bytes of {} do not hold {} elements", src.size(), traits.name, dst.size()));
  }
  // Blocks are independent: the pool's threads decode runs of them (about 64 Ki values each).
  const int64_t blocks = static_cast<int64_t>(dst.size() / traits.block_size);
  const int64_t blocks_per_task = std::max<int64_t>(1, kValuesPerTask / static_cast<int64_t>(traits.block_size));
  quant::parallel_ranges(blocks, threads.count, blocks_per_task, [&](int64_t begin, int64_t end) {
    k->dequantize(src.data() + begin * traits.block_bytes, dst.data() + begin * traits.block_size,
                  (end - begin) * traits.block_size);
    quant::simd::leave_vector_code();
  });
  return {};
}

Expected<void> quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst, int64_t n_per_row,
                        std::span<const float> imatrix, Threads threads) {
  const quant::TypeKernels* k = kernels_of(type);
  if (k == nullptr || k->quantize == nullptr) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("cannot quantize to type {}", static_cast<uint32_t>(type)));
  }
  const TypeTraits& traits = type_traits(type);
  if (n_per_row <= 0 || src.size() % static_cast<uint64_t>(n_per_row) != 0) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "the input is not a whole number of rows");
  }
  const auto row = row_size(type, n_per_row);
  if (!row) {
    return make_error(ErrorCode::block_size_mismatch, std::nullopt, {},
                      fmt::format("rows of {} are not a multiple of {}'s block size {}", n_per_row, traits.name,
                                  traits.block_size));
  }
  const uint64_t nrows = src.size() / static_cast<uint64_t>(n_per_row);
  const auto need = checked::mul(nrows, *row);
  if (!need || *need != dst.size()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "the output does not have the size of the quantized rows");
  }
  if (!imatrix.empty() && imatrix.size() != static_cast<uint64_t>(n_per_row)) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, "the importance matrix must have one weight per column");
  }
  if (imatrix.empty() && k->requires_imatrix) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, {}, fmt::format("{} needs an importance matrix", traits.name));
  }
  const float* weights = imatrix.empty() || !k->accepts_imatrix ? nullptr : imatrix.data();
  // Rows are independent (ggml quantizes row by row too): the pool's threads take runs of rows.
  const int64_t rows_per_task = std::max<int64_t>(1, kValuesPerTask / n_per_row);
  quant::parallel_ranges(static_cast<int64_t>(nrows), threads.count, rows_per_task, [&](int64_t begin, int64_t end) {
    k->quantize(src.data() + begin * n_per_row, dst.data() + static_cast<uint64_t>(begin) * *row, end - begin, n_per_row,
                weights);
    quant::simd::leave_vector_code();
  });
  return {};
}

}  // namespace ggufkit
