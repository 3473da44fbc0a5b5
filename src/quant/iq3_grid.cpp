// The IQ3 grids as lookup structures, and the sub-block search IQ3_XXS and IQ3_S share.
//
// The AVX2 search (chosen at run time, also on AVX-512 CPUs: a 16-candidate AVX-512 neighbour
// search measured slower for IQ3_S) tries each candidate scale in the 8 sub-blocks of a
// super-block at once (one sub-block per lane, every lane doing the scalar operations of its
// sub-block in the scalar order), and its neighbour searches evaluate 8 grid candidates per vector,
// each lane summing one candidate's error in the scalar order; the smallest error wins, the first
// of equal ones as in the scalar loop.
#include "quant/iq3_grid.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>

#include "quant/simd.h"
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

namespace {

#if GGUFKIT_QUANT_X86

// Neighbour lists longer than this take the scalar search (the 512-point grid's longest has 38).
constexpr int kVectorNeighbourLimit = 64;

// What a neighbour search compares candidates against, broadcast to every lane.
struct NeighbourQueryAvx2 {
  __m256 scale;
  __m256 magnitude[4];
  __m256 weight[4];
};

// Keys of candidates 8v..8v+7 of a list of count: the weighted error (computed as the scalar loop
// does) where the scalar loop could take it, +infinity elsewhere (past the list, NaN, or not below
// FLT_MAX).
GGUFKIT_TARGET_AVX2 __attribute__((always_inline)) inline __m256 candidate_keys_avx2(
    const NeighbourQueryAvx2& query, const GridIndex::CandidateChunk* chunks, int count, int v) {
  const int8_t* rows = chunks[v / 2].coordinate[0].data() + 8 * (v % 2);
  __m256 d2 = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    const __m128i q8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows + 16 * i));
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
    const __m256 diff = _mm256_sub_ps(_mm256_mul_ps(query.scale, q), query.magnitude[i]);
    d2 = _mm256_add_ps(d2, _mm256_mul_ps(_mm256_mul_ps(query.weight[i], diff), diff));
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 in_list = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(count - 8 * v), lane));
  const __m256 eligible = _mm256_and_ps(in_list, _mm256_cmp_ps(d2, _mm256_set1_ps(FLT_MAX), _CMP_LT_OQ));
  return _mm256_blendv_ps(_mm256_set1_ps(INFINITY), d2, eligible);
}

GGUFKIT_TARGET_AVX2 __attribute__((always_inline)) inline unsigned lanes_equal_avx2(__m256 a, __m256 b) {
  return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
}

// best_neighbour with 8 candidates per vector: lane c computes candidate c's weighted error with
// the scalar operations in the scalar order. The scalar loop keeps the first strictly smaller
// error below FLT_MAX, that is the first candidate holding the smallest such error; NaN errors
// never win, and when no candidate qualifies it keeps the first. Returns the grid index.
GGUFKIT_TARGET_AVX2 __attribute__((always_inline)) inline int best_neighbour_avx2(
    const GridIndex& grid, int code, const float* magnitudes, const float* weights, float scale) {
  const int count = grid.neighbours_count[code];
  const uint16_t* candidates = grid.neighbours.data() + grid.neighbours_begin[code];
  if (count > kVectorNeighbourLimit) {
    int8_t levels[4];
    best_neighbour(grid, code, magnitudes, weights, scale, levels);
    return grid.grid_of_code[level_code(levels)];
  }
  const auto* chunks = grid.candidate_chunks.data() + grid.chunks_begin[code];
  NeighbourQueryAvx2 query;
  query.scale = _mm256_set1_ps(scale);
  for (int i = 0; i < 4; ++i) {
    query.magnitude[i] = _mm256_set1_ps(magnitudes[i]);
    query.weight[i] = _mm256_set1_ps(weights[i]);
  }
  // The first 16 candidates without branches (most lists are that short), the rest in a loop.
  const int vectors = (count + 7) / 8;
  __m256 keys[kVectorNeighbourLimit / 8];
  keys[0] = candidate_keys_avx2(query, chunks, count, 0);
  keys[1] = candidate_keys_avx2(query, chunks, count, 1);
  __m256 smallest = _mm256_min_ps(keys[0], keys[1]);
  for (int v = 2; v < vectors; ++v) {
    keys[v] = candidate_keys_avx2(query, chunks, count, v);
    smallest = _mm256_min_ps(smallest, keys[v]);
  }
  // Broadcast the smallest key; the first candidate holding it wins (candidate 0 when all are +inf).
  smallest = _mm256_min_ps(smallest, _mm256_permute2f128_ps(smallest, smallest, 1));
  smallest = _mm256_min_ps(smallest, _mm256_permute_ps(smallest, _MM_SHUFFLE(1, 0, 3, 2)));
  smallest = _mm256_min_ps(smallest, _mm256_permute_ps(smallest, _MM_SHUFFLE(2, 3, 0, 1)));
  const unsigned first_hits = lanes_equal_avx2(keys[0], smallest) | (lanes_equal_avx2(keys[1], smallest) << 8);
  if (first_hits != 0) return candidates[std::countr_zero(first_hits)];
  for (int v = 2; v < vectors; ++v) {
    const unsigned hits = lanes_equal_avx2(keys[v], smallest);
    if (hits != 0) return candidates[8 * v + std::countr_zero(hits)];
  }
  return candidates[0];  // not reached: some key equals the smallest
}

// The 8 sub-blocks of a super-block with lane b holding sub-block b.
struct alignas(32) LaneInputs {
  float magnitude[kSubBlockValues][8];
  float weight[kSubBlockValues][8];
  float weighted_magnitude[kSubBlockValues][8];  // weight * magnitude: sumqx's terms start with it
};

// One candidate scale tried in every lane: the levels and level codes it gives (moved to the
// grid), and the fit sums.
struct alignas(32) LaneTrial {
  int32_t levels[kSubBlockValues][8];
  int32_t codes[kGroupsPerSubBlock][8];
  float scale[8];
  __m256 sumqx, sumq2;
  __m256i on_grid;  // bit k set: group k was on the grid without a neighbour search
};

// Rounds every lane's magnitudes at its inverse scale, moves off-grid groups of the lanes in
// `lanes` (a lane bit mask) to their best neighbour at `scale`, and sums the fit terms: what one
// step of search_sub_block does, per lane.
GGUFKIT_TARGET_AVX2 void try_scale_avx2(const GridIndex& grid, const SearchInputs& p, const LaneInputs& in,
                                        __m256 inv_scale, __m256 scale, unsigned lanes, LaneTrial& t) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 magic = _mm256_set1_ps(12582912.f);
  const __m256i mantissa = _mm256_set1_epi32(0x007FFFFF);
  const __m256i bias = _mm256_set1_epi32(0x00400000);
  const __m256i top = _mm256_set1_epi32(kLevels - 1);
  const __m256i zero = _mm256_setzero_si256();
  _mm256_store_ps(t.scale, scale);
  __m256i on_grid = zero;
  unsigned off_grid[kGroupsPerSubBlock];
  for (int k = 0; k < kGroupsPerSubBlock; ++k) {
    __m256i code = zero;
    for (int j = 0; j < 4; ++j) {
      const int i = 4 * k + j;
      // nearest_int(0.5f * (inv_scale * x - 1)), clamped to 0..7.
      const __m256 scaled = _mm256_mul_ps(inv_scale, _mm256_load_ps(in.magnitude[i]));
      const __m256 v = _mm256_mul_ps(half, _mm256_sub_ps(scaled, one));
      const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, magic));
      __m256i level = _mm256_sub_epi32(_mm256_and_si256(bits, mantissa), bias);
      level = _mm256_max_epi32(zero, _mm256_min_epi32(top, level));
      _mm256_store_si256(reinterpret_cast<__m256i*>(t.levels[i]), level);
      code = _mm256_or_si256(code, _mm256_sll_epi32(level, _mm_cvtsi32_si128(3 * j)));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(t.codes[k]), code);
    const __m256i index = _mm256_i32gather_epi32(grid.grid_of_code32.data(), code, 4);
    off_grid[k] = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(index))) & lanes;
    on_grid = _mm256_or_si256(on_grid, _mm256_andnot_si256(_mm256_srai_epi32(index, 31), _mm256_set1_epi32(1 << k)));
  }
  for (int k = 0; k < kGroupsPerSubBlock; ++k) {
    for (unsigned m = off_grid[k]; m != 0; m &= m - 1) {
      const int b = std::countr_zero(m);
      const int point = best_neighbour_avx2(grid, t.codes[k][b], &p.magnitudes[b][4 * k], &p.error_weight[b][4 * k],
                                            t.scale[b]);
      const int code = grid.code_of_point[point];
      t.codes[k][b] = code;
      for (int j = 0; j < 4; ++j) t.levels[4 * k + j][b] = (code >> (3 * j)) & 7;
    }
  }
  __m256 sumqx = _mm256_setzero_ps();
  __m256 sumq2 = _mm256_setzero_ps();
  const __m256i one_i = _mm256_set1_epi32(1);
  for (int i = 0; i < kSubBlockValues; ++i) {
    const __m256i level = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.levels[i]));
    const __m256 q = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(level, level), one_i));
    sumqx = _mm256_add_ps(sumqx, _mm256_mul_ps(_mm256_load_ps(in.weighted_magnitude[i]), q));
    sumq2 = _mm256_add_ps(sumq2, _mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(in.weight[i]), q), q));
  }
  t.sumqx = sumqx;
  t.sumq2 = sumq2;
  t.on_grid = on_grid;
}

// All ones in the lanes whose bit is set in `lanes`.
GGUFKIT_TARGET_AVX2 __attribute__((always_inline)) inline __m256i lanes_vector(unsigned lanes) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(lanes)), lane_bit), lane_bit);
}

// search_sub_block for the 8 sub-blocks at once. Leaves the upper vector halves zeroed: its
// callers are baseline (SSE) code, which runs several times slower with them dirty.
GGUFKIT_TARGET_AVX2 __attribute__((noinline)) void search_block_avx2(const GridIndex& grid, const SearchRules& rules,
                                                                     const SearchInputs& p, unsigned active_lanes,
                                                                     BlockChoice& choice) {
  active_lanes &= 0xFFu;
  if (active_lanes == 0) return;
  LaneInputs in;
  for (int b = 0; b < kSubBlocks; ++b) {
    for (int i = 0; i < kSubBlockValues; ++i) {
      in.magnitude[i][b] = p.magnitudes[b][i];
      in.weight[i][b] = p.weight[b][i];
      in.weighted_magnitude[i][b] = p.weight[b][i] * p.magnitudes[b][i];
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m256 max = _mm256_loadu_ps(p.max);
  const __m256 active = _mm256_castsi256_ps(lanes_vector(active_lanes));

  LaneTrial t;
  __m256 best = zero;
  __m256 scale = _mm256_div_ps(max, _mm256_set1_ps(2 * kLevels - 1));
  __m256i best_codes[kGroupsPerSubBlock];
  for (auto& c : best_codes) c = _mm256_setzero_si256();
  // Bit k: group k of the kept levels is on the grid without a neighbour search. Before any fit,
  // IQ3_S counts every group as off the grid, IQ3_XXS as on it (SearchRules).
  __m256i best_on_grid = _mm256_set1_epi32(rules.refine_every_group ? 0 : 0xFF);
  for (int step = -rules.half_steps; step <= rules.half_steps; ++step) {
    const __m256 inv_scale = _mm256_div_ps(_mm256_set1_ps(2 * kLevels - 1 + static_cast<float>(step) * 0.2f), max);
    const __m256 trial_scale = _mm256_div_ps(_mm256_set1_ps(1.0f), inv_scale);
    try_scale_avx2(grid, p, in, inv_scale, trial_scale, active_lanes, t);
    const __m256 better =
        _mm256_and_ps(_mm256_and_ps(active, _mm256_cmp_ps(t.sumq2, zero, _CMP_GT_OQ)),
                      _mm256_cmp_ps(_mm256_mul_ps(t.sumqx, t.sumqx), _mm256_mul_ps(best, t.sumq2), _CMP_GT_OQ));
    if (_mm256_movemask_ps(better) == 0) continue;
    const __m256 fitted = _mm256_div_ps(t.sumqx, t.sumq2);
    scale = _mm256_blendv_ps(scale, fitted, better);
    best = _mm256_blendv_ps(best, _mm256_mul_ps(fitted, t.sumqx), better);
    const __m256i take = _mm256_castps_si256(better);
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      const __m256i codes = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.codes[k]));
      best_codes[k] = _mm256_blendv_epi8(best_codes[k], codes, take);
    }
    best_on_grid = _mm256_blendv_epi8(best_on_grid, t.on_grid, take);
  }

  // Lanes whose best fit used neighbours: round the groups again at the fitted scale (IQ3_S: all,
  // IQ3_XXS: the ones that moved), refit.
  const unsigned all_on_grid = static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(best_on_grid, _mm256_set1_epi32(0xFF)))));
  const unsigned positive = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(scale, zero, _CMP_GT_OQ)));
  const unsigned refine_lanes = active_lanes & ~all_on_grid & positive;
  if (refine_lanes != 0) {
    try_scale_avx2(grid, p, in, _mm256_div_ps(_mm256_set1_ps(1.0f), scale), scale, refine_lanes, t);
    const __m256i refine = lanes_vector(refine_lanes);
    __m256 sumqx = t.sumqx;
    __m256 sumq2 = t.sumq2;
    if (rules.refine_every_group) {
      for (int k = 0; k < kGroupsPerSubBlock; ++k) {
        const __m256i codes = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.codes[k]));
        best_codes[k] = _mm256_blendv_epi8(best_codes[k], codes, refine);
      }
    } else {
      // Only the groups that had moved take the new levels; the fit is summed over the result.
      sumqx = _mm256_setzero_ps();
      sumq2 = _mm256_setzero_ps();
      const __m256i one_i = _mm256_set1_epi32(1);
      const __m256i seven = _mm256_set1_epi32(7);
      for (int k = 0; k < kGroupsPerSubBlock; ++k) {
        const __m256i group_bit = _mm256_set1_epi32(1 << k);
        const __m256i moved = _mm256_andnot_si256(
            _mm256_cmpeq_epi32(_mm256_and_si256(best_on_grid, group_bit), group_bit), refine);
        const __m256i codes = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.codes[k]));
        best_codes[k] = _mm256_blendv_epi8(best_codes[k], codes, moved);
        for (int j = 0; j < 4; ++j) {
          const int i = 4 * k + j;
          const __m256i level = _mm256_and_si256(_mm256_srl_epi32(best_codes[k], _mm_cvtsi32_si128(3 * j)), seven);
          const __m256 q = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_add_epi32(level, level), one_i));
          sumqx = _mm256_add_ps(sumqx, _mm256_mul_ps(_mm256_load_ps(in.weighted_magnitude[i]), q));
          sumq2 = _mm256_add_ps(sumq2, _mm256_mul_ps(_mm256_mul_ps(_mm256_load_ps(in.weight[i]), q), q));
        }
      }
    }
    const __m256 refit = _mm256_and_ps(_mm256_castsi256_ps(refine), _mm256_cmp_ps(sumq2, zero, _CMP_GT_OQ));
    scale = _mm256_blendv_ps(scale, _mm256_div_ps(sumqx, sumq2), refit);
  }

  _mm256_storeu_ps(choice.scale, scale);
  alignas(32) int32_t codes[kGroupsPerSubBlock][8];
  for (int k = 0; k < kGroupsPerSubBlock; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(codes[k]), best_codes[k]);
  for (int b = 0; b < kSubBlocks; ++b) {
    if ((active_lanes >> b & 1u) == 0) continue;
    for (int k = 0; k < kGroupsPerSubBlock; ++k) choice.grid_index[b][k] = grid_index_of(grid, codes[k][b]);
  }
  _mm256_zeroupper();
}

#endif  // GGUFKIT_QUANT_X86

void search_block_portable(const GridIndex& grid, const SearchRules& rules, const SearchInputs& p,
                           unsigned active_lanes, BlockChoice& choice) {
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if ((active_lanes >> ib & 1u) == 0) continue;
    int8_t levels[kSubBlockValues];
    choice.scale[ib] = search_sub_block(grid, rules, p.magnitudes[ib], p.weight[ib], p.error_weight[ib], p.max[ib],
                                        levels);
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      // search_sub_block leaves every group on the grid.
      choice.grid_index[ib][k] = grid_index_of(grid, level_code(levels + 4 * k));
    }
  }
}

}  // namespace

BlockSearch block_search() {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return search_block_avx2;
#endif
  return search_block_portable;
}

}  // namespace ggufkit::quant::iq3
