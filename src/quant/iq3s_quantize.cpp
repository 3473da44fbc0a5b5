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
// The grid index and the scalar search are shared with IQ3_XXS (quant/iq3_grid.h).
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
#include "quant/iq3_grid.h"
#include "quant/kernels.h"
#include "quant/simd.h"
#include "quant/tables.h"

namespace ggufkit::quant {
namespace {

using iq3::ggml_max;
using iq3::ggml_min;
using iq3::kGroupsPerSubBlock;
using iq3::kLevels;
using iq3::kSubBlockValues;
using iq3::level_code;

constexpr int kSuperBlockValues = 256;
constexpr int kSubBlocks = kSuperBlockValues / kSubBlockValues;  // 8
constexpr int kSignBytesPerSubBlock = kSubBlockValues / 8;         // 4

// block_iq3_s layout.
constexpr size_t kScaleOffset = 0;
constexpr size_t kQsOffset = 2;
constexpr size_t kQhOffset = kQsOffset + kSuperBlockValues / 4;      // 66
constexpr size_t kSignsOffset = kQhOffset + kSuperBlockValues / 32;  // 74
constexpr size_t kScalesOffset = kSignsOffset + kSuperBlockValues / 8;  // 106
constexpr size_t kBlockBytes = kScalesOffset + kSuperBlockValues / 64;  // 110

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

void quantize_block_portable(const iq3::GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  BlockChoice choice{};
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if (p.max[ib] == 0) continue;
    std::array<int8_t, kSubBlockValues> levels{};
    choice.scale[ib] = iq3::search_sub_block(grid, iq3::kIq3sRules, p.magnitudes[ib], p.weight[ib],
                                             p.error_weight[ib], p.max[ib], levels.data());
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
    const NeighbourQueryAvx2& query, const iq3::GridIndex::CandidateChunk* chunks, int count, int v) {
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
    const iq3::GridIndex& grid, int code, const float* magnitudes, const float* weights, float scale) {
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
GGUFKIT_TARGET_AVX2 void try_scale_avx2(const iq3::GridIndex& grid, const PreparedBlock& p, const LaneInputs& in,
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
GGUFKIT_TARGET_AVX2 __attribute__((noinline)) void search_block_avx2(const iq3::GridIndex& grid,
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

void quantize_block_avx2(const iq3::GridIndex& grid, const float* x, const float* importance,
                                             uint8_t* block) {
  PreparedBlock p;
  prepare_block(x, importance, p);
  BlockChoice choice{};
  search_block_avx2(grid, p, choice);
  pack_block(p, choice, block);
}

#endif  // GGUFKIT_QUANT_X86

using BlockQuantizer = void (*)(const iq3::GridIndex&, const float*, const float*, uint8_t*);

BlockQuantizer block_quantizer() {
#if GGUFKIT_QUANT_X86
  if (simd::has_avx2()) return quantize_block_avx2;
#endif
  return quantize_block_portable;
}

void quantize_iq3_s(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const iq3::GridIndex& grid = iq3::GridIndex::iq3_s();
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
