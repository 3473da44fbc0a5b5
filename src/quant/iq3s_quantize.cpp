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
#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/fp16.h"
#include "quant/kernels.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

constexpr int kSuperBlockValues = 256;
constexpr int kSubBlockValues = 32;
constexpr int kSubBlocks = kSuperBlockValues / kSubBlockValues;  // 8
constexpr int kGroupsPerSubBlock = kSubBlockValues / 4;            // 8 grid points
constexpr int kSignBytesPerSubBlock = kSubBlockValues / 8;         // 4
constexpr int kLevels = 8;                                         // levels 0..7 stand for 1, 3, ..., 15
constexpr int kGridSize = 512;
constexpr int kCodeCount = 1 << 12;  // 4 levels of 3 bits
// How many distinct distances the neighbour list of an off-grid code covers.
constexpr int kNeighbourDistances = 3;

// block_iq3_s layout.
constexpr size_t kScaleOffset = 0;
constexpr size_t kQsOffset = 2;
constexpr size_t kQhOffset = kQsOffset + kSuperBlockValues / 4;      // 66
constexpr size_t kSignsOffset = kQhOffset + kSuperBlockValues / 32;  // 74
constexpr size_t kScalesOffset = kSignsOffset + kSuperBlockValues / 8;  // 106
constexpr size_t kBlockBytes = kScalesOffset + kSuperBlockValues / 64;  // 110

// ggml's nearest_int: round to nearest (ties to even) by adding 1.5 * 2^23 and reading the low
// mantissa bits. Defined for every input (NaN and infinities give garbage but no UB), as in ggml.
int nearest_int(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value + 12582912.f);
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

// ggml's MAX / MIN macros (not std::max: the NaN and signed-zero cases differ).
template <class T>
T ggml_max(T a, T b) { return a > b ? a : b; }
template <class T>
T ggml_min(T a, T b) { return a < b ? a : b; }

// The grid as lookup structures: grid point coordinates, the grid index of each 12-bit level code,
// and for each code that is not a grid point, the grid points nearest to it.
struct Iq3sGridIndex {
  std::array<std::array<int8_t, 4>, kGridSize> points{};  // odd coordinates 1..15
  std::array<int16_t, kCodeCount> grid_of_code{};          // -1: not on the grid
  std::array<uint32_t, kCodeCount> neighbours_begin{};
  std::array<uint16_t, kCodeCount> neighbours_count{};
  std::vector<uint16_t> neighbours;

  // The grid points at the kNeighbourDistances smallest squared distances from an off-grid code,
  // ordered by distance, then by grid index: the search keeps the first of equally good
  // candidates, so this order is part of the output.
  void add_neighbours(int code) {
    std::array<int, 4> position{};
    for (int k = 0; k < 4; ++k) position[k] = 2 * ((code >> (3 * k)) & 7) + 1;
    std::array<int, kGridSize> distance{};
    for (int j = 0; j < kGridSize; ++j) {
      int d2 = 0;
      for (int k = 0; k < 4; ++k) d2 += (points[j][k] - position[k]) * (points[j][k] - position[k]);
      distance[j] = d2;
    }
    // The smallest distinct distances, ascending (INT_MAX: fewer distinct distances exist).
    std::array<int, kNeighbourDistances> nearest{};
    nearest.fill(INT_MAX);
    for (int d2 : distance) {
      for (int r = 0; r < kNeighbourDistances; ++r) {
        if (d2 == nearest[r]) break;
        if (d2 < nearest[r]) {
          for (int s = kNeighbourDistances - 1; s > r; --s) nearest[s] = nearest[s - 1];
          nearest[r] = d2;
          break;
        }
      }
    }
    neighbours_begin[code] = static_cast<uint32_t>(neighbours.size());
    for (int d2 : nearest) {
      if (d2 == INT_MAX) break;
      for (int j = 0; j < kGridSize; ++j) {
        if (distance[j] == d2) neighbours.push_back(static_cast<uint16_t>(j));
      }
    }
    neighbours_count[code] = static_cast<uint16_t>(neighbours.size() - neighbours_begin[code]);
  }

  Iq3sGridIndex() {
    grid_of_code.fill(-1);
    for (int j = 0; j < kGridSize; ++j) {
      int code = 0;
      for (int k = 0; k < 4; ++k) {
        const int coordinate = static_cast<int>((tables::iq3s_grid[j] >> (8 * k)) & 0xFFu);
        points[j][k] = static_cast<int8_t>(coordinate);
        code |= ((coordinate - 1) / 2) << (3 * k);
      }
      grid_of_code[code] = static_cast<int16_t>(j);
    }
    for (int code = 0; code < kCodeCount; ++code) {
      if (grid_of_code[code] < 0) add_neighbours(code);
    }
  }

  static const Iq3sGridIndex& get() {
    static const Iq3sGridIndex index;  // built once, thread-safe
    return index;
  }
};

int level_code(const int8_t* levels) {
  int code = 0;
  for (int i = 0; i < 4; ++i) code |= levels[i] << (3 * i);
  return code;
}

void levels_of_point(const Iq3sGridIndex& grid, int grid_index, int8_t* levels) {
  for (int i = 0; i < 4; ++i) levels[i] = static_cast<int8_t>((grid.points[grid_index][i] - 1) / 2);
}

// The neighbour of an off-grid code that best fits scale * point to the 4 magnitudes (weighted
// squared error; the first of equal ones wins). Writes its levels.
void best_neighbour(const Iq3sGridIndex& grid, int code, const float* magnitudes, const float* weights, float scale,
                   int8_t* levels) {
  const uint16_t* candidates = grid.neighbours.data() + grid.neighbours_begin[code];
  const int count = grid.neighbours_count[code];
  float best_d2 = FLT_MAX;
  // ggml asserts a candidate was found (only NaN or infinite errors prevent it); we take the first.
  int best_index = candidates[0];
  for (int c = 0; c < count; ++c) {
    const auto& point = grid.points[candidates[c]];
    float d2 = 0;
    for (int i = 0; i < 4; ++i) {
      const float q = point[i];
      const float diff = scale * q - magnitudes[i];
      d2 += weights[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best_index = candidates[c];
    }
  }
  levels_of_point(grid, best_index, levels);
}

// Rounds the magnitudes of a group of 4 to levels at inverse scale inv_scale, clamped to 0..7.
void round_group(const float* magnitudes, float inv_scale, int8_t* levels) {
  for (int i = 0; i < 4; ++i) {
    const int l = nearest_int(0.5f * (inv_scale * magnitudes[i] - 1));
    levels[i] = static_cast<int8_t>(ggml_max(0, ggml_min(kLevels - 1, l)));
  }
}

// Weighted least-squares terms of the fit magnitude ~ scale * (2 * level + 1), summed in order.
void fit_terms(const float* weight, const float* magnitudes, const int8_t* levels, float& sumqx, float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < kSubBlockValues; ++i) {
    const float w = weight[i];
    const float q = static_cast<float>(2 * levels[i] + 1);
    sumqx += w * magnitudes[i] * q;
    sumq2 += w * q * q;
  }
}

// Finds the levels (all on the grid on return) and the scale of one sub-block of magnitudes with
// positive maximum max. Returns the scale.
float search_sub_block(const Iq3sGridIndex& grid, const float* magnitudes, const float* weight,
                       const float* error_weight, float max, int8_t* levels) {
  std::array<int8_t, kSubBlockValues> trial{};
  std::array<bool, kGroupsPerSubBlock> on_grid{};
  std::array<bool, kGroupsPerSubBlock> trial_on_grid{};
  std::memset(levels, 0, kSubBlockValues);
  float best = 0;
  float scale = max / (2 * kLevels - 1);
  // 19 candidate scales: max / (15 + 0.2 * step).
  for (int step = -9; step <= 9; ++step) {
    const float inv_scale = (2 * kLevels - 1 + static_cast<float>(step) * 0.2f) / max;
    const float trial_scale = 1 / inv_scale;
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      int8_t* group = trial.data() + 4 * k;
      round_group(magnitudes + 4 * k, inv_scale, group);
      const int code = level_code(group);
      trial_on_grid[k] = grid.grid_of_code[code] >= 0;
      if (!trial_on_grid[k]) {
        best_neighbour(grid, code, magnitudes + 4 * k, error_weight + 4 * k, trial_scale, group);
      }
    }
    float sumqx = 0, sumq2 = 0;
    fit_terms(weight, magnitudes, trial.data(), sumqx, sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(levels, trial.data(), kSubBlockValues);
      on_grid = trial_on_grid;
    }
  }

  // Groups that had to move to a neighbour: round them again at the fitted scale (all groups are
  // redone, as ggml does), then refit the scale.
  const bool any_off_grid = std::find(on_grid.begin(), on_grid.end(), false) != on_grid.end();
  if (any_off_grid && scale > 0) {
    const float inv_scale = 1 / scale;
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      int8_t* group = levels + 4 * k;
      round_group(magnitudes + 4 * k, inv_scale, group);
      const int code = level_code(group);
      if (grid.grid_of_code[code] < 0) {
        best_neighbour(grid, code, magnitudes + 4 * k, error_weight + 4 * k, scale, group);
      }
    }
    float sumqx = 0, sumq2 = 0;
    fit_terms(weight, magnitudes, levels, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// Quantizes one super-block of 256 values; importance is null or its 256 importance weights.
void quantize_block(const Iq3sGridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  std::memset(block, 0, kBlockBytes);
  uint8_t* const qh = block + kQhOffset;
  // ggml advances its qs and signs cursors only past sub-blocks it encodes: after an all-zero
  // sub-block the following ones are written one slot earlier (and the trailing slots stay zero).
  uint8_t* qs = block + kQsOffset;
  uint8_t* signs = block + kSignsOffset;

  float sumx2 = 0;
  for (int i = 0; i < kSuperBlockValues; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = 2 * sumx2 / kSuperBlockValues;

  std::array<float, kSubBlocks> scales{};
  float max_scale = 0;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const float* xb = x + kSubBlockValues * ib;
    std::array<float, kSubBlockValues> weight{};
    std::array<float, kSubBlockValues> error_weight{};
    std::array<float, kSubBlockValues> magnitudes{};
    std::array<uint8_t, kSignBytesPerSubBlock> block_signs{};
    if (importance != nullptr) {
      const float* qw = importance + kSubBlockValues * ib;
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < kSubBlockValues; ++i) weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < kSubBlockValues; ++i) error_weight[i] = std::sqrt(weight[i]);
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
      block_signs[k] = s;
    }
    float max = magnitudes[0];
    for (int i = 1; i < kSubBlockValues; ++i) max = ggml_max(max, magnitudes[i]);
    if (max == 0) {  // an all-zero sub-block (a NaN maximum goes on, as in ggml)
      scales[ib] = 0;
      continue;
    }

    std::array<int8_t, kSubBlockValues> levels{};
    float scale = search_sub_block(grid, magnitudes.data(), weight.data(), error_weight.data(), max, levels.data());
    if (scale < 0) {  // only with negative importance weights: store |scale| and flip the signs
      scale = -scale;
      for (auto& s : block_signs) s = static_cast<uint8_t>(~s);
    }
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      // search_sub_block leaves every group on the grid.
      const int grid_index = ggml_max<int>(0, grid.grid_of_code[level_code(levels.data() + 4 * k)]);
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

void quantize_iq3_s(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const Iq3sGridIndex& grid = Iq3sGridIndex::get();
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

void register_iq3s_quantizer(KernelTable& table) {
  auto& e = entry(table, TensorType::IQ3_S);
  e.quantize = quantize_iq3_s;
  e.accepts_imatrix = true;
}

}  // namespace ggufkit::quant
