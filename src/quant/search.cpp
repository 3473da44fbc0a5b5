// The scale searches. Every expression keeps ggml's operand order and float precision (a*b*c is
// (a*b)*c, integer levels are converted to float where ggml's C does it), since a different
// rounding anywhere changes which scale wins and so the bytes.
#include "quant/search.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>

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

}  // namespace ggufkit::quant
