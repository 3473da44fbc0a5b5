"""export_to_gguf: PyTorch modules and state dicts (torch or numpy) to GGUF, read back by gguf-py
and llama.cpp's parser: every tensor's name, type, shape (reversed) and bytes (quantized blocks
byte-identical to ggml's), every key, and the refusals."""
from __future__ import annotations

import os

import numpy as np
import pytest

import ggufkit
from ggufkit import GGMLQuantizationType as Q

torch = pytest.importorskip("torch", reason="python3-torch (scripts/install-deps.sh test) is needed")


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 300, bias=False))


def keys_of(path):
    reader = ggufkit.GGUFReader(path)
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}, reader


def test_a_module_to_q8_0(tmp_path, ggufpy, ggml):
    m = model()
    path = tmp_path / "m.gguf"
    ggufkit.export_to_gguf(m, path, quantize="q8_0")
    keys, reader = keys_of(path)
    assert keys == {"general.architecture": "custom", "general.name": "Sequential", "general.file_type": 7,
                    "general.quantization_version": 2}
    state = m.state_dict()
    expected = [("0.weight", Q.Q8_0, [64, 32]), ("0.bias", Q.F32, [32]), ("1.weight", Q.F32, [32]),
                ("1.bias", Q.F32, [32]), ("2.weight", Q.Q8_0, [32, 300])]
    assert [(t.name, t.tensor_type, t.shape.tolist()) for t in reader.tensors] == expected
    for t in reader.tensors:
        values = state[t.name].numpy()
        if t.tensor_type == Q.Q8_0:
            assert t.data.tobytes() == ggml.quantize(int(Q.Q8_0), values).tobytes()
        else:
            assert np.array_equal(t.data, values)
    # gguf-py and llama.cpp read the same file.
    ref = ggufpy.GGUFReader(path)
    assert [(t.name, int(t.tensor_type), t.shape.tolist()) for t in ref.tensors] == [(n, int(q), s) for n, q, s in expected]
    seen = ggml.read(path)
    assert [(n, t) for n, t, _o, _s in seen["tensors"]] == [(n, int(q)) for n, q, _s in expected]
    assert [k for k, _t, _v in seen["kvs"]] == list(keys)


def test_none_keeps_each_float_type_and_bf16_bits(tmp_path):
    tensors = {"a": torch.randn(4, 64, dtype=torch.bfloat16), "b": torch.randn(8, dtype=torch.float16),
               "c": np.arange(6, dtype=np.float64).reshape(2, 3), "d": torch.tensor(2.5)}
    path = tmp_path / "plain.gguf"
    ggufkit.export_to_gguf(tensors, path)
    keys, reader = keys_of(path)
    assert keys == {"general.architecture": "custom", "general.name": "plain", "general.quantization_version": 2}
    got = {t.name: t for t in reader.tensors}
    assert [(t.name, t.tensor_type, t.shape.tolist()) for t in reader.tensors] == [
        ("a", Q.BF16, [64, 4]), ("b", Q.F16, [8]), ("c", Q.F64, [3, 2]), ("d", Q.F32, [1])]
    assert got["a"].data.tobytes() == tensors["a"].view(torch.int16).numpy().tobytes()
    assert np.array_equal(got["b"].data, tensors["b"].numpy()) and np.array_equal(got["c"].data, tensors["c"])
    assert got["d"].data.tolist() == [2.5]


def test_f16_bf16_and_k_quants_convert_only_whole_rows(tmp_path, ggml):
    m = model()
    state = m.state_dict()
    for name, qtype in (("f16", Q.F16), ("bf16", Q.BF16), ("q4_k", Q.Q4_K)):
        path = tmp_path / f"{name}.gguf"
        ggufkit.export_to_gguf(m, path, quantize=name, model_name="tiny", metadata={"general.name": "renamed"})
        keys, reader = keys_of(path)
        assert keys["general.name"] == "renamed"
        types = {t.name: t.tensor_type for t in reader.tensors}
        # Q4_K's blocks are 256 wide: 0.weight (64 columns) and 2.weight (32) stay F32.
        matrices = qtype if qtype != Q.Q4_K else Q.F32
        assert types == {"0.weight": matrices, "0.bias": Q.F32, "1.weight": Q.F32, "1.bias": Q.F32, "2.weight": matrices}
        for t in reader.tensors:  # every tensor's bytes: converted as ggml converts, or kept
            values = state[t.name].numpy()
            expected = {Q.F32: values, Q.F16: values.astype(np.float16)}.get(t.tensor_type)
            if expected is None:
                expected = ggml.quantize(int(t.tensor_type), values)
            assert t.data.tobytes() == expected.tobytes(), (name, t.name)
    big = {"w": torch.randn(3, 512)}
    ggufkit.export_to_gguf(big, tmp_path / "k.gguf", quantize=Q.Q4_K)
    t = ggufkit.GGUFReader(tmp_path / "k.gguf").tensors[0]
    assert t.tensor_type == Q.Q4_K and t.data.tobytes() == ggml.quantize(int(Q.Q4_K), big["w"].numpy()).tobytes()


def test_metadata_types_and_overrides(tmp_path):
    path = tmp_path / "meta.gguf"
    ggufkit.export_to_gguf({"w": np.zeros((2, 32), np.float32)}, path, quantize="q8_0", model_name="named",
                           metadata={"general.architecture": "llama", "my.int": 7, "my.neg": -3, "my.big": 2**40,
                                     "my.float": 0.5, "my.flag": True, "my.text": "hi", "my.list": [1, -2, 3],
                                     "my.words": ["a", "b"], "my.u8": (9, ggufkit.GGUFValueType.UINT8)})
    reader = ggufkit.GGUFReader(path)
    fields = {k: ([t.name for t in f.types], f.contents()) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert fields == {
        "general.architecture": (["STRING"], "llama"), "general.name": (["STRING"], "named"),
        "general.file_type": (["UINT32"], 7), "general.quantization_version": (["UINT32"], 2),
        "my.int": (["UINT32"], 7), "my.neg": (["INT32"], -3), "my.big": (["UINT64"], 2**40),
        "my.float": (["FLOAT32"], 0.5), "my.flag": (["BOOL"], True), "my.text": (["STRING"], "hi"),
        "my.list": (["ARRAY", "INT32"], [1, -2, 3]), "my.words": (["ARRAY", "STRING"], ["a", "b"]),
        "my.u8": (["UINT8"], 9)}


def test_refusals_write_nothing(tmp_path):
    path = tmp_path / "x.gguf"
    with pytest.raises(ValueError, match=r"2.num_batches_tracked: a torch.int64 tensor; export_to_gguf writes float tensors only"):
        ggufkit.export_to_gguf(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4)), path)
    with pytest.raises(ValueError, match="ids: a int32 array"):
        ggufkit.export_to_gguf({"ids": np.arange(3, dtype=np.int32)}, path)
    with pytest.raises(ValueError, match="unknown type 'q9_9'"):
        ggufkit.export_to_gguf({"w": np.zeros(4, np.float32)}, path, quantize="q9_9")
    with pytest.raises(ggufkit.QuantError, match="w: IQ2_XXS needs an importance matrix"):
        ggufkit.export_to_gguf({"w": np.ones((2, 256), np.float32)}, path, quantize="iq2_xxs")
    with pytest.raises(TypeError, match="^export_to_gguf takes a torch.nn.Module or a mapping of names to tensors$"):
        ggufkit.export_to_gguf([1, 2], path)
    assert os.listdir(tmp_path) == []
    # With the importance matrix it needs, IQ2_XXS is written.
    ggufkit.export_to_gguf({"w": np.ones((2, 256), np.float32)}, path, quantize="iq2_xxs",
                           imatrix={"w": np.ones(256, np.float32)})
    assert ggufkit.GGUFReader(path).tensors[0].tensor_type == Q.IQ2_XXS
