// The streaming model quantizer: metadata as llama_model_quantize writes it, then each tensor
// either copied or converted rows at a time (source rows to float32, then to the target type),
// so memory holds a bounded slice of one tensor however large the model is.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "ggufkit/conventions.h"
#include "ggufkit/quantize.h"
#include "ggufkit/writer.h"

namespace ggufkit {
namespace {

constexpr int64_t kRowsBudgetValues = int64_t{1} << 22;  // floats converted per step (16 MiB)
constexpr uint32_t kQuantizationVersion = 2;            // GGML_QNT_VERSION

Error cancelled() { return make_error(ErrorCode::io_error, 0, {}, "cancelled"); }

}  // namespace

Expected<void> quantize_model(const GgufFile& input, const std::filesystem::path& output,
                              const QuantizeOptions& options) {
  auto plan = plan_quantize(input, options);
  if (!plan) return std::move(plan).error();

  GgufBuilder b;
  if (auto r = b.set_version(kGgufVersionLatest); !r) return r;
  for (const KeyValue& kv : input.metadata()) {
    if (auto r = b.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r;
  }
  // As llama.cpp: split keys go, and the two quantization keys move to the end with new values.
  for (std::string_view key : {"split.no", "split.count", "split.tensors.count", "general.quantization_version",
                               "general.file_type"}) {
    b.remove(key);
  }
  (void)b.set(keys::kQuantizationVersion, MetadataValue::of<uint32_t>(kQuantizationVersion));
  (void)b.set(keys::kFileType, MetadataValue::of<uint32_t>(options.file_type));

  for (const TensorPlan& p : plan->tensors) {
    const TensorInfo& t = *p.tensor;
    if (!p.convert) {
      if (auto r = b.add_tensor(t.name, t.type, t.shape(), input.tensor_data(t)); !r) return r;
      continue;
    }
    if (!quant_capabilities(t.type).dequantize) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("cannot read {} tensors as floats", type_name(t.type)));
    }
    if (type_traits(t.type).quantized) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("the tensor is already quantized ({}); requantizing comes with the full quantize "
                                    "command", type_name(t.type)));
    }
    if (!quant_capabilities(p.target).quantize) {
      return make_error(ErrorCode::invalid_argument, t.info_offset, std::string(t.name),
                        fmt::format("ggufkit cannot quantize to {} yet", type_name(p.target)));
    }
    // Rows go through float32 a bounded slice at a time; the producer is called in order.
    const int64_t n_per_row = t.ne[0];
    const uint64_t src_row = *row_size(t.type, n_per_row), dst_row = *row_size(p.target, n_per_row);
    const int64_t rows_per_step = std::max<int64_t>(1, kRowsBudgetValues / std::max<int64_t>(1, n_per_row));
    const auto source = input.tensor_data(t);
    struct State {
      std::vector<float> floats;
      std::vector<std::byte> out;
      uint64_t out_start = 0;  // byte offset of `out` in the output tensor
    };
    auto state = std::make_shared<State>();
    const TensorType src_type = t.type, dst_type = p.target;
    const Threads threads = options.threads;
    const std::atomic<bool>* cancel = options.cancel;
    auto producer = [=](uint64_t offset, std::span<std::byte> chunk) -> Expected<void> {
      while (!chunk.empty()) {
        if (offset < state->out_start || offset >= state->out_start + state->out.size()) {
          if (cancel != nullptr && cancel->load()) return cancelled();
          const int64_t first_row = static_cast<int64_t>(offset / dst_row);
          const int64_t total_rows = static_cast<int64_t>(source.size() / src_row);
          const int64_t rows = std::min(rows_per_step, total_rows - first_row);
          state->floats.resize(static_cast<size_t>(rows * n_per_row));
          state->out.resize(static_cast<size_t>(rows) * dst_row);
          const auto src = source.subspan(static_cast<size_t>(first_row) * src_row, static_cast<size_t>(rows) * src_row);
          if (auto r = dequantize(src_type, src, state->floats, threads); !r) return r;
          if (auto r = quantize(dst_type, state->floats, state->out, n_per_row, {}, threads); !r) return r;
          state->out_start = static_cast<uint64_t>(first_row) * dst_row;
        }
        const uint64_t at = offset - state->out_start;
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), state->out.size() - at));
        std::copy_n(state->out.begin() + static_cast<std::ptrdiff_t>(at), n, chunk.begin());
        chunk = chunk.subspan(n);
        offset += n;
      }
      return {};
    };
    if (auto r = b.add_tensor(t.name, p.target, t.shape(), TensorProducer(producer)); !r) return r;
  }
  WriteOptions write_options;
  write_options.progress = options.progress;
  write_options.sync = options.sync;
  return b.write_file(output, write_options);
}

}  // namespace ggufkit
