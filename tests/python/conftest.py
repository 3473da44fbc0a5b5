"""Shared fixtures of the Python package's tests: the corpus, gguf-py (the reference, from the
oracle's llama.cpp checkout), llama.cpp's own GGUF parser and ggml's quantizer (libggml-base.so
through ctypes) and the CLI. Each skips with a clear message when what it needs is absent."""
from __future__ import annotations

import ctypes
import importlib
import os
import sys
from pathlib import Path

import numpy as np
import pytest

SOURCE_DIR = Path(os.environ.get("GGUFKIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SHARED_DIR = Path(os.environ.get("GGUFKIT_SHARED_DIR", SOURCE_DIR.parent / "shared"))
GGUF_PY_DIR = SOURCE_DIR / ".oracle" / "llama.cpp" / "gguf-py"
ORACLE_LIB_DIR = Path(os.environ.get("GGUFKIT_ORACLE_LIB_DIR",
                                     SOURCE_DIR / ".oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"))
CLI = os.environ.get("GGUFKIT_CLI", str(SOURCE_DIR / "build" / "gguf"))


def corpus_files(sub: str) -> list[Path]:
    return sorted((SHARED_DIR / "corpus" / sub).glob("*.gguf"))


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED_DIR / "corpus").is_dir():
        pytest.skip(f"no shared corpus at {SHARED_DIR} (../shared beside the project)")
    return SHARED_DIR


@pytest.fixture(scope="session")
def ggufpy():
    """llama.cpp's gguf-py, imported as a module of its own (not shadowing anything)."""
    if not (GGUF_PY_DIR / "gguf" / "__init__.py").is_file():
        pytest.skip(f"gguf-py not found at {GGUF_PY_DIR} (make oracle installs it)")
    sys.path.insert(0, str(GGUF_PY_DIR))
    try:
        return importlib.import_module("gguf")
    finally:
        sys.path.remove(str(GGUF_PY_DIR))


class Ggml:
    """llama.cpp's GGUF parser (gguf_init_from_file) and ggml_quantize_chunk, from libggml-base.so."""

    class InitParams(ctypes.Structure):
        _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]

    def __init__(self, path: Path):
        lib = ctypes.CDLL(str(path))
        self.lib = lib
        c = ctypes
        lib.gguf_init_from_file.restype = c.c_void_p
        lib.gguf_init_from_file.argtypes = [c.c_char_p, Ggml.InitParams]
        lib.gguf_free.argtypes = [c.c_void_p]
        for name, res, args in [
            ("gguf_get_version", c.c_uint32, []), ("gguf_get_alignment", c.c_size_t, []),
            ("gguf_get_data_offset", c.c_size_t, []), ("gguf_get_n_kv", c.c_int64, []),
            ("gguf_get_key", c.c_char_p, [c.c_int64]), ("gguf_get_kv_type", c.c_int, [c.c_int64]),
            ("gguf_get_arr_type", c.c_int, [c.c_int64]), ("gguf_get_arr_n", c.c_size_t, [c.c_int64]),
            ("gguf_get_arr_data", c.c_void_p, [c.c_int64]), ("gguf_get_arr_str", c.c_char_p, [c.c_int64, c.c_size_t]),
            ("gguf_get_val_str", c.c_char_p, [c.c_int64]), ("gguf_get_val_data", c.c_void_p, [c.c_int64]),
            ("gguf_get_n_tensors", c.c_int64, []), ("gguf_get_tensor_name", c.c_char_p, [c.c_int64]),
            ("gguf_get_tensor_offset", c.c_size_t, [c.c_int64]), ("gguf_get_tensor_type", c.c_int, [c.c_int64]),
            ("gguf_get_tensor_size", c.c_size_t, [c.c_int64]),
        ]:
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = [c.c_void_p] + args
        lib.ggml_quantize_chunk.restype = c.c_size_t
        lib.ggml_quantize_chunk.argtypes = [c.c_int, c.c_void_p, c.c_void_p, c.c_int64, c.c_int64, c.c_int64, c.c_void_p]
        lib.ggml_row_size.restype = c.c_size_t
        lib.ggml_row_size.argtypes = [c.c_int, c.c_int64]

    _SCALARS = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32,
                7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}

    def read(self, path: Path) -> dict:
        """Everything llama.cpp's parser sees: version, alignment, data offset, every key with its
        type and value, every tensor's name, type, offset and size. None when it refuses the file."""
        ctx = self.lib.gguf_init_from_file(str(path).encode(), Ggml.InitParams(True, None))
        if not ctx:
            return None
        try:
            lib = self.lib
            kvs = []
            for i in range(lib.gguf_get_n_kv(ctx)):
                t = lib.gguf_get_kv_type(ctx, i)
                if t == 8:
                    value = lib.gguf_get_val_str(ctx, i).decode()
                elif t == 9:
                    at, n = lib.gguf_get_arr_type(ctx, i), lib.gguf_get_arr_n(ctx, i)
                    if at == 8:
                        value = [lib.gguf_get_arr_str(ctx, i, k).decode() for k in range(n)]
                    else:
                        dtype = np.dtype(self._SCALARS[at])
                        data = ctypes.string_at(lib.gguf_get_arr_data(ctx, i), n * dtype.itemsize)
                        value = np.frombuffer(data, dtype=dtype).tolist()
                    t = (9, at)
                else:
                    dtype = np.dtype(self._SCALARS[t])
                    value = np.frombuffer(ctypes.string_at(lib.gguf_get_val_data(ctx, i), dtype.itemsize), dtype=dtype)[0].item()
                kvs.append((lib.gguf_get_key(ctx, i).decode(), t, value))
            tensors = [(lib.gguf_get_tensor_name(ctx, i).decode(), lib.gguf_get_tensor_type(ctx, i),
                        lib.gguf_get_tensor_offset(ctx, i), lib.gguf_get_tensor_size(ctx, i))
                       for i in range(lib.gguf_get_n_tensors(ctx))]
            return {"version": lib.gguf_get_version(ctx), "alignment": lib.gguf_get_alignment(ctx),
                    "data_offset": lib.gguf_get_data_offset(ctx), "kvs": kvs, "tensors": tensors}
        finally:
            lib.gguf_free(ctx)

    def quantize(self, type_id: int, values: np.ndarray, imatrix: np.ndarray | None = None) -> np.ndarray:
        values = np.ascontiguousarray(values, dtype=np.float32)
        rows, n = values.shape
        out = np.zeros(rows * self.lib.ggml_row_size(type_id, n), dtype=np.uint8)
        im = None if imatrix is None else np.ascontiguousarray(imatrix, dtype=np.float32)
        self.lib.ggml_quantize_chunk(type_id, values.ctypes.data, out.ctypes.data, 0, rows, n,
                                     None if im is None else im.ctypes.data)
        return out


@pytest.fixture(scope="session")
def ggml() -> Ggml:
    path = ORACLE_LIB_DIR / "libggml-base.so"
    if not path.is_file():
        pytest.skip(f"llama.cpp's libggml-base.so not found in {ORACLE_LIB_DIR} (make oracle installs it)")
    return Ggml(path)


@pytest.fixture(scope="session")
def cli() -> str:
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"the gguf CLI is not built at {CLI}")
    return CLI
