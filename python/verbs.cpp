// The library's verbs as functions of ggufkit._core; their Python face is python/ggufkit/verbs.py.
//
// Each function does what the CLI's verb does (tools/gguf/cmd_*.cpp) through the public headers,
// and returns plain Python data (dicts, lists, tuples) that verbs.py shapes. Long calls release
// the GIL; progress and cancellation go through Run (below): the Python callbacks are called from
// the library's callbacks with the GIL taken, and a cancel request or an exception raised by a
// callback sets the std::atomic<bool> the library's options point to.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "binding.h"
#include "ggufkit/atomic_file.h"
#include "ggufkit/check.h"
#include "ggufkit/conventions.h"
#include "ggufkit/convert.h"
#include "ggufkit/edit.h"
#include "ggufkit/estimate.h"
#include "ggufkit/hash.h"
#include "ggufkit/imatrix.h"
#include "ggufkit/nearest.h"
#include "ggufkit/quantize.h"
#include "ggufkit/reader.h"
#include "ggufkit/split.h"
#include "ggufkit/tensor_types.h"
#include "ggufkit/value.h"

namespace py = pybind11;

namespace ggufkit::python {
namespace {

[[noreturn]] void raise_invalid(const std::string& message, const std::string& file = {}, const std::string& subject = {}) {
  raise_error(make_error(ErrorCode::invalid_argument, std::nullopt, subject, message), file);
}

// f() with the GIL released (f must not touch Python objects).
template <class F>
auto without_gil(F&& f) {
  py::gil_scoped_release release;
  return f();
}

// Progress and cancellation of one long call. Made and finished with the GIL held; report() and
// poll() are called by the library (any thread, without the GIL).
class Run {
 public:
  // `progress`: None or a callable (done, total); `cancel`: None or a callable returning a truth
  // value (verbs.py turns a threading.Event into its is_set).
  Run(py::object progress, py::object cancel) : progress_(std::move(progress)), cancel_(std::move(cancel)) {
    if (!cancel_.is_none()) {
      try {
        if (py::bool_(cancel_())) flag_ = true;  // cancelled before the start
      } catch (...) {
        error_ = std::current_exception();
        flag_ = true;
      }
    }
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  const std::atomic<bool>* flag() const { return &flag_; }

  // The library's progress: the Python progress, then the cancel poll. Signals are checked too, so
  // that Ctrl-C (KeyboardInterrupt) stops a long call when the library reports from the main thread.
  void report(uint64_t done, uint64_t total) {
    if (flag_.load()) return;
    py::gil_scoped_acquire gil;
    if (flag_.load()) return;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!progress_.is_none()) progress_(done, total);
      if (!cancel_.is_none() && py::bool_(cancel_())) flag_ = true;
    } catch (...) {
      error_ = std::current_exception();
      flag_ = true;
    }
  }

  // Movement inside a tensor: the cancel poll (and signals) only.
  void poll() {
    if (flag_.load()) return;
    py::gil_scoped_acquire gil;
    if (flag_.load()) return;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (!cancel_.is_none() && py::bool_(cancel_())) flag_ = true;
    } catch (...) {
      error_ = std::current_exception();
      flag_ = true;
    }
  }

  // After the call, with the GIL: a callback's exception first, then the library's error.
  void finish(const Expected<void>& r, const std::string& file) {
    if (error_) std::rethrow_exception(error_);
    check(r, file);
  }
  // For calls that report no error of their own (hash_model): a cancel raises once they return.
  void finish_cancellable(const std::string& file) {
    if (error_) std::rethrow_exception(error_);
    if (flag_.load()) {
      raise_error(make_error(ErrorCode::cancelled, std::nullopt, {}, "the operation was cancelled"), file);
    }
  }

 private:
  py::object progress_;
  py::object cancel_;
  std::atomic<bool> flag_{false};
  std::exception_ptr error_;  // set with the GIL held
};

void use_run(RunOptions& o, Run& run) {
  o.cancel = run.flag();
  o.progress = [&run](size_t done, size_t total) { run.report(done, total); };
  o.tensor_progress = [&run](size_t, uint64_t, uint64_t) { run.poll(); };
}

std::string path_string(const std::filesystem::path& p) { return p.string(); }

// Names and messages in reports: invalid UTF-8 replaced, never an exception.
py::object decode_text(std::string_view s) { return text(s, "replace"); }

// A metadata value as Python data: arrays as (nested) lists.
py::object value_to_python_nested(const ValueView& v) { return value_to_python(v, false, "replace"); }

// "uint32", or "array[float32]".
std::string type_text(const ValueView& v) {
  if (v.type() != ValueType::Array) return std::string(value_type_name(v.type()));
  const auto a = v.as_array();
  return "array[" + std::string(a ? value_type_name(a->element_type()) : "?") + "]";
}

py::object optional_int(const std::optional<uint64_t>& v) { return v ? py::object(py::int_(*v)) : py::object(py::none()); }

// (severity, code, subject, offset, file, message)
py::tuple finding_tuple(const Finding& f) {
  return py::make_tuple(std::string(severity_name(f.severity)), f.code, decode_text(f.subject), optional_int(f.offset),
                        decode_text(f.file), decode_text(f.message));
}

// ---- check -----------------------------------------------------------------------------------

py::dict check_verb(const std::string& path, std::optional<std::string> base) {
  CheckOptions options;
  if (base) options.base = *base;
  Expected<CheckReport> report = without_gil([&] { return check_file(path, options); });
  const CheckReport r = take(std::move(report), path);
  py::list findings;
  for (const Finding& f : r.findings) findings.append(finding_tuple(f));
  py::dict out;
  out["kind"] = std::string(file_kind_name(r.kind));
  out["complete"] = r.complete;
  out["findings"] = findings;
  return out;
}

// ---- estimate ----------------------------------------------------------------------------------

// gguf estimate's JSON object, as a dict (the same keys).
py::dict estimate_verb(const std::string& path, uint64_t ctx_size, uint64_t batch_size, uint64_t ubatch_size,
                       uint64_t parallel, bool kv_unified, bool swa_full, const std::string& cache_type_k,
                       const std::string& cache_type_v, const std::string& flash_attn, bool assume_dense) {
  EstimateOptions o;
  const auto u32 = [](const char* what, uint64_t v) {
    if (v > UINT32_MAX) raise_invalid(std::string(what) + ": " + std::to_string(v) + " is above llama.cpp's 32-bit limit");
    return static_cast<uint32_t>(v);
  };
  o.ctx_size = u32("ctx_size", ctx_size);
  o.batch_size = u32("batch_size", batch_size);
  o.ubatch_size = u32("ubatch_size", ubatch_size);
  o.parallel = u32("parallel", parallel);
  o.kv_unified = kv_unified;
  o.swa_full = swa_full;
  const auto cache_type = [](const char* what, const std::string& name) {
    const auto t = parse_tensor_type(name);
    if (!t) raise_invalid(std::string(what) + ": '" + name + "' is not a tensor type (f16, q8_0, q4_0...)");
    return *t;
  };
  o.cache_type_k = cache_type("cache_type_k", cache_type_k);
  o.cache_type_v = cache_type("cache_type_v", cache_type_v);
  if (flash_attn != "on" && flash_attn != "off" && flash_attn != "auto") {
    raise_invalid("flash_attn: '" + flash_attn + "' is not on, off or auto");
  }
  o.flash_attn = flash_attn == "on" ? FlashAttention::on : flash_attn == "off" ? FlashAttention::off : FlashAttention::automatic;
  o.assume_dense = assume_dense;
  const MemoryEstimate e = take(without_gil([&] {
    OpenOptions open;
    open.allow_metadata_only = true;
    auto model = SplitModel::open(path, open);
    return model ? estimate_memory(*model, o) : Expected<MemoryEstimate>(model.error());
  }), path);
  py::list caches;
  for (const CacheEstimate& c : e.caches) {
    py::dict d;
    d["kind"] = std::string(cache_kind_name(c.kind));
    d["cells"] = c.cells;
    d["streams"] = c.streams;
    d["layers"] = c.layers;
    d["type_k"] = std::string(type_name(c.type_k));
    d["type_v"] = c.has_v ? py::object(py::str(std::string(type_name(c.type_v)))) : py::object(py::none());
    d["k_bytes"] = c.k_bytes;
    d["v_bytes"] = c.v_bytes;
    d["bytes"] = c.bytes();
    caches.append(d);
  }
  py::dict out;
  out["file"] = path;
  out["architecture"] = e.architecture;
  out["assumed_dense"] = e.assumed_dense;
  out["n_ctx"] = e.n_ctx;
  out["n_seq"] = e.n_seq;
  out["n_ctx_seq"] = e.n_ctx_seq;
  out["n_batch"] = e.n_batch;
  out["n_ubatch"] = e.n_ubatch;
  out["flash_attn"] = e.flash_attn;
  out["model_bytes"] = e.model_bytes;
  out["caches"] = caches;
  out["context_bytes"] = e.context_bytes;
  out["output_bytes"] = e.output_bytes;
  out["compute_bytes"] = e.compute_bytes;
  out["compute_estimated"] = true;
  out["total_bytes"] = e.total_bytes;
  return out;
}

// ---- quantize --------------------------------------------------------------------------------

std::optional<TensorType> tensor_type_option(const char* what, const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  const auto t = parse_tensor_type(*text);
  if (!t) raise_invalid(std::string(what) + ": '" + *text + "' is not a tensor type (q8_0, q6_K, f16...)");
  return t;
}

py::dict quantize_verb(const std::string& input, const std::string& output, const std::string& type,
                       std::optional<std::string> imatrix, int threads, py::object progress, py::object cancel,
                       bool dry_run, bool pure, std::optional<std::string> output_tensor_type,
                       std::optional<std::string> token_embedding_type, bool leave_output_tensor,
                       const std::vector<std::string>& tensor_types, const std::vector<std::string>& override_kv,
                       bool allow_requantize, bool keep_split, const std::vector<std::string>& include_weights,
                       const std::vector<std::string>& exclude_weights, bool overwrite, bool sync) {
  QuantizeOptions options;
  options.output_tensor_type = tensor_type_option("output_tensor_type", output_tensor_type);
  options.token_embedding_type = tensor_type_option("token_embedding_type", token_embedding_type);
  for (const auto& text : tensor_types) {
    auto o = parse_tensor_type_override(text);
    if (!o) raise_error(o.error());
    options.tensor_types.push_back(std::move(*o));
  }
  for (const auto& text : override_kv) {
    auto o = parse_metadata_override(text);
    if (!o) raise_error(o.error());
    options.metadata_overrides.push_back(std::move(*o));
  }
  options.quantize_output_tensor = !leave_output_tensor;
  options.allow_requantize = allow_requantize;
  options.keep_split = keep_split;
  options.dry_run = dry_run;
  if (!include_weights.empty() && !exclude_weights.empty()) {
    raise_invalid("include_weights and exclude_weights cannot be used together");
  }
  if ((!include_weights.empty() || !exclude_weights.empty()) && !imatrix) {
    raise_invalid("include_weights and exclude_weights select entries of imatrix, which is missing");
  }
  ImportanceMatrix importance;
  if (imatrix) {
    Expected<ImportanceMatrix> loaded = without_gil([&] { return load_importance_matrix(*imatrix); });
    importance = take(std::move(loaded), *imatrix);
    exclude_importance_entries(importance, exclude_weights);
    if (!include_weights.empty()) include_importance_entries(importance, include_weights);
    options.importance = &importance;
    options.importance_file = *imatrix;
  }
  if (!set_quantize_target(type, options)) {
    raise_invalid("'" + type + "' is not a quantization type (try q4_0, q8_0, q4_K, Q4_K_M, iq4_xs...)");
  }
  Expected<SplitModel> opened = without_gil([&] { return SplitModel::open(input); });
  const SplitModel model = take(std::move(opened), input);
  options.pure = pure;
  options.threads = threads_of(threads);
  options.sync = sync;
  options.output.overwrite = overwrite;
  Expected<QuantizePlan> planned = without_gil([&] { return plan_quantize(model, options); });
  const QuantizePlan plan = take(std::move(planned), input);
  const auto outputs = quantize_output_paths(plan, output, options);

  py::dict out;
  py::list tensors;
  for (const TensorPlan& p : plan.tensors) {
    py::dict t;
    t["name"] = decode_text(p.tensor->name);
    t["type"] = std::string(type_name(p.tensor->type));
    t["target"] = std::string(type_name(p.target));
    t["bytes"] = p.bytes;
    t["converted"] = p.convert;
    t["note"] = p.note;
    t["shard"] = p.shard;
    tensors.append(t);
  }
  const QuantizeSizes sizes = quantize_sizes(plan);
  py::dict s;
  s["elements"] = sizes.elements;
  s["source_bytes"] = sizes.source_bytes;
  s["output_bytes"] = sizes.output_bytes;
  s["converted"] = sizes.converted;
  s["copied"] = sizes.copied;
  s["source_bits_per_weight"] = sizes.source_bits_per_weight();
  s["output_bits_per_weight"] = sizes.output_bits_per_weight();
  py::list paths;
  for (const auto& p : outputs) paths.append(path_string(p));
  const FileTypeInfo* info = find_file_type(plan.file_type);
  out["file_type"] = plan.file_type;
  out["file_type_name"] = info ? std::string(file_type_preset_name(*info)) : std::string();
  out["tensors"] = tensors;
  out["sizes"] = s;
  out["tensor_bytes"] = plan.tensor_bytes;
  out["outputs"] = paths;
  out["importance_entries"] = options.importance ? py::object(py::int_(importance.entries.size())) : py::object(py::none());
  if (dry_run) return out;

  Run run(std::move(progress), std::move(cancel));
  use_run(options, run);
  Expected<void> written = without_gil([&] { return quantize_model(model, output, options); });
  run.finish(written, output);
  return out;
}

// ---- convert ---------------------------------------------------------------------------------

py::dict convert_verb(const std::string& model_dir, const std::string& output, const std::string& outtype, bool tokenizer,
                      int threads, py::object progress, py::object cancel, bool dry_run, bool overwrite, bool sync) {
  const auto type = parse_tensor_type(outtype);
  if (!type || !convert_accepts_out_type(*type)) {
    raise_invalid("'" + outtype + "' is not an output type (f32, f16, bf16, q8_0, or a type ggufkit quantizes without "
                  "an importance matrix: q4_0, q4_K, q6_K...)");
  }
  ConvertOptions options;
  options.out_type = *type;
  options.tokenizer = tokenizer;
  options.threads = threads_of(threads);
  options.sync = sync;
  options.output.overwrite = overwrite;
  Expected<ConvertPlan> planned = without_gil([&] { return plan_convert(model_dir, options); });
  const ConvertPlan plan = take(std::move(planned), model_dir);

  py::dict out;
  out["hf_architecture"] = plan.hf_architecture;
  out["architecture"] = plan.architecture;
  out["file_type"] = plan.file_type;
  out["parameter_count"] = plan.parameter_count;
  out["tensor_bytes"] = plan.tensor_bytes;
  py::list keys;
  py::dict metadata;
  for (const auto& [key, value] : plan.metadata) {
    keys.append(decode_text(key));
    metadata[decode_text(key)] = value_to_python_nested(value.view());
  }
  out["metadata_keys"] = keys;
  py::list tensors;
  for (const ConvertTensorPlan& t : plan.tensors) {
    py::dict d;
    d["hf_name"] = decode_text(t.hf_name);
    d["name"] = decode_text(t.gguf_name);
    d["shape"] = t.shape;
    d["source_dtype"] = t.source ? std::string(safetensors_dtype_name(t.source->dtype)) : std::string("generated");
    d["type"] = std::string(type_name(t.type));
    d["transform"] = std::string(convert_transform_name(t.transform));
    d["bytes"] = t.bytes;
    d["note"] = t.note;
    tensors.append(d);
  }
  out["tensors"] = tensors;
  out["skipped"] = plan.skipped;
  out["metadata"] = metadata;
  if (dry_run) return out;

  Run run(std::move(progress), std::move(cancel));
  use_run(options, run);
  Expected<void> written = without_gil([&] { return write_converted(plan, output, options); });
  run.finish(written, output);
  return out;
}

// ---- metadata edits --------------------------------------------------------------------------

// The value for KEY (cmd_set.cpp's value_for): the type given, else the existing key's, else
// `new_type` (Python's own type of the value), else inferred from the text as the CLI does.
Expected<MetadataValue> value_for(const GgufFile& file, const std::string& key, const std::string& text, bool is_json,
                                  std::optional<ValueType> type, std::optional<ValueType> new_type) {
  const KeyValue* kv = file.find(key);
  if (is_json) return parse_json_value(text, type, kv ? &kv->value : nullptr);
  if (type) return parse_scalar_value(text, *type);
  if (kv) {
    if (kv->value.type() == ValueType::Array) {
      return make_error(ErrorCode::invalid_argument, kv->offset, key, "the key holds an array: give the new value as a list");
    }
    return parse_scalar_value(text, kv->value.type());
  }
  return parse_scalar_value(text, new_type ? *new_type : infer_value_type(key, text));
}

std::optional<ValueType> value_type_option(const std::string& name) {
  if (name.empty()) return std::nullopt;
  const auto t = parse_value_type(name);
  if (!t || *t == ValueType::Array) {
    raise_invalid("unknown type '" + name + "' (uint8, int8, uint16, int16, uint32, int32, uint64, int64, float32, "
                  "float64, bool, string; for lists the element type)");
  }
  return t;
}

// What gguf check finds in the edited header that it did not find before (edit_common.cpp).
std::vector<Finding> introduced_problems(const EditPlan& plan) {
  if (plan.mode == EditMode::unchanged || plan.header.empty()) return {};
  const auto key = [](const Finding& f) { return f.code + "\n" + f.subject + "\n" + f.message; };
  std::set<std::string> before;
  for (const Finding& f : check_bytes(plan.original_header).findings) before.insert(key(f));
  std::vector<Finding> out;
  for (Finding& f : check_bytes(plan.header).findings) {
    if (f.severity != Severity::info && !before.contains(key(f))) out.push_back(std::move(f));
  }
  return out;
}

// `ops`: ("set", key, text, is_json, type name or "", new key's type name or ""), ("remove", key),
// ("rename", old, new), applied in order.
py::dict edit_verb(const std::string& path, const py::list& ops, std::optional<std::string> output, bool dry_run,
                   bool rewrite, bool overwrite, bool sync, bool strict, bool allow_new, py::object progress,
                   py::object cancel) {
  std::optional<Run> running;  // progress and cancellation from the wait for the lock to the write
  std::optional<EditLock> lock;
  if (!dry_run) {
    running.emplace(std::move(progress), std::move(cancel));
    // Waiting for another edit's lock: Ctrl-C (KeyboardInterrupt) or `cancel` ends the wait, and
    // nothing is applied.
    const auto stop = [&running] {
      running->poll();
      return running->flag()->load();
    };
    Expected<EditLock> acquired = without_gil([&] { return EditLock::acquire(path, stop); });
    if (!acquired) running->finish(acquired.error(), path);
    lock.emplace(std::move(*acquired));
  }
  Expected<GgufFile> opened = without_gil([&] { return GgufFile::open(path); });
  const GgufFile file = take(std::move(opened), path);
  const std::string arch(ModelMetadata(file).architecture().value_or(""));

  std::vector<MetadataChange> changes;
  for (const py::handle h : ops) {
    const auto op = h.cast<py::tuple>();
    const auto kind = op[0].cast<std::string>();
    if (kind == "set") {
      const std::string key = utf8(op[1]);
      if (!allow_new && file.find(key) == nullptr) {  // cmd_set.cpp's refuse_unknown_key
        const std::string_view ns = known_key_namespace(key, arch);
        if (!ns.empty() && !is_known_key(key, arch)) {
          const auto near = nearest_known_key(key, arch);
          raise_invalid(key + " is not a key llama.cpp or gguf-py knows in " + std::string(ns) + ".*" +
                            did_you_mean(near) +
                            "; pass new=True to add it anyway",
                        path, key);
        }
      }
      auto value = value_for(file, key, utf8(op[2]), op[3].cast<bool>(),
                             value_type_option(op[4].cast<std::string>()), value_type_option(op[5].cast<std::string>()));
      if (!value) {
        Error e = std::move(value).error();
        e.subject = key;
        raise_error(e, path);
      }
      changes.push_back(MetadataChange::set(key, std::move(*value)));
    } else if (kind == "remove") {
      changes.push_back(MetadataChange::remove(utf8(op[1])));
    } else if (kind == "rename") {
      changes.push_back(MetadataChange::rename(utf8(op[1]), utf8(op[2])));
    } else {
      throw py::value_error("unknown edit " + kind);
    }
  }
  std::error_code ec;
  const bool to_other = output && !std::filesystem::equivalent(path, *output, ec);
  EditOptions options;
  options.force_rewrite = rewrite || to_other;
  const EditPlan plan = take(plan_metadata_edit(file, changes, options), path);
  const auto problems = introduced_problems(plan);
  if (strict && !problems.empty()) {
    raise_invalid("strict: after this edit, gguf check finds: " + problems.front().describe() + "; nothing written", path,
                  problems.front().subject);
  }
  const std::string destination = to_other ? *output : path;

  py::dict out;
  py::list listed;
  for (const auto& c : plan.changes) {
    py::dict d;
    d["key"] = decode_text(c.key);
    d["renamed_from"] = c.renamed_from ? decode_text(*c.renamed_from) : py::object(py::none());
    d["before"] = c.before ? value_to_python_nested(c.before->view()) : py::object(py::none());
    d["before_type"] = c.before ? py::object(py::str(type_text(c.before->view()))) : py::object(py::none());
    d["after"] = c.after ? value_to_python_nested(c.after->view()) : py::object(py::none());
    d["after_type"] = c.after ? py::object(py::str(type_text(c.after->view()))) : py::object(py::none());
    listed.append(d);
  }
  py::list found;
  for (const Finding& f : problems) found.append(finding_tuple(f));
  out["changes"] = listed;
  std::string mode(edit_mode_name(plan.mode));  // "in place" as in_place, the enumerator's name
  std::replace(mode.begin(), mode.end(), ' ', '_');
  out["mode"] = to_other ? std::string("new_file") : mode;
  out["reason"] = plan.reason;
  out["output"] = destination;
  out["problems"] = found;
  out["written"] = !dry_run && (to_other || plan.mode != EditMode::unchanged);
  if (dry_run) return out;

  Run& run = *running;
  // A signal or cancel that came after the lock: nothing applied (an in-place write, once
  // started, always completes).
  run.poll();
  if (run.flag()->load()) {
    run.finish(make_error(ErrorCode::cancelled, std::nullopt, {}, "the operation was cancelled: nothing changed"), path);
  }
  ApplyOptions apply;
  apply.sync = sync;
  apply.output.overwrite = overwrite;
  apply.cancel = run.flag();  // a rewrite stops; an in-place write is one short write and always completes
  apply.progress = [&run](uint64_t done, uint64_t total) { run.report(done, total); };
  Expected<void> written = without_gil([&] { return apply_metadata_edit(file, path, plan, destination, apply); });
  run.finish(written, destination);
  return out;
}

// ---- hash ------------------------------------------------------------------------------------

py::list entries_list(const std::vector<ManifestEntry>& entries) {
  py::list out;
  for (const ManifestEntry& e : entries) {
    py::dict d;
    d["name"] = decode_text(e.name);
    d["bytes"] = e.bytes;
    d["digest"] = e.digest;
    out.append(d);
  }
  return out;
}

py::dict hash_verb(const std::string& path, const std::string& algorithm, bool per_tensor, int threads,
                   py::object progress, py::object cancel) {
  const auto a = parse_digest_algorithm(algorithm);
  if (!a || *a == DigestAlgorithm::uuid) raise_invalid("unknown algorithm '" + algorithm + "' (xxh64, sha1 or sha256)");
  Expected<SplitModel> opened = without_gil([&] { return SplitModel::open(path); });
  const SplitModel model = take(std::move(opened), path);
  Run run(std::move(progress), std::move(cancel));
  const HashProgress report = [&run](uint64_t done, uint64_t total) { run.report(done, total); };
  Manifest manifest;
  // hash_model stops between 16 MiB slices once the flag is set; its manifest is then incomplete.
  if (!run.flag()->load()) {
    py::gil_scoped_release release;
    manifest = hash_model(model, *a, threads_of(threads), report, run.flag());
  }
  run.finish_cancellable(path);
  if (!per_tensor) manifest.tensors.clear();
  py::dict out;
  out["algorithm"] = std::string(digest_algorithm_name(manifest.algorithm));
  out["files"] = entries_list(manifest.files);
  out["tensors"] = entries_list(manifest.tensors);
  out["manifest"] = format_manifest(manifest);
  return out;
}

// ---- split and merge -------------------------------------------------------------------------

py::dict split_verb(const std::string& input, const std::string& prefix, py::object max_size, uint64_t max_tensors,
                    bool dry_run, py::object progress, py::object cancel, bool overwrite, bool sync) {
  SplitLimits limits;
  if (!max_size.is_none()) {
    if (py::isinstance<py::str>(max_size)) {
      limits.max_bytes = take(parse_size(max_size.cast<std::string>()));
    } else {
      const auto bytes = max_size.cast<int64_t>();
      if (bytes <= 0) raise_invalid("max_size must be positive");
      limits.max_bytes = static_cast<uint64_t>(bytes);
    }
  } else if (max_tensors > 0) {
    limits.max_tensors = max_tensors;
  } else {
    raise_invalid("give max_size (bytes, or text such as \"2G\") or max_tensors (>= 1)");
  }
  Expected<GgufFile> opened = without_gil([&] { return GgufFile::open(input); });
  const GgufFile file = take(std::move(opened), input);
  if (const auto count = file.get(keys::kSplitCount); count && count->as_uint().value_or(0) > 1) {
    raise_invalid("a shard of a split model; merge it first", input);
  }
  const SplitPlan plan = take(plan_split(file, prefix, limits), input);

  py::dict out;
  out["input"] = input;
  py::list shards;
  for (const ShardPlan& s : plan.shards) {
    py::dict d;
    d["path"] = s.path;
    d["tensors"] = s.tensor_count;
    d["tensor_bytes"] = s.tensor_bytes;
    d["file_bytes"] = s.file_bytes;
    if (s.tensor_count) {
      d["first_tensor"] = decode_text(file.tensors()[s.first_tensor].name);
      d["last_tensor"] = decode_text(file.tensors()[s.first_tensor + s.tensor_count - 1].name);
    } else {
      d["first_tensor"] = py::none();
      d["last_tensor"] = py::none();
    }
    shards.append(d);
  }
  out["shards"] = shards;
  out["tensor_count"] = file.tensors().size();
  out["total_file_bytes"] = plan.total_file_bytes();
  if (dry_run) return out;

  Run run(std::move(progress), std::move(cancel));
  SplitWriteOptions options;
  options.sync = sync;
  options.input_path = input;
  options.output.overwrite = overwrite;
  options.cancel = run.flag();
  options.progress = [&run](size_t done, size_t total, const std::string&) { run.report(done, total); };
  Expected<void> written = without_gil([&] { return write_split(file, plan, options); });
  run.finish(written, input);
  return out;
}

py::dict merge_verb(const std::string& first, const std::string& output, bool dry_run, py::object progress,
                    py::object cancel, bool overwrite, bool sync) {
  Expected<SplitModel> opened = without_gil([&] { return SplitModel::open(first); });
  const SplitModel model = take(std::move(opened), first);
  if (!model.metadata_file().find(keys::kSplitCount)) raise_invalid("not a split model (it has no split.count)", first);
  // The output policy's checks of a shard (or a directory) as the output, before anything else, the
  // dry run included, as the CLI makes them (write_merged makes them again with `overwrite`).
  check(AtomicFile::check(output, {.overwrite = true, .inputs = {model.paths().begin(), model.paths().end()}}), output);
  GgufBuilder builder = take(merge_builder(model), first);
  py::dict out;
  py::list shards;
  for (size_t i = 0; i < model.shards().size(); ++i) {
    py::dict d;
    d["path"] = path_string(model.paths()[i]);
    d["tensors"] = model.shards()[i].tensors().size();
    d["file_bytes"] = model.shards()[i].file_size();
    shards.append(d);
  }
  out["shards"] = shards;
  out["output"] = output;
  out["tensor_count"] = model.tensors().size();
  out["file_bytes"] = builder.file_bytes();
  if (dry_run) return out;

  Run run(std::move(progress), std::move(cancel));
  WriteOptions options;
  options.sync = sync;
  options.output.overwrite = overwrite;
  options.output.inputs.assign(model.paths().begin(), model.paths().end());
  options.cancel = run.flag();
  options.progress = [&run](size_t done, size_t total) { run.report(done, total); };
  options.tensor_progress = [&run](size_t, uint64_t, uint64_t) { run.poll(); };
  Expected<void> written = without_gil([&] { return write_merged(model, output, options); });
  run.finish(written, output);
  return out;
}

}  // namespace

void register_verbs(py::module_& m) {
  m.def("check", &check_verb, py::arg("path"), py::arg("base") = py::none(),
        "gguf check: (kind, complete, findings as (severity, code, subject, offset, file, message)).");
  m.def("estimate", &estimate_verb, py::arg("path"), py::arg("ctx_size"), py::arg("batch_size"), py::arg("ubatch_size"),
        py::arg("parallel"), py::arg("kv_unified"), py::arg("swa_full"), py::arg("cache_type_k"), py::arg("cache_type_v"),
        py::arg("flash_attn"), py::arg("assume_dense"), "gguf estimate: its JSON object as a dict.");
  m.def("quantize_model", &quantize_verb, py::arg("input"), py::arg("output"), py::arg("type"), py::arg("imatrix"),
        py::arg("threads"), py::arg("progress"), py::arg("cancel"), py::arg("dry_run"), py::arg("pure"),
        py::arg("output_tensor_type"), py::arg("token_embedding_type"), py::arg("leave_output_tensor"),
        py::arg("tensor_types"), py::arg("override_kv"), py::arg("allow_requantize"), py::arg("keep_split"),
        py::arg("include_weights"), py::arg("exclude_weights"), py::arg("overwrite"), py::arg("sync"),
        "gguf quantize: the plan, and unless dry_run the output written.");
  m.def("convert", &convert_verb, py::arg("model_dir"), py::arg("output"), py::arg("outtype"), py::arg("tokenizer"),
        py::arg("threads"), py::arg("progress"), py::arg("cancel"), py::arg("dry_run"), py::arg("overwrite"),
        py::arg("sync"), "gguf convert: the plan, and unless dry_run the output written.");
  m.def("edit", &edit_verb, py::arg("path"), py::arg("ops"), py::arg("output"), py::arg("dry_run"), py::arg("rewrite"),
        py::arg("overwrite"), py::arg("sync"), py::arg("strict"), py::arg("allow_new"), py::arg("progress"), py::arg("cancel"),
        "gguf set / rm / rename: the changes, and unless dry_run the edit written.");
  m.def("hash", &hash_verb, py::arg("path"), py::arg("algorithm"), py::arg("per_tensor"), py::arg("threads"),
        py::arg("progress"), py::arg("cancel"), "gguf hash: the manifest.");
  m.def("split", &split_verb, py::arg("input"), py::arg("prefix"), py::arg("max_size"), py::arg("max_tensors"),
        py::arg("dry_run"), py::arg("progress"), py::arg("cancel"), py::arg("overwrite"), py::arg("sync"),
        "gguf split: the plan, and unless dry_run the shards written.");
  m.def("merge", &merge_verb, py::arg("first_shard"), py::arg("output"), py::arg("dry_run"), py::arg("progress"),
        py::arg("cancel"), py::arg("overwrite"), py::arg("sync"), "gguf merge: the shards and the output written.");
}

}  // namespace ggufkit::python
