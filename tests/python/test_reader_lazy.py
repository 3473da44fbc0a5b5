"""GGUFReader opens hostile-but-valid files (many keys, many tensors, millions of nested empty
arrays) at the cost of the library's validation: within 5x of ``gguf info``'s time and peak
memory on the same file, because ``fields`` and ``tensors`` make their entries on access. (It
took 60x the time and 10x the memory when every entry was made at open.)"""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time

import pytest

import ggufkit
from ggufkit import GGUFValueType as T

N_KEYS = N_TENSORS = 200_000
N_NESTED = 2_000_000


def header(tensors: int, kvs: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, kvs)


def padded(b: bytes) -> bytes:
    return b + bytes(-len(b) % 32)


def many_keys(n: int) -> bytes:
    return padded(header(0, n) + b"".join(struct.pack("<Q", 9) + b"k.%07d" % i + struct.pack("<II", 4, i)
                                          for i in range(n)))


def many_tensors(n: int) -> bytes:  # n F32 tensors of one element
    infos = b"".join(struct.pack("<Q", 9) + b"t.%07d" % i + struct.pack("<IqIQ", 1, 1, 0, 32 * i) for i in range(n))
    return padded(header(n, 0) + infos) + bytes(32 * n)


def nested_empty_arrays(n: int) -> bytes:  # one key: an array of n empty arrays of uint32
    return padded(header(0, 1) + struct.pack("<Q", 1) + b"a" + struct.pack("<IIQ", 9, 9, n) + struct.pack("<IQ", 4, 0) * n)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    files = {"keys": many_keys(N_KEYS), "tensors": many_tensors(N_TENSORS), "nested": nested_empty_arrays(N_NESTED)}
    for name, data in files.items():
        (d / f"{name}.gguf").write_bytes(data)
    return {name: d / f"{name}.gguf" for name in files}


def gguf_info_cost(cli, path) -> tuple[float, int]:
    """The fastest of two runs of `gguf info`, and its peak RSS in KiB."""
    best, rss = float("inf"), 0
    for _ in range(2):
        start = time.perf_counter()
        p = subprocess.Popen([cli, "info", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(p.pid, 0)
        best = min(best, time.perf_counter() - start)
        rss = max(rss, usage.ru_maxrss)
        assert os.waitstatus_to_exitcode(status) == 0, p.stderr.read()
    return best, rss


OPEN = """
import json, resource, sys, time
import ggufkit
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
times = []
for _ in range(2):
    start = time.perf_counter()
    r = ggufkit.GGUFReader(sys.argv[1])
    counts = (len(r.fields), len(r.tensors))
    times.append(time.perf_counter() - start)
    del r
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
print(json.dumps({"seconds": min(times), "kib": grown, "counts": counts}))
"""


@pytest.mark.parametrize("kind, counts", [("keys", (3 + N_KEYS, 0)), ("tensors", (3, N_TENSORS)), ("nested", (4, 0))])
def test_open_within_5x_of_gguf_info(hostile, cli, kind, counts):
    path = hostile[kind]
    info_seconds, info_kib = gguf_info_cost(cli, path)
    r = subprocess.run([sys.executable, "-c", OPEN, str(path)], capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (0, "")
    opened = json.loads(r.stdout)
    assert tuple(opened["counts"]) == counts
    # The reader's own cost (the interpreter and numpy are there before it opens anything).
    assert opened["seconds"] <= 5 * info_seconds, (opened, info_seconds)
    assert opened["kib"] <= 5 * info_kib, (opened, info_kib)


def test_entries_of_hostile_files_on_access(hostile):
    r = ggufkit.GGUFReader(hostile["keys"])
    field = r.fields["k.0123456"]
    assert (field.name, field.offset, field.types, field.contents()) == ("k.0123456", 24 + 25 * 123456, [T.UINT32], 123456)
    assert r.fields["k.0123456"] is field  # the same object while it is held
    assert list(r.fields)[-2:] == ["k.0199998", "k.0199999"] and "k.0200000" not in r.fields
    t = ggufkit.GGUFReader(hostile["tensors"]).tensors
    assert [(x.name, x.shape.tolist(), x.n_bytes, x.data.tolist()) for x in t[-2:]] == \
           [("t.0199998", [1], 4, [0.0]), ("t.0199999", [1], 4, [0.0])]
    nested = ggufkit.GGUFReader(hostile["nested"]).fields["a"]
    assert (nested.types, nested.contents()) == ([T.ARRAY, T.ARRAY], [])


def test_fields_and_tensors_behave_as_gguf_pys(tmp_path):
    """fields: a read-only mapping in file order (gguf-py's OrderedDict); tensors: a sequence."""
    path = tmp_path / "small.gguf"
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_uint32("b.count", 3)
    w.add_string("a.name", "x")
    for name in ("w2", "w1", "w3"):
        w.add_tensor(name, __import__("numpy").zeros(4, dtype="float32"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = ggufkit.GGUFReader(path)
    names = ["GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture", "b.count", "a.name"]
    assert (list(r.fields), list(r.fields.keys()), len(r.fields)) == (names, names, 6)
    assert [n for n, _ in r.fields.items()] == names and [f.name for f in r.fields.values()] == names
    assert [r.fields[n].name for n in names] == names
    assert ("a.name" in r.fields, "nope" in r.fields, 3 in r.fields) == (True, False, False)
    assert (r.get_field("nope"), r.fields.get("a.name").contents()) == (None, "x")
    with pytest.raises(KeyError):
        r.fields["nope"]
    with pytest.raises(TypeError):
        r.fields["nope"] = None
    assert [t.name for t in r.tensors] == ["w2", "w1", "w3"]
    assert ([t.name for t in r.tensors[1:]], r.tensors[-1].name, r.get_tensor(0).name) == (["w1", "w3"], "w3", "w2")
    with pytest.raises(IndexError):
        r.tensors[3]
