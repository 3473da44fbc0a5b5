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

Expected<void> dequantize(TensorType type, std::span<const std::byte> src, std::span<float> dst) {
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
  k->dequantize(src.data(), dst.data(), static_cast<int64_t>(dst.size()));
  return {};
}

Expected<void> quantize(TensorType type, std::span<const float> src, std::span<std::byte> dst, int64_t n_per_row,
                        std::span<const float> imatrix) {
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
  k->quantize(src.data(), dst.data(), static_cast<int64_t>(nrows), n_per_row,
              imatrix.empty() || !k->accepts_imatrix ? nullptr : imatrix.data());
  return {};
}

}  // namespace ggufkit
