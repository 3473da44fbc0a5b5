"""The module on hostile inputs and arguments: names and strings that are not UTF-8 (decoded
losslessly, where gguf-py raises UnicodeDecodeError), and one rule for ``threads`` at every entry
point that takes it (0 or None: every core; negative refused before any work)."""
from __future__ import annotations

import struct

import numpy as np
import pytest

import ggufkit
from ggufkit import GGMLQuantizationType as Q
from ggufkit import verbs


def raw_gguf(kvs: list[tuple[bytes, bytes]], tensors: list[tuple[bytes, int, list[int], bytes]], alignment=32) -> bytes:
    """A GGUF v3 file from raw pieces: kvs as (key bytes, encoded type + value), tensors as (name,
    type id, dims, data). Shares nothing with the library's writer."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)))
    for key, value in kvs:
        out += struct.pack("<Q", len(key)) + key + value
    offset = 0
    for name, type_id, dims, data in tensors:
        out += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        out += b"".join(struct.pack("<q", d) for d in dims) + struct.pack("<IQ", type_id, offset)
        offset += (len(data) + alignment - 1) // alignment * alignment
    out += bytes(-len(out) % alignment)
    for _, _, _, data in tensors:
        out += data + bytes(-len(data) % alignment)
    return bytes(out)


def string_value(b: bytes) -> bytes:
    return struct.pack("<IQ", 8, len(b)) + b


BAD_KEY, BAD_VALUE, BAD_TENSOR = b"bad.\xff\xfekey", b"caf\xe9 \xc3", b"t\xff"
DATA = np.arange(8, dtype=np.float32)


@pytest.fixture()
def non_utf8(tmp_path):
    path = tmp_path / "non-utf8.gguf"
    path.write_bytes(raw_gguf([(b"general.architecture", string_value(b"llama")), (BAD_KEY, string_value(BAD_VALUE)),
                               (b"list", struct.pack("<IIQ", 9, 8, 2) + struct.pack("<Q", 1) + b"\x80" +
                                struct.pack("<Q", 2) + b"ok")],
                              [(BAD_TENSOR, 0, [8], DATA.tobytes())]))
    return path


def test_non_utf8_names_and_strings_decode_losslessly(non_utf8, ggufpy):
    with pytest.raises(UnicodeDecodeError):  # the reference: gguf-py cannot open the file
        ggufpy.GGUFReader(non_utf8)
    r = ggufkit.GGUFReader(non_utf8)
    key = BAD_KEY.decode("utf-8", "surrogateescape")
    assert list(r.fields) == ["GGUF.version", "GGUF.tensor_count", "GGUF.kv_count", "general.architecture", key, "list"]
    assert r.fields[key].contents() == "caf\udce9 \udcc3"
    assert r.fields[key].contents().encode("utf-8", "surrogateescape") == BAD_VALUE
    assert bytes(r.fields[key].parts[1]) == BAD_KEY and bytes(r.fields[key].parts[4]) == BAD_VALUE
    assert r.fields["list"].contents() == ["\udc80", "ok"] and r.fields["list"].contents(0) == "\udc80"
    assert [(t.name, t.data.tolist()) for t in r.tensors] == [("t\udcff", DATA.tolist())]


def test_non_utf8_round_trip_through_writer_and_edits(non_utf8, tmp_path):
    r = ggufkit.GGUFReader(non_utf8)
    out = tmp_path / "copy.gguf"
    w = ggufkit.GGUFWriter(out, "llama")
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        w.add_key_value(name, field.contents(), field.types[0], field.types[-1] if len(field.types) > 1 else None)
    for t in r.tensors:
        w.add_tensor(t.name, np.array(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert out.read_bytes() == non_utf8.read_bytes()  # the same bytes as the raw file
    # A name read from the file is a name the verbs take.
    key = BAD_KEY.decode("utf-8", "surrogateescape")
    result = ggufkit.remove(out, key, sync=False)
    assert (result.mode, [c["key"] for c in result.changes]) == ("rewrite", ["bad.\ufffd\ufffdkey"])
    assert list(ggufkit.GGUFReader(out).fields)[3:] == ["general.architecture", "list"]


# ---- threads: one rule everywhere ------------------------------------------------------------

NEGATIVE = "threads must be 0 or more (0 or None: every core), not -1"
VALUES = np.random.default_rng(5).standard_normal((4, 64)).astype(np.float32)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("threads") / "model.gguf"
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_tensor("a.weight", VALUES)
    w.add_tensor("b.weight", VALUES * 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def entry_points(model, out):
    q8 = ggufkit.quantize(VALUES, Q.Q8_0)
    return {
        "dequantize f32": lambda t: ggufkit.dequantize(VALUES, Q.F32, threads=t),
        "dequantize q8_0": lambda t: ggufkit.dequantize(q8, Q.Q8_0, threads=t),
        "quantize f16": lambda t: ggufkit.quantize(VALUES, Q.F16, threads=t),
        "quantize q8_0": lambda t: ggufkit.quantize(VALUES, Q.Q8_0, threads=t),
        "_core.dequantize": lambda t: ggufkit._core.dequantize(q8.reshape(-1), int(Q.Q8_0), t),
        "_core.quantize": lambda t: ggufkit._core.quantize(VALUES.reshape(-1), int(Q.Q8_0), 64, None, t),
        "export_to_gguf": lambda t: ggufkit.export_to_gguf({"w": VALUES}, out, threads=t),
        "export_to_gguf q8_0": lambda t: ggufkit.export_to_gguf({"w": VALUES}, out, quantize="q8_0", threads=t),
        "quantize_model": lambda t: verbs.quantize_model(model, out, "Q8_0", threads=t, sync=False),
        "quantize_model dry_run": lambda t: verbs.quantize_model(model, out, "Q8_0", threads=t, dry_run=True),
        "convert": lambda t: verbs.convert(out.parent, out, threads=t, dry_run=True),
        "hash": lambda t: verbs.hash(model, threads=t),
    }


ENTRY_POINTS = list(entry_points(None, None))


@pytest.mark.parametrize("name", ENTRY_POINTS)
def test_negative_threads_refused(name, model, tmp_path):
    out = tmp_path / "out.gguf"
    call = entry_points(model, out)[name]
    with pytest.raises(ValueError) as e:
        call(-1)
    assert (type(e.value), str(e.value)) == (ValueError, NEGATIVE)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", [n for n in ENTRY_POINTS if n != "convert"])
def test_zero_threads_is_every_core(name, model, tmp_path):
    out = tmp_path / "out.gguf"
    call = entry_points(model, out)[name]
    every_core = call(0)
    written = out.read_bytes() if out.exists() else None
    one = call(1)
    if isinstance(every_core, np.ndarray):
        assert np.array_equal(every_core, one)
    else:
        assert every_core == one
    assert (out.read_bytes() if out.exists() else None) == written
    assert (written is not None) == (name in ("export_to_gguf", "export_to_gguf q8_0", "quantize_model"))
