#include "reference_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ggufkit::test {
namespace {

using Vector = std::vector<double>;

// y = W x for a PyTorch linear weight W of shape [out_features, in_features].
Vector linear(const HfTensor& weight, const Vector& x) {
  const size_t out_features = static_cast<size_t>(weight.shape.at(0));
  const size_t in_features = static_cast<size_t>(weight.shape.at(1));
  Vector y(out_features, 0.0);
  for (size_t o = 0; o < out_features; ++o) {
    const float* row = weight.values.data() + o * in_features;
    double sum = 0;
    for (size_t i = 0; i < in_features; ++i) sum += static_cast<double>(row[i]) * x[i];
    y[o] = sum;
  }
  return y;
}

// LlamaRMSNorm: x / sqrt(mean(x^2) + eps) * weight.
Vector rms_norm(const Vector& x, const HfTensor& weight, double eps) {
  double mean_square = 0;
  for (const double v : x) mean_square += v * v;
  mean_square /= static_cast<double>(x.size());
  const double scale = 1.0 / std::sqrt(mean_square + eps);
  Vector y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * weight.values[i];
  return y;
}

// HF's rotary embedding on one head's vector, in place: inv_freq[i] = theta^(-2i/d) for i < d/2,
// cos and sin repeated over both halves, and x * cos + rotate_half(x) * sin, where
// rotate_half(x) = (-x[d/2:], x[:d/2]). So element i pairs with element i + d/2 (not i + 1, which
// is why convert_hf_to_gguf.py permutes the q and k rows for llama.cpp's adjacent-pair rope).
void apply_rotary(double* head, int64_t head_dim, int64_t position, double theta) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double angle = static_cast<double>(position) * inv_freq;
    const double c = std::cos(angle);
    const double s = std::sin(angle);
    const double first = head[i];
    const double second = head[i + half];
    head[i] = first * c - second * s;
    head[i + half] = second * c + first * s;
  }
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

}  // namespace

std::vector<std::vector<double>> reference_llama_logits(const TinyLlama& model, const std::vector<int32_t>& tokens) {
  const TinyLlamaConfig& c = model.config;
  const size_t hidden = static_cast<size_t>(c.hidden_size);
  const int64_t head_dim = c.head_dim();
  const int64_t n_head = c.num_attention_heads;
  const int64_t n_kv_head = c.num_key_value_heads;
  const int64_t heads_per_kv = n_head / n_kv_head;  // GQA: query head h reads kv head h / heads_per_kv
  const size_t n_tokens = tokens.size();

  // The residual stream of every position.
  std::vector<Vector> x(n_tokens, Vector(hidden));
  const HfTensor& embed = model.at("model.embed_tokens.weight");
  for (size_t t = 0; t < n_tokens; ++t) {
    const float* row = embed.values.data() + static_cast<size_t>(tokens[t]) * hidden;
    for (size_t i = 0; i < hidden; ++i) x[t][i] = row[i];
  }

  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    std::vector<Vector> q(n_tokens), k(n_tokens), v(n_tokens);
    for (size_t t = 0; t < n_tokens; ++t) {
      const Vector h = rms_norm(x[t], model.at(p + "input_layernorm.weight"), c.rms_norm_eps);
      q[t] = linear(model.at(p + "self_attn.q_proj.weight"), h);
      k[t] = linear(model.at(p + "self_attn.k_proj.weight"), h);
      v[t] = linear(model.at(p + "self_attn.v_proj.weight"), h);
      const auto position = static_cast<int64_t>(t);
      for (int64_t head = 0; head < n_head; ++head) apply_rotary(&q[t][static_cast<size_t>(head * head_dim)], head_dim, position, c.rope_theta);
      for (int64_t head = 0; head < n_kv_head; ++head) apply_rotary(&k[t][static_cast<size_t>(head * head_dim)], head_dim, position, c.rope_theta);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    for (size_t t = 0; t < n_tokens; ++t) {
      Vector attended(static_cast<size_t>(n_head * head_dim), 0.0);
      for (int64_t head = 0; head < n_head; ++head) {
        const size_t q_at = static_cast<size_t>(head * head_dim);
        const size_t kv_at = static_cast<size_t>((head / heads_per_kv) * head_dim);
        // Causal: position t sees positions 0..t.
        Vector scores(t + 1);
        for (size_t s = 0; s <= t; ++s) {
          double dot = 0;
          for (int64_t d = 0; d < head_dim; ++d) dot += q[t][q_at + static_cast<size_t>(d)] * k[s][kv_at + static_cast<size_t>(d)];
          scores[s] = dot * scale;
        }
        const double top = *std::max_element(scores.begin(), scores.end());
        double total = 0;
        for (double& score : scores) total += (score = std::exp(score - top));
        for (size_t s = 0; s <= t; ++s) {
          for (int64_t d = 0; d < head_dim; ++d) {
            attended[q_at + static_cast<size_t>(d)] += scores[s] / total * v[s][kv_at + static_cast<size_t>(d)];
          }
        }
      }
      const Vector out = linear(model.at(p + "self_attn.o_proj.weight"), attended);
      for (size_t i = 0; i < hidden; ++i) x[t][i] += out[i];

      const Vector h = rms_norm(x[t], model.at(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      const Vector gate = linear(model.at(p + "mlp.gate_proj.weight"), h);
      Vector product = linear(model.at(p + "mlp.up_proj.weight"), h);
      for (size_t i = 0; i < product.size(); ++i) product[i] *= silu(gate[i]);
      const Vector down = linear(model.at(p + "mlp.down_proj.weight"), product);
      for (size_t i = 0; i < hidden; ++i) x[t][i] += down[i];
    }
  }

  const HfTensor& head = c.tie_word_embeddings ? embed : model.at("lm_head.weight");
  std::vector<Vector> logits(n_tokens);
  for (size_t t = 0; t < n_tokens; ++t) logits[t] = linear(head, rms_norm(x[t], model.at("model.norm.weight"), c.rms_norm_eps));
  return logits;
}

LogitsDistance logits_distance(const std::vector<float>& actual, const std::vector<double>& reference,
                               double relative_floor_fraction) {
  LogitsDistance d;
  const size_t n = std::min(actual.size(), reference.size());
  for (size_t i = 0; i < n; ++i) d.max_abs_reference = std::max(d.max_abs_reference, std::fabs(reference[i]));
  const double floor = relative_floor_fraction * d.max_abs_reference;
  for (size_t i = 0; i < n; ++i) {
    const double diff = std::fabs(static_cast<double>(actual[i]) - reference[i]);
    if (!(diff <= d.max_abs)) d.max_abs = diff;  // a NaN sticks
    if (std::fabs(reference[i]) >= floor && !(diff / std::fabs(reference[i]) <= d.max_relative)) {
      d.max_relative = diff / std::fabs(reference[i]);
    }
  }
  if (actual.size() != reference.size()) d.max_abs = INFINITY;
  d.values = static_cast<int64_t>(n);
  d.scaled = d.max_abs_reference > 0 ? d.max_abs / d.max_abs_reference : d.max_abs;
  return d;
}

std::string describe(const LogitsDistance& d) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "max |diff| %.3g, max |ref| %.3g, max|diff|/max|ref| %.3g, max per-value relative %.3g (%lld values)",
                d.max_abs, d.max_abs_reference, d.scaled, d.max_relative, static_cast<long long>(d.values));
  return buf;
}

}  // namespace ggufkit::test
