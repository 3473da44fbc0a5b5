// llama.cpp's memory for a model and a context: llama_context's constructor (the context, batch
// and sequence arithmetic, the output buffer), llama_model::create_memory and the caches' own
// constructors (llama_kv_cache, llama_kv_cache_iswa, llama_memory_recurrent), and the model
// buffer as ggml_backend_alloc_ctx_tensors_from_buft sizes it on the CPU.
#include <ggufkit/estimate.h>

#include "format/checked_math.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace ggufkit {
namespace {

constexpr uint64_t kTensorAlignment = 32;  // ggml's TENSOR_ALIGNMENT, the CPU buffer's alignment
constexpr uint32_t kMaxSequences = 256;    // LLAMA_MAX_SEQ
constexpr uint64_t kCellStep = 256;        // n_ctx and the SWA cache are padded to 256 cells

// The block of a tensor "blk.N.*".
std::optional<uint32_t> block_index(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  uint32_t il = 0;
  const auto [end, ec] = std::from_chars(name.data() + 4, name.data() + name.size(), il);
  if (ec != std::errc{} || end == name.data() + name.size() || *end != '.') return std::nullopt;
  return il;
}

Error refuse(std::string message) {
  return make_error(ErrorCode::invalid_argument, std::nullopt, {}, std::move(message));
}
Error overflow(std::string what) {
  return make_error(ErrorCode::shape_overflow, std::nullopt, {}, what + " does not fit 64 bits");
}

std::optional<uint64_t> pad(uint64_t v, uint64_t step) { return checked::align_up(v, step); }

// One ggml tensor of `rows` rows of `width` elements, as the CPU buffer holds it.
std::optional<uint64_t> tensor_bytes(TensorType type, uint64_t width, uint64_t rows) {
  if (width > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  const auto row = row_size(type, static_cast<int64_t>(width));
  if (!row) return std::nullopt;
  const auto bytes = checked::mul(*row, rows);
  return bytes ? pad(*bytes, kTensorAlignment) : std::nullopt;
}

bool quantized(TensorType t) { return type_traits(t).quantized; }
uint32_t block_size(TensorType t) { return type_traits(t).block_size; }

Expected<CacheEstimate> kv_cache(const arch::Hyperparameters& hp, bool swa_layers, uint32_t cells, uint32_t streams,
                                 bool v_trans, const EstimateOptions& o) {
  CacheEstimate c;
  c.kind = swa_layers ? CacheEstimate::Kind::kv_swa : CacheEstimate::Kind::kv;
  c.cells = cells;
  c.streams = streams;
  c.type_k = o.cache_type_k;
  c.type_v = o.cache_type_v;
  c.has_v = !hp.mla;
  const uint64_t rows = uint64_t{cells} * streams;
  for (const arch::Layer& l : hp.layers) {
    if (!l.has_kv || l.recurrent || l.swa != swa_layers) continue;
    ++c.layers;
    const auto k = tensor_bytes(o.cache_type_k, l.n_embd_k_gqa(), rows);
    if (!k) return overflow("the K cache");
    const auto v = c.has_v ? tensor_bytes(o.cache_type_v, v_trans ? hp.n_embd_v_gqa_max() : l.n_embd_v_gqa(), rows)
                           : std::optional<uint64_t>(0);
    if (!v) return overflow("the V cache");
    const auto k_sum = checked::add(c.k_bytes, *k);
    const auto v_sum = checked::add(c.v_bytes, *v);
    if (!k_sum || !v_sum) return overflow("the KV cache");
    c.k_bytes = *k_sum;
    c.v_bytes = *v_sum;
  }
  return c;
}

// The compute buffer the scheduler reserves for the worst-case ubatch, estimated (not allocated):
// the largest of the graph's phases, fitted to llama.cpp's figures on the grid of tests/estimate.
// - the output: the logits of every token of the ubatch and two rows of n_embd (F32);
// - a layer's attention: the masks of every cache (F16 with flash attention, F32 without) and,
//   without flash attention, the KQ matrix of the largest cache (n_kv x ubatch x n_head, F32) and
//   about 5.5 rows of n_embd (for MLA three rows of its expanded heads and an F16 view of the cache);
// - a layer's feed-forward: the masks and the gate, up and activation rows (the experts used, for
//   MoE, and their down projections when those are wider) with four rows of n_embd.
std::optional<uint64_t> compute_estimate(const arch::Hyperparameters& hp, const MemoryEstimate& e) {
  const double row = double(e.n_ubatch) * 4.0;  // one F32 value per token of the ubatch
  // An encoder (no memory: bert, nomic-bert) pools embeddings instead of computing logits, and
  // attends within the ubatch.
  const bool encoder = hp.entry != nullptr && hp.entry->memory == arch::Memory::none;
  const double output = encoder ? row * 2.0 * hp.n_embd : row * (double(hp.n_vocab) + 2.0 * hp.n_embd + 1.0);
  uint32_t n_head = 0, head_k = 0;
  for (const auto& l : hp.layers) {
    n_head = std::max(n_head, l.n_head);
    head_k = std::max(head_k, l.head_k);
  }
  double masks = 0, n_kv_max = 0;
  if (encoder) {
    masks = double(e.n_ubatch) * e.n_ubatch * (e.flash_attn ? 2.0 : 4.0);
    n_kv_max = e.n_ubatch;
  }
  for (const auto& c : e.caches) {
    if (c.kind == CacheEstimate::Kind::recurrent) continue;
    masks += double(c.cells) * e.n_ubatch * (e.flash_attn ? 2.0 : 4.0);
    n_kv_max = std::max(n_kv_max, double(c.cells));
  }
  // An MoE layer's experts are n_ff wide without expert_feed_forward_length (Mixtral as llama).
  const double ff = hp.n_expert > 0 ? double(hp.n_ff_exp > 0 ? hp.n_ff_exp : hp.n_ff) * std::max<uint32_t>(1, hp.n_expert_used)
                                    : double(hp.n_ff);
  const bool gated = hp.entry == nullptr || hp.entry->gated_ffn;
  // An MoE layer whose used experts are narrower than their outputs (granitemoe: 8 x 512 against
  // 8 x 1536) also holds each used expert's down projection (n_embd rows) before their sum.
  const double down = double(hp.n_embd) * hp.n_expert_used;
  const double experts_out = hp.n_expert > 0 && down > ff ? down : 0.0;
  const double ffn = masks + row * ((gated ? 3.0 * ff + 4.0 * hp.n_embd : ff + 2.0 * hp.n_embd) + experts_out);
  double attention = 0;
  if (!e.flash_attn && n_kv_max > 0) {
    // MLA attends over the compressed row: its expanded heads (three rows of n_head x the row) and
    // an F16 copy of the cache's view beside the KQ matrix.
    const double rows = hp.mla ? 3.0 * n_head * head_k : 5.5 * hp.n_embd;
    const double view = hp.mla ? n_kv_max * e.n_ubatch * 2.0 : 0.0;
    attention = masks + n_kv_max * e.n_ubatch * n_head * 4.0 + view + row * rows;
  }
  const double bytes = std::max({output, ffn, attention});
  if (!(bytes < 9.2e18)) return std::nullopt;  // beyond 2^63: not representable as a size
  return static_cast<uint64_t>(bytes);
}

// The steps of 256 cells in the context a ctx_size of 0 resolves to (the model's context_length).
uint64_t arch_context_steps(const MemoryEstimate& trained) { return trained.n_ctx / kCellStep; }

}  // namespace

std::string_view cache_kind_name(CacheEstimate::Kind kind) {
  switch (kind) {
    case CacheEstimate::Kind::kv: return "kv";
    case CacheEstimate::Kind::kv_swa: return "kv_swa";
    case CacheEstimate::Kind::recurrent: return "recurrent";
  }
  return "kv";
}

Expected<MemoryEstimate> estimate_memory(const SplitModel& model, const EstimateOptions& o) {
  auto derived = arch::derive_hyperparameters(model.metadata_file(), {.assume_dense = o.assume_dense});
  if (!derived) return derived.error();
  const arch::Hyperparameters& hp = *derived;
  MemoryEstimate e;
  e.architecture = hp.architecture;
  e.assumed_dense = hp.assumed_dense;

  // llama_context's constructor.
  if (o.parallel > kMaxSequences) return refuse(fmt::format("--parallel {} is above llama.cpp's {}", o.parallel, kMaxSequences));
  if (o.batch_size == 0 && o.ubatch_size == 0) return refuse("the batch and ubatch sizes cannot both be 0");
  e.n_seq = std::max<uint32_t>(1, o.parallel);
  const uint64_t n_ctx_asked = o.ctx_size == 0 ? hp.n_ctx_train : o.ctx_size;
  if (n_ctx_asked == 0) return refuse("the context size is 0 and the model's context_length is 0");
  e.n_batch = hp.causal ? static_cast<uint32_t>(std::min<uint64_t>(n_ctx_asked, o.batch_size)) : o.batch_size;
  e.n_ubatch = std::min(e.n_batch, o.ubatch_size == 0 ? o.batch_size : o.ubatch_size);
  uint64_t n_ctx = *pad(n_ctx_asked, kCellStep);
  uint64_t n_ctx_seq = n_ctx;
  if (!o.kv_unified) {
    n_ctx_seq = *pad(n_ctx / e.n_seq, kCellStep);
    if (n_ctx_seq == 0) return refuse("the context per sequence (n_ctx_seq) is 0");
    n_ctx = n_ctx_seq * e.n_seq;
  }
  if (n_ctx > UINT32_MAX || n_ctx_seq > UINT32_MAX) {
    return refuse(fmt::format("a context of {} cells does not fit llama.cpp's 32-bit n_ctx", n_ctx));
  }
  e.n_ctx = static_cast<uint32_t>(n_ctx);
  e.n_ctx_seq = static_cast<uint32_t>(n_ctx_seq);

  // llama_init_from_model's checks of the cache types.
  e.flash_attn = o.flash_attn != FlashAttention::off;
  const bool has_memory = hp.entry == nullptr || hp.entry->memory != arch::Memory::none;
  if (has_memory) {
    if (hp.mla && o.cache_type_k != o.cache_type_v) {
      return refuse(fmt::format("this model (MLA) does not support different K ({}) and V ({}) cache types",
                                type_name(o.cache_type_k), type_name(o.cache_type_v)));
    }
    if (quantized(o.cache_type_v) && !e.flash_attn) return refuse("a quantized V cache requires flash attention");
    for (const arch::Layer& l : hp.layers) {
      if (e.flash_attn && quantized(o.cache_type_k) && l.head_k % block_size(o.cache_type_k) != 0) {
        return refuse(fmt::format("K cache type {} with block size {} does not divide the head size {}",
                                  type_name(o.cache_type_k), block_size(o.cache_type_k), l.head_k));
      }
      if (e.flash_attn && quantized(o.cache_type_v) && l.head_v % block_size(o.cache_type_v) != 0) {
        return refuse(fmt::format("V cache type {} with block size {} does not divide the head size {}",
                                  type_name(o.cache_type_v), block_size(o.cache_type_v), l.head_v));
      }
    }
  }

  // The model buffer: every tensor padded to the alignment, in one CPU buffer (but the NextN
  // blocks' tensors, which llama.cpp does not load).
  const uint32_t first_nextn = static_cast<uint32_t>(hp.layers.size()) - hp.n_layer_nextn;
  for (const ModelTensor& t : model.tensors()) {
    if (hp.entry != nullptr && hp.entry->skips_nextn && hp.n_layer_nextn > 0) {
      const auto il = block_index(t.info->name);
      if (il && *il >= first_nextn) continue;
    }
    const auto bytes = pad(t.info->size, kTensorAlignment);
    const auto sum = bytes ? checked::add(e.model_bytes, *bytes) : std::nullopt;
    if (!sum) return overflow("the model buffer");
    e.model_bytes = *sum;
  }

  // create_memory.
  const bool has_attention =
      std::any_of(hp.layers.begin(), hp.layers.end(), [](const arch::Layer& l) { return !l.recurrent; });
  if (has_memory && has_attention) {
    const uint32_t streams = o.kv_unified ? 1 : e.n_seq;
    const bool v_trans = !e.flash_attn;
    if (hp.any_swa()) {
      auto base = kv_cache(hp, false, e.n_ctx_seq, streams, v_trans, o);
      if (!base) return base.error();
      uint64_t swa_cells = e.n_ctx_seq;
      if (!o.swa_full) {
        const uint64_t window = uint64_t{hp.n_swa} * (o.kv_unified ? e.n_seq : 1) + e.n_ubatch;
        swa_cells = *pad(std::min<uint64_t>(e.n_ctx_seq, window), kCellStep);
      }
      auto swa = kv_cache(hp, true, static_cast<uint32_t>(swa_cells), streams, v_trans, o);
      if (!swa) return swa.error();
      e.caches.push_back(*base);
      e.caches.push_back(*swa);
    } else {
      auto base = kv_cache(hp, false, e.n_ctx_seq, streams, v_trans, o);
      if (!base) return base.error();
      e.caches.push_back(*base);
    }
  }
  // llama_memory_recurrent: per recurrent layer, an F32 conv row and an F32 state row per sequence.
  if (has_memory && std::any_of(hp.layers.begin(), hp.layers.end(), [](const arch::Layer& l) { return l.recurrent; })) {
    CacheEstimate r;
    r.kind = CacheEstimate::Kind::recurrent;
    r.cells = e.n_seq;  // mem_size = max(1, n_seq_max)
    r.type_k = r.type_v = TensorType::F32;
    for (const arch::Layer& l : hp.layers) {
      if (!l.recurrent) continue;
      ++r.layers;
      const auto conv = tensor_bytes(TensorType::F32, hp.n_embd_r, e.n_seq);
      const auto state = tensor_bytes(TensorType::F32, hp.n_embd_s, e.n_seq);
      const auto k_sum = conv ? checked::add(r.k_bytes, *conv) : std::nullopt;
      const auto v_sum = state ? checked::add(r.v_bytes, *state) : std::nullopt;
      if (!k_sum || !v_sum) return overflow("the recurrent state");
      r.k_bytes = *k_sum;
      r.v_bytes = *v_sum;
    }
    e.caches.push_back(r);
  }
  for (const CacheEstimate& c : e.caches) {
    const auto sum = checked::add(e.context_bytes, c.bytes());
    if (!sum) return overflow("the context");
    e.context_bytes = *sum;
  }

  // output_reserve(n_seq_max): the logits of one output per sequence, as F32.
  const auto output = checked::mul(uint64_t{hp.n_vocab} * 4, e.n_seq);
  if (!output) return overflow("the output buffer");
  e.output_bytes = *output;

  const auto compute = compute_estimate(hp, e);
  if (!compute) return overflow("the compute buffer");
  e.compute_bytes = *compute;
  const auto total = checked::add(e.model_bytes, e.context_bytes);
  const auto total2 = total ? checked::add(*total, e.output_bytes) : std::nullopt;
  const auto total3 = total2 ? checked::add(*total2, e.compute_bytes) : std::nullopt;
  if (!total3) return overflow("the total");
  e.total_bytes = *total3;
  return e;
}

Expected<std::optional<MemoryEstimate>> estimate_max_context(const SplitModel& model, const EstimateOptions& options,
                                                             uint64_t memory_bytes) {
  EstimateOptions o = options;
  const auto at = [&](uint64_t steps) {
    o.ctx_size = static_cast<uint32_t>(steps * kCellStep);
    return estimate_memory(model, o);
  };
  auto smallest = at(1);
  if (!smallest) return smallest.error();
  if (smallest->total_bytes > memory_bytes) return std::optional<MemoryEstimate>();
  // The model's trained context, in whole steps (at least one).
  auto trained = estimate_memory(model, [&] {
    EstimateOptions t = options;
    t.ctx_size = 0;
    return t;
  }());
  if (!trained) return trained.error();
  uint64_t lo = 1, hi = std::max<uint64_t>(1, arch_context_steps(*trained));
  if (auto top = at(hi); top && top->total_bytes <= memory_bytes) return std::optional<MemoryEstimate>(*top);
  // total(lo) fits, total(hi) does not.
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    auto e = at(mid);
    if (!e) return e.error();
    (e->total_bytes <= memory_bytes ? lo : hi) = mid;
  }
  auto best = at(lo);
  if (!best) return best.error();
  return std::optional<MemoryEstimate>(*best);
}

Expected<MemoryEstimate> estimate_memory(const std::filesystem::path& path, const EstimateOptions& options) {
  OpenOptions open;
  open.allow_metadata_only = true;  // only the header is read: a metadata-only file is enough
  auto model = SplitModel::open(path, open);
  if (!model) return model.error();
  return estimate_memory(*model, options);
}

}  // namespace ggufkit
