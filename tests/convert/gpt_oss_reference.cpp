#include "gpt_oss_reference.h"

#include "family_reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace ggufkit::test {
namespace {

using Json = nlohmann::ordered_json;
using Vec = std::vector<double>;

// E2M1 (FP4_VALUES of transformers' integrations/mxfp4.py), by 4-bit code.
constexpr double kE2M1[16] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0};
constexpr double kSwigluAlpha = 1.702;  // GptOssExperts.alpha

double number_or(const Json& j, const char* key, double fallback) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  return j[key].get<double>();
}

struct Rope {
  Vec inv_freq;
  double attention_factor = 1.0;
  std::string what;
};

// modeling_rope_utils: the default parameters, or _compute_yarn_parameters.
Rope rope_of(const Json& c, int64_t dim) {
  const double base = number_or(c, "rope_theta", 10000.0);
  Rope r;
  r.inv_freq.resize(static_cast<size_t>(dim / 2));
  const Json rs = c.contains("rope_scaling") ? c["rope_scaling"] : Json();
  std::string type = "default";
  if (rs.is_object()) type = rs.value("rope_type", rs.value("type", std::string("default")));
  if (type == "default") {
    for (int64_t i = 0; i < dim / 2; ++i) r.inv_freq[i] = 1.0 / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(dim));
    r.what = "default rope (base " + std::to_string(base) + ")";
    return r;
  }
  if (type != "yarn") throw std::invalid_argument("the gpt-oss reference knows default and yarn rope only, not " + type);
  const YarnRope yarn = yarn_rope(c, rs, base, dim);  // family_reference.h: transformers' yarn parameters
  r.inv_freq.assign(yarn.inv_freq.begin(), yarn.inv_freq.end());
  r.attention_factor = yarn.attention_factor;
  const double factor = yarn.factor, low = yarn.low, high = yarn.high;
  const double original = number_or(rs, "original_max_position_embeddings", number_or(c, "max_position_embeddings", 0));
  const double beta_fast = number_or(rs, "beta_fast", 0) != 0 ? number_or(rs, "beta_fast", 0) : 32;
  const double beta_slow = number_or(rs, "beta_slow", 0) != 0 ? number_or(rs, "beta_slow", 0) : 1;
  const bool truncate = rs.value("truncate", true);
  std::ostringstream what;
  what << "yarn rope (base " << base << ", factor " << factor << ", original " << original << ", beta_fast " << beta_fast
       << ", beta_slow " << beta_slow << ", truncate " << (truncate ? "true" : "false") << ": ramp over dims [" << low << ", "
       << high << "], attention factor " << r.attention_factor << ")";
  r.what = what.str();
  return r;
}

struct Params {
  int64_t hidden = 0, heads = 0, kv_heads = 0, head_dim = 0, experts = 0, experts_used = 0, ff = 0, vocab = 0, layers = 0;
  double eps = 1e-5;
  int64_t window = 0;  // 0: no sliding window anywhere
  std::vector<bool> sliding;
  double limit = 7.0;
  Rope rope;
};

Params params_of(const Json& c) {
  Params p;
  p.hidden = c.at("hidden_size").get<int64_t>();
  p.heads = c.at("num_attention_heads").get<int64_t>();
  p.kv_heads = c.value("num_key_value_heads", p.heads);
  p.head_dim = c.contains("head_dim") && !c["head_dim"].is_null() ? c["head_dim"].get<int64_t>() : p.hidden / p.heads;
  p.experts = c.at("num_local_experts").get<int64_t>();
  p.experts_used = c.at("num_experts_per_tok").get<int64_t>();
  p.ff = c.at("intermediate_size").get<int64_t>();
  p.vocab = c.at("vocab_size").get<int64_t>();
  p.layers = c.at("num_hidden_layers").get<int64_t>();
  p.eps = number_or(c, "rms_norm_eps", 1e-5);
  p.window = c.contains("sliding_window") && !c["sliding_window"].is_null() ? c["sliding_window"].get<int64_t>() : 0;
  for (int64_t l = 0; l < p.layers; ++l) {
    // GptOssConfig's default layer_types: sliding on even layers.
    const std::string type = c.contains("layer_types") ? c["layer_types"].at(static_cast<size_t>(l)).get<std::string>()
                                                       : (l % 2 == 0 ? "sliding_attention" : "full_attention");
    p.sliding.push_back(type == "sliding_attention" && p.window > 0);
  }
  p.limit = number_or(c, "swiglu_limit", 7.0);
  p.rope = rope_of(c, p.head_dim);
  return p;
}

// y = W x (+ b), the family reference's linear layer with a bias.
Vec linear(const HfTensor& w, const Vec& x, const HfTensor* b) {
  Vec y = reference_linear(w, x);
  for (size_t o = 0; b != nullptr && o < y.size(); ++o) y[o] += static_cast<double>(b->values[o]);
  return y;
}

// ggml's Q8_0 of a row (quantize_row_q8_0), then back to values: what an MXFP4 product sees.
void round_to_q8_0(Vec& x) {
  for (size_t b = 0; b + 32 <= x.size(); b += 32) {
    double amax = 0;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const double d = amax / 127.0;
    const double id = amax != 0 ? 127.0 / amax : 0.0;
    const double stored_d = f16_bits_to_float(float_to_f16_bits(static_cast<float>(d)));
    for (size_t i = b; i < b + 32; ++i) x[i] = std::nearbyint(x[i] * id) * stored_d;
  }
}

// NEOX rope on one head: (first half, second half) pairs.
void rotate(double* v, int64_t dim, int64_t position, const Rope& rope) {
  const int64_t half = dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * rope.inv_freq[i];
    const double c = std::cos(angle) * rope.attention_factor, s = std::sin(angle) * rope.attention_factor;
    const double a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

}  // namespace

std::vector<double> dequantize_gpt_oss_mxfp4(const U8Tensor& blocks, const U8Tensor& scales) {
  if (blocks.shape.size() != 4 || blocks.shape[3] != 16 || scales.shape.size() != 3) {
    throw std::invalid_argument("MXFP4 blocks [experts, rows, groups, 16] and scales [experts, rows, groups] expected");
  }
  const int64_t experts = blocks.shape[0], rows = blocks.shape[1], groups = blocks.shape[2], cols = groups * 32;
  std::vector<double> out(static_cast<size_t>(experts * rows * cols));
  for (int64_t r = 0; r < experts * rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = c / 32, k = c % 32;
      const uint8_t byte = blocks.bytes[static_cast<size_t>((r * groups + g) * 16 + k / 2)];
      const int code = k % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
      const int exponent = static_cast<int>(scales.bytes[static_cast<size_t>(r * groups + g)]) - 127;
      out[static_cast<size_t>(r * cols + c)] = std::ldexp(kE2M1[code], exponent);
    }
  }
  return out;
}

std::vector<std::vector<double>> reference_gpt_oss_logits(const TinyGptOss& model, const std::vector<int32_t>& tokens,
                                                          ExpertInputs inputs, GptOssRouting* routing) {
  const Params p = params_of(model.config);
  const auto T = static_cast<int64_t>(tokens.size());
  const int64_t H = p.hidden, HD = p.head_dim, group = p.heads / p.kv_heads, FF = p.ff;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HD));
  if (routing != nullptr) *routing = GptOssRouting{};

  const HfTensor& embed = model.at("model.embed_tokens.weight");
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = embed.values.data() + static_cast<size_t>(tokens[t]) * H;
    x[t].assign(row, row + H);
  }

  for (int64_t l = 0; l < p.layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    const std::string attn = pre + "self_attn.";
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = reference_rms_norm(x[t], model.at(pre + "input_layernorm.weight"), p.eps);
      q[t] = linear(model.at(attn + "q_proj.weight"), h, &model.at(attn + "q_proj.bias"));
      k[t] = linear(model.at(attn + "k_proj.weight"), h, &model.at(attn + "k_proj.bias"));
      v[t] = linear(model.at(attn + "v_proj.weight"), h, &model.at(attn + "v_proj.bias"));
      for (int64_t hq = 0; hq < p.heads; ++hq) rotate(q[t].data() + hq * HD, HD, t, p.rope);
      for (int64_t hk = 0; hk < p.kv_heads; ++hk) rotate(k[t].data() + hk * HD, HD, t, p.rope);
    }
    const HfTensor& sinks = model.at(attn + "sinks");
    for (int64_t t = 0; t < T; ++t) {
      Vec out(static_cast<size_t>(p.heads * HD), 0.0);
      // transformers' sliding window: key j is seen from query t when t - j < sliding_window.
      const int64_t first = p.sliding[l] ? std::max<int64_t>(0, t - p.window + 1) : 0;
      for (int64_t hq = 0; hq < p.heads; ++hq) {
        const int64_t hk = hq / group;
        Vec s;
        for (int64_t j = first; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < HD; ++i) d += q[t][hq * HD + i] * k[j][hk * HD + i];
          s.push_back(d * scale);
        }
        const double sink = sinks.values[hq];
        double m = sink;
        for (const double e : s) m = std::max(m, e);
        double denom = std::exp(sink - m);
        for (double& e : s) denom += (e = std::exp(e - m));
        for (int64_t j = first; j <= t; ++j) {
          const double w = s[j - first] / denom;
          for (int64_t i = 0; i < HD; ++i) out[hq * HD + i] += w * v[j][hk * HD + i];
        }
      }
      const Vec o = linear(model.at(attn + "o_proj.weight"), out, &model.at(attn + "o_proj.bias"));
      for (int64_t i = 0; i < H; ++i) x[t][i] += o[i];
    }

    // The experts.
    const std::string mlp = pre + "mlp.";
    const std::vector<double> gate_up = dequantize_gpt_oss_mxfp4(model.mxfp4.at(mlp + "experts.gate_up_proj_blocks"),
                                                                 model.mxfp4.at(mlp + "experts.gate_up_proj_scales"));
    const std::vector<double> down = dequantize_gpt_oss_mxfp4(model.mxfp4.at(mlp + "experts.down_proj_blocks"),
                                                              model.mxfp4.at(mlp + "experts.down_proj_scales"));
    const HfTensor& gate_up_bias = model.at(mlp + "experts.gate_up_proj_bias");
    const HfTensor& down_bias = model.at(mlp + "experts.down_proj_bias");
    if (routing != nullptr) routing->chosen.emplace_back();
    for (int64_t t = 0; t < T; ++t) {
      Vec h = reference_rms_norm(x[t], model.at(pre + "post_attention_layernorm.weight"), p.eps);
      const Vec logits = linear(model.at(mlp + "router.weight"), h, &model.at(mlp + "router.bias"));
      std::vector<int64_t> order(static_cast<size_t>(p.experts));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
      order.resize(static_cast<size_t>(p.experts_used));
      // Softmax over the top values only (GptOssTopKRouter).
      Vec weight(order.size());
      double denom = 0;
      for (size_t i = 0; i < order.size(); ++i) denom += (weight[i] = std::exp(logits[order[i]] - logits[order[0]]));
      for (double& w : weight) w /= denom;
      if (routing != nullptr) {
        routing->chosen.back().push_back(order);
        if (p.experts_used < p.experts) {
          double next = -1e300;
          for (int64_t e = 0; e < p.experts; ++e) {
            if (std::find(order.begin(), order.end(), e) == order.end()) next = std::max(next, logits[e]);
          }
          const double gap = logits[order.back()] - next;
          if (gap < routing->min_gap) {
            routing->min_gap = gap;
            routing->min_gap_layer = l;
            routing->min_gap_position = t;
          }
        }
      }
      if (inputs == ExpertInputs::ggml_q8_0) round_to_q8_0(h);
      for (size_t n = 0; n < order.size(); ++n) {
        const int64_t e = order[n];
        Vec a(static_cast<size_t>(FF));
        for (int64_t f = 0; f < FF; ++f) {
          double g = 0, u = 0;
          const double* wg = gate_up.data() + (e * 2 * FF + 2 * f) * H;
          const double* wu = wg + H;
          for (int64_t i = 0; i < H; ++i) {
            g += wg[i] * h[i];
            u += wu[i] * h[i];
          }
          g += gate_up_bias.values[e * 2 * FF + 2 * f];
          u += gate_up_bias.values[e * 2 * FF + 2 * f + 1];
          if (routing != nullptr) {
            routing->clipped += (g > p.limit) + (std::fabs(u) > p.limit);
            routing->gate_up_values += 2;
          }
          g = std::min(g, p.limit);
          u = std::clamp(u, -p.limit, p.limit);
          a[f] = (u + 1) * (g / (1 + std::exp(-kSwigluAlpha * g)));
        }
        if (inputs == ExpertInputs::ggml_q8_0) round_to_q8_0(a);
        for (int64_t o = 0; o < H; ++o) {
          const double* wd = down.data() + (e * H + o) * FF;
          double s = 0;
          for (int64_t f = 0; f < FF; ++f) s += wd[f] * a[f];
          x[t][o] += weight[n] * (s + down_bias.values[e * H + o]);
        }
      }
    }
  }

  const HfTensor& head = model.at("lm_head.weight");
  std::vector<std::vector<double>> logits(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) logits[t] = linear(head, reference_rms_norm(x[t], model.at("model.norm.weight"), p.eps), nullptr);
  return logits;
}

std::string describe_gpt_oss_semantics(const nlohmann::ordered_json& config) {
  const Params p = params_of(config);
  std::ostringstream s;
  s << "GptOssForCausalLM: " << p.rope.what << "; attention sinks, head_dim^-0.5; sliding window " << p.window << " on layers";
  for (int64_t l = 0; l < p.layers; ++l) {
    if (p.sliding[l]) s << " " << l;
  }
  s << "; top " << p.experts_used << " of " << p.experts << " experts, softmax after top-k; SwiGLU alpha " << kSwigluAlpha
    << ", limit " << p.limit << "; MXFP4 experts dequantized as transformers does";
  return s.str();
}

}  // namespace ggufkit::test
