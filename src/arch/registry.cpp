// The registry: one entry per architecture, what llama.cpp's load_arch_hparams (models/<arch>.cpp)
// and create_memory (llama-model.cpp) do for it, as data. A new architecture is one entry here
// (and, for the converter, its bindings in src/convert/families/).
#include <ggufkit/arch.h>

#include <algorithm>
#include <array>

namespace ggufkit::arch {
namespace {

constexpr std::string_view kRmsEps[] = {"attention.layer_norm_rms_epsilon"};
constexpr std::string_view kEps[] = {"attention.layer_norm_epsilon"};
constexpr std::string_view kCohere2[] = {"attention.sliding_window", "logit_scale", "attention.layer_norm_epsilon"};
constexpr std::string_view kGranite[] = {"attention.layer_norm_rms_epsilon", "logit_scale"};
constexpr std::string_view kGptOss[] = {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length",
                                        "attention.sliding_window"};
constexpr std::string_view kDeepseek2[] = {"attention.layer_norm_rms_epsilon", "attention.kv_lora_rank",
                                           "expert_feed_forward_length", "expert_shared_count"};
constexpr std::string_view kExpertFfn[] = {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length"};
constexpr std::string_view kLlama4[] = {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length",
                                        "interleave_moe_layer_step"};
constexpr std::string_view kGlm4Moe[] = {"attention.layer_norm_rms_epsilon", "expert_feed_forward_length",
                                         "expert_shared_count"};

// set_swa_pattern(period): layer il slides unless il % period == period - 1.
constexpr std::string_view kSsm[] = {"attention.layer_norm_rms_epsilon", "ssm.conv_kernel", "ssm.inner_size",
                                     "ssm.state_size", "ssm.time_step_rank", "ssm.group_count"};
constexpr std::string_view kQwen35[] = {"attention.layer_norm_rms_epsilon", "rope.dimension_sections", "ssm.conv_kernel",
                                        "ssm.inner_size", "ssm.state_size", "ssm.time_step_rank", "ssm.group_count"};

constexpr std::string_view kLfm2[] = {"attention.layer_norm_rms_epsilon", "shortconv.l_cache"};

constexpr SwaRule swa_always(uint32_t period, uint32_t default_window = 0) {
  return {.when = SwaWhen::always, .period = period, .default_window = default_window};
}
constexpr SwaRule swa_if_window(uint32_t period) { return {.when = SwaWhen::window_positive, .period = period}; }

// Each entry's memory figures are checked against libllama in tests/estimate's grid on a real
// model's shape (tests/estimate/model_fixtures.cpp), except those marked "source only": stated from
// llama.cpp's source, not yet in the grid (no fixture of their tensors yet).
const std::array kArchitectures = {
    Architecture{.name = "llama", .required_keys = kRmsEps},
    Architecture{.name = "llama4",
                 .swa = {.when = SwaWhen::unless_window_zero, .type = SwaType::chunked, .period = 4,
                         .default_window = 8192, .window_forced = true},
                 .required_keys = kLlama4},
    Architecture{.name = "bert", .memory = Memory::none, .required_keys = kEps, .gated_ffn = false},
    Architecture{.name = "nomic-bert", .memory = Memory::none, .required_keys = kEps},
    Architecture{.name = "qwen2", .required_keys = kRmsEps},
    Architecture{.name = "qwen3", .required_keys = kRmsEps},
    Architecture{.name = "qwen3moe", .required_keys = kRmsEps},
    // Gated DeltaNet layers (recurrent, the SSM state rows) between full-attention layers: every
    // full_attention_interval-th layer (4 by default) attends, or attention.recurrent_layers says.
    Architecture{.name = "qwen35", .memory = Memory::hybrid, .state = State::ssm, .required_keys = kQwen35},
    Architecture{.name = "qwen35moe", .memory = Memory::hybrid, .state = State::ssm, .required_keys = kQwen35},
    // Phi-3's sliding window is disabled in llama.cpp (its load_arch_hparams sets none).
    Architecture{.name = "phi3", .required_keys = kRmsEps},
    Architecture{.name = "gemma", .required_keys = kRmsEps},
    Architecture{.name = "gemma2", .swa = swa_always(2, 4096), .required_keys = kRmsEps},
    Architecture{.name = "gemma3", .swa = swa_if_window(6), .required_keys = kRmsEps},
    Architecture{.name = "mamba2", .memory = Memory::recurrent, .state = State::ssm, .required_keys = kSsm},
    Architecture{.name = "command-r", .required_keys = kEps},
    Architecture{.name = "cohere2", .swa = swa_always(4), .required_keys = kCohere2},
    Architecture{.name = "olmo2", .swa = swa_if_window(4), .required_keys = kRmsEps},
    Architecture{.name = "deepseek2", .required_keys = kDeepseek2},
    Architecture{.name = "glm4", .required_keys = kRmsEps},
    Architecture{.name = "glm4moe", .required_keys = kGlm4Moe, .skips_nextn = true},
    Architecture{.name = "exaone4",
                 .swa = {.when = SwaWhen::layer_count, .period = 4, .default_window = 4096, .layer_count = 64},
                 .required_keys = kRmsEps},
    Architecture{.name = "granite", .required_keys = kGranite},
    Architecture{.name = "granitemoe", .required_keys = kGranite},
    Architecture{.name = "ernie4_5", .required_keys = kRmsEps},
    Architecture{.name = "ernie4_5-moe", .required_keys = kRmsEps},
    Architecture{.name = "hunyuan-moe", .required_keys = kExpertFfn},
    Architecture{.name = "smollm3", .required_keys = kRmsEps},
    Architecture{.name = "gpt-oss", .swa = swa_always(2), .required_keys = kGptOss},
    Architecture{.name = "seed_oss", .required_keys = kRmsEps},
    Architecture{.name = "minimax-m2", .required_keys = kExpertFfn},
    Architecture{.name = "mistral3", .required_keys = kRmsEps},
    // Short convolutions in the layers without KV heads (head_count_kv 0), attention in the others.
    Architecture{.name = "lfm2", .memory = Memory::hybrid, .state = State::shortconv, .required_keys = kLfm2},
};

}  // namespace

std::span<const Architecture> architectures() { return kArchitectures; }

const Architecture* find_architecture(std::string_view name) {
  const auto it = std::find_if(kArchitectures.begin(), kArchitectures.end(),
                               [&](const Architecture& a) { return a.name == name; });
  return it == kArchitectures.end() ? nullptr : &*it;
}

}  // namespace ggufkit::arch
