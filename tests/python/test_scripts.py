"""gguf-py scripts run unchanged on ggufkit (`import gguf` resolved to ggufkit by shim/), with the
same output as on gguf-py: metadata and tensor types of models of the corpus, the first Q4_K
tensor dequantized and saved, a minimal file written with GGUFWriter (which llama.cpp's parser and
gguf-py then read identically)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import GGUF_PY_DIR

HERE = Path(__file__).resolve().parent


def run(script: str, args: list[str], library: str) -> str:
    path = [str(GGUF_PY_DIR)] if library == "gguf-py" else [str(HERE / "shim"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))
    done = subprocess.run([sys.executable, str(HERE / "scripts" / script), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stderr == "", (library, done.stderr)
    return done.stdout


def both(script, args_of):
    return run(script, args_of("gguf-py"), "gguf-py"), run(script, args_of("ggufkit"), "ggufkit")


@pytest.mark.parametrize("model", ["tiny-llama/tiny-llama-q4_k_m.gguf", "tiny-llama/tiny-llama-iq3_m.gguf",
                                   "vocab/ggml-vocab-llama-spm.gguf"])
def test_print_metadata(shared, ggufpy, model):
    ref, ours = both("print_metadata.py", lambda _lib: [str(shared / "corpus" / model)])
    assert ours == ref
    assert "general.architecture = llama" in ours


def test_dequantize_and_save(shared, ggufpy, tmp_path):
    model = str(shared / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf")
    ref, ours = both("dequantize_q4k.py", lambda lib: [model, str(tmp_path / f"{lib}.npy")])
    assert ours == ref and ref.startswith("blk.")
    a, b = np.load(tmp_path / "gguf-py.npy"), np.load(tmp_path / "ggufkit.npy")
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b)


def test_write_minimal(ggufpy, ggml, tmp_path):
    ref, ours = both("write_minimal.py", lambda lib: [str(tmp_path / f"{lib}.gguf")])
    assert ours == f"wrote {tmp_path / 'ggufkit.gguf'}\n" and ref == f"wrote {tmp_path / 'gguf-py.gguf'}\n"
    written = (tmp_path / "ggufkit.gguf").read_bytes()
    assert written == (tmp_path / "gguf-py.gguf").read_bytes()
    seen = ggml.read(tmp_path / "ggufkit.gguf")
    assert seen["kvs"] == [("general.architecture", 8, "llama"), ("general.name", 8, "minimal"),
                           ("general.alignment", 4, 64), ("llama.block_count", 4, 1), ("answer", 4, 42),
                           ("greeting", 8, "hello"), ("primes", (9, 5), [2, 3, 5, 7])]
    assert seen["alignment"] == 64 and seen["tensors"] == [("tensor1", 0, 0, 48)]
    reader = ggufpy.GGUFReader(tmp_path / "ggufkit.gguf")
    assert reader.data_offset == seen["data_offset"] and reader.data_offset % 64 == 0
    assert np.array_equal(reader.tensors[0].data, np.arange(12, dtype=np.float32).reshape(3, 4))
    assert len(written) == seen["data_offset"] + 64  # the tensor padded to the alignment


GGUF_PY_SCRIPTS = GGUF_PY_DIR / "gguf" / "scripts"


def run_gguf_py_script(script: str, args: list[str], library: str) -> str:
    """One of gguf-py's own scripts, on gguf-py or (through shim/) on ggufkit. NO_LOCAL_GGUF keeps
    the script from putting its own gguf-py first on sys.path."""
    path = [str(GGUF_PY_DIR)] if library == "gguf-py" else [str(HERE / "shim"), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p), NO_LOCAL_GGUF="1")
    done = subprocess.run([sys.executable, str(GGUF_PY_SCRIPTS / script), *args], capture_output=True, text=True, env=env)
    assert done.returncode == 0, (library, done.stderr)
    return done.stdout


@pytest.mark.parametrize("mode", [[], ["--markdown"], ["--json"], ["--no-tensors"]], ids=["text", "markdown", "json", "no-tensors"])
@pytest.mark.parametrize("model", ["tiny-llama/tiny-llama-q4_k_m.gguf", "vocab/ggml-vocab-phi-3.gguf"])
def test_gguf_dump_runs_unchanged(shared, ggufpy, model, mode):
    args = [*mode, str(shared / "corpus" / model)]
    ref = run_gguf_py_script("gguf_dump.py", args, "gguf-py")
    ours = run_gguf_py_script("gguf_dump.py", args, "ggufkit")
    assert ours == ref and len(ref) > 1000
