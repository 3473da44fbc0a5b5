#include "quant_oracle.h"

#include <dlfcn.h>

#include <cstdlib>

#include "oracle_library.h"

const QuantOracle* QuantOracle::get(std::string* why_not) {
  static std::string reason;
  static const QuantOracle* oracle = []() -> const QuantOracle* {
    void* handle = ggufkit::test::open_oracle_library(
        "libggml-base.so", {"ggml_get_type_traits", "ggml_quantize_chunk", "ggml_quantize_requires_imatrix"}, &reason);
    if (handle == nullptr) return nullptr;
    auto* o = new QuantOracle();
    o->get_type_traits_ = reinterpret_cast<decltype(o->get_type_traits_)>(dlsym(handle, "ggml_get_type_traits"));
    o->quantize_chunk_ = reinterpret_cast<decltype(o->quantize_chunk_)>(dlsym(handle, "ggml_quantize_chunk"));
    o->requires_imatrix_ =
        reinterpret_cast<decltype(o->requires_imatrix_)>(dlsym(handle, "ggml_quantize_requires_imatrix"));
    return o;
  }();
  if (why_not) *why_not = reason;
  return oracle;
}

QuantOracle::ToFloat QuantOracle::to_float(uint32_t type) const { return get_type_traits_(static_cast<int>(type))->to_float; }

size_t QuantOracle::quantize_chunk(uint32_t type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                                   const float* imatrix) const {
  return quantize_chunk_(static_cast<int>(type), src, dst, 0, nrows, n_per_row, imatrix);
}

bool QuantOracle::requires_imatrix(uint32_t type) const { return requires_imatrix_(static_cast<int>(type)); }
