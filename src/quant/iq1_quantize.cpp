// IQ1_S and IQ1_M quantization, byte for byte what ggml's quantize_iq1_s and quantize_iq1_m write.
//
// Both store groups of 8 values as points of the 2048-point grid (quant/iq2_grid.h) whose levels
// 0, 1, 2 stand for -1, 0, 1, shifted by a small delta (IQ1S_DELTA, IQ1M_DELTA: both 0.125) whose
// sign is stored per sub-block (IQ1_S) or per group (IQ1_M). With three levels the best
// weighted split of a sub-block into them is found exhaustively: sort the values, try every pair of
// boundaries and both shifts. A group of levels off the grid goes to its best neighbour, and the
// scale is refitted. Everything keeps ggml's float operations and their order.
//
// ggml sorts with qsort, which in glibc is a merge sort (stable); std::stable_sort keeps equal
// values in the same order. Where ggml aborts or reads out of bounds (a neighbour search in which
// every error is NaN or overflows) we take the first neighbour.
#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "format/blocks.h"
#include "quant/iq2_grid.h"
#include "quant/kernels.h"
#include "quant/search.h"

namespace ggufkit::quant {
namespace {

constexpr int kSuperBlockValues = 256;
constexpr int kGroup = Iq2GridIndex::kGroupSize;
constexpr float kDelta = 0.125f;  // IQ1S_DELTA and IQ1M_DELTA
// The values of levels 0, 1, 2 with a positive and a negative shift.
constexpr float kShiftedUp[3] = {-1 + kDelta, kDelta, 1 + kDelta};
constexpr float kShiftedDown[3] = {-1 - kDelta, -kDelta, 1 - kDelta};

constexpr float kIq1sGroupMaxEps = 1e-12f;  // GROUP_MAX_EPS_IQ1_S
constexpr float kIq1mGroupMaxEps = 1e-7f;   // GROUP_MAX_EPS_IQ1_M
constexpr size_t kIq1sBlockBytes = 2 + kSuperBlockValues / 8 + kSuperBlockValues / 16;  // 50
constexpr size_t kIq1mBlockBytes = kSuperBlockValues / 8 + kSuperBlockValues / 16 + kSuperBlockValues / 32;  // 56
static_assert(kIq1sBlockBytes == sizeof(format::BlockIQ1S) && kIq1mBlockBytes == sizeof(format::BlockIQ1M));

// The neighbour of an off-grid code that best fits scale * value[level] to the 8 values (ggml's
// iq1_find_best_neighbour2). Writes its levels, returns its index.
int best_neighbour(const Iq2GridIndex& grid, uint16_t code, const float* x, const float* weight, float scale,
                   const float* value, int8_t* levels) {
  const int index = grid.best_neighbour(code, x, weight, scale, value);
  std::memcpy(levels, grid.levels(index).data(), kGroup);
  return index;
}

// The positions of a sub-block's values in ascending order (equal values keep their order).
template <int n>
std::array<int, n> ascending_order(const float* x) {
  std::array<int, n> order{};
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [x](int a, int b) { return x[a] < x[b]; });
  return order;
}

float sum_of_squares(const float* x) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlockValues; ++i) sumx2 += x[i] * x[i];
  return sumx2;
}

float max_magnitude(const float* x, int n) {
  float max = std::fabs(x[0]);
  for (int i = 1; i < n; ++i) max = ggml_max(max, std::fabs(x[i]));
  return max;
}

// ---- IQ1_S: 8 sub-blocks of 32 (4 grid points each); per sub-block a uint16 holds the top 3 bits
// of its 4 grid indices, a 3-bit scale and the shift's sign.

void quantize_block_iq1_s(const Iq2GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  constexpr int kSub = 32;
  constexpr int kGroups = kSub / kGroup;
  constexpr int kSubBlocks = kSuperBlockValues / kSub;
  uint8_t* const qs = block + 2;
  std::array<uint16_t, kSubBlocks> qh{};
  std::array<float, kSubBlocks> scales{};
  std::array<int, kSubBlocks> shifts{};
  std::memset(block, 0, kIq1sBlockBytes);
  float max_scale = 0;
  const float sigma2 = 2 * sum_of_squares(x) / kSuperBlockValues;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const float* xb = x + kSub * ib;
    const float* qw = importance + kSub * ib;
    float weight[kSub];
    for (int i = 0; i < kSub; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    const float max = max_magnitude(xb, kSub);
    shifts[static_cast<size_t>(ib)] = 1;
    if (max < kIq1sGroupMaxEps) continue;
    // Prefix sums over the sorted values: every split into levels 0 | 1 | 2 at boundaries i1 <= i2
    // then costs a few operations.
    const auto order = ascending_order<kSub>(xb);
    float sumx[kSub + 1], sumw[kSub + 1];
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < kSub; ++j) {
      const int i = order[static_cast<size_t>(j)];
      sumx[j + 1] = sumx[j] + weight[i] * xb[i];
      sumw[j + 1] = sumw[j] + weight[i];
    }
    float best_score = -FLT_MAX, scale = max;
    int best_i1 = -1, best_i2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= kSub; ++i1) {
      for (int i2 = i1; i2 <= kSub; ++i2) {
        for (const int shift : {1, -1}) {
          const float* v = shift == 1 ? kShiftedUp : kShiftedDown;
          const float sumqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] + (sumx[kSub] - sumx[i2]) * v[2];
          const float sumq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                              (sumw[kSub] - sumw[i2]) * v[2] * v[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            best_i1 = i1;
            best_i2 = i2;
            best_shift = shift;
          }
        }
      }
    }
    if (best_i1 < 0 || best_i2 < 0 || best_shift == 0) continue;
    int8_t levels[kSub];
    for (int j = 0; j < kSub; ++j) {
      levels[order[static_cast<size_t>(j)]] = static_cast<int8_t>(j < best_i1 ? 0 : j < best_i2 ? 1 : 2);
    }
    if (scale < 0) {  // mirror the levels and the shift
      for (auto& l : levels) l = static_cast<int8_t>(2 - l);
      scale = -scale;
      best_shift = -best_shift;
    }
    const float* value = best_shift == 1 ? kShiftedUp : kShiftedDown;
    bool all_on_grid = true;
    int index[kGroups];
    for (int k = 0; k < kGroups; ++k) {
      const uint16_t code = Iq2GridIndex::code_of(levels + kGroup * k);
      index[k] = grid.grid_of(code);
      if (index[k] < 0) {
        all_on_grid = false;
        index[k] = best_neighbour(grid, code, xb + kGroup * k, weight + kGroup * k, scale, value, levels + kGroup * k);
      }
    }
    if (!all_on_grid) {
      float sumqx = 0, sumq2 = 0;
      for (int k = 0; k < kGroups; ++k) {
        const auto& point = grid.levels(index[k]);
        for (int j = 0; j < kGroup; ++j) {
          const float w = weight[kGroup * k + j];
          const float q = value[point[static_cast<size_t>(j)]];
          sumqx += w * q * xb[kGroup * k + j];
          sumq2 += w * q * q;
        }
      }
      if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
    }
    unsigned high_bits = 0;
    for (int k = 0; k < kGroups; ++k) {
      qs[kGroups * ib + k] = static_cast<uint8_t>(index[k] & 255);
      high_bits |= static_cast<unsigned>(index[k] >> 8) << (3 * k);
    }
    qh[static_cast<size_t>(ib)] = static_cast<uint16_t>(high_bits);
    scales[static_cast<size_t>(ib)] = scale;
    shifts[static_cast<size_t>(ib)] = best_shift;
    max_scale = ggml_max(max_scale, scale);
  }
  if (!(max_scale != 0)) {  // ggml's `if (!max_scale)`: the grid bytes stay, with scale 0
    std::memcpy(block + 2 + kSuperBlockValues / 8, qh.data(), sizeof qh);
    return;
  }
  const float d = max_scale / 15;
  const uint16_t d_half = fp32_to_fp16(d * 1.125f);
  std::memcpy(block, &d_half, sizeof d_half);
  const float inv_d = 1 / d;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    int l = ggml_max(0, ggml_min(7, nearest_int(0.5f * (inv_d * scales[static_cast<size_t>(ib)] - 1))));
    if (shifts[static_cast<size_t>(ib)] == -1) l |= 8;
    qh[static_cast<size_t>(ib)] = static_cast<uint16_t>(qh[static_cast<size_t>(ib)] | (l << 12));
  }
  std::memcpy(block + 2 + kSuperBlockValues / 8, qh.data(), sizeof qh);
}

// ---- IQ1_M: 16 sub-blocks of 16 (2 grid points each), each group with its own shift sign; 3-bit
// sub-block scales, and the block scale as an fp16 spread over the top nibbles of the scales.

// Which value table group `half` (0, 1) of a sub-block uses under shift pattern k:
// 0: (+, +), 1: (+, -), 2: (-, +), 3: (-, -).
const float* iq1m_values(int k, int half) {
  const bool up = half == 0 ? k < 2 : k % 2 == 0;
  return up ? kShiftedUp : kShiftedDown;
}

void quantize_block_iq1_m(const Iq2GridIndex& grid, const float* x, const float* importance, uint8_t* block) {
  constexpr int kSub = 16;
  constexpr int kGroups = kSub / kGroup;
  constexpr int kSubBlocks = kSuperBlockValues / kSub;
  constexpr uint8_t kShiftMasks[4] = {0x00, 0x80, 0x08, 0x88};
  uint8_t* const qs = block;
  uint8_t* const qh = block + kSuperBlockValues / 8;
  std::array<uint16_t, 4> sc{};  // the scale bytes as ggml's uint16_t view
  std::array<float, kSubBlocks> scales{};
  std::array<int, kSubBlocks> shifts{};
  std::memset(block, 0, kIq1mBlockBytes);
  float max_scale = 0;
  const float sigma2 = 2 * sum_of_squares(x) / kSuperBlockValues;
  auto fill_weights = [&](int ib, float* weight) {
    const float* xb = x + kSub * ib;
    if (importance != nullptr) {
      const float* qw = importance + kSub * ib;
      for (int i = 0; i < kSub; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < kSub; ++i) weight[i] = xb[i] * xb[i];
    }
  };
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const float* xb = x + kSub * ib;
    float weight[kSub];
    fill_weights(ib, weight);
    const float max = max_magnitude(xb, kSub);
    if (max < kIq1mGroupMaxEps) continue;  // scale 0, shift pattern 0
    const auto order = ascending_order<kSub>(xb);
    float best_score = -FLT_MAX, scale = max;
    int best_i1 = -1, best_i2 = -1, best_k = -1;
    // ggml sums each split from scratch, value by value in sorted order, into one accumulator per
    // shift pattern. The splits (i1, i2) share the first i2 of those additions with (i1, i2 - 1)
    // and, for i2 = i1, with (i1 - 1, i1 - 1): carrying those partial sums along gives the same
    // floats with far fewer additions. The terms are ggml's products, (weight * value) * x.
    float term_qx[kSub][3][4], term_q2[kSub][3][4];
    for (int j = 0; j < kSub; ++j) {
      const int i = order[static_cast<size_t>(j)];
      const int half = i < kSub / 2 ? 0 : 1;
      for (int level = 0; level < 3; ++level) {
        for (int k = 0; k < 4; ++k) {
          const float c = iq1m_values(k, half)[level];
          term_qx[j][level][k] = weight[i] * c * xb[i];
          term_q2[j][level][k] = weight[i] * c * c;
        }
      }
    }
    struct Sums {
      float qx[4] = {}, q2[4] = {};
      void add(const float (&tx)[4], const float (&t2)[4]) {
        for (int k = 0; k < 4; ++k) {
          qx[k] += tx[k];
          q2[k] += t2[k];
        }
      }
    };
    Sums low;  // values 0..i1-1 at level 0
    for (int i1 = 0; i1 <= kSub; ++i1) {
      Sums low_mid = low;  // and values i1..i2-1 at level 1
      for (int i2 = i1; i2 <= kSub; ++i2) {
        Sums all = low_mid;  // and the rest at level 2
        for (int j = i2; j < kSub; ++j) all.add(term_qx[j][2], term_q2[j][2]);
        for (int k = 0; k < 4; ++k) {
          if (all.q2[k] > 0 && all.qx[k] * all.qx[k] > best_score * all.q2[k]) {
            scale = all.qx[k] / all.q2[k];
            best_score = scale * all.qx[k];
            best_i1 = i1;
            best_i2 = i2;
            best_k = k;
          }
        }
        if (i2 < kSub) low_mid.add(term_qx[i2][1], term_q2[i2][1]);
      }
      if (i1 < kSub) low.add(term_qx[i1][0], term_q2[i1][0]);
    }
    if (best_i1 < 0 || best_i2 < 0 || best_k < 0) continue;
    int8_t levels[kSub];
    for (int j = 0; j < kSub; ++j) {
      levels[order[static_cast<size_t>(j)]] = static_cast<int8_t>(j < best_i1 ? 0 : j < best_i2 ? 1 : 2);
    }
    if (scale < 0) {  // mirror the levels and both shifts
      for (auto& l : levels) l = static_cast<int8_t>(2 - l);
      scale = -scale;
      best_k = 3 - best_k;
    }
    bool all_on_grid = true;
    int index[kGroups];
    for (int k = 0; k < kGroups; ++k) {
      const uint16_t code = Iq2GridIndex::code_of(levels + kGroup * k);
      index[k] = grid.grid_of(code);
      if (index[k] < 0) {
        all_on_grid = false;
        index[k] = best_neighbour(grid, code, xb + kGroup * k, weight + kGroup * k, scale, iq1m_values(best_k, k),
                                  levels + kGroup * k);
      }
    }
    if (!all_on_grid) {
      float sumqx = 0, sumq2 = 0;
      for (int k = 0; k < kGroups; ++k) {
        const float* value = iq1m_values(best_k, k);
        const auto& point = grid.levels(index[k]);
        for (int j = 0; j < kGroup; ++j) {
          const float w = weight[kGroup * k + j];
          const float q = value[point[static_cast<size_t>(j)]];
          sumqx += w * q * xb[kGroup * k + j];
          sumq2 += w * q * q;
        }
      }
      if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
    }
    qs[2 * ib] = static_cast<uint8_t>(index[0] & 255);
    qs[2 * ib + 1] = static_cast<uint8_t>(index[1] & 255);
    qh[ib] = static_cast<uint8_t>((index[0] >> 8) | ((index[1] >> 8) << 4));
    scales[static_cast<size_t>(ib)] = scale;
    shifts[static_cast<size_t>(ib)] = best_k;
    max_scale = ggml_max(max_scale, scale);
  }
  if (!(max_scale != 0)) return;  // ggml's `if (!max_scale)`: the grid bytes stay, no scales
  // The block scale: fitted again over the whole block with the 3-bit sub-block scales.
  float d = max_scale / 15;
  const float inv_d = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const int l = ggml_max(0, ggml_min(7, nearest_int(0.5f * (inv_d * scales[static_cast<size_t>(ib)] - 1))));
    sc[static_cast<size_t>(ib / 4)] = static_cast<uint16_t>(sc[static_cast<size_t>(ib / 4)] | (l << (3 * (ib % 4))));
    qh[ib] = static_cast<uint8_t>(qh[ib] | kShiftMasks[shifts[static_cast<size_t>(ib)]]);
    const float* xb = x + kSub * ib;
    float weight[kSub];
    fill_weights(ib, weight);
    for (int k = 0; k < kGroups; ++k) {
      const float* value = iq1m_values(shifts[static_cast<size_t>(ib)], k);
      const int index = qs[2 * ib + k] + ((qh[ib] << (8 - 4 * k)) & 0x700);
      const auto& point = grid.levels(index);
      for (int j = 0; j < kGroup; ++j) {
        const float w = weight[kGroup * k + j];
        const float q = value[point[static_cast<size_t>(j)]] * static_cast<float>(2 * l + 1);
        sumqx += w * q * xb[kGroup * k + j];
        sumq2 += w * q * q;
      }
    }
  }
  if (sumq2 > 0) d = sumqx / sumq2;
  const uint16_t s = fp32_to_fp16(d * 1.1125f);
  sc[0] = static_cast<uint16_t>(sc[0] | ((s & 0x000f) << 12));
  sc[1] = static_cast<uint16_t>(sc[1] | ((s & 0x00f0) << 8));
  sc[2] = static_cast<uint16_t>(sc[2] | ((s & 0x0f00) << 4));
  sc[3] = static_cast<uint16_t>(sc[3] | (s & 0xf000));
  std::memcpy(block + kSuperBlockValues / 8 + kSuperBlockValues / 16, sc.data(), sizeof sc);
}

using BlockQuantizer = void (*)(const Iq2GridIndex&, const float*, const float*, uint8_t*);

template <BlockQuantizer quantize_block, size_t kBlockBytes>
void quantize_rows(const float* src, std::byte* dst, int64_t nrows, int64_t n_per_row, const float* imatrix) {
  const Iq2GridIndex& grid = Iq2GridIndex::get(Iq2Grid::iq1s_2048);
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

void register_iq1_quantizers(KernelTable& table) {
  auto& s = entry(table, TensorType::IQ1_S);
  s.quantize = quantize_rows<quantize_block_iq1_s, kIq1sBlockBytes>;
  s.accepts_imatrix = true;
  s.requires_imatrix = true;  // ggml_quantize_requires_imatrix
  auto& m = entry(table, TensorType::IQ1_M);
  m.quantize = quantize_rows<quantize_block_iq1_m, kIq1mBlockBytes>;
  m.accepts_imatrix = true;
  m.requires_imatrix = false;
  state_block<format::BlockIQ1S>(table, TensorType::IQ1_S);
  state_block<format::BlockIQ1M>(table, TensorType::IQ1_M);
}

}  // namespace ggufkit::quant
