// estimate-oracle: llama.cpp's memory figures for the grid of tests/estimate (model shapes x
// context parameters), from the oracle's libllama with no_alloc. scripts/gen-estimate-grid.sh runs
// it to regenerate tests/estimate/data/oracle_grid.json, which estimate_grid_test checks every
// estimate against without the oracle.
//
//   estimate-oracle --grid OUT.json [MODEL...]   the whole grid (or the named models')
//   estimate-oracle --time MODEL                 one default context, with the time it took
#include "memory_oracle.h"
#include "model_fixtures.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

namespace {

using ggufkit::test::ModelShape;
using ggufkit::test::OracleContext;

constexpr int kF16 = 1, kQ8_0 = 8, kQ4_0 = 2;

std::string type_name(int type) { return type == kF16 ? "f16" : type == kQ8_0 ? "q8_0" : "q4_0"; }

// The grid: context {4k, 32k, 128k} x sequences {1, 4} x unified KV x full SWA (sliding-window
// models only) x KV type {f16, q8_0, q4_0} (the quantized ones with flash attention only, which
// llama.cpp requires for a quantized V cache) x flash attention {on, off} x ubatch {512, 1024}.
std::vector<OracleContext> grid_for(const ModelShape& m) {
  std::vector<OracleContext> out;
  const bool swa = m.sliding_window != 0;
  for (uint32_t n_ctx : {4096u, 32768u, 131072u}) {
    for (uint32_t n_seq : {1u, 4u}) {
      for (bool unified : {false, true}) {
        for (bool swa_full : {false, true}) {
          if (swa_full && !swa) continue;
          for (int type : {kF16, kQ8_0, kQ4_0}) {
            for (int fa : {1, 0}) {
              if (fa == 0 && type != kF16) continue;
              for (uint32_t ubatch : {512u, 1024u}) {
                OracleContext c;
                c.n_ctx = n_ctx;
                c.n_seq = n_seq;
                c.kv_unified = unified;
                c.swa_full = swa_full;
                c.type_k = c.type_v = type;
                c.flash_attn = fa;
                c.n_ubatch = ubatch;
                out.push_back(c);
              }
            }
          }
        }
      }
    }
  }
  return out;
}

int fail(const std::string& message) {
  std::cerr << "estimate-oracle: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2 || (args[0] != "--grid" && args[0] != "--time")) {
    return fail("usage: estimate-oracle --grid OUT.json [MODEL...] | --time MODEL");
  }
  std::string why;
  const auto* oracle = ggufkit::test::MemoryOracle::get(&why);
  if (oracle == nullptr) return fail(why);
  const auto dir = std::filesystem::temp_directory_path() / ("estimate-oracle-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() { std::filesystem::remove_all(dir); }
  } cleanup{dir};

  if (args[0] == "--time") {
    const ModelShape& m = ggufkit::test::grid_model(args[1]);
    const auto path = dir / (m.name + ".gguf");
    ggufkit::test::write_sparse_model(m, path);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> errors;
    const auto r = oracle->measure(path.string(), {OracleContext{}}, &errors);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r.empty() || !r[0]) return fail(errors.empty() ? "no result" : errors[0]);
    std::printf("%s: model %llu context %llu compute %llu output %s MiB in %.3f s\n", m.name.c_str(),
                static_cast<unsigned long long>(r[0]->model), static_cast<unsigned long long>(r[0]->context),
                static_cast<unsigned long long>(r[0]->compute), r[0]->output_mib.c_str(), seconds);
    return 0;
  }

  std::vector<const ModelShape*> models;
  for (size_t i = 2; i < args.size(); ++i) models.push_back(&ggufkit::test::grid_model(args[i]));
  if (models.empty()) {
    for (const auto& m : ggufkit::test::grid_models()) models.push_back(&m);
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const ModelShape* m : models) {
    const auto path = dir / (m->name + ".gguf");
    ggufkit::test::write_sparse_model(*m, path);
    const auto contexts = grid_for(*m);
    std::vector<std::string> errors;
    const auto results = oracle->measure(path.string(), contexts, &errors);
    if (results.empty()) return fail(m->name + ": " + errors.at(0));
    for (size_t i = 0; i < contexts.size(); ++i) {
      const OracleContext& c = contexts[i];
      if (!results[i]) return fail(m->name + ": " + errors[i]);
      rows.push_back({{"model", m->name},
                      {"ctx_size", c.n_ctx},
                      {"parallel", c.n_seq},
                      {"kv_unified", c.kv_unified},
                      {"swa_full", c.swa_full},
                      {"cache_type_k", type_name(c.type_k)},
                      {"cache_type_v", type_name(c.type_v)},
                      {"flash_attn", c.flash_attn == 1 ? "on" : "off"},
                      {"batch_size", c.n_batch},
                      {"ubatch_size", c.n_ubatch},
                      {"model_bytes", results[i]->model},
                      {"context_bytes", results[i]->context},
                      {"compute_bytes", results[i]->compute},
                      {"output_mib", results[i]->output_mib}});
    }
    std::fprintf(stderr, "%s: %zu contexts\n", m->name.c_str(), contexts.size());
  }
  std::ofstream out(args[1]);
  // One row per line: the diff of a regenerated file reads row by row.
  out << "[\n";
  for (size_t i = 0; i < rows.size(); ++i) out << rows[i].dump() << (i + 1 < rows.size() ? ",\n" : "\n");
  out << "]\n";
  return out ? 0 : fail("cannot write " + args[1]);
}
