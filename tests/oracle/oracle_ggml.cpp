#include "oracle_ggml.h"

#include <dlfcn.h>

#include "oracle_library.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace {

constexpr const char* kLibName = "libggml-base.so";

// gguf_type ids 0..12.
constexpr std::array<const char*, 13> kValueTypeNames = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};
enum : int {
    kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6,
    kBool = 7, kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// ---- ggml log capture ---------------------------------------------------------------------------
// ggml's log callback is process-wide; while an oracle call runs, its output goes to g_log_sink.
std::string* g_log_sink = nullptr;

bool verbose() {
    static const bool v = [] {
        const char* e = std::getenv("GGUFKIT_ORACLE_VERBOSE");
        return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
    }();
    return v;
}

void log_callback(int /*level*/, const char* text, void* /*user_data*/) {
    if (text == nullptr) {
        return;
    }
    if (g_log_sink != nullptr) {
        g_log_sink->append(text);
    }
    if (verbose()) {
        std::fputs(text, stderr);
    }
}

class LogCapture {
public:
    explicit LogCapture(std::string* sink) : previous_(std::exchange(g_log_sink, sink)) {}
    ~LogCapture() { g_log_sink = previous_; }
    LogCapture(const LogCapture&) = delete;
    LogCapture& operator=(const LogCapture&) = delete;

private:
    std::string* previous_;
};

std::string trim_log(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
        s.pop_back();
    }
    for (char& c : s) {
        if (c == '\n') {
            c = ';';
        }
    }
    return s;
}

// ---- symbol resolution --------------------------------------------------------------------------
template <typename Fn>
bool resolve(void* handle, const char* name, Fn& out, std::string* missing) {
    void* sym = dlsym(handle, name);
    if (sym == nullptr) {
        if (missing != nullptr) {
            if (!missing->empty()) {
                missing->append(", ");
            }
            missing->append(name);
        }
        return false;
    }
    out = reinterpret_cast<Fn>(sym);
    return true;
}

// ---- JSON helpers -------------------------------------------------------------------------------
nlohmann::json float_json(double v) {
    if (std::isnan(v)) {
        return "nan";
    }
    if (std::isinf(v)) {
        return v > 0 ? "inf" : "-inf";
    }
    return v;
}

template <typename T>
T load_elem(const void* data, size_t i) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(data) + i * sizeof(T), sizeof(T));
    return v;
}

// Array elements of a fixed-size type, from the oracle's packed array data.
template <typename T, typename Conv>
nlohmann::json array_json(const void* data, size_t n, Conv conv) {
    nlohmann::json out = nlohmann::json::array();
    auto& arr = out.get_ref<nlohmann::json::array_t&>();
    arr.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        arr.emplace_back(conv(load_elem<T>(data, i)));
    }
    return out;
}

template <typename T>
nlohmann::json array_json(const void* data, size_t n) {
    return array_json<T>(data, n, [](T v) { return nlohmann::json(v); });
}

struct ContextCloser {
    const OracleGgml::Api* api;
    void operator()(OracleGgml::gguf_context* ctx) const {
        if (ctx != nullptr) {
            api->gguf_free(ctx);
        }
    }
};
using ContextPtr = std::unique_ptr<OracleGgml::gguf_context, ContextCloser>;

ContextPtr open_context(const OracleGgml::Api& api, const std::string& path) {
    OracleGgml::InitParams params{};
    params.no_alloc = true;
    params.ctx = nullptr;
    return ContextPtr(api.gguf_init_from_file(path.c_str(), params), ContextCloser{&api});
}

}  // namespace

// ---- OracleGgml ---------------------------------------------------------------------------------
std::unique_ptr<OracleGgml> OracleGgml::load(std::string* why_not) {
    void* handle = ggufkit::test::open_oracle_library(kLibName, {}, why_not);
    if (handle == nullptr) {
        return nullptr;
    }
    const std::string path = ggufkit::test::oracle_library_dir() + "/" + kLibName;

    std::unique_ptr<OracleGgml> o(new OracleGgml());
    o->library_path_ = path;
    Api& a = o->api_;
    std::string missing;
    bool ok = true;
    ok &= resolve(handle, "gguf_init_from_file", a.gguf_init_from_file, &missing);
    ok &= resolve(handle, "gguf_free", a.gguf_free, &missing);
    ok &= resolve(handle, "gguf_get_version", a.gguf_get_version, &missing);
    ok &= resolve(handle, "gguf_get_alignment", a.gguf_get_alignment, &missing);
    ok &= resolve(handle, "gguf_get_data_offset", a.gguf_get_data_offset, &missing);
    ok &= resolve(handle, "gguf_get_n_kv", a.gguf_get_n_kv, &missing);
    ok &= resolve(handle, "gguf_get_key", a.gguf_get_key, &missing);
    ok &= resolve(handle, "gguf_get_kv_type", a.gguf_get_kv_type, &missing);
    ok &= resolve(handle, "gguf_get_arr_type", a.gguf_get_arr_type, &missing);
    ok &= resolve(handle, "gguf_get_val_u8", a.gguf_get_val_u8, &missing);
    ok &= resolve(handle, "gguf_get_val_i8", a.gguf_get_val_i8, &missing);
    ok &= resolve(handle, "gguf_get_val_u16", a.gguf_get_val_u16, &missing);
    ok &= resolve(handle, "gguf_get_val_i16", a.gguf_get_val_i16, &missing);
    ok &= resolve(handle, "gguf_get_val_u32", a.gguf_get_val_u32, &missing);
    ok &= resolve(handle, "gguf_get_val_i32", a.gguf_get_val_i32, &missing);
    ok &= resolve(handle, "gguf_get_val_f32", a.gguf_get_val_f32, &missing);
    ok &= resolve(handle, "gguf_get_val_u64", a.gguf_get_val_u64, &missing);
    ok &= resolve(handle, "gguf_get_val_i64", a.gguf_get_val_i64, &missing);
    ok &= resolve(handle, "gguf_get_val_f64", a.gguf_get_val_f64, &missing);
    ok &= resolve(handle, "gguf_get_val_bool", a.gguf_get_val_bool, &missing);
    ok &= resolve(handle, "gguf_get_val_str", a.gguf_get_val_str, &missing);
    ok &= resolve(handle, "gguf_get_arr_n", a.gguf_get_arr_n, &missing);
    ok &= resolve(handle, "gguf_get_arr_data", a.gguf_get_arr_data, &missing);
    ok &= resolve(handle, "gguf_get_arr_str", a.gguf_get_arr_str, &missing);
    ok &= resolve(handle, "gguf_get_n_tensors", a.gguf_get_n_tensors, &missing);
    ok &= resolve(handle, "gguf_get_tensor_name", a.gguf_get_tensor_name, &missing);
    ok &= resolve(handle, "gguf_get_tensor_type", a.gguf_get_tensor_type, &missing);
    ok &= resolve(handle, "gguf_get_tensor_offset", a.gguf_get_tensor_offset, &missing);
    ok &= resolve(handle, "gguf_get_tensor_size", a.gguf_get_tensor_size, &missing);
    ok &= resolve(handle, "gguf_get_tensor_ne", a.gguf_get_tensor_ne, &missing);
    ok &= resolve(handle, "ggml_type_name", a.ggml_type_name, &missing);
    ok &= resolve(handle, "gguf_write_to_file", a.gguf_write_to_file, &missing);
    if (!ok) {
        if (why_not != nullptr) {
            *why_not = "the oracle " + path + " lacks the symbols: " + missing;
        }
        return nullptr;
    }
    // Optional: without it ggml logs to stderr, which is harmless.
    if (resolve(handle, "ggml_log_set", a.ggml_log_set, nullptr)) {
        a.ggml_log_set(&log_callback, nullptr);
    }
    return o;
}

bool OracleGgml::open_and_free(const std::string& path) const {
    LogCapture quiet(nullptr);
    gguf_context* ctx = api_.gguf_init_from_file(path.c_str(), InitParams{true, nullptr});
    if (ctx == nullptr) {
        return false;
    }
    api_.gguf_free(ctx);
    return true;
}

bool OracleGgml::accepts(const std::string& path, std::string* log) const {
    std::string captured;
    LogCapture capture(&captured);
    const bool ok = open_context(api_, path) != nullptr;
    if (log != nullptr) {
        *log = std::move(captured);
    }
    return ok;
}

// ---- free functions -----------------------------------------------------------------------------
std::string oracle_value_type_name(int gguf_type) {
    if (gguf_type >= 0 && static_cast<size_t>(gguf_type) < kValueTypeNames.size()) {
        return kValueTypeNames[static_cast<size_t>(gguf_type)];
    }
    return "type#" + std::to_string(gguf_type);
}

nlohmann::json oracle_dump_json(const OracleGgml& oracle, const std::string& path, std::string* error) {
    const OracleGgml::Api& a = oracle.api();
    std::string captured;
    LogCapture capture(&captured);

    ContextPtr owner = open_context(a, path);
    if (!owner) {
        if (error != nullptr) {
            *error = "llama.cpp's gguf_init_from_file rejected " + path;
            const std::string log = trim_log(captured);
            if (!log.empty()) {
                *error += ": " + log;
            }
        }
        return nullptr;
    }
    const OracleGgml::gguf_context* ctx = owner.get();

    auto fail = [&](const std::string& why) {
        if (error != nullptr) {
            *error = path + ": " + why;
        }
        return nlohmann::json();
    };

    nlohmann::json out = nlohmann::json::object();
    out["version"] = a.gguf_get_version(ctx);
    out["alignment"] = static_cast<uint64_t>(a.gguf_get_alignment(ctx));
    out["data_offset"] = static_cast<uint64_t>(a.gguf_get_data_offset(ctx));

    nlohmann::json metadata = nlohmann::json::array();
    const int64_t n_kv = a.gguf_get_n_kv(ctx);
    for (int64_t i = 0; i < n_kv; ++i) {
        nlohmann::json kv = nlohmann::json::object();
        const char* key = a.gguf_get_key(ctx, i);
        kv["key"] = std::string(key != nullptr ? key : "");
        const int type = a.gguf_get_kv_type(ctx, i);
        kv["type"] = oracle_value_type_name(type);
        switch (type) {
            case kU8: kv["value"] = a.gguf_get_val_u8(ctx, i); break;
            case kI8: kv["value"] = a.gguf_get_val_i8(ctx, i); break;
            case kU16: kv["value"] = a.gguf_get_val_u16(ctx, i); break;
            case kI16: kv["value"] = a.gguf_get_val_i16(ctx, i); break;
            case kU32: kv["value"] = a.gguf_get_val_u32(ctx, i); break;
            case kI32: kv["value"] = a.gguf_get_val_i32(ctx, i); break;
            case kF32: kv["value"] = float_json(static_cast<double>(a.gguf_get_val_f32(ctx, i))); break;
            case kBool: kv["value"] = a.gguf_get_val_bool(ctx, i); break;
            case kString: {
                const char* s = a.gguf_get_val_str(ctx, i);
                kv["value"] = std::string(s != nullptr ? s : "");
                break;
            }
            case kU64: kv["value"] = a.gguf_get_val_u64(ctx, i); break;
            case kI64: kv["value"] = a.gguf_get_val_i64(ctx, i); break;
            case kF64: kv["value"] = float_json(a.gguf_get_val_f64(ctx, i)); break;
            case kArray: {
                const int et = a.gguf_get_arr_type(ctx, i);
                kv["array_type"] = oracle_value_type_name(et);
                const size_t n = a.gguf_get_arr_n(ctx, i);
                if (et == kString) {
                    nlohmann::json values = nlohmann::json::array();
                    auto& arr = values.get_ref<nlohmann::json::array_t&>();
                    arr.reserve(n);
                    for (size_t j = 0; j < n; ++j) {
                        const char* s = a.gguf_get_arr_str(ctx, i, j);
                        arr.emplace_back(std::string(s != nullptr ? s : ""));
                    }
                    kv["value"] = std::move(values);
                    break;
                }
                const void* data = n > 0 ? a.gguf_get_arr_data(ctx, i) : nullptr;
                if (n > 0 && data == nullptr) {
                    return fail("gguf_get_arr_data returned null for key " + kv["key"].get<std::string>());
                }
                switch (et) {
                    case kU8: kv["value"] = array_json<uint8_t>(data, n); break;
                    case kI8: kv["value"] = array_json<int8_t>(data, n); break;
                    case kU16: kv["value"] = array_json<uint16_t>(data, n); break;
                    case kI16: kv["value"] = array_json<int16_t>(data, n); break;
                    case kU32: kv["value"] = array_json<uint32_t>(data, n); break;
                    case kI32: kv["value"] = array_json<int32_t>(data, n); break;
                    case kU64: kv["value"] = array_json<uint64_t>(data, n); break;
                    case kI64: kv["value"] = array_json<int64_t>(data, n); break;
                    case kF32:
                        kv["value"] = array_json<float>(
                            data, n, [](float v) { return float_json(static_cast<double>(v)); });
                        break;
                    case kF64: kv["value"] = array_json<double>(data, n, float_json); break;
                    case kBool:  // stored one byte per element
                        kv["value"] = array_json<uint8_t>(
                            data, n, [](uint8_t v) { return nlohmann::json(v != 0); });
                        break;
                    default:
                        return fail("key " + kv["key"].get<std::string>() + " has an array of unexpected type " +
                                    oracle_value_type_name(et));
                }
                break;
            }
            default:
                return fail("key " + kv["key"].get<std::string>() + " has unexpected type " +
                            oracle_value_type_name(type));
        }
        metadata.push_back(std::move(kv));
    }
    out["metadata"] = std::move(metadata);

    nlohmann::json tensors = nlohmann::json::array();
    const int64_t n_tensors = a.gguf_get_n_tensors(ctx);
    for (int64_t i = 0; i < n_tensors; ++i) {
        nlohmann::json t = nlohmann::json::object();
        const char* name = a.gguf_get_tensor_name(ctx, i);
        t["name"] = std::string(name != nullptr ? name : "");
        const char* type_name = a.ggml_type_name(a.gguf_get_tensor_type(ctx, i));
        t["type"] = std::string(type_name != nullptr ? type_name : "");
        const int64_t* ne = a.gguf_get_tensor_ne(ctx, i);
        nlohmann::json shape = nlohmann::json::array();
        for (int d = 0; d < 4; ++d) {
            shape.push_back(ne != nullptr ? ne[d] : int64_t{1});
        }
        t["shape"] = std::move(shape);
        t["offset"] = static_cast<uint64_t>(a.gguf_get_tensor_offset(ctx, i));
        t["size"] = static_cast<uint64_t>(a.gguf_get_tensor_size(ctx, i));
        tensors.push_back(std::move(t));
    }
    out["tensors"] = std::move(tensors);
    return out;
}

bool oracle_accepts(const std::string& path) {
    static std::once_flag once;
    static std::unique_ptr<OracleGgml> shared;
    static std::string why_not;
    std::call_once(once, [] { shared = OracleGgml::load(&why_not); });
    if (!shared) {
        throw std::runtime_error(why_not);
    }
    return shared->accepts(path);
}
