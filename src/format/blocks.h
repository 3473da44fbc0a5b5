// ggml's block structs, each defined once (ggml-common.h's block_* with QK_K = 256), with its size
// asserted: the kernels (quant/) read and write through them and state them to the registry, which
// checks them against the type table (tensor_types.cpp) when it is built; the byte-order layouts
// (block_layout.cpp) take their field offsets from them. Fields that ggml fills and reads as 16- or
// 32-bit words are noted where the struct holds bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ggufkit::format {

inline constexpr int kSuperBlock = 256;  // QK_K

// ---- legacy: 32 values a block (Q1_0: 128, Q2_0: 64) ----
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
  uint8_t qh[4];  // bit j: the fifth bit of element j (stored and read as one uint32)
  uint8_t qs[16];
};
struct BlockQ5_1 {
  static constexpr int kElements = 32;
  uint16_t d, m;
  uint8_t qh[4];  // one uint32, as in Q5_0
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

// ---- k-quants: 256 values a block ----
struct BlockQ2K {
  static constexpr int kElements = kSuperBlock;
  uint8_t scales[16];  // per 16 values: scale in the low nibble, min in the high one
  uint8_t qs[64];      // 2-bit levels
  uint16_t d, dmin;
};
struct BlockQ3K {
  static constexpr int kElements = kSuperBlock;
  uint8_t hmask[32];   // third bit of value e: bit e/32 of hmask[e%32]
  uint8_t qs[64];      // low 2 bits
  uint8_t scales[12];  // 16 six-bit scales, offset by 32
  uint16_t d;
};
struct BlockQ4K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d, dmin;
  uint8_t scales[12];  // 8 six-bit scales and mins
  uint8_t qs[128];     // value e: nibble (e/32)%2 of qs[(e/64)*32 + e%32]
};
struct BlockQ5K {
  static constexpr int kElements = kSuperBlock;
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];  // fifth bit of value e: bit e/32 of qh[e%32]
  uint8_t qs[128];
};
struct BlockQ6K {
  static constexpr int kElements = kSuperBlock;
  uint8_t ql[128];  // low 4 bits
  uint8_t qh[64];   // high 2 bits
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8K {
  static constexpr int kElements = kSuperBlock;
  float d;
  int8_t qs[256];
  int16_t bsums[16];  // sums of 16 quants, for dot products
};

// ---- i-quants ----
struct BlockIQ2XXS {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];  // written as uint32 words, read back byte by byte: no byte order is defined
};
struct BlockIQ2XS {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t qs[32];
  uint8_t scales[8];
};
struct BlockIQ2S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t scales[8];
};
struct BlockIQ3XXS {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t grid[64];             // grid indices
  uint8_t scales_and_signs[32];  // 8 uint32 words
};
struct BlockIQ3S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[64];
  uint8_t qh[8];
  uint8_t signs[32];
  uint8_t scales[4];
};
struct BlockIQ1S {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint8_t qs[32];
  uint16_t qh[8];
};
struct BlockIQ1M {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[32];
  uint8_t qh[16];
  uint8_t scales[8];  // read as 4 uint16 words (the block's scale is spread over their top bits)
};
struct BlockIQ4NL {
  static constexpr int kElements = 32;
  uint16_t d;
  uint8_t qs[16];
};
struct BlockIQ4XS {
  static constexpr int kElements = kSuperBlock;
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};

// ---- ternary and fp4 ----
struct BlockTQ1_0 {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[48];  // five trits a byte
  uint8_t qh[4];   // four trits a byte
  uint16_t d;
};
struct BlockTQ2_0 {
  static constexpr int kElements = kSuperBlock;
  uint8_t qs[64];  // four 2-bit values a byte
  uint16_t d;
};
struct BlockMXFP4 {
  static constexpr int kElements = 32;
  uint8_t e;  // e8m0 scale
  uint8_t qs[16];
};
struct BlockNVFP4 {
  static constexpr int kElements = 64;
  uint8_t scales[4];  // e4m3, one per 16 values
  uint8_t qs[32];
};

// ggml's sizes (ggml-common.h's static_asserts).
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36 &&
              sizeof(BlockQ1_0) == 18 && sizeof(BlockQ2_0) == 18);
static_assert(sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 && sizeof(BlockQ4K) == 144 &&
              sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210 && sizeof(BlockQ8K) == 292);
static_assert(sizeof(BlockIQ2XXS) == 66 && sizeof(BlockIQ2XS) == 74 && sizeof(BlockIQ2S) == 82 &&
              sizeof(BlockIQ3XXS) == 98 && sizeof(BlockIQ3S) == 110 && sizeof(BlockIQ1S) == 50 &&
              sizeof(BlockIQ1M) == 56 && sizeof(BlockIQ4NL) == 18 && sizeof(BlockIQ4XS) == 136);
static_assert(sizeof(BlockTQ1_0) == 54 && sizeof(BlockTQ2_0) == 66 && sizeof(BlockMXFP4) == 17 &&
              sizeof(BlockNVFP4) == 36);

}  // namespace ggufkit::format
