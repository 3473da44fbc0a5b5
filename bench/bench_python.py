#!/usr/bin/env python3
"""bench/bench_python.py: the Python package ggufkit against llama.cpp's gguf-py, as ratios in one run.

    bench/run.sh python [ARGS...]
    PYTHONPATH= /usr/bin/python3 bench/bench_python.py [--python-dir DIR] [--gguf-py DIR] [--corpus DIR]
                 [--repeat R] [--kernel-repeat K] [--rows N] [--cols N] [--no-memory]

Jobs (both libraries in this process, alternating in every repeat so that they share the machine's
noise; best of R for the vocabulary, of K for the kernels; ratio = gguf-py time / ggufkit time):
  * open:            GGUFReader(ggml-vocab-llama-bpe.gguf) (128k tokens, 280k merges)
  * open + every token, contents():   open, then tokenizer.ggml.tokens' field.contents()
  * open + every token, parts idiom:  open, then gguf-py's classic
                     [str(bytes(field.parts[i]), encoding='utf-8') for i in field.data]
    (both on the reader just opened: the first contents() call, then the first parts walk; the rows
    "after open" are these calls alone)
  * dequantize q4_K / q6_K: N x C random float32 values (default 1024 rows of 4096) quantized by
    ggufkit.quantize, then gguf.quants.dequantize (numpy) against ggufkit.dequantize on all cores and
    on one thread; the outputs must be bit-identical
  * quantize q8_0:   gguf.quants.quantize (numpy) against ggufkit.quantize; identical bytes
  * dequantize every tensor of tiny-llama-q4_k_m.gguf, each library through its own GGUFReader
Peak memory (unless --no-memory): one child process per library and job, the growth of its resident
set during the job (VmHWM after the job less VmRSS before it, the peak reset through
/proc/self/clear_refs); it counts the pages of the mapped file that the job touches.
Exits 1 when the libraries' results differ, 2 on a usage or setup error.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = "vocab/ggml-vocab-llama-bpe.gguf"
TINY = "tiny-llama/tiny-llama-q4_k_m.gguf"
TOKENS = "tokenizer.ggml.tokens"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--python-dir", default=os.environ.get("GGUFKIT_PYTHON_DIR", os.path.join(ROOT, "build-bench", "python")),
                   help="directory holding the ggufkit package (env GGUFKIT_PYTHON_DIR; default build-bench/python)")
    p.add_argument("--gguf-py", default=os.environ.get("GGUF_PY_DIR", os.path.join(ROOT, ".oracle", "llama.cpp", "gguf-py")),
                   help="llama.cpp's gguf-py directory (env GGUF_PY_DIR; default .oracle/llama.cpp/gguf-py)")
    p.add_argument("--corpus", default=os.environ.get("GGUFKIT_CORPUS", os.path.join(ROOT, "..", "shared", "corpus")),
                   help="the shared corpus (env GGUFKIT_CORPUS; default ../shared/corpus)")
    p.add_argument("--repeat", type=int, default=3, help="repeats of the vocabulary jobs (gguf-py's open takes seconds)")
    p.add_argument("--kernel-repeat", type=int, default=7, help="repeats of the (de)quantization jobs")
    p.add_argument("--rows", type=int, default=1024, help="rows of the (de)quantized tensor")
    p.add_argument("--cols", type=int, default=4096, help="values per row (a multiple of 256)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    p.add_argument("--child", nargs=2, metavar=("JOB", "LIB"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeat < 1 or args.kernel_repeat < 1 or args.rows < 1 or args.cols < 256 or args.cols % 256:
        p.error("--repeat/--kernel-repeat/--rows must be positive and --cols a positive multiple of 256")
    return args


def import_libraries(args: argparse.Namespace):
    """gguf-py and ggufkit, each from the directory given (nothing else on sys.path is used for them)."""
    for d, what in ((args.python_dir, "ggufkit"), (args.gguf_py, "gguf")):
        if not os.path.isdir(os.path.join(d, what)):
            sys.exit(f"bench_python: no {what} package in {d} "
                     f"({'build it: bench/run.sh python, or --python-dir' if what == 'ggufkit' else 'scripts/install-oracle.sh, or --gguf-py'})")
        sys.path.insert(0, os.path.abspath(d))
    import gguf  # noqa: E402
    import ggufkit  # noqa: E402
    return gguf, ggufkit


# --- memory ---------------------------------------------------------------------------------------

def _status_kib(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def qdata(ggufkit, name: str, rows: int, cols: int):
    """rows x cols random normal float32 values (seeded) quantized by ggufkit to the type `name`."""
    import numpy as np
    x = np.random.default_rng(1234).standard_normal((rows, cols), dtype=np.float32)
    return x if name == "F32" else ggufkit.quantize(x, ggufkit.GGMLQuantizationType[name])


def child(args: argparse.Namespace) -> None:
    """One job with one library; prints {"kib": growth of the resident set during the job}."""
    job, lib = args.child
    gguf, ggufkit = import_libraries(args)
    mod = gguf if lib == "gguf-py" else ggufkit
    if job == "open-contents":
        path = os.path.join(args.corpus, VOCAB)
        with open(path, "rb") as f:  # in the page cache, like the timed runs
            while f.read(1 << 20):
                pass

        def run():
            return mod.GGUFReader(path).fields[TOKENS].contents()
    elif job.startswith("dequantize-"):
        name = job.split("-", 1)[1]
        data = qdata(ggufkit, name, args.rows, args.cols)
        qt = mod.GGMLQuantizationType[name]

        def run():
            return mod.quants.dequantize(data, qt)
    elif job == "quantize-Q8_0":
        data = qdata(ggufkit, "F32", args.rows, args.cols)
        qt = mod.GGMLQuantizationType.Q8_0

        def run():
            return mod.quants.quantize(data, qt)
    else:
        sys.exit(f"bench_python: unknown child job {job}")
    gc.collect()
    _reset_peak()
    base = _status_kib("VmRSS")
    out = run()
    peak = _status_kib("VmHWM")
    del out
    print(json.dumps({"kib": peak - base}))


def peak_mib(args: argparse.Namespace, job: str, lib: str) -> float | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", job, lib, "--python-dir", args.python_dir,
           "--gguf-py", args.gguf_py, "--corpus", args.corpus, "--rows", str(args.rows), "--cols", str(args.cols)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"bench_python: memory child {job} {lib} failed:\n{r.stderr}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])["kib"] / 1024


# --- timing ---------------------------------------------------------------------------------------

def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


class Failures:
    def __init__(self):
        self.messages: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.messages.append(what)
            print(f"bench_python: DIFFERS: {what}", file=sys.stderr)


def bench_vocab(gguf, ggufkit, path: str, repeat: int, fail: Failures) -> dict[str, dict[str, float]]:
    """Best times of the open, contents() and parts-idiom jobs per library."""
    libs = {"gguf-py": gguf, "ggufkit": ggufkit}
    best = {job: {lib: float("inf") for lib in libs} for job in ("open", "contents", "parts", "open+contents", "open+parts")}
    reference = None
    ggufkit.GGUFReader(path)  # the file in the page cache
    for r in range(repeat):
        order = list(libs) if r % 2 == 0 else list(reversed(libs))
        for lib in order:
            mod = libs[lib]
            t_open, reader = timed(lambda: mod.GGUFReader(path))
            field = reader.fields[TOKENS]
            t_contents, tokens = timed(lambda: field.contents())
            t_parts, classic = timed(lambda: [str(bytes(field.parts[i]), encoding="utf-8") for i in field.data])
            for job, t in (("open", t_open), ("contents", t_contents), ("parts", t_parts),
                           ("open+contents", t_open + t_contents), ("open+parts", t_open + t_parts)):
                best[job][lib] = min(best[job][lib], t)
            if reference is None:
                reference = tokens
            fail.check(tokens == reference, f"{lib}: contents() of {TOKENS} differs from gguf-py's")
            fail.check(classic == reference, f"{lib}: the parts idiom on {TOKENS} differs from contents()")
            del reader, field, tokens, classic
    print(f"  {len(reference)} tokens; best of {repeat}", file=sys.stderr)
    return best


def same_floats(a, b) -> bool:
    import numpy as np
    return a.shape == b.shape and a.dtype == b.dtype == np.float32 and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def same_bytes(a, b) -> bool:
    import numpy as np
    return a.shape == b.shape and np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def bench_kernel(runs: dict, repeat: int, same, fail: Failures, what: str) -> dict[str, float]:
    """Best time of each named run (alternating the order each repeat); every output compared with the first's."""
    best = {name: float("inf") for name in runs}
    names = list(runs)
    reference = None
    for r in range(repeat):
        for name in (names if r % 2 == 0 else list(reversed(names))):
            t, out = timed(runs[name])
            best[name] = min(best[name], t)
            if reference is None:
                reference = out
            else:
                fail.check(same(out, reference), f"{what}: {name} differs from {names[0]}")
            del out
    return best


def bench_tiny(gguf, ggufkit, path: str, repeat: int, fail: Failures):
    ra, rb = gguf.GGUFReader(path), ggufkit.GGUFReader(path)
    ta, tb = ra.tensors, rb.tensors
    fail.check([t.name for t in ta] == [t.name for t in tb], "tiny-llama: tensor names differ")
    types = sorted({t.tensor_type.name for t in ta})
    outs = {}

    def all_tensors(mod, tensors, key):
        def run():
            outs[key] = [mod.quants.dequantize(t.data, t.tensor_type) for t in tensors]
            return outs[key]
        return run

    best = bench_kernel({"gguf-py": all_tensors(gguf, ta, "a"), "ggufkit": all_tensors(ggufkit, tb, "b")}, repeat,
                        lambda x, y: True, fail, "tiny-llama")
    fail.check(len(outs["a"]) == len(outs["b"]) and all(same_floats(x, y) for x, y in zip(outs["a"], outs["b"])),
               "tiny-llama: dequantized tensors differ")
    return best, len(ta), sum(int(t.n_elements) for t in ta), types


# --- report ---------------------------------------------------------------------------------------

def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), {model}"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def oracle_version(gguf_py: str) -> str:
    r = subprocess.run(["git", "-C", os.path.join(gguf_py, ".."), "log", "-1", "--format=%h"], capture_output=True, text=True)
    return f"llama.cpp {r.stdout.strip()}" if r.returncode == 0 and r.stdout.strip() else "llama.cpp"


def fmt_s(t: float) -> str:
    return f"{t * 1e3:.2f} ms" if t < 1 else f"{t:.3f} s"


def fmt_mib(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    return f"{a:.0f}/{b:.0f}"


def main() -> int:
    args = parse_args(sys.argv[1:])
    if args.child:
        child(args)
        return 0
    gguf, ggufkit = import_libraries(args)
    import numpy as np
    vocab, tiny = os.path.join(args.corpus, VOCAB), os.path.join(args.corpus, TINY)
    for f in (vocab, tiny):
        if not os.path.isfile(f):
            print(f"bench_python: {f} missing (--corpus)", file=sys.stderr)
            return 2
    fail = Failures()
    load_start = loadavg()
    start = time.perf_counter()
    K = ggufkit.GGMLQuantizationType
    G = gguf.GGMLQuantizationType
    n = args.rows * args.cols
    size = f"{args.rows}x{args.cols}"

    print("vocabulary...", file=sys.stderr)
    v = bench_vocab(gguf, ggufkit, vocab, args.repeat, fail)
    rows = [
        ("open", v["open"], "GGUFReader(ggml-vocab-llama-bpe.gguf)", None),
        ("open + every token, contents()", v["open+contents"], "tokenizer.ggml.tokens: 128256 strings", "open-contents"),
        ("open + every token, parts idiom", v["open+parts"], "str(bytes(parts[i])) for i in data", None),
        ("  contents(), after open", v["contents"], "the call alone", None),
        ("  parts idiom, after open", v["parts"], "the walk alone", None),
    ]

    kernel_rows = []
    for name in ("Q4_K", "Q6_K"):
        print(f"dequantize {name}...", file=sys.stderr)
        data = qdata(ggufkit, name, args.rows, args.cols)
        best = bench_kernel({"gguf-py": lambda: gguf.quants.dequantize(data, G[name]),
                             "ggufkit": lambda: ggufkit.dequantize(data, K[name]),
                             "ggufkit-1": lambda: ggufkit.dequantize(data, K[name], threads=1)},
                            args.kernel_repeat, same_floats, fail, f"dequantize {name}")
        label = name.lower().replace("_k", "_K")
        kernel_rows.append((f"dequantize {label}", {"gguf-py": best["gguf-py"], "ggufkit": best["ggufkit"]},
                            f"{size}, {os.cpu_count()} threads, bit-identical", f"dequantize-{name}"))
        kernel_rows.append((f"dequantize {label}, 1 thread", {"gguf-py": best["gguf-py"], "ggufkit": best["ggufkit-1"]},
                            "ggufkit threads=1", None))
        del data

    print("quantize Q8_0...", file=sys.stderr)
    x = qdata(ggufkit, "F32", args.rows, args.cols)
    best = bench_kernel({"gguf-py": lambda: gguf.quants.quantize(x, G.Q8_0),
                         "ggufkit": lambda: ggufkit.quantize(x, K.Q8_0),
                         "ggufkit-1": lambda: ggufkit.quantize(x, K.Q8_0, threads=1)},
                        args.kernel_repeat, same_bytes, fail, "quantize Q8_0")
    kernel_rows.append(("quantize q8_0", {"gguf-py": best["gguf-py"], "ggufkit": best["ggufkit"]},
                        f"{size}, {os.cpu_count()} threads, same bytes", "quantize-Q8_0"))
    kernel_rows.append(("quantize q8_0, 1 thread", {"gguf-py": best["gguf-py"], "ggufkit": best["ggufkit-1"]},
                        "ggufkit threads=1", None))
    del x

    print("tiny-llama...", file=sys.stderr)
    tbest, count, values, types = bench_tiny(gguf, ggufkit, tiny, args.kernel_repeat, fail)
    kernel_rows.append(("dequantize tiny-llama-q4_k_m", tbest,
                        f"{count} tensors ({values / 1e6:.1f} M values: {', '.join(types)})", None))

    peaks: dict[str, dict[str, float | None]] = {}
    if not args.no_memory:
        print("peak memory...", file=sys.stderr)
        for job in ("open-contents", "dequantize-Q4_K", "dequantize-Q6_K", "quantize-Q8_0"):
            peaks[job] = {lib: peak_mib(args, job, lib) for lib in ("gguf-py", "ggufkit")}

    elapsed = time.perf_counter() - start
    print(f"bench_python: ggufkit ({args.python_dir}) against gguf-py ({args.gguf_py}, {oracle_version(args.gguf_py)}); "
          f"Python {sys.version.split()[0]}, numpy {np.__version__}")
    print(f"machine: {machine()}; load average {load_start} at the start, {loadavg()} at the end; {elapsed:.0f} s")
    print(f"best of {args.repeat} (vocabulary) and {args.kernel_repeat} (kernels), the libraries alternating in one process; "
          f"ratio = gguf-py time / ggufkit time;")
    print("peak = MiB the resident set grew during the job (gguf-py/ggufkit; a child process each, mapped file pages count)")
    print(f"{'job':<34}{'gguf-py':>11}{'ggufkit':>11}{'ratio':>9}{'peak MiB':>11}  note")
    for label, best, note, mem in rows + kernel_rows:
        a, b = best["gguf-py"], best["ggufkit"]
        peak = fmt_mib(peaks[mem]["gguf-py"], peaks[mem]["ggufkit"]) if mem in peaks else ""
        print(f"{label:<34}{fmt_s(a):>11}{fmt_s(b):>11}{a / b:>8.1f}x{peak:>11}  {note}")
    if fail.messages:
        print(f"bench_python: {len(fail.messages)} result(s) differ between the libraries:", file=sys.stderr)
        for m in fail.messages:
            print(f"  {m}", file=sys.stderr)
        return 1
    print(f"results identical: tokens (both idioms), dequantized values (bits), quantized bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
