"""GGUFWriter: the same calls as gguf-py's writer give the same bytes as gguf-py's (both ways of
writing tensors, little- and big-endian), llama.cpp's parser reads them back as gguf-py does, and
the file is written atomically: a failed or unfinished writer leaves nothing behind."""
from __future__ import annotations

import os

import numpy as np
import pytest

import ggufkit

RNG = np.random.default_rng(3)
F32 = RNG.standard_normal((3, 64)).astype(np.float32)
F16 = RNG.standard_normal((2, 32)).astype(np.float16)
I32 = np.arange(10, dtype=np.int32)
Q8 = RNG.standard_normal((4, 64)).astype(np.float32)


def write_model(gguf, path, endianess=None, with_info=False):
    """One script for both libraries: every value type, arrays, the helpers, custom alignment 64,
    typed, raw (Q8_0) tensors."""
    kwargs = {} if endianess is None else {"endianess": gguf.GGUFEndian(int(endianess))}
    w = gguf.GGUFWriter(path, "llama", **kwargs)
    w.add_name("tiny test")
    w.add_custom_alignment(64)
    w.add_quantization_version(2)
    w.add_file_type(7)
    w.add_context_length(2048)
    w.add_embedding_length(64)
    w.add_head_count([4, 4, 8])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(["a", "b", "<s>", "ünï"])
    w.add_token_scores([0.0, -1.5, 2.25, 3.0])
    w.add_token_types([1, 1, 3, 1])
    w.add_bos_token_id(2)
    w.add_add_bos_token(True)
    w.add_chat_template([{"name": "default", "template": "{{x}}"}, {"name": "tool use", "template": "{{y}}"}])
    w.add_sampling_top_k(40)
    w.add_sampling_temp(0.7)
    w.add_sampling_sequence("kt")
    w.add_base_model_count(1)
    w.add_base_model_name(0, "base")
    w.add_base_model_repo_url(0, "https://example.org/base")
    w.add_dataset_count(1)
    w.add_dataset_name(0, "data")
    w.add_tags(["a", "b"])
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**62))
    w.add_float32("t.f32", 0.1)
    w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", False)
    w.add_string("t.empty", "")  # not written (gguf-py skips empty strings)
    w.add_array("t.bools", [True, False, True])
    w.add_array("t.bytes", b"\x00\x01\xff")
    w.add_key_value("t.u16s", [1, 2, 3], gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.UINT16)
    q8 = gguf.quantize(Q8, gguf.GGMLQuantizationType.Q8_0)
    tensors = [("a.weight", F32, {}), ("b.weight", F16, {}), ("c.ids", I32, {}),
               ("d.weight", q8, {"raw_dtype": gguf.GGMLQuantizationType.Q8_0})]
    if not with_info:
        for name, data, extra in tensors:
            w.add_tensor(name, data, **extra)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
    else:
        for name, data, extra in tensors:
            w.add_tensor_info(name, data.shape, data.dtype, data.nbytes, **extra)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_ti_data_to_file()
        for _name, data, _extra in tensors:
            w.write_tensor_data(data)
    w.close()


class GgufPyQuantize:
    """gguf-py with ggufkit's Q8_0 (gguf-py's is the same bytes: test_quants), to share the script."""

    def __init__(self, ggufpy):
        self._m = ggufpy

    def __getattr__(self, name):
        return ggufkit.quantize if name == "quantize" else getattr(self._m, name)


@pytest.mark.parametrize("with_info", [False, True], ids=["add_tensor", "add_tensor_info"])
@pytest.mark.parametrize("endian", ["little", "big"])
def test_same_bytes_as_gguf_py(ggufpy, tmp_path, with_info, endian):
    e = ggufkit.GGUFEndian.BIG if endian == "big" else None
    ours, ref = tmp_path / "ours.gguf", tmp_path / "ref.gguf"
    write_model(ggufkit, ours, e, with_info)
    write_model(GgufPyQuantize(ggufpy), ref, e, with_info)
    assert ours.read_bytes() == ref.read_bytes()
    assert sorted(os.listdir(tmp_path)) == ["ours.gguf", "ref.gguf"]  # no temporary file left


def test_llama_cpp_reads_it_as_gguf_py_does(ggufpy, ggml, tmp_path):
    path = tmp_path / "model.gguf"
    write_model(ggufkit, path)
    seen = ggml.read(path)
    ref = ggufpy.GGUFReader(path)
    assert seen["version"] == 3 and seen["alignment"] == 64 and seen["data_offset"] == ref.data_offset
    assert seen["data_offset"] % 64 == 0
    fields = {k: f for k, f in ref.fields.items() if not k.startswith("GGUF.")}
    assert [k for k, _t, _v in seen["kvs"]] == list(fields)
    for key, vtype, value in seen["kvs"]:
        expected = fields[key].contents()
        if isinstance(value, float) or (isinstance(value, list) and value and isinstance(value[0], float)):
            assert np.allclose(value, expected, rtol=0, atol=0), key
        else:
            assert value == expected, key
    assert "t.empty" not in fields and fields["tokenizer.chat_template"].contents() == "{{x}}"
    assert fields["tokenizer.chat_templates"].contents() == ["tool_use"]
    assert fields["t.u64"].contents() == 2**63 + 5 and fields["t.bytes"].contents() == [0, 1, 255]
    names = ["a.weight", "b.weight", "c.ids", "d.weight"]
    assert [(n, t) for n, t, _o, _s in seen["tensors"]] == list(zip(names, [0, 1, 26, 8]))
    data = path.read_bytes()
    for (name, _t, offset, size), tensor in zip(seen["tensors"], ref.tensors):
        assert tensor.name == name and offset % 64 == 0
        assert data[seen["data_offset"] + offset:seen["data_offset"] + offset + size] == tensor.data.tobytes()
    assert np.array_equal(ref.tensors[0].data, F32) and np.array_equal(ref.tensors[1].data, F16)
    assert np.array_equal(ref.tensors[2].data, I32)
    assert np.array_equal(ggufkit.dequantize(ref.tensors[3].data, ggufkit.GGMLQuantizationType.Q8_0),
                          ggufkit.dequantize(ggufkit.quantize(Q8, ggufkit.GGMLQuantizationType.Q8_0), 8))


def test_a_failed_writer_leaves_nothing_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"the old file")
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_tensor_info("a", (2, 3), np.float32, 24)
    w.add_tensor_info("b", (4,), np.float32, 16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.write_tensor_data(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="tensor b: 8 bytes given, its info says 16"):
        w.write_tensor_data(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="the file was abandoned after an error; nothing was written"):
        w.close()
    assert path.read_bytes() == b"the old file" and os.listdir(tmp_path) == ["model.gguf"]


def test_close_before_every_tensor_is_written_is_an_error(tmp_path):
    path = tmp_path / "model.gguf"
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_tensor_info("a", (2,), np.float32, 8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    with pytest.raises(ValueError, match=r"the data of 1 tensor\(s\) was not written \(first: a\); nothing was written"):
        w.close()
    assert os.listdir(tmp_path) == []


def test_an_exception_inside_with_leaves_nothing(tmp_path):
    path = tmp_path / "model.gguf"
    with pytest.raises(RuntimeError):
        with ggufkit.GGUFWriter(path, "llama") as w:
            w.add_tensor("a", np.zeros(4, np.float32))
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_ti_data_to_file()
            raise RuntimeError("stop")
    assert os.listdir(tmp_path) == []


def test_refusals(tmp_path):
    w = ggufkit.GGUFWriter(tmp_path / "x.gguf", "llama")
    with pytest.raises(ValueError, match="power of two"):
        w.add_custom_alignment(48)
    w.add_tensor("a", np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="Duplicated tensor name 'a'"):
        w.add_tensor("a", np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="Only F16, F32, F64, I8, I16, I32, I64"):
        w.add_tensor("b", np.zeros(4, np.uint32))
    with pytest.raises(ValueError, match=r"bytes per row \(30\) is not a multiple of Q8_0 type size \(34\)"):
        w.add_tensor("q", np.zeros((2, 30), np.uint8), raw_dtype=ggufkit.GGMLQuantizationType.Q8_0)
    w.add_tensor_info("wrong", (2, 8), np.float32, 60)  # 2 x 8 F32 take 64 bytes
    w.write_header_to_file()
    w.write_kv_data_to_file()
    with pytest.raises(ValueError, match="tensor wrong: 60 bytes for a f32 tensor of this shape, which takes 64"):
        w.write_ti_data_to_file()
    with pytest.raises(ValueError, match="Expected output file to be not yet opened"):
        w.add_tensor_info("late", (1,), np.float32, 4)
    with pytest.raises(ValueError, match="splits? it afterwards|one file"):
        ggufkit.GGUFWriter(tmp_path / "y.gguf", "llama", split_max_tensors=2)
    assert os.listdir(tmp_path) == []


def nested_and_vocab_only(gguf, path, close=True):
    """gguf-py's vocabulary-only sequence (header, keys, close: no tensor infos), with arrays of
    arrays and bytes."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_token_list(["a", "bb"])
    w.add_array("t.nested", [[1, 2], [3, 4, 5]])
    w.add_array("t.deep", [[["u", "vv"]], [["w"]]])
    w.add_array("t.floats", [[0.5], [1.5, 2.5]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    if close:
        w.close()
    return w


def test_vocab_only_files_and_arrays_of_arrays_as_gguf_py(ggufpy, tmp_path):
    ours, ref = tmp_path / "ours.gguf", tmp_path / "ref.gguf"
    nested_and_vocab_only(ggufkit, ours)
    nested_and_vocab_only(ggufpy, ref)
    assert ours.read_bytes() == ref.read_bytes()
    a, b = ggufpy.GGUFReader(ref), ggufkit.GGUFReader(ours)
    for key in ("t.nested", "t.deep", "t.floats"):
        fa, fb = a.fields[key], b.fields[key]
        assert [int(t) for t in fb.types] == [int(t) for t in fa.types]
        assert fb.contents() == fa.contents() and list(fb.data) == list(fa.data)
        assert [p.tolist() for p in fb.parts] == [p.tolist() for p in fa.parts]
        for k in range(-len(fa.data), len(fa.data)):  # one leaf of the flattened array, as gguf-py
            assert fb.contents(k) == fa.contents(k), (key, k)
        assert fb.contents(slice(1, None)) == fa.contents(slice(1, None))
    assert b.fields["t.deep"].contents() == ["u", "vv", "w"]


def test_a_writer_collected_without_close_is_complete_as_gguf_py(ggufpy, tmp_path):
    import gc
    ours, ref = tmp_path / "ours.gguf", tmp_path / "ref.gguf"
    for gguf, path in ((ggufkit, ours), (ggufpy, ref)):
        w = gguf.GGUFWriter(path, "llama")
        w.add_tensor("a", np.arange(8, dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        del w
        gc.collect()
    assert ours.read_bytes() == ref.read_bytes()
    # Keys only, never closed: complete too.
    for gguf, name in ((ggufkit, "keys-ours.gguf"), (ggufpy, "keys-ref.gguf")):
        w = nested_and_vocab_only(gguf, tmp_path / name, close=False)
        del w
        gc.collect()
    assert (tmp_path / "keys-ours.gguf").read_bytes() == (tmp_path / "keys-ref.gguf").read_bytes()


def test_a_missing_tensor_abandons_the_file(tmp_path):
    path = tmp_path / "m.gguf"
    w = ggufkit.GGUFWriter(path, "llama")
    w.add_tensor_info("a", (2,), np.float32, 8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    with pytest.raises(ValueError, match=r"tensor 'a' has no data"):
        w.write_tensors_to_file()
    assert os.listdir(tmp_path) == []  # no temporary file either
    with pytest.raises(ValueError, match="abandoned after an error; nothing was written"):
        w.close()
    assert os.listdir(tmp_path) == []


def test_values_that_do_not_fit_their_type_name_the_key(tmp_path):
    for add, key, value, message in [
            ("add_uint64", "k.u64", -1, r"k.u64: -1 is not a uint64"),
            ("add_int64", "k.i64", 2**70, r"k.i64: 1180591620717411303424 is not an int64"),
            ("add_array", "k.arr", [2**70], r"k.arr: \[1180591620717411303424\] is not an array of int32"),
            ("add_uint8", "k.u8", 300, r"k.u8: value out of range"),
            ("add_array", "k.mixed", [1, "a"], r"k.mixed: All items in a GGUF array should be of the same type")]:
        w = ggufkit.GGUFWriter(tmp_path / "x.gguf", "llama")
        getattr(w, add)(key, value)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        with pytest.raises(ValueError, match=message):
            w.write_ti_data_to_file()
        assert os.listdir(tmp_path) == []


def nested(levels):
    value = 1
    for _ in range(levels):
        value = [value]
    return value


def test_arrays_nested_deeper_than_the_reader_reads_are_refused(tmp_path):
    # Issue 29: such a value was written, and no reader (nor any verb, rm included) opened the file again.
    message = "'k.deep': arrays nested more than 8 deep"
    w = ggufkit.GGUFWriter(tmp_path / "x.gguf", "llama")
    w.add_array("k.deep", nested(9))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    with pytest.raises(ggufkit.GGUFError) as e:
        w.write_ti_data_to_file()
    assert (e.value.code, str(e.value)) == ("array_too_deep", f"{tmp_path / 'x.gguf'}: {message}")
    assert os.listdir(tmp_path) == []
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.export_to_gguf({"a": np.zeros(4, dtype=np.float32)}, tmp_path / "e.gguf", metadata={"k.deep": nested(9)})
    assert (e.value.code, str(e.value)) == ("array_too_deep", f"{tmp_path / 'e.gguf'}: {message}")
    assert os.listdir(tmp_path) == []
    # Eight levels: written and read back.
    ggufkit.export_to_gguf({"a": np.zeros(4, dtype=np.float32)}, tmp_path / "e.gguf", metadata={"k.deep": nested(8)})
    assert ggufkit.GGUFReader(tmp_path / "e.gguf").fields["k.deep"].contents() == [1]
    # An edit: refused, the file unchanged.
    before = (tmp_path / "e.gguf").read_bytes()
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.set(tmp_path / "e.gguf", "k.deep", nested(9), sync=False)
    assert (e.value.code, str(e.value)) == (
        "array_too_deep", f"{tmp_path / 'e.gguf'}: 'k.deep': arrays nested more than 8 deep")
    assert (tmp_path / "e.gguf").read_bytes() == before


def test_a_list_nested_past_any_stack_or_inside_itself_is_refused_as_too_deep(tmp_path):
    # Issue 29 review: 50000 nested lists, or a list holding itself, crashed the interpreter (SIGSEGV).
    itself = []
    itself.append(itself)
    for value in (nested(50000), itself):
        w = ggufkit.GGUFWriter(tmp_path / "x.gguf", "llama")
        w.add_array("k.deep", value)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        with pytest.raises(ggufkit.GGUFError) as e:
            w.write_ti_data_to_file()
        assert (e.value.code, str(e.value)) == ("array_too_deep", f"{tmp_path / 'x.gguf'}: 'k.deep': arrays nested more than 8 deep")
        assert os.listdir(tmp_path) == []
