// The test oracle: llama.cpp's own GGUF reader (libggml-base.so from the npm package
// node-llama-cpp@3.21.1, installed by scripts/install-oracle.sh), loaded at run time with dlopen().
//
// Nothing from ggml's headers is included: the few C signatures used are declared in OracleGgml::Api.
// Where the library is looked for, first match wins:
//   1. the environment variable GGUFKIT_ORACLE_LIB_DIR (a directory holding libggml-base.so);
//   2. the compile definition GGUFKIT_ORACLE_LIB_DIR (a string literal, set by the build).
//
// The library stays loaded for the life of the process once load() has succeeded (ggml keeps
// global state, among it the log callback this wrapper installs); OracleGgml objects are cheap.
// ggml's log output is captured rather than printed: it becomes part of the error texts below.
// Set GGUFKIT_ORACLE_VERBOSE=1 to have it copied to stderr as well.
//
// Not thread-safe: ggml's log callback is process-wide; use the oracle from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

class OracleGgml {
public:
    // The C functions used, resolved from libggml-base.so. Enum parameters and results of ggml
    // (enum gguf_type, enum ggml_type, enum ggml_log_level) are plain ints in the C ABI.
    struct gguf_context;  // opaque
    struct InitParams {   // struct gguf_init_params
        bool no_alloc;
        void** ctx;       // struct ggml_context **
    };
    using LogCallback = void (*)(int level, const char* text, void* user_data);

    struct Api {
        gguf_context* (*gguf_init_from_file)(const char* fname, InitParams params) = nullptr;
        void (*gguf_free)(gguf_context* ctx) = nullptr;
        uint32_t (*gguf_get_version)(const gguf_context* ctx) = nullptr;
        size_t (*gguf_get_alignment)(const gguf_context* ctx) = nullptr;
        size_t (*gguf_get_data_offset)(const gguf_context* ctx) = nullptr;
        int64_t (*gguf_get_n_kv)(const gguf_context* ctx) = nullptr;
        const char* (*gguf_get_key)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int (*gguf_get_kv_type)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int (*gguf_get_arr_type)(const gguf_context* ctx, int64_t key_id) = nullptr;
        uint8_t (*gguf_get_val_u8)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int8_t (*gguf_get_val_i8)(const gguf_context* ctx, int64_t key_id) = nullptr;
        uint16_t (*gguf_get_val_u16)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int16_t (*gguf_get_val_i16)(const gguf_context* ctx, int64_t key_id) = nullptr;
        uint32_t (*gguf_get_val_u32)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int32_t (*gguf_get_val_i32)(const gguf_context* ctx, int64_t key_id) = nullptr;
        float (*gguf_get_val_f32)(const gguf_context* ctx, int64_t key_id) = nullptr;
        uint64_t (*gguf_get_val_u64)(const gguf_context* ctx, int64_t key_id) = nullptr;
        int64_t (*gguf_get_val_i64)(const gguf_context* ctx, int64_t key_id) = nullptr;
        double (*gguf_get_val_f64)(const gguf_context* ctx, int64_t key_id) = nullptr;
        bool (*gguf_get_val_bool)(const gguf_context* ctx, int64_t key_id) = nullptr;
        const char* (*gguf_get_val_str)(const gguf_context* ctx, int64_t key_id) = nullptr;
        size_t (*gguf_get_arr_n)(const gguf_context* ctx, int64_t key_id) = nullptr;
        const void* (*gguf_get_arr_data)(const gguf_context* ctx, int64_t key_id) = nullptr;
        const char* (*gguf_get_arr_str)(const gguf_context* ctx, int64_t key_id, size_t i) = nullptr;
        int64_t (*gguf_get_n_tensors)(const gguf_context* ctx) = nullptr;
        const char* (*gguf_get_tensor_name)(const gguf_context* ctx, int64_t tensor_id) = nullptr;
        int (*gguf_get_tensor_type)(const gguf_context* ctx, int64_t tensor_id) = nullptr;
        size_t (*gguf_get_tensor_offset)(const gguf_context* ctx, int64_t tensor_id) = nullptr;
        size_t (*gguf_get_tensor_size)(const gguf_context* ctx, int64_t tensor_id) = nullptr;
        const int64_t* (*gguf_get_tensor_ne)(const gguf_context* ctx, int64_t tensor_id) = nullptr;
        const char* (*ggml_type_name)(int type) = nullptr;
        // gguf_write_to_file(ctx, fname, only_meta): llama.cpp's own writer.
        bool (*gguf_write_to_file)(const gguf_context* ctx, const char* fname, bool only_meta) = nullptr;
        // Optional (null when the library does not export it): silences / captures ggml's log.
        void (*ggml_log_set)(LogCallback callback, void* user_data) = nullptr;
    };

    // Loads libggml-base.so from the default directory (see above). On failure returns null and,
    // when why_not is not null, stores a one-line explanation there (suitable for a test skip).
    static std::unique_ptr<OracleGgml> load(std::string* why_not);

    const Api& api() const { return api_; }
    const std::string& library_path() const { return library_path_; }

    // One gguf_init_from_file(no_alloc=true, ctx=nullptr) + gguf_free cycle: what the benchmark
    // times. Returns whether gguf_init_from_file succeeded.
    bool open_and_free(const std::string& path) const;

    // Whether gguf_init_from_file accepts the file. When log is not null, ggml's log output of
    // the attempt (its reason for rejecting the file, if any) is stored there.
    bool accepts(const std::string& path, std::string* log = nullptr) const;

private:
    OracleGgml() = default;
    Api api_{};
    std::string library_path_;
};

// Opens the file with the oracle and describes it as JSON:
//   {"version":3,"alignment":32,"data_offset":N,
//    "metadata":[{"key":K,"type":"string","value":V},
//                {"key":K,"type":"array","array_type":"float32","value":[...]}, ...],
//    "tensors":[{"name":N,"type":"q4_K","shape":[ne0,ne1,ne2,ne3],"offset":O,"size":S}, ...]}
// Metadata and tensors are in file order. Value type names: uint8 int8 uint16 int16 uint32 int32
// float32 bool string array uint64 int64 float64. Tensor type names as ggml_type_name returns them.
// "shape" always has the 4 entries of gguf_get_tensor_ne (the oracle does not expose the stored
// dimension count). "offset" is relative to the data section. Finite floats are JSON numbers
// (float32 widened to double); non-finite ones are the strings "nan", "inf", "-inf".
// Strings come from ggml as C strings: a string with an embedded NUL byte is cut at that byte.
// On failure returns a null json value and, when error is not null, stores the reason there.
nlohmann::json oracle_dump_json(const OracleGgml& oracle, const std::string& path, std::string* error);

// Whether llama.cpp's gguf_init_from_file accepts the file, using a process-wide oracle loaded on
// first use. Throws std::runtime_error when the oracle cannot be loaded (check with
// OracleGgml::load() first to skip instead).
bool oracle_accepts(const std::string& path);

// Name of a gguf_type id ("uint8" ... "float64"), or "type#N" for an unknown id.
std::string oracle_value_type_name(int gguf_type);
