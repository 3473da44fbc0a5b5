// What the IQ3_XXS and IQ3_S quantizers share: their grids as lookup structures (ggml's
// iq3xs_init_impl, for the 256-point and the 512-point grid) and the search that picks a
// sub-block's scale and grid points (the middle of ggml's quantize_row_iq3_xxs_impl and
// quantize_row_iq3_s_impl, which differ only in the parameters of SearchRules).
//
// Each group of 4 magnitudes is a grid point whose coordinates are odd levels 1, 3, ..., 15
// (level index 0..7, 3 bits each: a 12-bit level code). Everything here keeps ggml's float
// operations and their order: a single different rounding changes bytes.
#pragma once

#include <array>
#include <cfloat>
#include <cstdint>
#include <vector>

#include "quant/search.h"

namespace ggufkit::quant::iq3 {

inline constexpr int kSuperBlockValues = 256;
inline constexpr int kSubBlockValues = 32;
inline constexpr int kSubBlocks = kSuperBlockValues / kSubBlockValues;  // 8
inline constexpr int kGroupsPerSubBlock = kSubBlockValues / 4;  // 8 grid points
inline constexpr int kLevels = 8;                               // levels 0..7 stand for 1, 3, ..., 15
inline constexpr int kMaxGridSize = 512;
inline constexpr int kCodeCount = 1 << 12;                      // 4 levels of 3 bits

// ggml's MAX / MIN macros (not std::max: the NaN and signed-zero cases differ).
template <class T>
T ggml_max(T a, T b) { return a > b ? a : b; }
template <class T>
T ggml_min(T a, T b) { return a < b ? a : b; }

// A grid as lookup structures: grid point coordinates, the grid index of each 12-bit level code,
// and for each code that is not a grid point, the grid points nearest to it.
struct GridIndex {
  int size = 0;                                              // 256 or 512 points
  std::array<std::array<int8_t, 4>, kMaxGridSize> points{};  // odd coordinates 1..15
  std::array<int16_t, kCodeCount> grid_of_code{};            // -1: not on the grid
  std::array<uint32_t, kCodeCount> neighbours_begin{};
  std::array<uint16_t, kCodeCount> neighbours_count{};
  std::vector<uint16_t> neighbours;

  // The same neighbour lists for vector searches: per off-grid code, chunks of 16 candidates
  // holding their 4 coordinates as rows (unused slots are zero; the searches mask them off).
  struct alignas(64) CandidateChunk {
    std::array<std::array<int8_t, 16>, 4> coordinate;
  };
  std::vector<CandidateChunk> candidate_chunks;
  std::array<uint32_t, kCodeCount> chunks_begin{};
  std::array<int32_t, kCodeCount> grid_of_code32{};  // grid_of_code widened for vector gathers
  std::array<uint16_t, kMaxGridSize> code_of_point{};

  // codes[j]: the level code of grid point j. An off-grid code's neighbours are the grid points
  // at its `neighbour_distances` smallest squared distances (ggml: 2 for the 256-point grid, 3 for
  // the 512-point one).
  GridIndex(const uint16_t* codes, int grid_size, int neighbour_distances);

  // IQ3_XXS's 256-point grid and IQ3_S's 512-point grid, built once (thread-safe).
  static const GridIndex& iq3_xxs();
  static const GridIndex& iq3_s();

 private:
  void add_neighbours(int code, int neighbour_distances);
};

inline int level_code(const int8_t* levels) {
  int code = 0;
  for (int i = 0; i < 4; ++i) code |= levels[i] << (3 * i);
  return code;
}

inline void levels_of_point(const GridIndex& grid, int grid_index, int8_t* levels) {
  for (int i = 0; i < 4; ++i) levels[i] = static_cast<int8_t>((grid.points[grid_index][i] - 1) / 2);
}

// The grid index of a level code the search left on the grid (ggml aborts otherwise; we take 0).
inline int grid_index_of(const GridIndex& grid, int code) { return ggml_max<int>(0, grid.grid_of_code[code]); }

// The neighbour of an off-grid code that best fits scale * point to the 4 magnitudes (weighted
// squared error; the first of equal ones wins). Writes its levels.
inline void best_neighbour(const GridIndex& grid, int code, const float* magnitudes, const float* weights,
                           float scale, int8_t* levels) {
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
inline void round_group(const float* magnitudes, float inv_scale, int8_t* levels) {
  for (int i = 0; i < 4; ++i) {
    const int l = nearest_int(0.5f * (inv_scale * magnitudes[i] - 1));
    levels[i] = static_cast<int8_t>(ggml_max(0, ggml_min(kLevels - 1, l)));
  }
}

// Where the two ggml searches differ.
struct SearchRules {
  // Candidate scales max / (15 + 0.2 * step) for step in [-half_steps, half_steps].
  int half_steps = 9;
  // The final pass, run when the best candidate moved a group to a neighbour: IQ3_S rounds every
  // group again at the fitted scale, IQ3_XXS only the groups that had moved. IQ3_S also runs it
  // when no candidate fitted at all (its on-grid flags start false), IQ3_XXS not.
  bool refine_every_group = true;
};
inline constexpr SearchRules kIq3sRules{9, true};
inline constexpr SearchRules kIq3xxsRules{15, false};

// Finds the levels (all on the grid on return) and the scale of one sub-block of 32 magnitudes
// whose maximum is max: weight is the fit's weights, error_weight their square roots (the
// neighbour search's weights). Returns the scale (negative only with negative weights).
float search_sub_block(const GridIndex& grid, const SearchRules& rules, const float* magnitudes,
                       const float* weight, const float* error_weight, float max, int8_t* levels);

// One super-block's inputs to the search, per sub-block of 32 values.
struct SearchInputs {
  float magnitudes[kSubBlocks][kSubBlockValues];
  float weight[kSubBlocks][kSubBlockValues];        // the fit's weights
  float error_weight[kSubBlocks][kSubBlockValues];  // their square roots, the neighbour search's weights
  float max[kSubBlocks];  // largest magnitude (ggml's order: NaN handling follows its MAX)
};

// What the search chose for each sub-block: the scale and the 8 grid points.
struct BlockChoice {
  float scale[kSubBlocks];
  int grid_index[kSubBlocks][kGroupsPerSubBlock];
};

// search_sub_block for the sub-blocks whose bit is set in `active` (bit b: sub-block b); the
// others' choices are left as they are. The AVX2 form searches all 8 at once with the same result.
using BlockSearch = void (*)(const GridIndex& grid, const SearchRules& rules, const SearchInputs& inputs,
                             unsigned active, BlockChoice& choice);
// The fastest form this CPU runs (simd.h's GGUFKIT_QUANT_ISA applies).
BlockSearch block_search();

}  // namespace ggufkit::quant::iq3
