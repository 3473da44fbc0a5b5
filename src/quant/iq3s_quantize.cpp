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
//
// The AVX2 kernel (chosen at run time, also on AVX-512 CPUs: a 16-candidate AVX-512 neighbour
// search measured slower here) tries each candidate scale in the 8 sub-blocks of a super-block at
// once (one sub-block per lane, every lane doing the scalar operations of its sub-block in the
// scalar order), and its neighbour searches evaluate 8 grid candidates per vector, each lane
// summing one candidate's error in the scalar order; the smallest error wins, the first of equal
// ones as in the scalar loop.
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
#include "quant/simd.h"
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

  // The same neighbour lists for the vector searches: per off-grid code, chunks of 16 candidates
  // holding their 4 coordinates as rows (unused slots are zero; the searches mask them off).
  struct alignas(64) CandidateChunk {
    std::array<std::array<int8_t, 16>, 4> coordinate;
  };
  std::vector<CandidateChunk> candidate_chunks;
  std::array<uint32_t, kCodeCount> chunks_begin{};
  std::array<int32_t, kCodeCount> grid_of_code32{};  // grid_of_code widened for vector gathers
  std::array<uint16_t, kGridSize> code_of_point{};

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
      code_of_point[j] = static_cast<uint16_t>(code);
    }
    for (int code = 0; code < kCodeCount; ++code) {
      if (grid_of_code[code] < 0) add_neighbours(code);
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

// One super-block's inputs to the search, per sub-block of 32 values.
struct PreparedBlock {
  float magnitudes[kSubBlocks][kSubBlockValues];
  float weight[kSubBlocks][kSubBlockValues];        // the fit's weights
  float error_weight[kSubBlocks][kSubBlockValues];  // their square roots, the neighbour search's weights
  uint8_t signs[kSubBlocks][kSignBytesPerSubBlock];
  float max[kSubBlocks];  // largest magnitude (ggml's order: NaN handling follows its MAX)
};

// What the search chose for each sub-block: the scale and the 8 grid points.
struct BlockChoice {
  float scale[kSubBlocks];
  int grid_index[kSubBlocks][kGroupsPerSubBlock];
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
void pack_block(const PreparedBlock& p, const BlockChoice& choice, uint8_t* block) {
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

// The grid index of a level code the search left on the grid (ggml aborts otherwise; we take 0).
int grid_index_of(const Iq3sGridIndex& grid, int code) { return ggml_max<int>(0, grid.grid_of_code[code]); }

void quantize_block_portable(const Iq3sGridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  BlockChoice choice{};
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if (p.max[ib] == 0) continue;
    std::array<int8_t, kSubBlockValues> levels{};
    choice.scale[ib] = search_sub_block(grid, p.magnitudes[ib], p.weight[ib], p.error_weight[ib], p.max[ib],
                                        levels.data());
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      // search_sub_block leaves every group on the grid.
      choice.grid_index[ib][k] = grid_index_of(grid, level_code(levels.data() + 4 * k));
    }
  }
  pack_block(p, choice, block);
}

#if GGUFKIT_QUANT_X86

// Neighbour lists longer than this take the scalar search (the iq3s grid's longest has 38).
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
    const NeighbourQueryAvx2& query, const Iq3sGridIndex::CandidateChunk* chunks, int count, int v) {
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
    const Iq3sGridIndex& grid, int code, const float* magnitudes, const float* weights, float scale) {
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
GGUFKIT_TARGET_AVX2 void try_scale_avx2(const Iq3sGridIndex& grid, const PreparedBlock& p, const LaneInputs& in,
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

// search_sub_block for the 8 sub-blocks at once. Leaves the upper vector halves zeroed: its
// callers are baseline (SSE) code, which runs several times slower with them dirty.
GGUFKIT_TARGET_AVX2 __attribute__((noinline)) void search_block_avx2(const Iq3sGridIndex& grid,
                                                                     const PreparedBlock& p, BlockChoice& choice) {
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
  const __m256 active = _mm256_cmp_ps(max, zero, _CMP_NEQ_UQ);  // all-zero sub-blocks are skipped
  const unsigned active_lanes = static_cast<unsigned>(_mm256_movemask_ps(active));
  if (active_lanes == 0) {
    _mm256_zeroupper();
    return;
  }

  LaneTrial t;
  __m256 best = zero;
  __m256 scale = _mm256_div_ps(max, _mm256_set1_ps(2 * kLevels - 1));
  __m256i best_codes[kGroupsPerSubBlock];
  for (auto& c : best_codes) c = _mm256_setzero_si256();
  __m256i best_on_grid = _mm256_setzero_si256();
  for (int step = -9; step <= 9; ++step) {
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

  // Lanes whose best fit used neighbours: round all groups again at the fitted scale, refit.
  const unsigned all_on_grid = static_cast<unsigned>(
      _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(best_on_grid, _mm256_set1_epi32(0xFF)))));
  const unsigned positive = static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(scale, zero, _CMP_GT_OQ)));
  const unsigned refine_lanes = active_lanes & ~all_on_grid & positive;
  if (refine_lanes != 0) {
    try_scale_avx2(grid, p, in, _mm256_div_ps(_mm256_set1_ps(1.0f), scale), scale, refine_lanes, t);
    const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i refine =
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(refine_lanes)), lane_bit), lane_bit);
    for (int k = 0; k < kGroupsPerSubBlock; ++k) {
      const __m256i codes = _mm256_load_si256(reinterpret_cast<const __m256i*>(t.codes[k]));
      best_codes[k] = _mm256_blendv_epi8(best_codes[k], codes, refine);
    }
    const __m256 refit = _mm256_and_ps(_mm256_castsi256_ps(refine), _mm256_cmp_ps(t.sumq2, zero, _CMP_GT_OQ));
    scale = _mm256_blendv_ps(scale, _mm256_div_ps(t.sumqx, t.sumq2), refit);
  }

  _mm256_storeu_ps(choice.scale, scale);
  alignas(32) int32_t codes[kGroupsPerSubBlock][8];
  for (int k = 0; k < kGroupsPerSubBlock; ++k) _mm256_store_si256(reinterpret_cast<__m256i*>(codes[k]), best_codes[k]);
  for (int b = 0; b < kSubBlocks; ++b) {
    for (int k = 0; k < kGroupsPerSubBlock; ++k) choice.grid_index[b][k] = grid_index_of(grid, codes[k][b]);
  }
  _mm256_zeroupper();
}

void quantize_block_avx2(const Iq3sGridIndex& grid, const float* x, const float* importance,
                                             uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  BlockChoice choice{};
  search_block_avx2(grid, p, choice);
  pack_block(p, choice, block);
}

#endif  // GGUFKIT_QUANT_X86

using BlockQuantizer = void (*)(const Iq3sGridIndex&, const float*, const float*, uint8_t*);

BlockQuantizer block_quantizer() {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_block_avx2;
#endif
  return quantize_block_portable;
}

void quantize_iq3_s(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const Iq3sGridIndex& grid = Iq3sGridIndex::get();
  const BlockQuantizer quantize_block = block_quantizer();
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
