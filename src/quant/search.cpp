// The scale searches. Every expression keeps ggml's operand order and float precision (a*b*c is
// (a*b)*c, integer levels are converted to float where ggml's C does it), since a different
// rounding anywhere changes which scale wins and so the bytes.
#include "quant/search.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>

#include "quant/simd.h"

namespace ggufkit::quant {
namespace {

int clamp_int(int value, int lo, int hi) { return value < lo ? lo : value > hi ? hi : value; }

// The value of largest magnitude (the first one on ties), or 0 with amax 0 when all are zero.
struct SignedMax {
  float value = 0;
  float amax = 0;
};
SignedMax signed_max(int n, const float* x) {
  SignedMax m;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > m.amax) {
      m.amax = ax;
      m.value = x[i];
    }
  }
  return m;
}

float rmse_weight(int rmse_type, float x) {
  switch (rmse_type) {
    case 1: return x * x;
    case 2: return 1.0f;
    case 3: return std::fabs(x);
    default: return std::sqrt(std::fabs(x));
  }
}

// Sums of the weighted least-squares fit of x by scale * l.
struct LinearSums {
  float sumlx = 0;
  float suml2 = 0;
  void add(float w, float x, int l) {
    sumlx += w * x * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
};

AffineFit affine_search(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float rmin,
                        float rdelta, int nstep, bool use_mad, bool stop_when_max_le_min) {
  assert(n <= kMaxAffineGroup);
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  auto error = [&](float scale, float min, int i, uint8_t l) {
    float diff = scale * static_cast<float>(l) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    return weight(i) * diff;
  };

  float min = x[0];
  float max = x[0];
  float sum_w = weight(0);
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weight(i);
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (stop_when_max_le_min ? max <= min : max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return {0.f, -min};
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    best_error += error(scale, min, i, levels[i]);
  }
  if (nstep < 1) return {scale, -min};

  // Note that a better fit moves min, which shifts both the range and the origin of later steps.
  std::array<uint8_t, kMaxAffineGroup> trial{};
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float w = weight(i);
      const auto lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    // The weighted least-squares scale and min for these levels, min kept <= 0.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float this_error = 0;
    for (int i = 0; i < n; ++i) this_error += error(this_scale, this_min, i, trial[i]);
    if (this_error < best_error) {
      for (int i = 0; i < n; ++i) levels[i] = trial[i];
      best_error = this_error;
      scale = this_scale;
      min = this_min;
    }
  }
  return {scale, -min};
}

}  // namespace

float make_qx_quants(int n, int nmax, const float* x, int8_t* levels, int rmse_type, const float* weights) {
  const SignedMax m = signed_max(n, x);
  if (m.amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  auto level_at = [&](float iscale, int i) { return clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = static_cast<float>(-nmax) / m.value;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + level_at(iscale, i));
    return 1 / iscale;
  }
  const bool return_early = rmse_type < 0;
  if (return_early) rmse_type = -rmse_type;
  auto weight = [&](int i) { return weights ? weights[i] : rmse_weight(rmse_type, x[i]); };

  LinearSums sums;
  for (int i = 0; i < n; ++i) {
    const int l = level_at(iscale, i);
    levels[i] = static_cast<int8_t>(l + nmax);
    sums.add(weight(i), x[i], l);
  }
  float scale = sums.suml2 != 0 ? sums.sumlx / sums.suml2 : 0.0f;
  if (return_early) return sums.suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;

  // Try slightly different starting scales; keep the one with the best least-squares fit.
  float best = scale * sums.sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / m.value;
    LinearSums trial;
    for (int i = 0; i < n; ++i) trial.add(weight(i), x[i], level_at(iscale, i));
    if (trial.suml2 > 0 && trial.sumlx * trial.sumlx > best * trial.suml2) {
      for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + level_at(iscale, i));
      scale = trial.sumlx / trial.suml2;
      best = scale * trial.sumlx;
    }
  }
  return scale;
}

float make_q3_quants(int n, int nmax, const float* x, int8_t* levels, bool do_rmse) {
  const SignedMax m = signed_max(n, x);
  if (m.amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / m.value;
  auto level_at = [&](int i) { return clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  if (!do_rmse) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(level_at(i) + nmax);
    return 1 / iscale;
  }
  LinearSums sums;
  for (int i = 0; i < n; ++i) {
    const int l = level_at(i);
    levels[i] = static_cast<int8_t>(l);
    sums.add(x[i] * x[i], x[i], l);
  }
  // Move one level at a time to its best value given all the others, while the fit improves.
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto old_l = static_cast<float>(levels[i]);
      float slx = sums.sumlx - w * x[i] * old_l;
      if (!(slx > 0)) continue;
      float sl2 = sums.suml2 - w * old_l * old_l;
      const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == levels[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (sl2 > 0 && slx * slx * sums.suml2 > sums.sumlx * sums.sumlx * sl2) {
        levels[i] = static_cast<int8_t>(new_l);
        sums.sumlx = slx;
        sums.suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
  return sums.suml2 > 0.0f ? sums.sumlx / sums.suml2 : 0.0f;
}

AffineFit make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float rmin,
                           float rdelta, int nstep, bool use_mad) {
  assert(weights != nullptr);
  return affine_search(n, nmax, x, weights, levels, rmin, rdelta, nstep, use_mad, false);
}

AffineFit make_qkx3_quants(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float rmin,
                           float rdelta, int nstep, bool use_mad) {
  return affine_search(n, nmax, x, weights, levels, rmin, rdelta, nstep, use_mad, true);
}

float make_qp_quants(int n, int nmax, const float* x, uint8_t* levels, const float* weights) {
  float max = 0;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  // Levels are stored as bytes before being used again, as in ggml (a negative level wraps).
  auto squared_error = [&](float scale) {
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = x[i] - scale * static_cast<float>(levels[i]);
      mse += weights[i] * diff * diff;
    }
    return mse;
  };
  float iscale = static_cast<float>(nmax) / max;
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  float best_mse = squared_error(1 / iscale);
  for (int step = -4; step <= 4; ++step) {
    if (step == 0) continue;
    const float trial_iscale = (0.1f * static_cast<float>(step) + static_cast<float>(nmax)) / max;
    const float trial_scale = 1 / trial_iscale;
    float mse = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(trial_iscale * x[i]));
      const float diff = x[i] - trial_scale * static_cast<float>(l);
      mse += weights[i] * diff * diff;
    }
    if (mse < best_mse) {
      best_mse = mse;
      iscale = trial_iscale;
    }
  }
  LinearSums sums;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    levels[i] = static_cast<uint8_t>(l);
    sums.add(weights[i], x[i], l);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const auto old_l = static_cast<float>(levels[i]);
      float slx = sums.sumlx - w * x[i] * old_l;
      float sl2 = sums.suml2 - w * old_l * old_l;
      if (!(slx > 0 && sl2 > 0)) continue;
      const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
      if (new_l == levels[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (slx * slx * sums.suml2 > sums.sumlx * sums.sumlx * sl2) {
        levels[i] = static_cast<uint8_t>(new_l);
        sums.sumlx = slx;
        sums.suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  return sums.suml2 > 0.0f ? sums.sumlx / sums.suml2 : 0.0f;
}


// ---- lane-parallel searches (x86): one group per vector lane
//
// Each lane runs the scalar search's float operations in the scalar order; the branches become
// per-lane selects, and a lane whose group the scalar code would leave early keeps computing
// harmless values that are masked out at the end. The kernels are written once with GCC/Clang
// vector extensions and inlined into one function per instruction set, so that each copy is
// compiled for its own target (the library itself is built for baseline x86-64).

#if GGUFKIT_QUANT_X86
// GCC reports the vector ABI of the inlined helpers at the end of the file, so this stays on to the
// end; the transposed arrays are filled for the n values used, which it cannot see.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace {

inline constexpr int kMaxLaneGroup = 32;

template <int L>
struct LaneTypes {
  typedef float F __attribute__((vector_size(4 * L)));
  typedef int32_t I __attribute__((vector_size(4 * L)));
};

#define GGUFKIT_LANE_INLINE __attribute__((always_inline)) inline

template <class V>
GGUFKIT_LANE_INLINE V lane_load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class S>
GGUFKIT_LANE_INLINE V lane_splat(S s) {
  V v;
  for (int i = 0; i < static_cast<int>(sizeof(V) / sizeof(S)); ++i) v[i] = s;
  return v;
}
template <class I, class F>
GGUFKIT_LANE_INLINE I lane_nearest_int(F v) {
  const I bits = reinterpret_cast<I>(v + 12582912.f);
  return (bits & 0x007fffff) - 0x00400000;
}
template <class I>
GGUFKIT_LANE_INLINE I lane_clamp(I v, int lo, int hi) {
  v = v < lo ? lane_splat<I>(lo) : v;
  return v > hi ? lane_splat<I>(hi) : v;
}
template <class I, class F>
GGUFKIT_LANE_INLINE F lane_fabs(F v) {
  return reinterpret_cast<F>(reinterpret_cast<I>(v) & 0x7fffffff);
}
template <class F, class I>
GGUFKIT_LANE_INLINE F lane_float(I v) {
  return __builtin_convertvector(v, F);
}
template <class I>
GGUFKIT_LANE_INLINE bool lane_any(I mask) {
  int32_t acc = 0;
  for (int i = 0; i < static_cast<int>(sizeof(I) / sizeof(int32_t)); ++i) acc |= mask[i];
  return acc != 0;
}

// Group g's value i (at x[g*n + i]) to t[i*L + g].
template <int L>
GGUFKIT_LANE_INLINE void transpose_in(int n, const float* x, float* t) {
  for (int g = 0; g < L; ++g) {
    for (int i = 0; i < n; ++i) t[i * L + g] = x[g * n + i];
  }
}
template <int L, class Level, class I>
GGUFKIT_LANE_INLINE void transpose_levels_out(int n, const I* lanes, Level* levels) {
  for (int i = 0; i < n; ++i) {
    for (int g = 0; g < L; ++g) levels[g * n + i] = static_cast<Level>(lanes[i][g]);
  }
}

// One lane's weighted error of level l against x: |d| or d², d = scale * l + min - x.
template <class F, class I, bool kMad>
GGUFKIT_LANE_INLINE F lane_weighted_error(F scale, F min, F x, F w, I l) {
  F diff = scale * lane_float<F>(l) + min - x;
  diff = kMad ? lane_fabs<I>(diff) : diff * diff;
  return w * diff;
}

// affine_search for L groups.
template <int L, bool kMad>
GGUFKIT_LANE_INLINE void affine_lanes(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                                      float rmin, float rdelta, int nstep, bool stop_when_max_le_min,
                                      AffineFit* fits) {
  using F = typename LaneTypes<L>::F;
  using I = typename LaneTypes<L>::I;
  alignas(64) float xt[kMaxLaneGroup * L];
  alignas(64) float wt[kMaxLaneGroup * L];
  transpose_in<L>(n, x, xt);
  if (weights != nullptr) {
    transpose_in<L>(n, weights, wt);
  } else {
    for (int k = 0; k < n * L; ++k) wt[k] = xt[k] * xt[k];
  }
  // (Macros rather than lambdas: GCC's UBSan misreads captures in these always-inline vector functions.)
#define xv(i) lane_load<F>(xt + (i) * L)
#define wv(i) lane_load<F>(wt + (i) * L)
#define error(scale, min, i, l) lane_weighted_error<F, I, kMad>(scale, min, xv(i), wv(i), l)
  const F zero = lane_splat<F>(0.f);

  F min = xv(0), max = xv(0);
  F sum_w = wv(0);
  F sum_x = sum_w * xv(0);
  for (int i = 1; i < n; ++i) {
    const F xi = xv(i);
    min = xi < min ? xi : min;
    max = xi > max ? xi : max;
    const F w = wv(i);
    sum_w += w;
    sum_x += w * xi;
  }
  min = min > 0.f ? zero : min;
  const I flat = stop_when_max_le_min ? max <= min : max == min;
  const F flat_min = min;
  F iscale = static_cast<float>(nmax) / (max - min);
  F scale = 1.f / iscale;
  F best_error = zero;
  I best[kMaxLaneGroup];
  for (int i = 0; i < n; ++i) {
    best[i] = lane_clamp(lane_nearest_int<I>(iscale * (xv(i) - min)), 0, nmax);
    best_error += error(scale, min, i, best[i]);
  }
  I trial[kMaxLaneGroup];
  for (int step = 0; step <= nstep && nstep >= 1; ++step) {
    const float numerator = rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax);
    iscale = numerator / (max - min);
    F sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; ++i) {
      const F xi = xv(i);
      const I l = lane_clamp(lane_nearest_int<I>(iscale * (xi - min)), 0, nmax);
      trial[i] = l;
      const F w = wv(i);
      const F lf = lane_float<F>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * xi;
    }
    const F det = sum_w * sum_l2 - sum_l * sum_l;
    const I usable = (det > 0) & ~flat;
    if (!lane_any(usable)) continue;
    F this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    F this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    const I positive_min = this_min > 0;
    this_min = positive_min ? zero : this_min;
    this_scale = positive_min ? sum_xl / sum_l2 : this_scale;
    F this_error = zero;
    for (int i = 0; i < n; ++i) this_error += error(this_scale, this_min, i, trial[i]);
    const I better = usable & (this_error < best_error);
    if (!lane_any(better)) continue;
    for (int i = 0; i < n; ++i) best[i] = better ? trial[i] : best[i];
    best_error = better ? this_error : best_error;
    scale = better ? this_scale : scale;
    min = better ? this_min : min;
  }
  const I no_level = lane_splat<I>(0);
  for (int i = 0; i < n; ++i) best[i] = flat ? no_level : best[i];
  scale = flat ? zero : scale;
  min = flat ? flat_min : min;
  const F offset = -min;
  for (int g = 0; g < L; ++g) fits[g] = {scale[g], offset[g]};
  transpose_levels_out<L>(n, best, levels);
#undef error
#undef wv
#undef xv
}

// The value of largest magnitude per lane (the first on ties) and that magnitude.
template <int L>
GGUFKIT_LANE_INLINE void signed_max_lanes(int n, const float* xt, typename LaneTypes<L>::F& value,
                                          typename LaneTypes<L>::F& amax) {
  using F = typename LaneTypes<L>::F;
  using I = typename LaneTypes<L>::I;
  value = lane_splat<F>(0.f);
  amax = lane_splat<F>(0.f);
  for (int i = 0; i < n; ++i) {
    const F xi = lane_load<F>(xt + i * L);
    const F ax = lane_fabs<I>(xi);
    const I larger = ax > amax;
    amax = larger ? ax : amax;
    value = larger ? xi : value;
  }
}

// make_qx_quants with rmse_type 1 for L groups.
template <int L>
GGUFKIT_LANE_INLINE void qx_lanes(int n, int nmax, const float* x, const float* weights, int8_t* levels,
                                  float* scales) {
  using F = typename LaneTypes<L>::F;
  using I = typename LaneTypes<L>::I;
  alignas(64) float xt[kMaxLaneGroup * L];
  alignas(64) float wt[kMaxLaneGroup * L];
  transpose_in<L>(n, x, xt);
  if (weights != nullptr) {
    transpose_in<L>(n, weights, wt);
  } else {
    for (int k = 0; k < n * L; ++k) wt[k] = xt[k] * xt[k];
  }
#define xv(i) lane_load<F>(xt + (i) * L)
#define wv(i) lane_load<F>(wt + (i) * L)
  const F zero = lane_splat<F>(0.f);
  F value, amax;
  signed_max_lanes<L>(n, xt, value, amax);
  const I tiny = amax < kGroupMaxEps;

  F iscale = static_cast<float>(-nmax) / value;
  I best[kMaxLaneGroup];
  F sumlx = zero, suml2 = zero;
  for (int i = 0; i < n; ++i) {
    const I l = lane_clamp(lane_nearest_int<I>(iscale * xv(i)), -nmax, nmax - 1);
    best[i] = l;
    const F w = wv(i), lf = lane_float<F>(l);
    sumlx += w * xv(i) * lf;
    suml2 += w * lf * lf;
  }
  F scale = suml2 != 0 ? sumlx / suml2 : zero;
  F best_fit = scale * sumlx;
  I trial[kMaxLaneGroup];
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    const float numerator = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step));
    iscale = numerator / value;
    F tlx = zero, tl2 = zero;
    for (int i = 0; i < n; ++i) {
      const I l = lane_clamp(lane_nearest_int<I>(iscale * xv(i)), -nmax, nmax - 1);
      trial[i] = l;
      const F w = wv(i), lf = lane_float<F>(l);
      tlx += w * xv(i) * lf;
      tl2 += w * lf * lf;
    }
    const I better = (tl2 > 0) & (tlx * tlx > best_fit * tl2);
    if (!lane_any(better)) continue;
    for (int i = 0; i < n; ++i) best[i] = better ? trial[i] : best[i];
    const F new_scale = tlx / tl2;
    scale = better ? new_scale : scale;
    best_fit = better ? new_scale * tlx : best_fit;
  }
  const I no_level = lane_splat<I>(0);
  for (int i = 0; i < n; ++i) best[i] = tiny ? no_level : best[i] + nmax;
  scale = tiny ? zero : scale;
  for (int g = 0; g < L; ++g) scales[g] = scale[g];
  transpose_levels_out<L>(n, best, levels);
#undef wv
#undef xv
}

// make_q3_quants with do_rmse for K*L groups, K vectors of L lanes side by side: the passes are
// one long chain of dependent operations per vector, and K independent chains overlap. A lane
// whose pass changes nothing would stop; further passes change nothing either, so lanes stop
// together.
template <int L, int K>
GGUFKIT_LANE_INLINE void q3_lanes(int n, int nmax, const float* x, int8_t* levels, float* scales) {
  using F = typename LaneTypes<L>::F;
  using I = typename LaneTypes<L>::I;
  constexpr int kGroups = K * L;
  alignas(64) float xt[kMaxLaneGroup * kGroups];
  transpose_in<kGroups>(n, x, xt);
#define xv(i, k) lane_load<F>(xt + (i) * kGroups + (k) * L)
  const F zero = lane_splat<F>(0.f);
  I tiny[K], lv[K][kMaxLaneGroup];
  F sumlx[K], suml2[K];
  for (int k = 0; k < K; ++k) {
    F value = zero, amax = zero;
    for (int i = 0; i < n; ++i) {
      const F xi = xv(i, k);
      const F ax = lane_fabs<I>(xi);
      const I larger = ax > amax;
      amax = larger ? ax : amax;
      value = larger ? xi : value;
    }
    tiny[k] = amax < kGroupMaxEps;
    const F iscale = static_cast<float>(-nmax) / value;
    sumlx[k] = zero;
    suml2[k] = zero;
    for (int i = 0; i < n; ++i) {
      const I l = lane_clamp(lane_nearest_int<I>(iscale * xv(i, k)), -nmax, nmax - 1);
      lv[k][i] = l;
      const F xi = xv(i, k), w = xi * xi, lf = lane_float<F>(l);
      sumlx[k] += w * xi * lf;
      suml2[k] += w * lf * lf;
    }
  }
  for (int pass = 0; pass < 5; ++pass) {
    I changed = lane_splat<I>(0);
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < K; ++k) {
        const F xi = xv(i, k), w = xi * xi;
        const F old_l = lane_float<F>(lv[k][i]);
        F slx = sumlx[k] - w * xi * old_l;
        I take = (slx > 0) & ~tiny[k];
        F sl2 = suml2[k] - w * old_l * old_l;
        const I new_l = lane_clamp(lane_nearest_int<I>(xi * sl2 / slx), -nmax, nmax - 1);
        take &= new_l != lv[k][i];
        const F new_lf = lane_float<F>(new_l);
        slx += w * xi * new_lf;
        sl2 += w * new_lf * new_lf;
        take &= (sl2 > 0) & (slx * slx * suml2[k] > sumlx[k] * sumlx[k] * sl2);
        lv[k][i] = take ? new_l : lv[k][i];
        sumlx[k] = take ? slx : sumlx[k];
        suml2[k] = take ? sl2 : suml2[k];
        changed |= take;
      }
    }
    if (!lane_any(changed)) break;
  }
  const I no_level = lane_splat<I>(0);
  for (int k = 0; k < K; ++k) {
    F scale = suml2[k] > 0 ? sumlx[k] / suml2[k] : zero;
    scale = tiny[k] ? zero : scale;
    for (int g = 0; g < L; ++g) scales[k * L + g] = scale[g];
    for (int i = 0; i < n; ++i) {
      const I l = tiny[k] ? no_level : lv[k][i] + nmax;
      for (int g = 0; g < L; ++g) levels[(k * L + g) * n + i] = static_cast<int8_t>(l[g]);
    }
  }
#undef xv
}

#define GGUFKIT_LANE_ENTRY_POINTS(TARGET, SUFFIX, L)                                                          \
  TARGET void affine_lanes_##SUFFIX(int n, int nmax, const float* x, const float* weights, uint8_t* levels,   \
                                    float rmin, float rdelta, int nstep, bool use_mad, bool stop, AffineFit* fits) { \
    if (use_mad) {                                                                                            \
      affine_lanes<L, true>(n, nmax, x, weights, levels, rmin, rdelta, nstep, stop, fits);                    \
    } else {                                                                                                  \
      affine_lanes<L, false>(n, nmax, x, weights, levels, rmin, rdelta, nstep, stop, fits);                   \
    }                                                                                                         \
  }                                                                                                           \
  TARGET void qx_lanes_##SUFFIX(int n, int nmax, const float* x, const float* weights, int8_t* levels,        \
                                float* scales) {                                                              \
    qx_lanes<L>(n, nmax, x, weights, levels, scales);                                                         \
  }                                                                                                           \
  TARGET void q3_lanes_##SUFFIX(int n, int nmax, const float* x, int8_t* levels, float* scales) {             \
    q3_lanes<L, 1>(n, nmax, x, levels, scales);                                                               \
  }                                                                                                           \
  TARGET void q3_lanes_twice_##SUFFIX(int n, int nmax, const float* x, int8_t* levels, float* scales) {       \
    q3_lanes<L, 2>(n, nmax, x, levels, scales);                                                               \
  }

GGUFKIT_LANE_ENTRY_POINTS(GGUFKIT_TARGET_AVX2, avx2, 8)
#undef GGUFKIT_LANE_ENTRY_POINTS

}  // namespace

// 8 lanes (AVX2). GCC 12 turns the comparisons of 16-lane vectors into scalar code, so the
// AVX-512 width is not used for now.
int search_lanes() { return simd::has_avx2() ? 8 : 0; }

void make_qkx2_quants_lanes(int groups, int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                            float rmin, float rdelta, int nstep, bool use_mad, AffineFit* fits) {
  assert(weights != nullptr && n <= kMaxLaneGroup);
  assert(groups == 8);
  (void)groups;
  affine_lanes_avx2(n, nmax, x, weights, levels, rmin, rdelta, nstep, use_mad, false, fits);
}

void make_qkx3_quants_lanes(int groups, int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                            float rmin, float rdelta, int nstep, bool use_mad, AffineFit* fits) {
  assert(n <= kMaxLaneGroup);
  assert(groups == 8);
  (void)groups;
  affine_lanes_avx2(n, nmax, x, weights, levels, rmin, rdelta, nstep, use_mad, true, fits);
}

void make_qx_quants_lanes(int groups, int n, int nmax, const float* x, int8_t* levels, const float* weights,
                          float* scales) {
  assert(n <= kMaxLaneGroup);
  assert(groups == 8);
  (void)groups;
  qx_lanes_avx2(n, nmax, x, weights, levels, scales);
}

void make_q3_quants_lanes(int groups, int n, int nmax, const float* x, int8_t* levels, float* scales) {
  assert(n <= kMaxLaneGroup);
  assert(groups == 8 || groups == 16);
  if (groups == 16) return q3_lanes_twice_avx2(n, nmax, x, levels, scales);
  q3_lanes_avx2(n, nmax, x, levels, scales);
}
#else
int search_lanes() { return 0; }
void make_qkx2_quants_lanes(int, int, int, const float*, const float*, uint8_t*, float, float, int, bool, AffineFit*) {}
void make_qkx3_quants_lanes(int, int, int, const float*, const float*, uint8_t*, float, float, int, bool, AffineFit*) {}
void make_qx_quants_lanes(int, int, int, const float*, int8_t*, const float*, float*) {}
void make_q3_quants_lanes(int, int, int, const float*, int8_t*, float*) {}
#endif

}  // namespace ggufkit::quant
