"""GGUFWriter's array values: every kind of sequence gguf-py's writer takes (list, tuple, range,
array.array, bytes, bytearray, str), and numpy arrays (which gguf-py refuses; here they are their
tolist()), written with the same bytes as gguf-py's writer writes for the same calls (for numpy
arrays: for their tolist()) and read back with every value equal.

The elements of a range, an array.array or a numpy array are made anew by each __getitem__: a
converter that kept borrowed references to them read freed memory (garbage token texts written
with close() succeeding; crashes under the debug allocator). ctest runs this file with
PYTHONMALLOC=debug (and in the sanitizer build with ASan); run directly, the last test runs the
file again under PYTHONMALLOC=debug."""
from __future__ import annotations

import array
import os
import subprocess
import sys

import numpy as np
import pytest

import ggufkit
from ggufkit import GGUFValueType as T

# (key, value given to ggufkit, the same value for gguf-py (None: the value itself), sub_type,
#  the element type written, the contents read back)
CASES = [
    ("list.str", ["a", "b", "ünï"], None, None, T.STRING, ["a", "b", "ünï"]),
    ("tuple.str", ("x", "yz"), None, None, T.STRING, ["x", "yz"]),
    ("list.bytes", [b"ab", bytearray(b"\xc3\xbc")], None, None, T.STRING, ["ab", "ü"]),
    ("str", "abc", None, None, T.STRING, ["a", "b", "c"]),
    ("range", range(3, 9), None, None, T.INT32, [3, 4, 5, 6, 7, 8]),
    ("range.u64", range(2**40, 2**40 + 3), None, T.UINT64, T.UINT64, [2**40, 2**40 + 1, 2**40 + 2]),
    ("array.i", array.array("i", [-1, 0, 7]), None, None, T.INT32, [-1, 0, 7]),
    ("array.B", array.array("B", [0, 255]), None, T.UINT8, T.UINT8, [0, 255]),
    ("array.f", array.array("f", [0.5, -1.25]), None, None, T.FLOAT32, [0.5, -1.25]),
    ("array.d.f64", array.array("d", [0.1, 1e300]), None, T.FLOAT64, T.FLOAT64, [0.1, 1e300]),
    ("bytes", b"\x00\x01\xff", None, None, T.UINT8, [0, 1, 255]),
    ("bytearray", bytearray(b"\x05\x06"), None, None, T.INT32, [5, 6]),
    ("nested", [[1, 2], [3]], None, None, T.ARRAY, [1, 2, 3]),
    ("nested.kinds", [range(2), array.array("i", [5]), np.array([6, 7])], [[0, 1], [5], [6, 7]], T.ARRAY, T.ARRAY,
     [0, 1, 5, 6, 7]),
    ("np.str", np.array(["tok", "ü", ""]), ["tok", "ü", ""], None, T.STRING, ["tok", "ü", ""]),
    ("np.bytes", np.array([b"a", b"\xc3\xa9"]), [b"a", b"\xc3\xa9"], None, T.STRING, ["a", "é"]),
    ("np.int32", np.arange(-2, 3, dtype=np.int32), [-2, -1, 0, 1, 2], None, T.INT32, [-2, -1, 0, 1, 2]),
    ("np.uint32.typed", np.array([1, 4000000000], dtype=np.uint32), [1, 4000000000], T.UINT32, T.UINT32,
     [1, 4000000000]),
    ("np.uint8.typed", np.array([9, 200], dtype=np.uint8), [9, 200], T.UINT8, T.UINT8, [9, 200]),
    ("np.int64.typed", np.array([-(2**40), 3], dtype=np.int64), [-(2**40), 3], T.INT64, T.INT64, [-(2**40), 3]),
    ("np.float32", np.array([0.1, 2.5], dtype=np.float32), np.array([0.1, 2.5], dtype=np.float32).tolist(), None,
     T.FLOAT32, np.array([0.1, 2.5], dtype=np.float32).tolist()),
    ("np.float64.typed", np.array([0.1, -3.0]), [0.1, -3.0], T.FLOAT64, T.FLOAT64, [0.1, -3.0]),
    ("np.bool", np.array([True, False, True]), [True, False, True], None, T.BOOL, [True, False, True]),
    ("np.2d", np.array([[1, 2], [3, 4]], dtype=np.int16), [[1, 2], [3, 4]], None, T.ARRAY, [1, 2, 3, 4]),
]


def write(gguf, path, ggufpy_values: bool):
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value, reference, sub_type, _, _ in CASES:
        given = reference if ggufpy_values and reference is not None else value
        sub = None if sub_type is None else gguf.GGUFValueType(int(sub_type))
        w.add_key_value("t." + key, given, gguf.GGUFValueType.ARRAY, sub)
    tokens = ["<s>", "</s>", "héllo", "wörld"]
    w.add_token_list(tokens if ggufpy_values else np.array(tokens))  # the reported case
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_every_kind_read_back(tmp_path):
    path = tmp_path / "kinds.gguf"
    write(ggufkit, path, ggufpy_values=False)
    fields = ggufkit.GGUFReader(path).fields
    for key, _, _, _, element_type, contents in CASES:
        field = fields["t." + key]
        assert (key, field.types[0], field.types[1]) == (key, T.ARRAY, element_type)
        assert (key, field.contents()) == (key, contents)
    assert fields["tokenizer.ggml.tokens"].contents() == ["<s>", "</s>", "héllo", "wörld"]


def test_same_bytes_as_ggufpy(tmp_path, ggufpy):
    ours, theirs = tmp_path / "ours.gguf", tmp_path / "theirs.gguf"
    write(ggufkit, ours, ggufpy_values=False)
    write(ggufpy, theirs, ggufpy_values=True)
    assert ours.read_bytes() == theirs.read_bytes()


@pytest.mark.parametrize("value, message", [
    ({1: 2}, "t.k: Invalid GGUF metadata array, expecting sequence"),
    ({1, 2}, "t.k: Invalid GGUF metadata array, expecting sequence"),
    (iter([1]), "t.k: Invalid GGUF metadata array, expecting sequence"),
    (np.array([], dtype=np.int32), "t.k: Invalid GGUF metadata array. Empty array"),
    (np.array([1, 2**40]), "t.k: value out of range"),
    ([1, "a"], "t.k: All items in a GGUF array should be of the same type"),
])
def test_refused(tmp_path, value, message):
    path = tmp_path / "refused.gguf"
    w = ggufkit.GGUFWriter(str(path), "llama")
    w.add_key_value("t.k", value, T.ARRAY)
    with pytest.raises(ValueError) as e:
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    assert str(e.value) == message
    assert not path.exists()


@pytest.mark.skipif(os.environ.get("PYTHONMALLOC") in ("debug", "malloc"),
                    reason="already running under PYTHONMALLOC=debug (or malloc, under ASan)")
def test_under_debug_allocator():
    env = dict(os.environ, PYTHONMALLOC="debug")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
