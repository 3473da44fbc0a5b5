"""ggufkit.verbs: the CLI's verbs as functions. Each function gives what the CLI gives for the same
job: check's report equals `gguf check --json`, quantize_model / convert / split / merge / set /
remove / rename write the bytes the CLI writes, hash equals `gguf hash`; progress is called with
increasing (done, total) ending at total; a cancel (threading.Event or callable) or an exception in
the progress callback stops the work and leaves no file; errors are GGUFError with the library's
code."""
from __future__ import annotations

import _thread
import json
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

import ggufkit
from conftest import SOURCE_DIR
from ggufkit import verbs

SAMPLE = SOURCE_DIR / "samples" / "tiny-llama-f16.gguf"


def run_cli(cli, *args, ok=(0,)) -> str:
    r = subprocess.run([cli, *map(str, args)], capture_output=True, text=True, check=False)
    assert r.returncode in ok, f"gguf {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}"
    return r.stdout


def data(path) -> bytes:
    return Path(path).read_bytes()


def keys_of(path) -> dict:
    """Every key of a file with its value type and contents, in file order."""
    r = ggufkit.GGUFReader(path)
    out = {}
    for name, f in r.fields.items():
        value = f.contents()
        out[name] = (int(f.types[0]), [int(t) for t in f.types[1:]], value)
    return out


def leftovers(directory) -> list[str]:
    """Files in a directory that an operation left behind (temporaries included)."""
    return sorted(os.listdir(directory))


@pytest.fixture()
def model(tmp_path) -> Path:
    """A writable copy of the tiny sample (64-wide rows; 20 tensors)."""
    p = tmp_path / "model.gguf"
    shutil.copyfile(SAMPLE, p)
    return p


@pytest.fixture(scope="module")
def tiny(shared) -> Path:
    """The corpus' tiny llama in f16 (rows of 256: K-quants apply)."""
    return shared / "corpus" / "tiny-llama" / "tiny-llama-f16.gguf"


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, done, total):
        self.calls.append((done, total))

    def assert_complete(self, total=None):
        calls = self.calls
        assert calls, "progress was never called"
        totals = {t for _d, t in calls}
        assert len(totals) == 1, calls
        (t,) = totals
        if total is not None:
            assert t == total
        dones = [d for d, _t in calls]
        assert dones == sorted(dones) and len(set(dones)) == len(dones), calls
        assert calls[-1] == (t, t)


def cancel_at_first_call():
    """A progress callback that sets the returned Event on its first call."""
    event = threading.Event()
    return event, (lambda done, total: event.set())


# ---- check -------------------------------------------------------------------------------------

@pytest.mark.parametrize("strict", [False, True])
def test_check_equals_cli_json(cli, shared, tmp_path, strict):
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(SAMPLE.read_bytes()[:20000])  # the data section cut short: structure errors
    cut_header = tmp_path / "cut-header.gguf"
    cut_header.write_bytes(SAMPLE.read_bytes()[:5000])  # a string cut short: checking stops there
    appended = tmp_path / "appended.gguf"
    appended.write_bytes(SAMPLE.read_bytes() + b"appended")  # bytes after the last tensor: a warning
    bad_key = tmp_path / "bad-key.gguf"
    shutil.copyfile(SAMPLE, bad_key)
    verbs.set(bad_key, "llama.context_length", 0, sync=False)  # a hyperparameter check complains
    files = [SAMPLE, shared / "corpus" / "vocab" / "ggml-vocab-gpt-2.gguf",
             shared / "corpus" / "tiny-llama" / "tiny-llama-q4_k_m.gguf", truncated, cut_header, appended, bad_key]
    severities = set()
    for path in files:
        report = verbs.check(str(path), strict=strict)
        expected = json.loads(run_cli(cli, "check", "--json", *(["--strict"] if strict else []), path, ok=(0, 1)))
        assert report.to_dict() == expected, path
        assert isinstance(report.findings[0], verbs.Finding)
        assert bool(report) == expected["passed"]
        severities |= {f.severity for f in report.findings}
    assert severities == {"error", "warning", "info"}  # the files cover every severity
    assert [(f.code, f.offset) for f in verbs.check(appended).findings if f.severity == "warning"] == [
        ("structure.trailing_bytes", SAMPLE.stat().st_size)]
    report = verbs.check(truncated)
    assert report.complete and report.errors == 20
    assert {(f.code, f.severity) for f in report.findings if f.severity == "error"} == {
        ("structure.data_out_of_bounds", "error")}
    assert not verbs.check(cut_header).complete and not verbs.check(cut_header).passed


def test_check_errors(tmp_path):
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.check(tmp_path / "missing.gguf")
    assert e.value.code == "io_error"
    assert e.value.file == str(tmp_path / "missing.gguf")


# ---- quantize ----------------------------------------------------------------------------------

def write_imatrix(source: Path, path: Path):
    """An importance matrix in llama-imatrix's GGUF form for every 2-D weight of `source`."""
    rng = np.random.default_rng(5)
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_array("imatrix.datasets", ["test.txt"])
    w.add_uint32("imatrix.chunk_count", 4)
    w.add_uint32("imatrix.chunk_size", 512)
    for t in ggufkit.GGUFReader(source).tensors:
        if len(t.shape) == 2 and t.name != "token_embd.weight":
            w.add_tensor(t.name + ".in_sum2", (rng.random(int(t.shape[0])) * 40 + 1).astype(np.float32))
            w.add_tensor(t.name + ".counts", np.array([4.0], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def dry_run_rows(text: str) -> list[tuple]:
    """(name, type, target, copied) per tensor line of `gguf quantize --dry-run`."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[2] == "->":
            rows.append((parts[0], parts[1], parts[3], line.rstrip().endswith("copied")))
    return rows


@pytest.mark.parametrize("preset,options,cli_options", [
    ("Q4_K_M", {}, []),
    ("q8_0", {"pure": True}, ["--pure"]),
    (ggufkit.LlamaFileType.MOSTLY_Q5_K_S, {"output_tensor_type": "q8_0", "tensor_types": {"attn_v": "q6_K"},
                                           "override_kv": {"general.name": "quantized", "test.n": 3}},
     ["--output-tensor-type", "q8_0", "--tensor-type", "attn_v=q6_K", "--override-kv", "general.name=str:quantized",
      "--override-kv", "test.n=int:3"]),
    ("IQ2_XXS", {"imatrix": True}, ["--imatrix"]),
    ("COPY", {}, []),
])
def test_quantize_equals_cli(cli, tiny, tmp_path, preset, options, cli_options):
    options = dict(options)
    cli_options = list(cli_options)
    if options.get("imatrix"):
        imatrix = tmp_path / "imatrix.gguf"
        write_imatrix(tiny, imatrix)
        options["imatrix"] = str(imatrix)
        cli_options.append(imatrix)
    out, expected = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    cli_type = str(int(preset)) if isinstance(preset, int) else preset
    progress = Recorder()
    result = verbs.quantize_model(tiny, out, preset, progress=progress, threads=2, sync=False, **options)
    run_cli(cli, "quantize", "-q", "--no-sync", "--threads", 2, *cli_options, tiny, expected, cli_type)
    assert data(out) == data(expected)
    progress.assert_complete(total=len(ggufkit.GGUFReader(tiny).tensors))
    # The plan is the CLI's dry run, and the file's tensors are the plan's.
    plan = verbs.quantize_model(tiny, tmp_path / "never.gguf", preset, dry_run=True, **options)
    assert plan == {**result, "outputs": [str(tmp_path / "never.gguf")]}
    assert not (tmp_path / "never.gguf").exists()
    rows = dry_run_rows(run_cli(cli, "quantize", "--dry-run", *cli_options, tiny, tmp_path / "x.gguf", cli_type))
    assert [(t["name"], t["type"], t["target"], not t["converted"]) for t in result["tensors"]] == rows
    written = {t.name: t.tensor_type.name.lower() for t in ggufkit.GGUFReader(out).tensors}
    assert {t["name"]: t["target"].lower() for t in result["tensors"]} == written
    assert result["outputs"] == [str(out)]
    assert result["sizes"]["converted"] + result["sizes"]["copied"] == len(rows)
    assert result["importance_entries"] == (None if "imatrix" not in options else 14)


def test_quantize_cancel_and_errors(tiny, tmp_path):
    out = tmp_path / "out" / "q.gguf"
    out.parent.mkdir()
    # A threading.Event set from the progress callback: cancelled, nothing left in the directory.
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tiny, out, "Q4_K_M", progress=progress, cancel=event, sync=False)
    assert e.value.code == "cancelled"
    assert leftovers(out.parent) == []
    # A callable, already true: nothing starts.
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tiny, out, "q8_0", cancel=lambda: True)
    assert e.value.code == "cancelled"
    # An exception in the progress callback stops the work and comes back as itself.
    def boom(done, total):
        raise KeyError("stop here")
    with pytest.raises(KeyError, match="stop here"):
        verbs.quantize_model(tiny, out, "q8_0", progress=boom)
    assert leftovers(out.parent) == []
    # Ctrl-C (here _thread.interrupt_main) during the work: KeyboardInterrupt, nothing written.
    def interrupt(done, total):
        if done == 1:
            _thread.interrupt_main()
    with pytest.raises(KeyboardInterrupt):
        verbs.quantize_model(tiny, out, "q8_0", progress=interrupt)
    assert leftovers(out.parent) == []
    # Errors: an unknown type, a missing input, the input as output, an existing output not to replace.
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tiny, out, "Q4_K_Q")
    assert (e.value.code, str(e.value)) == ("invalid_argument", "'Q4_K_Q' is not a quantization type (try q4_0, "
                                                                "q8_0, q4_K, Q4_K_M, iq4_xs...)")
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tmp_path / "missing.gguf", out, "q8_0")
    assert e.value.code == "io_error"
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tiny, tiny, "q8_0")
    assert e.value.code == "output_is_input"
    out.write_bytes(b"keep")
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.quantize_model(tiny, out, "q8_0", overwrite=False)
    assert e.value.code == "output_exists"
    assert out.read_bytes() == b"keep"
    with pytest.raises(ggufkit.GGUFError) as e:  # IQ2_XXS tensors need an importance matrix
        verbs.quantize_model(tiny, out, "IQ2_XXS")
    assert e.value.code == "invalid_argument"
    assert out.read_bytes() == b"keep"
    with pytest.raises(TypeError, match=r"^cancel must be a threading.Event \(anything with is_set\(\)\), a callable "
                                        r"returning a bool, or None$"):
        verbs.quantize_model(tiny, out, "q8_0", cancel=42)


# ---- convert -----------------------------------------------------------------------------------

def write_safetensors(path: Path, tensors: dict[str, np.ndarray]):
    header, blobs, at = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_checkpoint(directory: Path, layers=2, embd=64, heads=4, kv_heads=2, ff=128, vocab=48):
    """A tiny LlamaForCausalLM checkpoint: config.json and model.safetensors (no tokenizer)."""
    directory.mkdir(parents=True)
    rng = np.random.default_rng(11)
    head_dim = embd // heads
    shapes = {"model.embed_tokens.weight": (vocab, embd), "lm_head.weight": (vocab, embd), "model.norm.weight": (embd,)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes |= {p + "input_layernorm.weight": (embd,), p + "self_attn.q_proj.weight": (heads * head_dim, embd),
                   p + "self_attn.k_proj.weight": (kv_heads * head_dim, embd),
                   p + "self_attn.v_proj.weight": (kv_heads * head_dim, embd),
                   p + "self_attn.o_proj.weight": (embd, heads * head_dim), p + "post_attention_layernorm.weight": (embd,),
                   p + "mlp.gate_proj.weight": (ff, embd), p + "mlp.up_proj.weight": (ff, embd),
                   p + "mlp.down_proj.weight": (embd, ff)}
    write_safetensors(directory / "model.safetensors",
                      {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()})
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": embd, "intermediate_size": ff,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "num_hidden_layers": layers,
              "vocab_size": vocab, "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": False}
    (directory / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("outtype", ["f16", "q8_0"])
def test_convert_equals_cli(cli, tmp_path, outtype):
    ckpt = tmp_path / "Tiny-Llama-1M"
    write_checkpoint(ckpt)
    out, expected = tmp_path / "py.gguf", tmp_path / "cli.gguf"
    progress = Recorder()
    plan = verbs.convert(ckpt, out, outtype=outtype, tokenizer=False, threads=2, progress=progress, sync=False)
    run_cli(cli, "convert", "--no-sync", "--no-tokenizer", "--threads", 2, "--outtype", outtype, ckpt, expected)
    assert data(out) == data(expected)
    progress.assert_complete(total=len(plan["tensors"]))
    cli_plan = json.loads(run_cli(cli, "convert", "--dry-run", "--json", "--no-tokenizer", "--outtype", outtype,
                                  ckpt, tmp_path / "x.gguf"))
    dry = verbs.convert(ckpt, tmp_path / "never.gguf", outtype=outtype, tokenizer=False, dry_run=True)
    assert not (tmp_path / "never.gguf").exists()
    assert dry == plan
    metadata = dry.pop("metadata")
    assert dry == cli_plan
    # The plan's metadata is the file's, key for key.
    written = {k: v[2] for k, v in keys_of(out).items() if not k.startswith("GGUF.")}
    assert list(metadata) == list(written)
    for k, v in metadata.items():
        assert v == pytest.approx(written[k]) if isinstance(v, float) else v == written[k], k


def test_convert_cancel_and_errors(tmp_path):
    ckpt = tmp_path / "ckpt"
    write_checkpoint(ckpt)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.convert(ckpt, out_dir / "m.gguf", tokenizer=False, progress=progress, cancel=event)
    assert e.value.code == "cancelled"
    assert leftovers(out_dir) == []
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.convert(ckpt, out_dir / "m.gguf", outtype="iq2_xxs", tokenizer=False)
    assert e.value.code == "invalid_argument"
    with pytest.raises(ggufkit.GGUFError) as e:  # no tokenizer files, and the tokenizer asked for
        verbs.convert(ckpt, out_dir / "m.gguf", dry_run=True)
    assert (e.value.code, e.value.file) == ("io_error", "tokenizer.json")
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.convert(tmp_path / "missing", out_dir / "m.gguf", tokenizer=False)
    assert e.value.code == "io_error"
    assert leftovers(out_dir) == []


# ---- metadata edits ----------------------------------------------------------------------------

EDITS = [
    # (verb call, CLI arguments, expected mode)
    (lambda p, **k: verbs.set(p, "general.name", "A longer name than the sample had", **k),
     ["set", "{f}", "general.name", "A longer name than the sample had"], "rewrite"),
    (lambda p, **k: verbs.set(p, "llama.context_length", 4096, **k),
     ["set", "{f}", "llama.context_length", "4096"], "in_place"),
    (lambda p, **k: verbs.set(p, "test.ratio", 0.25, **k), ["set", "{f}", "test.ratio", "0.25"], "rewrite"),
    (lambda p, **k: verbs.set(p, "test.count", 7, type=ggufkit.GGUFValueType.UINT64, **k),
     ["set", "--type", "uint64", "{f}", "test.count", "7"], "rewrite"),
    (lambda p, **k: verbs.set(p, "test.list", [1.5, -2.0, 3.0], type="float32", **k),
     ["set", "--type", "float32", "--json", "[1.5, -2.0, 3.0]", "{f}", "test.list"], "rewrite"),
    (lambda p, **k: verbs.remove(p, "general.name", **k), ["rm", "{f}", "general.name"], "rewrite"),
    (lambda p, **k: verbs.rename(p, "general.name", "general.title", **k),
     ["rename", "{f}", "general.name", "general.title"], "rewrite"),
]


@pytest.mark.parametrize("index", range(len(EDITS)))
def test_edit_equals_cli(cli, tmp_path, index):
    call, cli_args, mode = EDITS[index]
    mine, theirs = tmp_path / "mine.gguf", tmp_path / "theirs.gguf"
    shutil.copyfile(SAMPLE, mine)
    shutil.copyfile(SAMPLE, theirs)
    before = keys_of(SAMPLE)
    dry = call(mine, dry_run=True)
    assert data(mine) == data(SAMPLE) and not dry.written
    result = call(mine, sync=False)
    run_cli(cli, *[a.format(f=theirs) for a in cli_args])
    assert data(mine) == data(theirs)
    assert result.mode == mode and result.written and result.output == str(mine)
    assert result == dry.__class__(**{**dry.__dict__, "written": True})
    # Every key after the edit: the ones before, changed as the result says.
    after = keys_of(mine)
    expected = {k: v[2] for k, v in before.items()}
    for c in result.changes:
        if c["renamed_from"]:
            expected.pop(c["renamed_from"], None)
        if c["after"] is None:
            expected.pop(c["key"], None)
        else:
            expected[c["key"]] = c["after"]
    got = {k: v[2] for k, v in after.items() if not k.startswith("GGUF.")}
    expected = {k: v for k, v in expected.items() if not k.startswith("GGUF.")}
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        assert got[k] == (pytest.approx(v) if isinstance(v, float) else v), k
    # Written to another file instead: that file is the same bytes, the input is untouched.
    other = tmp_path / "other.gguf"
    source = tmp_path / "source.gguf"
    shutil.copyfile(SAMPLE, source)
    moved = call(source, output=other, sync=False)
    assert moved.mode == "new_file" and moved.output == str(other)
    assert data(source) == data(SAMPLE)
    assert keys_of(other) == after


def test_edit_results_and_errors(model):
    r = verbs.set(model, "llama.context_length", 512, sync=False)
    assert r.changes == [{"key": "llama.context_length", "renamed_from": None, "before": 256, "before_type": "uint32",
                          "after": 512, "after_type": "uint32"}]
    assert r.problems == []
    r = verbs.rename(model, "general.name", "general.title", sync=False)
    assert [(c["key"], c["renamed_from"], c["after"]) for c in r.changes] == [
        ("general.title", "general.name", "ggufkit tiny sample"), ("general.name", None, None)]
    original = data(model)
    for call, code in [
        (lambda: verbs.remove(model, "no.such.key"), "invalid_argument"),
        (lambda: verbs.rename(model, "general.title", "llama.context_length"), "invalid_argument"),
        (lambda: verbs.set(model, "llama.context_lenght", 5), "invalid_argument"),  # a misspelling
        (lambda: verbs.set(model, "llama.context_length", "many"), "invalid_argument"),
        (lambda: verbs.set(model, "llama.context_length", -1), "invalid_argument"),
        (lambda: verbs.set(model, "tokenizer.ggml.tokens", "x"), "invalid_argument"),  # an array
        (lambda: verbs.set(model, "test.x", 1, type="complex"), "invalid_argument"),
        (lambda: verbs.set(model, "general.alignment", 3, type="uint32"), "bad_alignment"),
        (lambda: verbs.set(model, "tokenizer.ggml.bos_token_id", 100000, strict=True), "invalid_argument"),
    ]:
        with pytest.raises(ggufkit.GGUFError) as e:
            call()
        assert e.value.code == code, e.value
        assert data(model) == original
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.set(model, "llama.context_lenght", 5)
    assert e.value.record == "llama.context_lenght" and "did you mean llama.context_length" in str(e.value)
    r = verbs.set(model, "llama.context_lenght", 5, new=True, sync=False)  # meant
    assert r.changes[0]["after_type"] == "uint32"
    r = verbs.set(model, "tokenizer.ggml.bos_token_id", 100000, sync=False)  # allowed, reported
    assert [(f.severity, f.subject) for f in r.problems] == [("error", "tokenizer.ggml.bos_token_id")]
    with pytest.raises(TypeError, match=r"^test.b: a metadata value is a bool, int, float, str or a list of them, not bytes$"):
        verbs.set(model, "test.b", b"bytes")


def test_edit_progress_and_cancel(model):
    directory = model.parent
    original = data(model)
    progress = Recorder()
    r = verbs.set(model, "general.name", "A name long enough to move the data section", progress=progress, sync=False)
    assert r.mode == "rewrite"
    progress.assert_complete(total=len(original) - 13184)  # the data section copied
    edited = data(model)
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.set(model, "general.name", "x", progress=progress, cancel=event, rewrite=True)
    assert e.value.code == "cancelled"
    assert data(model) == edited and leftovers(directory) == ["model.gguf"]
    assert original != edited


# ---- hash --------------------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["sha256", "xxh64"])
def test_hash_equals_cli(cli, tiny, algorithm):
    progress = Recorder()
    h = verbs.hash(tiny, algorithm=algorithm, per_tensor=True, threads=2, progress=progress)
    expected = json.loads(run_cli(cli, "hash", "--json", "-a", algorithm, tiny))
    assert {k: h[k] for k in ("algorithm", "files", "tensors")} == expected
    assert h["manifest"] == run_cli(cli, "hash", "-a", algorithm, tiny)
    progress.assert_complete()
    short = verbs.hash(tiny, algorithm=algorithm)
    assert short["files"] == expected["files"] and short["tensors"] == []


def test_hash_split_model_cancel_and_errors(cli, model, tmp_path):
    verbs.split(model, tmp_path / "part", max_tensors=7, sync=False)
    first = tmp_path / "part-00001-of-00003.gguf"
    h = verbs.hash(first, per_tensor=True)
    assert {k: h[k] for k in ("algorithm", "files", "tensors")} == json.loads(
        run_cli(cli, "hash", "--json", "-a", "sha256", first))
    assert [f["name"] for f in h["files"]] == [f"part-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.hash(model, progress=progress, cancel=event)
    assert e.value.code == "cancelled"
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.hash(model, algorithm="md5")
    assert e.value.code == "invalid_argument"


# ---- split and merge ---------------------------------------------------------------------------

@pytest.mark.parametrize("limit,cli_limit", [
    ({"max_tensors": 6}, ["--max-tensors", "6"]),
    ({"max_size": "100K"}, ["--max-size", "100K"]),
    ({"max_size": 60000}, ["--max-size", "60000"]),
])
def test_split_and_merge_equal_cli(cli, tmp_path, limit, cli_limit):
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    progress = Recorder()
    plan = verbs.split(SAMPLE, mine / "m", progress=progress, sync=False, **limit)
    run_cli(cli, "split", *cli_limit, SAMPLE, theirs / "m")
    names = leftovers(theirs)
    assert leftovers(mine) == names and len(names) == len(plan["shards"]) > 1
    for name in names:
        assert data(mine / name) == data(theirs / name), name
    progress.assert_complete(total=len(names))
    assert plan == json.loads(run_cli(cli, "split", "--dry-run", "--json", "--force", *cli_limit, SAMPLE, mine / "m"))
    assert verbs.split(SAMPLE, tmp_path / "none", dry_run=True, **limit) == json.loads(
        run_cli(cli, "split", "--dry-run", "--json", *cli_limit, SAMPLE, tmp_path / "none"))
    assert not list(tmp_path.glob("none*"))
    # Merging gives back the original bytes; the result is `gguf merge --json`'s.
    first = str(mine / names[0])
    merged_progress = Recorder()
    result = verbs.merge(first, tmp_path / "merged.gguf", progress=merged_progress, sync=False)
    assert data(tmp_path / "merged.gguf") == data(SAMPLE)
    merged_progress.assert_complete(total=20)
    assert result == json.loads(run_cli(cli, "merge", "--dry-run", "--json", "--force", first, tmp_path / "merged.gguf"))
    assert verbs.merge(first, tmp_path / "never.gguf", dry_run=True) == {**result, "output": str(tmp_path / "never.gguf")}
    assert not (tmp_path / "never.gguf").exists()


def test_split_merge_cancel_and_errors(model, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.split(model, out / "s", max_tensors=5, progress=progress, cancel=event)
    assert e.value.code == "cancelled"
    assert leftovers(out) == []
    verbs.split(model, tmp_path / "s", max_tensors=5, sync=False)
    first = tmp_path / "s-00001-of-00004.gguf"
    event, progress = cancel_at_first_call()
    with pytest.raises(ggufkit.GGUFError) as e:
        verbs.merge(first, out / "merged.gguf", progress=progress, cancel=event)
    assert e.value.code == "cancelled"
    assert leftovers(out) == []
    for call, code in [
        (lambda: verbs.split(model, out / "s"), "invalid_argument"),  # no limit
        (lambda: verbs.split(model, out / "s", max_size="lots"), "invalid_argument"),
        (lambda: verbs.split(first, out / "s", max_tensors=2), "invalid_argument"),  # a shard
        (lambda: verbs.merge(model, out / "m.gguf"), "invalid_argument"),  # not split
        (lambda: verbs.merge(first, first), "output_is_input"),
        (lambda: verbs.merge(tmp_path / "missing-00001-of-00002.gguf", out / "m.gguf"), "io_error"),
    ]:
        with pytest.raises(ggufkit.GGUFError) as e:
            call()
        assert e.value.code == code, e.value
    assert leftovers(out) == []
    with pytest.raises(ValueError, match=r"^give max_size or max_tensors, not both$"):
        verbs.split(model, out / "s", max_size=1000, max_tensors=2)


# ---- estimate -------------------------------------------------------------------------------------

def test_estimate_equals_the_cli_json(cli):
    for options, args in [({}, []),
                          ({"ctx_size": 4096, "parallel": 2, "cache_type_k": "f32", "cache_type_v": "bf16",
                            "flash_attn": "on", "kv_unified": True}, ["-c", "4096", "-np", "2", "-ctk", "f32",
                                                                     "-ctv", "bf16", "-fa", "on", "--kv-unified"])]:
        got = ggufkit.estimate(SAMPLE, **options)
        want = json.loads(run_cli(cli, "estimate", "--json", SAMPLE, *args))[0]
        assert got == want


def test_estimate_errors_are_gguf_errors():
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.estimate(SAMPLE, cache_type_v="q8_0", flash_attn="off")
    assert e.value.code == "invalid_argument"
    assert str(e.value).endswith("a quantized V cache requires flash attention")
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.estimate(SAMPLE, ctx_size=2**40)
    assert e.value.code == "invalid_argument"
    assert str(e.value).endswith("ctx_size: 1099511627776 is above llama.cpp's 32-bit limit")
