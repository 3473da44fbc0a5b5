// IQ3_XXS quantization, byte for byte what ggml's quantize_iq3_xxs writes (with or without an
// importance matrix).
//
// A super-block of 256 values is stored as: fp16 d, 64 grid indices (one byte each, into the
// 256-point grid) and 8 little-endian uint32, one per sub-block of 32 values, holding 4 x 7 sign
// bits and a 4-bit sub-block scale in the top bits. Only 7 signs per 8 values are stored: the 8th
// makes the number of negative values even, so when it is odd ggml flips the sign of the value
// that matters least (smallest weight * x²) and quantizes its magnitude as negative.
//
// The scale and grid search per sub-block is IQ3_S's (quant/iq3_grid.h) with 31 candidate scales
// and a final pass over the groups that moved to a neighbour only, in its scalar or AVX2 form.
// Everything keeps ggml's float operations and their order.
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
using iq3::kSubBlockValues;
using iq3::kSubBlocks;
using iq3::kSuperBlockValues;

constexpr int kSignGroups = kSubBlockValues / 8;  // 4 groups of 8 values, 7 sign bits each
// Sub-blocks whose largest magnitude is below this are stored as zero (GROUP_MAX_EPS_IQ3_XXS).
constexpr float kIq3xxsGroupMaxEps = 1e-8f;

// block_iq3_xxs layout.
constexpr size_t kScaleOffset = 0;
constexpr size_t kGridOffset = 2;
constexpr size_t kScalesAndSignsOffset = kGridOffset + kSuperBlockValues / 4;    // 66
constexpr size_t kBlockBytes = kScalesAndSignsOffset + 4 * kSubBlocks;            // 98
static_assert(kBlockBytes == sizeof(format::BlockIQ3XXS) &&
              kScalesAndSignsOffset == offsetof(format::BlockIQ3XXS, scales_and_signs));

// Magnitudes and the 4 sign bytes (7 bits each) of one sub-block, with ggml's even-sign fix-up.
void signs_and_magnitudes(const float* xb, const float* weight, float* magnitudes, uint8_t* signs) {
  for (int k = 0; k < kSignGroups; ++k) {
    int negatives = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      const float v = xb[8 * k + i];
      if (v >= 0) {
        magnitudes[8 * k + i] = v;
      } else {
        magnitudes[8 * k + i] = -v;
        ++negatives;
        s = static_cast<uint8_t>(s | (1u << i));
      }
    }
    if (negatives % 2 != 0) {
      // The value with the smallest weight * x² (the first of equal ones) takes the wrong sign.
      int least = 0;
      float least_error = weight[8 * k] * xb[8 * k] * xb[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float error = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
        if (error < least_error) {
          least_error = error;
          least = i;
        }
      }
      magnitudes[8 * k + least] = -magnitudes[8 * k + least];
      s = static_cast<uint8_t>(s ^ (1u << least));
    }
    signs[k] = s & 127;
  }
}

// One super-block's inputs to the search, and its signs.
struct PreparedBlock : iq3::SearchInputs {
  uint8_t signs[kSubBlocks][kSignGroups];
};

void prepare_block(const float* x, const float* importance, PreparedBlock& p) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlockValues; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = 2 * sumx2 / kSuperBlockValues;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const float* xb = x + kSubBlockValues * ib;
    float* weight = p.weight[ib];
    if (importance != nullptr) {
      const float* qw = importance + kSubBlockValues * ib;
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < kSubBlockValues; ++i) p.error_weight[ib][i] = std::sqrt(weight[i]);
    signs_and_magnitudes(xb, weight, p.magnitudes[ib], p.signs[ib]);
    float max = p.magnitudes[ib][0];
    for (int i = 1; i < kSubBlockValues; ++i) max = ggml_max(max, p.magnitudes[ib][i]);
    p.max[ib] = max;
  }
}

// Sub-blocks below the threshold are stored as zero: scale 0, grid index 0, no signs (a NaN
// maximum goes on, as in ggml).
bool searched(const PreparedBlock& p, int ib) { return !(p.max[ib] < kIq3xxsGroupMaxEps); }

// Writes the block from the chosen scales and grid points.
void pack_block(const PreparedBlock& p, const iq3::BlockChoice& choice, uint8_t* block) {
  std::memset(block, 0, kBlockBytes);
  uint32_t scales_and_signs[kSubBlocks] = {};
  float scales[kSubBlocks] = {};
  float max_scale = 0;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if (!searched(p, ib)) continue;
    float scale = choice.scale[ib];
    uint8_t signs[kSignGroups];
    std::memcpy(signs, p.signs[ib], kSignGroups);
    if (scale < 0) {  // only with negative importance weights: store |scale| and flip the signs
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
    }
    for (int k = 0; k < iq3::kGroupsPerSubBlock; ++k) {
      block[kGridOffset + iq3::kGroupsPerSubBlock * ib + k] = static_cast<uint8_t>(choice.grid_index[ib][k]);
    }
    scales_and_signs[ib] = uint32_t{signs[0]} | uint32_t{signs[1]} << 7 | uint32_t{signs[2]} << 14 |
                           uint32_t{signs[3]} << 21;
    scales[ib] = scale;
    max_scale = ggml_max(max_scale, scale);
  }

  if (max_scale == 0) {  // the whole block is zero, d included
    std::memset(block, 0, kBlockBytes);
    return;
  }

  // The block scale is max_scale / 31 times a fudge factor; sub-block scales are 4-bit odd
  // multiples of the unfudged d.
  const float d = max_scale / 31;
  const uint16_t d_half = fp32_to_fp16(d * 1.0125f);
  std::memcpy(block + kScaleOffset, &d_half, sizeof d_half);
  const float inv_d = 1 / d;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const int l = ggml_max(0, ggml_min(15, nearest_int(0.5f * (inv_d * scales[ib] - 1))));
    scales_and_signs[ib] |= static_cast<uint32_t>(l) << 28;
  }
  std::memcpy(block + kScalesAndSignsOffset, scales_and_signs, sizeof scales_and_signs);
}

void quantize_block(const iq3::GridIndex& grid, iq3::BlockSearch search, const float* x, const float* importance,
                    uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  unsigned active = 0;
  for (int ib = 0; ib < kSubBlocks; ++ib) active |= searched(p, ib) ? 1u << ib : 0u;
  iq3::BlockChoice choice{};
  search(grid, iq3::kIq3xxsRules, p, active, choice);
  pack_block(p, choice, block);
}

void quantize_iq3_xxs(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const iq3::GridIndex& grid = iq3::GridIndex::iq3_xxs();
  const iq3::BlockSearch search = iq3::block_search();
  const int64_t blocks_per_row = n_per_row / kSuperBlockValues;
  uint8_t block[kBlockBytes];
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const float* x = src + row * n_per_row + b * kSuperBlockValues;
      const float* importance = imatrix != nullptr ? imatrix + b * kSuperBlockValues : nullptr;
      quantize_block(grid, search, x, importance, block);
      std::memcpy(dst + (row * blocks_per_row + b) * static_cast<int64_t>(kBlockBytes), block, kBlockBytes);
    }
  }
}

}  // namespace

void register_iq3xxs_quantizer(KernelTable& table) {
  auto& e = entry(table, TensorType::IQ3_XXS);
  e.quantize = quantize_iq3_xxs;
  e.accepts_imatrix = true;
  e.requires_imatrix = false;  // ggml_quantize_requires_imatrix: IQ2_XXS, IQ2_XS and IQ1_S only
  state_block<format::BlockIQ3XXS>(table, TensorType::IQ3_XXS);
}

}  // namespace ggufkit::quant
