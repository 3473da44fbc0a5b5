// The IQ3 grids as lookup structures, and the sub-block search IQ3_XXS and IQ3_S share.
#include "quant/iq3_grid.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "quant/tables.h"

namespace ggufkit::quant::iq3 {

GridIndex::GridIndex(const uint16_t* codes, int grid_size, int neighbour_distances) : size(grid_size) {
  grid_of_code.fill(-1);
  for (int j = 0; j < grid_size; ++j) {
    for (int k = 0; k < 4; ++k) points[j][k] = static_cast<int8_t>(2 * ((codes[j] >> (3 * k)) & 7) + 1);
    grid_of_code[codes[j]] = static_cast<int16_t>(j);
    code_of_point[j] = codes[j];
  }
  for (int code = 0; code < kCodeCount; ++code) {
    if (grid_of_code[code] < 0) add_neighbours(code, neighbour_distances);
  }
  for (int code = 0; code < kCodeCount; ++code) {
    grid_of_code32[code] = grid_of_code[code];
    if (grid_of_code[code] >= 0) continue;
    const int count = neighbours_count[code];
    chunks_begin[code] = static_cast<uint32_t>(candidate_chunks.size());
    for (int c = 0; c < count; c += 16) {
      CandidateChunk chunk{};
      for (int slot = 0; slot < 16 && c + slot < count; ++slot) {
        const auto& point = points[neighbours[neighbours_begin[code] + static_cast<uint32_t>(c + slot)]];
        for (int k = 0; k < 4; ++k) chunk.coordinate[k][slot] = point[k];
      }
      candidate_chunks.push_back(chunk);
    }
  }
}

// The grid points at the neighbour_distances smallest squared distances from an off-grid code,
// ordered by distance, then by grid index: the search keeps the first of equally good candidates,
// so this order is part of the output.
void GridIndex::add_neighbours(int code, int neighbour_distances) {
  std::array<int, 4> position{};
  for (int k = 0; k < 4; ++k) position[k] = 2 * ((code >> (3 * k)) & 7) + 1;
  std::array<int, kMaxGridSize> distance{};
  for (int j = 0; j < size; ++j) {
    int d2 = 0;
    for (int k = 0; k < 4; ++k) d2 += (points[j][k] - position[k]) * (points[j][k] - position[k]);
    distance[j] = d2;
  }
  // The smallest distinct distances, ascending (INT_MAX: fewer distinct distances exist).
  std::vector<int> nearest(static_cast<size_t>(neighbour_distances), INT_MAX);
  for (int j = 0; j < size; ++j) {
    const int d2 = distance[j];
    for (size_t r = 0; r < nearest.size(); ++r) {
      if (d2 == nearest[r]) break;
      if (d2 < nearest[r]) {
        nearest.insert(nearest.begin() + static_cast<std::ptrdiff_t>(r), d2);
        nearest.pop_back();
        break;
      }
    }
  }
  neighbours_begin[code] = static_cast<uint32_t>(neighbours.size());
  for (int d2 : nearest) {
    if (d2 == INT_MAX) break;
    for (int j = 0; j < size; ++j) {
      if (distance[j] == d2) neighbours.push_back(static_cast<uint16_t>(j));
    }
  }
  neighbours_count[code] = static_cast<uint16_t>(neighbours.size() - neighbours_begin[code]);
}

const GridIndex& GridIndex::iq3_xxs() {
  static const GridIndex index = [] {
    // The dequantization grid stores levels 0..7 as these byte values.
    constexpr uint8_t kLevelValues[kLevels] = {4, 12, 20, 28, 36, 44, 52, 62};
    std::array<uint16_t, 256> codes{};
    for (size_t j = 0; j < codes.size(); ++j) {
      int code = 0;
      for (int k = 0; k < 4; ++k) {
        const auto value = static_cast<uint8_t>(tables::iq3xxs_grid[j] >> (8 * k));
        const auto level = std::find(std::begin(kLevelValues), std::end(kLevelValues), value) - std::begin(kLevelValues);
        code |= static_cast<int>(level) << (3 * k);
      }
      codes[j] = static_cast<uint16_t>(code);
    }
    return GridIndex(codes.data(), 256, 2);
  }();
  return index;
}

const GridIndex& GridIndex::iq3_s() {
  static const GridIndex index = [] {
    // The dequantization grid stores the odd coordinates themselves.
    std::array<uint16_t, 512> codes{};
    for (size_t j = 0; j < codes.size(); ++j) {
      int code = 0;
      for (int k = 0; k < 4; ++k) {
        const int coordinate = static_cast<int>((tables::iq3s_grid[j] >> (8 * k)) & 0xFFu);
        code |= ((coordinate - 1) / 2) << (3 * k);
      }
      codes[j] = static_cast<uint16_t>(code);
    }
    return GridIndex(codes.data(), 512, 3);
  }();
  return index;
}

namespace {

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

}  // namespace

float search_sub_block(const GridIndex& grid, const SearchRules& rules, const float* magnitudes,
                       const float* weight, const float* error_weight, float max, int8_t* levels) {
  std::array<int8_t, kSubBlockValues> trial{};
  std::array<bool, kGroupsPerSubBlock> on_grid{};
  std::array<bool, kGroupsPerSubBlock> trial_on_grid{};
  on_grid.fill(!rules.refine_every_group);
  std::memset(levels, 0, kSubBlockValues);
  float best = 0;
  float scale = max / (2 * kLevels - 1);
  for (int step = -rules.half_steps; step <= rules.half_steps; ++step) {
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

  // Groups that had to move to a neighbour: round them (IQ3_S: all groups) again at the fitted
  // scale, then refit the scale.
  const bool any_off_grid = std::find(on_grid.begin(), on_grid.end(), false) != on_grid.end();
  if (any_off_grid && scale > 0) {
    const float inv_scale = 1 / scale;
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      if (on_grid[k] && !rules.refine_every_group) continue;
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

}  // namespace ggufkit::quant::iq3
