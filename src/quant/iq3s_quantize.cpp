// IQ3_S quantization, byte for byte what ggml's quantize_iq3_s writes (with or without an
// importance matrix).
//
// A super-block of 256 values is stored as: fp16 d, 64 low bytes of grid indices (qs), 8 bytes
// holding the 9th bit of each grid index (qh), 32 sign bytes (one bit per value) and 4 bytes of
// 4-bit sub-block scales. Each group of 4 magnitudes is one entry of the 512-point iq3s grid, whose
// coordinates are the odd levels 1, 3, ..., 15 (level index 0..7, 3 bits each).
//
// The search per sub-block of 32 values: try 19 candidate scales around max/15, round every
// magnitude to a level, and when a group of 4 levels is not a grid point, take the closest grid
// point among that code's precomputed neighbours; keep the scale with the best weighted fit. If
// that fit used neighbours, round all groups again at the fitted scale and refit once. Everything
// here keeps ggml's float operations and their order: a single different rounding changes bytes.
// The grid index and the search (scalar and AVX2) are shared with IQ3_XXS (quant/iq3_grid.h).
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "format/blocks.h"
#include "quant/iq3_grid.h"
#include "quant/kernels.h"

namespace ggufkit::quant {
namespace {

using iq3::ggml_max;
using iq3::ggml_min;
using iq3::kGroupsPerSubBlock;
using iq3::kSubBlockValues;
using iq3::kSubBlocks;
using iq3::kSuperBlockValues;

constexpr int kSignBytesPerSubBlock = kSubBlockValues / 8;  // 4

// block_iq3_s layout.
constexpr size_t kScaleOffset = 0;
constexpr size_t kQsOffset = 2;
constexpr size_t kQhOffset = kQsOffset + kSuperBlockValues / 4;      // 66
constexpr size_t kSignsOffset = kQhOffset + kSuperBlockValues / 32;  // 74
constexpr size_t kScalesOffset = kSignsOffset + kSuperBlockValues / 8;  // 106
constexpr size_t kBlockBytes = kScalesOffset + kSuperBlockValues / 64;  // 110
static_assert(kBlockBytes == sizeof(format::BlockIQ3S) && kScalesOffset == offsetof(format::BlockIQ3S, scales));

// One super-block's inputs to the search, and its signs.
struct PreparedBlock : iq3::SearchInputs {
  uint8_t signs[kSubBlocks][kSignBytesPerSubBlock];
};

void prepare_block(const float* x, const float* importance, PreparedBlock& p) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlockValues; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = 2 * sumx2 / kSuperBlockValues;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const float* xb = x + kSubBlockValues * ib;
    float* weight = p.weight[ib];
    float* magnitudes = p.magnitudes[ib];
    if (importance != nullptr) {
      const float* qw = importance + kSubBlockValues * ib;
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < kSubBlockValues; ++i) p.error_weight[ib][i] = std::sqrt(weight[i]);
    for (int k = 0; k < kSignBytesPerSubBlock; ++k) {
      uint8_t s = 0;
      for (int i = 0; i < 8; ++i) {
        const float v = xb[8 * k + i];
        if (v >= 0) {
          magnitudes[8 * k + i] = v;
        } else {
          magnitudes[8 * k + i] = -v;
          s |= static_cast<uint8_t>(1u << i);
        }
      }
      p.signs[ib][k] = s;
    }
    float max = magnitudes[0];
    for (int i = 1; i < kSubBlockValues; ++i) max = ggml_max(max, magnitudes[i]);
    p.max[ib] = max;
  }
}

// Writes the block from the chosen scales and grid points.
void pack_block(const PreparedBlock& p, const iq3::BlockChoice& choice, uint8_t* block) {
  std::memset(block, 0, kBlockBytes);
  uint8_t* const qh = block + kQhOffset;
  // ggml advances its qs and signs cursors only past sub-blocks it encodes: after an all-zero
  // sub-block the following ones are written one slot earlier (and the trailing slots stay zero).
  uint8_t* qs = block + kQsOffset;
  uint8_t* signs = block + kSignsOffset;
  std::array<float, kSubBlocks> scales{};
  float max_scale = 0;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if (p.max[ib] == 0) {  // an all-zero sub-block (a NaN maximum goes on, as in ggml)
      scales[ib] = 0;
      continue;
    }
    float scale = choice.scale[ib];
    std::array<uint8_t, kSignBytesPerSubBlock> block_signs{};
    std::memcpy(block_signs.data(), p.signs[ib], kSignBytesPerSubBlock);
    if (scale < 0) {  // only with negative importance weights: store |scale| and flip the signs
      scale = -scale;
      for (auto& s : block_signs) s = static_cast<uint8_t>(~s);
    }
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      const int grid_index = choice.grid_index[ib][k];
      const int group = ib * kGroupsPerSubBlock + k;
      qs[k] = static_cast<uint8_t>(grid_index & 0xFF);
      qh[group / 8] |= static_cast<uint8_t>((grid_index >> 8) << (group % 8));
    }
    qs += kGroupsPerSubBlock;
    std::memcpy(signs, block_signs.data(), kSignBytesPerSubBlock);
    signs += kSignBytesPerSubBlock;
    scales[ib] = scale;
    max_scale = ggml_max(max_scale, scale);
  }

  if (max_scale == 0) return;  // d and the scales stay zero

  // The block scale is max_scale / 31 times a fudge factor; sub-block scales are 4-bit odd
  // multiples of the unfudged d.
  const float d = max_scale / 31;
  const uint16_t d_half = fp32_to_fp16(d * 1.033f);
  std::memcpy(block + kScaleOffset, &d_half, sizeof d_half);
  const float inv_d = 1 / d;
  for (int ib = 0; ib < kSubBlocks; ib += 2) {
    const int low = ggml_max(0, ggml_min(15, nearest_int(0.5f * (inv_d * scales[ib] - 1))));
    const int high = ggml_max(0, ggml_min(15, nearest_int(0.5f * (inv_d * scales[ib + 1] - 1))));
    block[kScalesOffset + ib / 2] = static_cast<uint8_t>(low | (high << 4));
  }
}

void quantize_block(const iq3::GridIndex& grid, iq3::BlockSearch search, const float* x, const float* importance,
                    uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  unsigned active = 0;  // all-zero sub-blocks are skipped (a NaN maximum goes on, as in ggml)
  for (int ib = 0; ib < kSubBlocks; ++ib) active |= p.max[ib] == 0 ? 0u : 1u << ib;
  iq3::BlockChoice choice{};
  search(grid, iq3::kIq3sRules, p, active, choice);
  pack_block(p, choice, block);
}

void quantize_iq3_s(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const iq3::GridIndex& grid = iq3::GridIndex::iq3_s();
  const iq3::BlockSearch search = iq3::block_search();
  const int64_t blocks_per_row = n_per_row / kSuperBlockValues;
  std::array<uint8_t, kBlockBytes> block{};
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const float* x = src + row * n_per_row + b * kSuperBlockValues;
      const float* importance = imatrix != nullptr ? imatrix + b * kSuperBlockValues : nullptr;
      quantize_block(grid, search, x, importance, block.data());
      std::memcpy(dst + (row * blocks_per_row + b) * static_cast<int64_t>(kBlockBytes), block.data(), kBlockBytes);
    }
  }
}

}  // namespace

void register_iq3s_quantizer(KernelTable& table) {
  auto& e = entry(table, TensorType::IQ3_S);
  e.quantize = quantize_iq3_s;
  e.accepts_imatrix = true;
  state_block<format::BlockIQ3S>(table, TensorType::IQ3_S);
}

}  // namespace ggufkit::quant
