"""quantize and dequantize: byte-identical to ggml_quantize_chunk (llama.cpp's libggml-base) for
every type the library quantizes, with and without an importance matrix; the same values as
gguf-py's numpy (de)quantizers wherever gguf-py has one; gguf-py's shapes and errors."""
from __future__ import annotations

import numpy as np
import pytest

import ggufkit
from ggufkit import GGMLQuantizationType as Q

ROWS, COLS = 4, 512
RNG = np.random.default_rng(7)
VALUES = (RNG.standard_normal((ROWS, COLS)) * np.linspace(0.1, 3.0, COLS)).astype(np.float32)
IMATRIX = RNG.uniform(0.1, 4.0, COLS).astype(np.float32)
QUANTIZABLE = [t for t in Q if ggufkit.quants.can_quantize(t) and t not in (Q.F32, Q.F16)]


def needs_imatrix(t) -> bool:
    return bool(ggufkit.quants._CAPS[t][2])


def test_every_block_type_is_quantizable():
    names = {t.name for t in QUANTIZABLE}
    assert {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ2_XXS", "IQ2_XS",
            "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "BF16"} <= names


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=[t.name for t in QUANTIZABLE])
def test_quantize_is_ggml_byte_for_byte(ggml, qtype):
    imatrix = IMATRIX if needs_imatrix(qtype) else None
    ours = ggufkit.quantize(VALUES, qtype, imatrix=imatrix)
    block, size = ggufkit.GGML_QUANT_SIZES[qtype]
    assert ours.dtype == np.uint8 and ours.shape == (ROWS, COLS // block * size)
    assert ours.tobytes() == ggml.quantize(int(qtype), VALUES, imatrix).tobytes()
    # With an importance matrix where the type takes one, and on one thread: still ggml's bytes.
    with_imatrix = ggufkit.quantize(VALUES, qtype, imatrix=IMATRIX, threads=1)
    assert with_imatrix.tobytes() == ggml.quantize(int(qtype), VALUES, IMATRIX).tobytes()
    # Dequantized: ggml's values (gguf-py's, where gguf-py has the type), any shape of rows.
    back = ggufkit.dequantize(ours, qtype)
    assert back.dtype == np.float32 and back.shape == (ROWS, COLS)
    three_d = ggufkit.dequantize(ours.reshape(2, 2, -1), qtype)
    assert three_d.shape == (2, 2, COLS) and np.array_equal(three_d.reshape(ROWS, COLS), back, equal_nan=True)


@pytest.mark.parametrize("qtype", QUANTIZABLE, ids=[t.name for t in QUANTIZABLE])
def test_dequantize_matches_gguf_py(ggufpy, qtype):
    data = ggufkit.quantize(VALUES, qtype, imatrix=IMATRIX if needs_imatrix(qtype) else None)
    try:
        ref = ggufpy.quants.dequantize(data, ggufpy.GGMLQuantizationType(int(qtype)))
    except NotImplementedError:
        pytest.skip(f"gguf-py cannot dequantize {qtype.name}")
    ours = ggufkit.dequantize(data, qtype)
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    assert np.array_equal(ours, ref, equal_nan=True)


def test_quantize_matches_gguf_py_where_it_has_a_quantizer(ggufpy):
    compared = []
    for qtype in QUANTIZABLE:
        try:
            ref = ggufpy.quants.quantize(VALUES, ggufpy.GGMLQuantizationType(int(qtype)))
        except NotImplementedError:
            continue
        ours = ggufkit.quantize(VALUES, qtype)
        assert ours.shape == ref.shape and ours.tobytes() == ref.tobytes(), qtype.name
        compared.append(qtype.name)
    assert {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16"} <= set(compared)


def test_float_types_are_as_gguf_py(ggufpy):
    for qtype in (Q.F32, Q.F16):
        ref = ggufpy.quants.quantize(VALUES, ggufpy.GGMLQuantizationType(int(qtype)))
        ours = ggufkit.quantize(VALUES, qtype)
        assert ours.dtype == ref.dtype and np.array_equal(ours, ref)
        assert np.array_equal(ggufkit.dequantize(ours, qtype), ggufpy.quants.dequantize(ref, ggufpy.GGMLQuantizationType(int(qtype))))


def test_errors():
    with pytest.raises(ggufkit.QuantError, match=r"Can't quantize tensor with shape \(4, 100\) to Q4_K"):
        ggufkit.quantize(np.zeros((4, 100), np.float32), Q.Q4_K)
    with pytest.raises(ggufkit.QuantError, match="IQ2_XXS needs an importance matrix"):
        ggufkit.quantize(VALUES, Q.IQ2_XXS)
    with pytest.raises(ValueError, match="one weight per column"):
        ggufkit.quantize(VALUES, Q.Q4_K, imatrix=np.ones(3, np.float32))
    with pytest.raises(ValueError, match="not a multiple of Q4_K type size"):
        ggufkit.dequantize(np.zeros((2, 100), np.uint8), Q.Q4_K)
    with pytest.raises(ValueError, match="4 is not a valid GGMLQuantizationType"):
        ggufkit.dequantize(np.zeros(4, np.uint8), 4)  # a removed type id
    with pytest.raises(ValueError, match=r"threads must be 0 or more \(0 or None: every core\), not -1"):
        ggufkit.quantize(VALUES, Q.Q8_0, threads=-1)
