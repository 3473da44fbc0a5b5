// ggml's own conversions, from the oracle libggml-base.so (node-llama-cpp@3.21.1): the per-type
// to_float of ggml_get_type_traits and ggml_quantize_chunk. Loaded with dlopen at test time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

class QuantOracle {
 public:
  using ToFloat = void (*)(const void* src, float* dst, int64_t n);

  // Null when the oracle is not installed; why_not says why.
  static const QuantOracle* get(std::string* why_not);

  // ggml's to_float for a type id; null when ggml has none for it.
  ToFloat to_float(uint32_t type) const;
  // ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, imatrix); returns bytes written.
  size_t quantize_chunk(uint32_t type, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                        const float* imatrix) const;
  bool requires_imatrix(uint32_t type) const;

 private:
  struct TypeTraits {  // struct ggml_type_traits (ggml.h)
    const char* type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    ToFloat to_float;
    void* from_float_ref;
  };
  const TypeTraits* (*get_type_traits_)(int type) = nullptr;
  size_t (*quantize_chunk_)(int type, const float* src, void* dst, int64_t start, int64_t nrows,
                            int64_t n_per_row, const float* imatrix) = nullptr;
  bool (*requires_imatrix_)(int type) = nullptr;
};

// Skips the test when the oracle is absent.
#define REQUIRE_QUANT_ORACLE(name)                                                                      \
  std::string name##_why;                                                                               \
  const QuantOracle* name = QuantOracle::get(&name##_why);                                              \
  if (name == nullptr) GTEST_SKIP() << "skipped: llama.cpp oracle not installed (run scripts/install-oracle.sh): " \
                                    << name##_why
