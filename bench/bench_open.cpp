// Opening vocabulary files: ggufkit against llama.cpp's own GGUF reader.
//
//   bench_open [--benchmark_... flags] [file.gguf ...]
//
// Without files, every ../shared/corpus/vocab/*.gguf is used. For each file it times
//   ggufkit:   GgufFile::open + an "index" pass that visits every metadata entry and every string of
//              every string array (comparable to llama.cpp, which materialises each string);
//   llama.cpp: gguf_init_from_file(no_alloc=true, ctx=nullptr) + gguf_free, through the oracle
//              library (tests/oracle/oracle_ggml.h; see scripts/install-oracle.sh).
// and measures the peak memory of one open+index in a forked child (its ru_maxrss minus that of a
// child that only loads the oracle library). It ends with one table of times, ratios and memory.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <benchmark/benchmark.h>

#include "ggufkit/reader.h"
#include "oracle_ggml.h"

namespace fs = std::filesystem;

namespace {

// ---- the measured work --------------------------------------------------------------------------

// Visits every metadata entry, and every string of string arrays; returns a checksum so that the
// work cannot be optimised away. std::nullopt when the file does not open.
std::optional<uint64_t> ggufkit_open_index(const fs::path& path, std::string* error = nullptr) {
    auto file = ggufkit::GgufFile::open(path);
    if (!file) {
        if (error != nullptr) {
            *error = file.error().describe();
        }
        return std::nullopt;
    }
    uint64_t sum = 0;
    for (const ggufkit::KeyValue& kv : file.value().metadata()) {
        sum += kv.key.size();
        if (kv.value.type() == ggufkit::ValueType::String) {
            if (auto s = kv.value.as_string()) {
                sum += s->size();
            }
        } else if (auto array = kv.value.as_array()) {
            sum += array->size();
            if (array->element_type() == ggufkit::ValueType::String) {
                for (std::string_view s : array->strings()) {
                    sum += s.size();
                }
            }
        }
    }
    for (const ggufkit::TensorInfo& tensor : file.value().tensors()) {
        sum += tensor.name.size();
    }
    return sum;
}

// ---- results ------------------------------------------------------------------------------------

struct FileCase {
    fs::path path;
    std::string label;  // file name without ".gguf"
    uint64_t size = 0;
};

// Seconds per iteration of each repetition (real and CPU time), by benchmark name; the failed
// benchmarks with the reason.
struct Timings {
    std::vector<double> real;
    std::vector<double> cpu;
};
std::map<std::string, Timings> g_seconds;
std::map<std::string, std::string> g_failed;

// The console output of Google Benchmark, plus a copy of the timings for the final table.
class RecordingReporter : public benchmark::ConsoleReporter {
public:
    using benchmark::ConsoleReporter::ConsoleReporter;

    void ReportRuns(const std::vector<Run>& reports) override {
        benchmark::ConsoleReporter::ReportRuns(reports);
        for (const Run& run : reports) {
            if (run.run_type != Run::RT_Iteration || run.iterations <= 0) {
                continue;
            }
            Timings& t = g_seconds[run.run_name.function_name];
            t.real.push_back(run.real_accumulated_time / static_cast<double>(run.iterations));
            t.cpu.push_back(run.cpu_accumulated_time / static_cast<double>(run.iterations));
        }
    }
};

std::optional<double> median_seconds(const std::string& name, bool cpu = false) {
    if (g_failed.count(name) != 0) {
        return std::nullopt;
    }
    auto it = g_seconds.find(name);
    if (it == g_seconds.end()) {
        return std::nullopt;
    }
    std::vector<double> v = cpu ? it->second.cpu : it->second.real;
    if (v.empty()) {
        return std::nullopt;
    }
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- peak memory in a forked child --------------------------------------------------------------

enum class ChildWork { baseline, ggufkit, llama_cpp };

// Runs `child` in a forked process (it must end with _exit) and returns what wait4 reports of it;
// std::nullopt when the fork fails or the child does not exit with 0.
std::optional<struct rusage> run_child(const std::function<void()>& child) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
        return std::nullopt;
    }
    if (pid == 0) {
        child();
        _exit(127);
    }
    int status = 0;
    struct rusage usage {};
    if (wait4(pid, &status, 0, &usage) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return std::nullopt;
    }
    return usage;
}

// ru_maxrss (bytes) of a forked child that loads the oracle library and then does the work once.
// std::nullopt when the child fails.
std::optional<int64_t> child_maxrss(ChildWork work, const fs::path& path) {
    const auto usage = run_child([&] {
        std::unique_ptr<OracleGgml> oracle = OracleGgml::load(nullptr);
        bool ok = true;
        switch (work) {
            case ChildWork::baseline: break;
            case ChildWork::ggufkit: ok = ggufkit_open_index(path).has_value(); break;
            case ChildWork::llama_cpp: ok = oracle != nullptr && oracle->open_and_free(path.string()); break;
        }
        _exit(ok ? 0 : 1);
    });
    if (!usage) {
        return std::nullopt;
    }
    return static_cast<int64_t>(usage->ru_maxrss) * 1024;  // Linux reports KiB
}

// The smallest of a few runs: the peak is deterministic up to allocator and page-fault noise.
std::optional<int64_t> min_child_maxrss(ChildWork work, const fs::path& path, int runs = 3) {
    std::optional<int64_t> best;
    for (int i = 0; i < runs; ++i) {
        auto r = child_maxrss(work, path);
        if (!r) {
            return std::nullopt;
        }
        best = best ? std::min(*best, *r) : *r;
    }
    return best;
}

// ---- the CLI as a user runs it -------------------------------------------------------------------

// CPU time (user + system, from wait4) of one whole `gguf info FILE` process, stdout to /dev/null:
// the median of `runs`. Start-up (dynamic linking, option parsing) counts, as it does for a user.
std::optional<double> info_process_cpu_seconds(const fs::path& path, int runs = 21) {
    std::vector<double> cpu;
    for (int i = 0; i < runs; ++i) {
        const auto usage = run_child([&] {
            const int null = open("/dev/null", O_WRONLY);
            dup2(null, STDOUT_FILENO);
            execl(GGUFKIT_CLI, GGUFKIT_CLI, "info", path.c_str(), static_cast<char*>(nullptr));
        });
        if (!usage) {
            return std::nullopt;
        }
        const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
        cpu.push_back(seconds(usage->ru_utime) + seconds(usage->ru_stime));
    }
    std::sort(cpu.begin(), cpu.end());
    return cpu[cpu.size() / 2];
}

struct MemoryFigures {
    std::optional<int64_t> ggufkit;    // bytes above the baseline
    std::optional<int64_t> llama_cpp;
};

// ---- formatting ---------------------------------------------------------------------------------

std::string format_time(std::optional<double> seconds) {
    if (!seconds) {
        return "n/a";
    }
    char buf[32];
    const double s = *seconds;
    if (s >= 1.0) {
        std::snprintf(buf, sizeof buf, "%.2f s", s);
    } else if (s >= 1e-3) {
        std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
    } else {
        std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
    }
    return buf;
}

std::string format_bytes(double bytes) {
    char buf[32];
    if (bytes >= 1024.0 * 1024.0) {
        std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
    } else if (bytes >= 1024.0) {
        std::snprintf(buf, sizeof buf, "%.0f KiB", bytes / 1024.0);
    } else {
        std::snprintf(buf, sizeof buf, "%.0f B", bytes);
    }
    return buf;
}

std::string format_memory(std::optional<int64_t> bytes, uint64_t file_size) {
    if (!bytes) {
        return "n/a";
    }
    char buf[64];
    const double b = static_cast<double>(std::max<int64_t>(*bytes, 0));
    std::snprintf(buf, sizeof buf, "%s (%.2fx)", format_bytes(b).c_str(),
                  file_size > 0 ? b / static_cast<double>(file_size) : 0.0);
    return buf;
}

std::string format_ratio(std::optional<double> ours, std::optional<double> theirs) {
    if (!ours || !theirs || *ours <= 0) {
        return "n/a";
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fx", *theirs / *ours);
    return buf;
}

std::string fmt_fraction(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3fx", x);
    return buf;
}

void print_table(const std::vector<FileCase>& files, const std::vector<MemoryFigures>& memory) {
    std::printf("\nggufkit open+index vs llama.cpp gguf_init_from_file+gguf_free: median real time per open;\n"
                "ratio = llama.cpp time / ggufkit time (real time, and CPU time, which a busy machine\n"
                "disturbs less); peak = extra ru_maxrss of one open in a forked child, in parentheses\n"
                "as a multiple of the file size\n\n");
    std::printf("%-28s %10s %11s %11s %7s %9s %20s %20s\n", "file", "size", "ggufkit", "llama.cpp", "ratio",
                "cpu ratio", "ggufkit peak", "llama.cpp peak");
    std::printf("%s\n", std::string(28 + 10 + 11 + 11 + 7 + 9 + 20 + 20 + 7, '-').c_str());
    for (size_t i = 0; i < files.size(); ++i) {
        const FileCase& f = files[i];
        const std::string ours = "ggufkit/" + f.label;
        const std::string theirs = "llama.cpp/" + f.label;
        const auto ours_real = median_seconds(ours);
        const auto theirs_real = median_seconds(theirs);
        std::printf("%-28s %10s %11s %11s %7s %9s %20s %20s\n", f.label.c_str(),
                    format_bytes(static_cast<double>(f.size)).c_str(), format_time(ours_real).c_str(),
                    format_time(theirs_real).c_str(), format_ratio(ours_real, theirs_real).c_str(),
                    format_ratio(median_seconds(ours, true), median_seconds(theirs, true)).c_str(),
                    format_memory(memory[i].ggufkit, f.size).c_str(),
                    format_memory(memory[i].llama_cpp, f.size).c_str());
    }
    std::printf("\n`gguf info FILE` as a whole process (CPU time from wait4, median of 21 runs) against llama.cpp's\n"
                "gguf_init_from_file+gguf_free in process (median CPU time): info / llama.cpp, lower is better\n\n");
    std::printf("%-28s %12s %12s %9s\n", "file", "gguf info", "llama.cpp", "info/llama");
    std::printf("%s\n", std::string(28 + 12 + 12 + 9 + 3, '-').c_str());
    for (const FileCase& f : files) {
        const auto info = info_process_cpu_seconds(f.path);
        const auto theirs = median_seconds("llama.cpp/" + f.label, true);
        std::printf("%-28s %12s %12s %9s\n", f.label.c_str(), format_time(info).c_str(), format_time(theirs).c_str(),
                    info && theirs && *theirs > 0 ? fmt_fraction(*info / *theirs).c_str() : "-");
    }
    for (const auto& [name, why] : g_failed) {
        std::printf("failed: %s: %s\n", name.c_str(), why.c_str());
    }
}

std::vector<FileCase> default_files() {
    std::vector<FileCase> out;
#ifdef GGUFKIT_SHARED_DIR
    const fs::path dir = fs::path(GGUFKIT_SHARED_DIR) / "corpus" / "vocab";
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        if (e.is_regular_file() && e.path().extension() == ".gguf") {
            out.push_back({e.path(), {}, 0});
        }
    }
    std::sort(out.begin(), out.end(), [](const FileCase& a, const FileCase& b) { return a.path < b.path; });
#endif
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);

    std::vector<FileCase> files;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg.size() > 1 && arg[0] == '-') {
            std::fprintf(stderr, "bench_open: unknown option %s\nusage: %s [--benchmark_...] [file.gguf ...]\n",
                         argv[i], argv[0]);
            return 2;
        }
        files.push_back({fs::path(arg), {}, 0});
    }
    if (files.empty()) {
        files = default_files();
        if (files.empty()) {
#ifdef GGUFKIT_SHARED_DIR
            std::fprintf(stderr, "bench_open: no files given and no %s/corpus/vocab/*.gguf\n", GGUFKIT_SHARED_DIR);
#else
            std::fprintf(stderr, "bench_open: no files given\n");
#endif
            return 2;
        }
    }
    for (FileCase& f : files) {
        std::error_code ec;
        f.size = fs::file_size(f.path, ec);
        if (ec) {
            std::fprintf(stderr, "bench_open: %s: %s\n", f.path.c_str(), ec.message().c_str());
            return 2;
        }
        f.label = f.path.filename().string();
        if (f.label.size() > 5 && f.label.ends_with(".gguf")) {
            f.label.resize(f.label.size() - 5);
        }
    }

    // Memory first, while this process is still small: children inherit its pages.
    std::string why_not;
    const std::unique_ptr<OracleGgml> oracle = OracleGgml::load(&why_not);
    const bool have_oracle = oracle != nullptr;
    if (!have_oracle) {
        std::fprintf(stderr, "bench_open: llama.cpp oracle unavailable, timing ggufkit only: %s\n", why_not.c_str());
    }
    std::vector<MemoryFigures> memory(files.size());
    {
        // Every child loads the oracle library (already mapped here, so as good as a no-op); the
        // baseline child does only that, so the difference is the open+index alone.
        const auto baseline = min_child_maxrss(ChildWork::baseline, {});
        for (size_t i = 0; i < files.size() && baseline; ++i) {
            if (auto m = min_child_maxrss(ChildWork::ggufkit, files[i].path)) {
                memory[i].ggufkit = *m - *baseline;
            }
            if (have_oracle) {
                if (auto m = min_child_maxrss(ChildWork::llama_cpp, files[i].path)) {
                    memory[i].llama_cpp = *m - *baseline;
                }
            }
        }
    }

    for (const FileCase& f : files) {
        const std::string ours = "ggufkit/" + f.label;
        benchmark::RegisterBenchmark(ours.c_str(), [path = f.path, ours](benchmark::State& state) {
            for (auto _ : state) {
                std::string error;
                auto sum = ggufkit_open_index(path, &error);
                if (!sum) {
                    g_failed[ours] = error;
                    state.SkipWithError("ggufkit could not open the file");
                    break;
                }
                benchmark::DoNotOptimize(*sum);
            }
        })->Unit(benchmark::kMicrosecond)->UseRealTime();
        if (oracle) {
            const std::string theirs = "llama.cpp/" + f.label;
            const OracleGgml* o = oracle.get();
            benchmark::RegisterBenchmark(theirs.c_str(), [path = f.path.string(), o, theirs](benchmark::State& state) {
                for (auto _ : state) {
                    if (!o->open_and_free(path)) {
                        g_failed[theirs] = "gguf_init_from_file failed";
                        state.SkipWithError("llama.cpp could not open the file");
                        break;
                    }
                }
            })->Unit(benchmark::kMicrosecond)->UseRealTime();
        }
    }

    RecordingReporter reporter(isatty(STDOUT_FILENO) ? benchmark::ConsoleReporter::OO_ColorTabular
                                                     : benchmark::ConsoleReporter::OO_Tabular);
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();

    print_table(files, memory);
    return g_failed.empty() ? 0 : 1;
}
