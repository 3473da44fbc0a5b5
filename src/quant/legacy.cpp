// The legacy block formats: one fp16 scale (and for the _1 types an fp16 min) per block of 32
// (q1_0: 128, q2_0: 64) values. Without an importance matrix ggml rounds against the block's
// extreme value; with one, q4_0/q4_1/q5_0/q5_1 search the scale with make_qx_quants or
// make_qkx3_quants instead.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/search.h"

namespace ggufkit::quant {
namespace {

struct BlockQ4_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];  // element j in the low nibble of qs[j], element j+16 in the high one
};
struct BlockQ4_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qh[4];  // bit j: the fifth bit of element j
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  static constexpr int kElements = 32;
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  static constexpr int kElements = 32;
  uint16_t d, s;  // s = d * sum(qs), used by dot products only
  int8_t qs[32];
};
struct BlockQ1_0 {
  static constexpr int kElements = 128;
  uint16_t d;
  uint8_t qs[16];  // bit j: element j is +d (set) or -d
};
struct BlockQ2_0 {
  static constexpr int kElements = 64;
  uint16_t d;
  uint8_t qs[16];  // 2-bit codes, element j at bits 2*(j%4) of qs[j/4]: code - 1 in {-1, 0, 1, 2}
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 &&
              sizeof(BlockQ1_0) == 18 && sizeof(BlockQ2_0) == 18);

float half(uint16_t h) { return fp16_to_fp32(h); }
uint16_t to_half(float f) { return fp32_to_fp16(f); }

// ggml's reference quantizers cast floats to (u)int8 directly. Its x86 build converts to int32
// with truncation (NaN and out-of-range values give INT32_MIN) and keeps the low byte; we do the
// same without the undefined behaviour.
int32_t truncate_to_int32(float f) {
  if (!(f >= -2147483648.0f && f < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(f);
}
int8_t truncate_to_int8(float f) { return static_cast<int8_t>(static_cast<uint8_t>(truncate_to_int32(f) & 0xFF)); }
uint8_t truncate_to_uint8(float f) { return static_cast<uint8_t>(truncate_to_int32(f) & 0xFF); }

// The value of largest magnitude in the block (the first one on ties), 0 for an all-zero block.
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

struct MinMax {
  float min = FLT_MAX;
  float max = -FLT_MAX;
};
MinMax min_max(const float* x, int n) {
  MinMax r;
  for (int j = 0; j < n; ++j) {
    if (x[j] < r.min) r.min = x[j];
    if (x[j] > r.max) r.max = x[j];
  }
  return r;
}

uint8_t pack_nibbles(int low, int high) { return static_cast<uint8_t>(low | (high << 4)); }

// Splits 5-bit levels (element j and j+16 of a block) into the nibbles and the qh bit mask.
template <class Block, class Level>
void pack_5bit(const Level* levels, Block& b) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(levels[j]);
    const auto l1 = static_cast<uint8_t>(levels[j + 16]);
    b.qs[j] = pack_nibbles(l0 & 0x0F, l1 & 0x0F);
    qh |= ((l0 & 0x10u) >> 4) << j;
    qh |= ((l1 & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof qh);
}

// The 5-bit level of element j (and of j + 16 through `high`).
template <class Block>
int level_5bit(const Block& b, uint32_t qh, int j, bool high) {
  const int nibble = high ? b.qs[j] >> 4 : b.qs[j] & 0x0F;
  const int bit = static_cast<int>((qh >> (j + (high ? 16 : 0))) & 1u);
  return nibble | (bit << 4);
}

// ---- dequantize

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ4_0>(src, dst, n, [](const BlockQ4_0& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
      y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
    }
  });
}

void dequantize_q4_1(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ4_1>(src, dst, n, [](const BlockQ4_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(b.qs[j] & 0x0F) * d + m;
      y[j + 16] = static_cast<float>(b.qs[j] >> 4) * d + m;
    }
  });
}

void dequantize_q5_0(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ5_0>(src, dst, n, [](const BlockQ5_0& b, float* y) {
    const float d = half(b.d);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(level_5bit(b, qh, j, false) - 16) * d;
      y[j + 16] = static_cast<float>(level_5bit(b, qh, j, true) - 16) * d;
    }
  });
}

void dequantize_q5_1(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ5_1>(src, dst, n, [](const BlockQ5_1& b, float* y) {
    const float d = half(b.d), m = half(b.m);
    uint32_t qh;
    std::memcpy(&qh, b.qh, sizeof qh);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(level_5bit(b, qh, j, false)) * d + m;
      y[j + 16] = static_cast<float>(level_5bit(b, qh, j, true)) * d + m;
    }
  });
}

template <class Block>
void dequantize_q8(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<Block>(src, dst, n, [](const Block& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
  });
}

void dequantize_q1_0(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ1_0>(src, dst, n, [](const BlockQ1_0& b, float* y) {
    const float d = half(b.d);
    const float neg_d = -d;
    for (int j = 0; j < 128; ++j) y[j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : neg_d;
  });
}

void dequantize_q2_0(const std::byte* src, float* dst, int64_t n) {
  decode_blocks<BlockQ2_0>(src, dst, n, [](const BlockQ2_0& b, float* y) {
    const float d = half(b.d);
    for (int j = 0; j < 64; ++j) {
      const int code = (b.qs[j / 4] >> (2 * (j % 4))) & 3;
      y[j] = static_cast<float>(code - 1) * d;
    }
  });
}

// ---- quantize without an importance matrix (ggml's _ref quantizers)

void encode_q4_0(const float* x, BlockQ4_0& b) {
  const float d = signed_absmax(x, 32) / -8;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(x[j] * id + 8.5f)));
    const auto l1 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8(x[j + 16] * id + 8.5f)));
    b.qs[j] = pack_nibbles(l0, l1);
  }
}

void encode_q4_1(const float* x, BlockQ4_1& b) {
  const MinMax r = min_max(x, 32);
  const float d = (r.max - r.min) / 15;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  b.m = to_half(r.min);
  for (int j = 0; j < 16; ++j) {
    const auto l0 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8((x[j] - r.min) * id + 0.5f)));
    const auto l1 = static_cast<uint8_t>(std::min<int>(15, truncate_to_int8((x[j + 16] - r.min) * id + 0.5f)));
    b.qs[j] = pack_nibbles(l0, l1);
  }
}

void encode_q5_0(const float* x, BlockQ5_0& b) {
  const float d = signed_absmax(x, 32) / -16;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  uint8_t levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = static_cast<uint8_t>(std::min<int>(31, truncate_to_int8(x[j] * id + 16.5f)));
  pack_5bit(levels, b);
}

void encode_q5_1(const float* x, BlockQ5_1& b) {
  const MinMax r = min_max(x, 32);
  const float d = (r.max - r.min) / 31;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  b.m = to_half(r.min);
  uint8_t levels[32];
  for (int j = 0; j < 32; ++j) levels[j] = truncate_to_uint8((x[j] - r.min) * id + 0.5f);
  pack_5bit(levels, b);
}

void encode_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = amax > std::fabs(x[j]) ? amax : std::fabs(x[j]);
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = to_half(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = truncate_to_int8(std::round(x[j] * id));
}

// One bit per value (its sign), scaled by the mean magnitude.
void encode_q1_0(const float* x, BlockQ1_0& b) {
  float sum_abs = 0.0f;
  for (int j = 0; j < 128; ++j) sum_abs += std::fabs(x[j]);
  b.d = to_half(sum_abs / 128);
  for (int j = 0; j < 128; ++j) {
    if (x[j] >= 0.0f) b.qs[j / 8] = static_cast<uint8_t>(b.qs[j / 8] | (1 << (j % 8)));
  }
}

// Levels -1, 0, 1, 2 times the block's largest magnitude.
void encode_q2_0(const float* x, BlockQ2_0& b) {
  float amax = 0.0f;
  for (int j = 0; j < 64; ++j) {
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]);
  }
  const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
  b.d = to_half(amax);
  for (int j = 0; j < 64; ++j) {
    int code = truncate_to_int32(std::round(x[j] * id)) + 1;
    code = code < 0 ? 0 : code > 3 ? 3 : code;
    b.qs[j / 4] = static_cast<uint8_t>(b.qs[j / 4] | (code << (2 * (j % 4))));
  }
}

template <class Block, void (*Encode)(const float*, Block&)>
void quantize_plain(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float*) {
  encode_blocks<Block>(src, dst, nrows * n_per_row, Encode);
}

// ---- quantize with an importance matrix

// ggml weighs each value by imatrix * sqrt(sigma2 + x²), sigma2 the mean square of its row, then
// searches each block's scale with those weights.
template <class Block, class EncodeWeighted>
void quantize_rows_weighted(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                            const float* imatrix, EncodeWeighted encode) {
  const int64_t blocks_per_row = n_per_row / Block::kElements;
  for (int64_t row = 0; row < nrows; ++row) {
    const float* x = src + row * n_per_row;
    std::byte* row_dst = dst + row * blocks_per_row * static_cast<int64_t>(sizeof(Block));
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; ++j) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / static_cast<float>(n_per_row);
    for (int64_t ib = 0; ib < blocks_per_row; ++ib) {
      const float* xb = x + ib * Block::kElements;
      const float* qw = imatrix + ib * Block::kElements;
      float weight[Block::kElements];
      for (int j = 0; j < Block::kElements; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + xb[j] * xb[j]);
      Block b{};
      encode(xb, weight, b);
      store_block(row_dst, ib, b);
    }
  }
}

template <class Block, void (*Encode)(const float*, Block&), void (*EncodeWeighted)(const float*, const float*, Block&)>
void quantize_with_optional_imatrix(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row,
                                    const float* imatrix) {
  if (imatrix == nullptr) {
    encode_blocks<Block>(src, dst, nrows * n_per_row, Encode);
  } else {
    quantize_rows_weighted<Block>(src, dst, nrows, n_per_row, imatrix, EncodeWeighted);
  }
}

void encode_q4_0_weighted(const float* x, const float* weight, BlockQ4_0& b) {
  int8_t levels[32];
  b.d = to_half(make_qx_quants(32, 8, x, levels, 1, weight));
  for (int j = 0; j < 16; ++j) b.qs[j] = pack_nibbles(levels[j], levels[j + 16]);
}

void encode_q5_0_weighted(const float* x, const float* weight, BlockQ5_0& b) {
  int8_t levels[32];
  b.d = to_half(make_qx_quants(32, 16, x, levels, 1, weight));
  pack_5bit(levels, b);
}

void encode_q4_1_weighted(const float* x, const float* weight, BlockQ4_1& b) {
  uint8_t levels[32];
  const AffineFit fit = make_qkx3_quants(32, 15, x, weight, levels, -0.9f, 0.05f, 36, false);
  b.d = to_half(fit.scale);
  b.m = to_half(-fit.offset);
  for (int j = 0; j < 16; ++j) b.qs[j] = pack_nibbles(levels[j], levels[j + 16]);
}

void encode_q5_1_weighted(const float* x, const float* weight, BlockQ5_1& b) {
  uint8_t levels[32];
  const AffineFit fit = make_qkx3_quants(32, 31, x, weight, levels, -0.9f, 0.05f, 36, false);
  b.d = to_half(fit.scale);
  b.m = to_half(-fit.offset);
  pack_5bit(levels, b);
}

}  // namespace

void register_legacy_kernels(KernelTable& t) {
  entry(t, TensorType::Q8_0) = {dequantize_q8<BlockQ8_0>, quantize_plain<BlockQ8_0, encode_q8_0>};
  entry(t, TensorType::Q8_1).dequantize = dequantize_q8<BlockQ8_1>;
  entry(t, TensorType::Q4_0) = {dequantize_q4_0,
                                quantize_with_optional_imatrix<BlockQ4_0, encode_q4_0, encode_q4_0_weighted>, true};
  entry(t, TensorType::Q4_1) = {dequantize_q4_1,
                                quantize_with_optional_imatrix<BlockQ4_1, encode_q4_1, encode_q4_1_weighted>, true};
  entry(t, TensorType::Q5_0) = {dequantize_q5_0,
                                quantize_with_optional_imatrix<BlockQ5_0, encode_q5_0, encode_q5_0_weighted>, true};
  entry(t, TensorType::Q5_1) = {dequantize_q5_1,
                                quantize_with_optional_imatrix<BlockQ5_1, encode_q5_1, encode_q5_1_weighted>, true};
  // ggml's quantize_q1_0 / quantize_q2_0 take an importance matrix but do not use it.
  entry(t, TensorType::Q1_0) = {dequantize_q1_0, quantize_plain<BlockQ1_0, encode_q1_0>};
  entry(t, TensorType::Q2_0) = {dequantize_q2_0, quantize_plain<BlockQ2_0, encode_q2_0>};
}

}  // namespace ggufkit::quant
