// IQ2_XXS, IQ2_XS and IQ2_S quantization, byte for byte what ggml's quantize_iq2_xxs,
// quantize_iq2_xs and quantize_iq2_s write. (IQ1_S and IQ1_M: iq1_quantize.cpp.)
//
// All three store groups of 8 magnitudes as points of a grid (quant/iq2_grid.h) whose levels 0, 1,
// 2 stand for 1, 3, 5 times a sub-block scale, plus the signs. The search per sub-block tries
// candidate scales around its maximum, rounds every magnitude to a level, and when a group of 8
// levels is not a grid point, takes the closest grid point among that code's precomputed
// neighbours; it keeps the scale with the best weighted fit, then rounds the groups that needed a
// neighbour again at the fitted scale and refits. Everything keeps ggml's float operations and
// their order: a single different rounding changes bytes.
//
// Where ggml aborts (a group left off the grid, a neighbour search with only NaN or overflowing
// errors) we take grid point 0 or the first neighbour instead.
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "format/blocks.h"
#include "quant/iq2_grid.h"
#include "quant/kernels.h"
#include "quant/search.h"

namespace ggufkit::quant {
namespace {

constexpr int kSuperBlockValues = 256;
constexpr int kGroup = Iq2GridIndex::kGroupSize;  // 8 values per grid point
constexpr int kTopLevel = Iq2GridIndex::kLevels - 1;
constexpr float kIq2sGroupMaxEps = 1e-8f;  // ggml's GROUP_MAX_EPS_IQ2_S

constexpr size_t kIq2xxsBlockBytes = 2 + kSuperBlockValues / 4;                      // 66
constexpr size_t kIq2xsBlockBytes = 2 + kSuperBlockValues / 4 + kSuperBlockValues / 32;  // 74
constexpr size_t kIq2sBlockBytes = 2 + kSuperBlockValues / 4 + 2 * (kSuperBlockValues / 32);  // 82
static_assert(kIq2xxsBlockBytes == sizeof(format::BlockIQ2XXS) && kIq2xsBlockBytes == sizeof(format::BlockIQ2XS) &&
              kIq2sBlockBytes == sizeof(format::BlockIQ2S));

// The grid point of a group of levels the search left on the grid.
int grid_index_of(const Iq2GridIndex& grid, const int8_t* levels) {
  return ggml_max(0, grid.grid_of(Iq2GridIndex::code_of(levels)));
}

// What levels 0, 1, 2 stand for, in units of the sub-block scale.
constexpr float kLevelValues[3] = {1.0f, 3.0f, 5.0f};

// Moves an off-grid group to the neighbour that best fits scale * (2 * level + 1) to its 8
// magnitudes (ggml's iq2_find_best_neighbour).
void best_neighbour(const Iq2GridIndex& grid, uint16_t code, const float* magnitudes, const float* weights,
                    float scale, int8_t* levels) {
  const int index = grid.best_neighbour(code, magnitudes, weights, scale, kLevelValues);
  std::memcpy(levels, grid.levels(index).data(), kGroup);
}

// Rounds a group's magnitudes to levels at inverse scale inv_scale, clamped to 0..2.
void round_group(const float* magnitudes, float inv_scale, int8_t* levels) {
  for (int i = 0; i < kGroup; ++i) {
    const int l = nearest_int(0.5f * (inv_scale * magnitudes[i] - 1));
    levels[i] = static_cast<int8_t>(ggml_max(0, ggml_min(kTopLevel, l)));
  }
}

// Rounds group k at inverse scale inv_scale and moves it to its best neighbour (at `scale`) when
// it is off the grid. Returns whether it was on the grid.
bool place_group(const Iq2GridIndex& grid, const float* magnitudes, const float* error_weight, float inv_scale,
                 float scale, int8_t* levels) {
  round_group(magnitudes, inv_scale, levels);
  const uint16_t code = Iq2GridIndex::code_of(levels);
  if (grid.grid_of(code) >= 0) return true;
  best_neighbour(grid, code, magnitudes, error_weight, scale, levels);
  return false;
}

// Weighted least-squares terms of the fit magnitude ~ scale * (2 * level + 1), summed in order.
void fit_terms(int n, const float* weight, const float* magnitudes, const int8_t* levels, float& sumqx,
               float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i];
    const auto q = static_cast<float>(2 * levels[i] + 1);
    sumqx += w * magnitudes[i] * q;
    sumq2 += w * q * q;
  }
}

// Magnitudes and sign bits of a group of 8. With `even_signs` (IQ2_XXS, IQ2_XS: 7 stored sign bits,
// the 8th is the parity), an odd count of negative values flips the one with the smallest
// weight * x^2 to the other sign: its magnitude becomes negative.
uint8_t split_signs(const float* x, const float* weight, bool even_signs, float* magnitudes) {
  int negatives = 0;
  unsigned signs = 0;
  for (int i = 0; i < kGroup; ++i) {
    if (x[i] >= 0) {
      magnitudes[i] = x[i];
    } else {
      magnitudes[i] = -x[i];
      ++negatives;
      signs |= 1u << i;
    }
  }
  if (even_signs && negatives % 2 != 0) {
    int smallest = 0;
    float min = weight[0] * x[0] * x[0];
    for (int i = 1; i < kGroup; ++i) {
      const float ax = weight[i] * x[i] * x[i];
      if (ax < min) {
        min = ax;
        smallest = i;
      }
    }
    magnitudes[smallest] = -magnitudes[smallest];
    signs ^= 1u << smallest;
  }
  return static_cast<uint8_t>(even_signs ? signs & 127u : signs);
}

float sum_of_squares(const float* x) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlockValues; ++i) sumx2 += x[i] * x[i];
  return sumx2;
}

// The 4-bit sub-block scale ggml stores for `scale` under the block scale d = max_scale / 31.
int scale_nibble(float inv_d, float scale) {
  return ggml_max(0, ggml_min(15, nearest_int(0.5f * (inv_d * scale - 1))));
}

// ---- IQ2_XXS: 8 sub-blocks of 32; per sub-block 4 grid indices (bytes) and 4 x 7 sign bits and
// a 4-bit scale in two uint32.

void quantize_block_iq2_xxs(const Iq2GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  constexpr int kSub = 32;
  constexpr int kGroups = kSub / kGroup;
  std::array<uint32_t, 2 * (kSuperBlockValues / kSub)> q2{};
  std::array<float, kSuperBlockValues / kSub> scales{};
  float max_scale = 0;
  const float sigma2 = sum_of_squares(x) / kSuperBlockValues;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    const float* xb = x + kSub * ib;
    const float* qw = importance + kSub * ib;
    float weight[kSub], error_weight[kSub], magnitudes[kSub];
    int8_t levels[kSub] = {}, trial[kSub];
    uint8_t signs[kGroups];
    for (int i = 0; i < kSub; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    for (int i = 0; i < kSub; ++i) error_weight[i] = std::sqrt(weight[i]);
    for (int k = 0; k < kGroups; ++k) {
      signs[k] = split_signs(xb + kGroup * k, weight + kGroup * k, true, magnitudes + kGroup * k);
    }
    float max = magnitudes[0];
    for (int i = 1; i < kSub; ++i) max = ggml_max(max, magnitudes[i]);
    if (max < kGroupMaxEps) continue;  // scale 0, grid point 0, no signs
    uint8_t qp_levels[kSub];
    float scale = make_qp_quants(kSub, kTopLevel + 2, magnitudes, qp_levels, weight);
    const float eff_max = scale * (kTopLevel + 1);
    if (eff_max <= 0) continue;
    float best = 0;
    for (int step = -6; step <= 6; ++step) {
      const float inv_scale = (2 * (kTopLevel + 1) - 1 + static_cast<float>(step) * 0.1f) / eff_max;
      const float trial_scale = 1 / inv_scale;
      for (int k = 0; k < kGroups; ++k) {
        place_group(grid, magnitudes + kGroup * k, error_weight + kGroup * k, inv_scale, trial_scale,
                    trial + kGroup * k);
      }
      float sumqx, sumq2;
      fit_terms(kSub, weight, magnitudes, trial, sumqx, sumq2);
      if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
        scale = sumqx / sumq2;
        best = scale * sumqx;
        std::memcpy(levels, trial, kSub);
      }
    }
    // Unlike IQ2_XS and IQ2_S, every group is placed again at the fitted scale.
    if (scale > 0) {
      const float inv_scale = 1 / scale;
      for (int k = 0; k < kGroups; ++k) {
        place_group(grid, magnitudes + kGroup * k, error_weight + kGroup * k, inv_scale, scale, levels + kGroup * k);
      }
      float sumqx, sumq2;
      fit_terms(kSub, weight, magnitudes, levels, sumqx, sumq2);
      if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {  // only with negative importance weights: store |scale| and flip the signs
      scale = -scale;
      for (auto& s : signs) s = static_cast<uint8_t>(~s & 127u);
    }
    for (int k = 0; k < kGroups; ++k) {
      q2[2 * ib] |= static_cast<uint32_t>(grid_index_of(grid, levels + kGroup * k)) << (8 * k);
      q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
    }
    scales[ib] = scale;
    max_scale = ggml_max(max_scale, scale);
  }
  std::memset(block, 0, kIq2xxsBlockBytes);
  if (!(max_scale != 0)) return;  // ggml's `if (!max_scale)`: all zero (a NaN goes on)
  const float d = max_scale / 31;
  const uint16_t d_half = fp32_to_fp16(d);
  std::memcpy(block, &d_half, sizeof d_half);
  const float inv_d = 1 / d;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    q2[2 * ib + 1] |= static_cast<uint32_t>(scale_nibble(inv_d, scales[ib])) << 28;
  }
  std::memcpy(block + 2, q2.data(), sizeof q2);
}

// ---- IQ2_XS and IQ2_S: 16 sub-blocks of 16 (two grid points each) and 4-bit scales.

// What the two types differ in, besides the layout.
struct Iq2SubBlockRules {
  bool even_signs;  // IQ2_XS: 7 sign bits per group
  float group_max_eps;
};

// Searches one sub-block of 16: its levels (on the grid on return) and scale, and its signs (flipped
// when the scale came out negative). Returns false for a sub-block ggml skips (scale 0).
bool search_sub_block_16(const Iq2GridIndex& grid, const Iq2SubBlockRules& rules, const float* xb,
                         const float* weight, int8_t* levels, uint8_t* signs, float& scale_out) {
  constexpr int kSub = 16;
  constexpr int kGroups = kSub / kGroup;
  float error_weight[kSub], magnitudes[kSub];
  int8_t trial[kSub];
  for (int i = 0; i < kSub; ++i) error_weight[i] = std::sqrt(weight[i]);
  for (int k = 0; k < kGroups; ++k) {
    signs[k] = split_signs(xb + kGroup * k, weight + kGroup * k, rules.even_signs, magnitudes + kGroup * k);
  }
  float max = magnitudes[0];
  for (int i = 1; i < kSub; ++i) max = ggml_max(max, magnitudes[i]);
  std::memset(levels, 0, kSub);
  if (max < rules.group_max_eps) return false;
  float best = 0;
  float scale = max / (2 * (kTopLevel + 1) - 1);
  bool on_grid[kGroups] = {true, true};
  for (int step = -9; step <= 9; ++step) {
    const float inv_scale = (2 * (kTopLevel + 1) - 1 + static_cast<float>(step) * 0.1f) / max;
    const float trial_scale = 1 / inv_scale;
    bool trial_on_grid[kGroups];
    for (int k = 0; k < kGroups; ++k) {
      trial_on_grid[k] = place_group(grid, magnitudes + kGroup * k, error_weight + kGroup * k, inv_scale,
                                     trial_scale, trial + kGroup * k);
    }
    float sumqx, sumq2;
    fit_terms(kSub, weight, magnitudes, trial, sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(levels, trial, kSub);
      for (int k = 0; k < kGroups; ++k) on_grid[k] = trial_on_grid[k];
    }
  }
  // Groups that had to move to a neighbour: place them again at the fitted scale, refit.
  if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
    const float inv_scale = 1 / scale;
    for (int k = 0; k < kGroups; ++k) {
      if (on_grid[k]) continue;
      place_group(grid, magnitudes + kGroup * k, error_weight + kGroup * k, inv_scale, scale, levels + kGroup * k);
    }
    float sumqx, sumq2;
    fit_terms(kSub, weight, magnitudes, levels, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {  // only with negative importance weights: store |scale| and flip the signs
    scale = -scale;
    for (int k = 0; k < kGroups; ++k) signs[k] = static_cast<uint8_t>(rules.even_signs ? ~signs[k] & 127u : ~signs[k]);
  }
  scale_out = scale;
  return true;
}

void quantize_block_iq2_xs(const Iq2GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  constexpr int kSub = 16;
  constexpr Iq2SubBlockRules kRules{true, kGroupMaxEps};
  std::array<uint16_t, 2 * (kSuperBlockValues / kSub)> q2{};
  std::array<float, kSuperBlockValues / kSub> scales{};
  float max_scale = 0;
  const float sigma2 = sum_of_squares(x) / kSuperBlockValues;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    const float* xb = x + kSub * ib;
    const float* qw = importance + kSub * ib;
    float weight[kSub];
    for (int i = 0; i < kSub; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    int8_t levels[kSub];
    uint8_t signs[2];
    float scale = 0;
    if (!search_sub_block_16(grid, kRules, xb, weight, levels, signs, scale)) continue;
    for (int k = 0; k < 2; ++k) {
      q2[static_cast<size_t>(2 * ib + k)] =
          static_cast<uint16_t>(grid_index_of(grid, levels + kGroup * k) | (signs[k] << 9));
    }
    scales[static_cast<size_t>(ib)] = scale;
    max_scale = ggml_max(max_scale, scale);
  }
  std::memset(block, 0, kIq2xsBlockBytes);
  if (!(max_scale != 0)) return;
  const float d = max_scale / 31;
  const uint16_t d_half = fp32_to_fp16(d);
  std::memcpy(block, &d_half, sizeof d_half);
  std::memcpy(block + 2, q2.data(), sizeof q2);
  const float inv_d = 1 / d;
  uint8_t* packed_scales = block + 2 + sizeof q2;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    packed_scales[ib / 2] |= static_cast<uint8_t>(scale_nibble(inv_d, scales[static_cast<size_t>(ib)]) << (4 * (ib % 2)));
  }
}

// IQ2_S: the 32 low bytes of the 10-bit grid indices, then 32 sign bytes (qs), the top 2 bits of
// each index (qh), 4-bit scales. Works without an importance matrix too.
void quantize_block_iq2_s(const Iq2GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  constexpr int kSub = 16;
  constexpr Iq2SubBlockRules kRules{false, kIq2sGroupMaxEps};
  constexpr size_t kQs = 2, kSigns = kQs + kSuperBlockValues / 8, kQh = kQs + kSuperBlockValues / 4,
                   kScales = kQh + kSuperBlockValues / 32;
  std::memset(block, 0, kIq2sBlockBytes);
  std::array<float, kSuperBlockValues / kSub> scales{};
  float max_scale = 0;
  const float sigma2 = 2 * sum_of_squares(x) / kSuperBlockValues;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    const float* xb = x + kSub * ib;
    float weight[kSub];
    if (importance != nullptr) {
      const float* qw = importance + kSub * ib;
      for (int i = 0; i < kSub; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < kSub; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
    }
    int8_t levels[kSub];
    uint8_t signs[2];
    float scale = 0;
    if (!search_sub_block_16(grid, kRules, xb, weight, levels, signs, scale)) continue;
    for (int k = 0; k < 2; ++k) {
      const int index = grid_index_of(grid, levels + kGroup * k);
      const int group = 2 * ib + k;
      block[kQs + static_cast<size_t>(group)] = static_cast<uint8_t>(index & 255);
      block[kQh + static_cast<size_t>(group / 4)] |= static_cast<uint8_t>((index >> 8) << (2 * (group % 4)));
      block[kSigns + static_cast<size_t>(group)] = signs[k];
    }
    scales[static_cast<size_t>(ib)] = scale;
    max_scale = ggml_max(max_scale, scale);
  }
  // An all-zero block keeps its grid bytes with scale 0, as in ggml.
  if (!(max_scale != 0)) return;
  const float d = max_scale / 31;
  const uint16_t d_half = fp32_to_fp16(d * 0.9875f);
  std::memcpy(block, &d_half, sizeof d_half);
  const float inv_d = 1 / d;
  for (int ib = 0; ib < kSuperBlockValues / kSub; ++ib) {
    block[kScales + static_cast<size_t>(ib / 2)] |=
        static_cast<uint8_t>(scale_nibble(inv_d, scales[static_cast<size_t>(ib)]) << (4 * (ib % 2)));
  }
}

using BlockQuantizer = void (*)(const Iq2GridIndex&, const float*, const float*, uint8_t*);

// Rows of super-blocks; the importance matrix (one weight per column) applies to every row.
template <BlockQuantizer quantize_block, Iq2Grid kGrid, size_t kBlockBytes>
void quantize_rows(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const Iq2GridIndex& grid = Iq2GridIndex::get(kGrid);
  const int64_t blocks_per_row = n_per_row / kSuperBlockValues;
  std::array<uint8_t, kBlockBytes> block{};
  for (int64_t row = 0; row < nrows; ++row) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      const float* x = src + row * n_per_row + b * kSuperBlockValues;
      const float* importance = imatrix != nullptr ? imatrix + b * kSuperBlockValues : nullptr;
      quantize_block(grid, x, importance, block.data());
      std::memcpy(dst + (row * blocks_per_row + b) * static_cast<int64_t>(kBlockBytes), block.data(), kBlockBytes);
    }
  }
}

}  // namespace

void register_iq1_quantizers(KernelTable& table);  // iq1_quantize.cpp

void register_iq2_quantizers(KernelTable& table) {
  // ggml_quantize_requires_imatrix: IQ2_XXS, IQ2_XS and IQ1_S; IQ2_S and IQ1_M work without.
  auto& xxs = entry(table, TensorType::IQ2_XXS);
  xxs.quantize = quantize_rows<quantize_block_iq2_xxs, Iq2Grid::iq2xxs_256, kIq2xxsBlockBytes>;
  xxs.accepts_imatrix = true;
  xxs.requires_imatrix = true;
  auto& xs = entry(table, TensorType::IQ2_XS);
  xs.quantize = quantize_rows<quantize_block_iq2_xs, Iq2Grid::iq2xs_512, kIq2xsBlockBytes>;
  xs.accepts_imatrix = true;
  xs.requires_imatrix = true;
  auto& s = entry(table, TensorType::IQ2_S);
  s.quantize = quantize_rows<quantize_block_iq2_s, Iq2Grid::iq2s_1024, kIq2sBlockBytes>;
  s.accepts_imatrix = true;
  s.requires_imatrix = false;
  state_block<format::BlockIQ2XXS>(table, TensorType::IQ2_XXS);
  state_block<format::BlockIQ2XS>(table, TensorType::IQ2_XS);
  state_block<format::BlockIQ2S>(table, TensorType::IQ2_S);
  register_iq1_quantizers(table);
}

}  // namespace ggufkit::quant
