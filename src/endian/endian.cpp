#include "ggufkit/endian.h"

#include <algorithm>

#include <fmt/format.h>

#include "ggufkit/writer.h"

namespace ggufkit {

Expected<void> copy_tensor_native(const GgufFile& file, const TensorInfo& tensor, uint64_t offset,
                                  std::span<std::byte> out) {
  return copy_tensor_bytes(tensor.type, file.tensor_data(tensor), offset, out,
                           file.byte_order() != native_byte_order());
}

ConvertEndianPlan plan_convert_endian(const GgufFile& in, ByteOrder to) {
  ConvertEndianPlan plan;
  plan.from = in.byte_order();
  plan.to = to;
  plan.tensor_bytes = in.tensor_bytes();
  for (const TensorInfo& t : in.tensors()) {
    if (!byte_order_known(t.type)) plan.unsupported.push_back(fmt::format("{} ({})", t.name, type_name(t.type)));
  }
  return plan;
}

Expected<void> convert_endian(const GgufFile& in, const std::filesystem::path& out, ByteOrder to,
                              const ConvertEndianOptions& options) {
  const ConvertEndianPlan plan = plan_convert_endian(in, to);
  if (plan.swaps() && !plan.unsupported.empty()) {
    return make_error(ErrorCode::invalid_argument, std::nullopt, plan.unsupported.front(),
                      fmt::format("{} tensor(s) have a type whose byte layout is not known, first {}: cannot convert",
                                  plan.unsupported.size(), plan.unsupported.front()));
  }
  GgufBuilder builder;
  if (auto r = builder.set_version(in.version()); !r) return r;
  for (const KeyValue& kv : in.metadata()) {
    if (auto r = builder.set(kv.key, MetadataValue::copy_of(kv.value)); !r) return r;
  }
  const uint64_t total = plan.tensor_bytes;
  auto done = std::make_shared<uint64_t>(0);
  for (const TensorInfo& t : in.tensors()) {
    const auto stored = in.tensor_data(t);
    const TensorType type = t.type;
    const bool swap = plan.swaps();
    TensorProducer producer = [stored, type, swap, done, total, &options](uint64_t offset, std::span<std::byte> chunk) {
      if (auto r = copy_tensor_bytes(type, stored, offset, chunk, swap); !r) return r;
      *done += chunk.size();
      if (options.progress) options.progress(*done, total);
      return Expected<void>{};
    };
    if (auto r = builder.add_tensor(t.name, t.type, t.shape(), std::move(producer)); !r) return r;
  }
  WriteOptions write_options;
  // Files without tensors: keep the source's header padding choice (as GgufBuilder::from_file).
  if (in.tensors().empty()) {
    write_options.pad_header_without_tensors = in.header_padded();
  }
  write_options.byte_order = to;
  write_options.sync = options.sync;
  write_options.chunk_bytes = std::max<size_t>(options.chunk_bytes, 1);
  write_options.output = options.output;
  write_options.cancel = options.cancel;
  if (!in.path().empty()) write_options.output.inputs.push_back(in.path());
  return builder.write_file(out, write_options);
}

}  // namespace ggufkit
