"""gguf-py's quants module: quantize and dequantize every type the library has, in C++ (the GIL
released, on every core), bit-exact with ggml. Shapes as gguf-py's: quantized data are bytes, the
last dimension a row's bytes."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import _core
from .constants import GGML_QUANT_SIZES, GGMLQuantizationType

_CAPS = {GGMLQuantizationType(id_): (dq, q, needs) for id_, _n, _b, _s, _qd, dq, q, needs in _core.tensor_types()}


class QuantError(Exception):
    """A tensor that cannot be quantized to the type asked for (gguf-py's QuantError)."""


def quant_shape_to_byte_shape(shape: Sequence[int], quant_type: GGMLQuantizationType) -> tuple[int, ...]:
    block_size, type_size = GGML_QUANT_SIZES[quant_type]
    if shape[-1] % block_size != 0:
        raise ValueError(f"Quantized tensor row size ({shape[-1]}) is not a multiple of "
                         f"{GGMLQuantizationType(quant_type).name} block size ({block_size})")
    return (*shape[:-1], shape[-1] // block_size * type_size)


def quant_shape_from_byte_shape(shape: Sequence[int], quant_type: GGMLQuantizationType) -> tuple[int, ...]:
    block_size, type_size = GGML_QUANT_SIZES[quant_type]
    if shape[-1] % type_size != 0:
        raise ValueError(f"Quantized tensor bytes per row ({shape[-1]}) is not a multiple of "
                         f"{GGMLQuantizationType(quant_type).name} type size ({type_size})")
    return (*shape[:-1], shape[-1] // type_size * block_size)


def _threads(threads: int | None) -> int:
    """The one rule for the thread count every function takes, checked before any work: None or 0
    for every core (the C++ library's Threads{0}), else that many; negative is a ValueError."""
    if threads is None:
        return 0
    threads = int(threads)
    if threads < 0:
        raise ValueError(f"threads must be 0 or more (0 or None: every core), not {threads}")
    return threads


def dequantize(data: np.ndarray, qtype: GGMLQuantizationType, *, threads: int | None = None) -> np.ndarray:
    """float32 values of ``data`` (gguf-py: bytes shaped [..., row bytes] for block types), shaped
    [..., row values]. Identical to ggml's to_float for every type."""
    qtype, threads = GGMLQuantizationType(qtype), _threads(threads)
    if qtype == GGMLQuantizationType.F32:
        return data.view(np.float32)
    if qtype == GGMLQuantizationType.F16:
        return data.view(np.float16).astype(np.float32)
    if not _CAPS[qtype][0]:
        raise NotImplementedError(f"Dequantization for {qtype.name} is not yet implemented")
    raw = np.ascontiguousarray(data).view(np.uint8)
    shape = quant_shape_from_byte_shape(raw.shape, qtype)
    return _core.dequantize(raw.reshape(-1), int(qtype), threads).reshape(shape)


def quantize(data: np.ndarray, qtype: GGMLQuantizationType, *, imatrix: np.ndarray | None = None,
             threads: int | None = None) -> np.ndarray:
    """``data`` (rows along the last dimension) encoded as ``qtype``: F32/F16 as gguf-py (astype),
    block types as bytes shaped [..., row bytes], byte-identical to ggml_quantize_chunk (with the
    importance matrix ``imatrix``, one weight per column, when given)."""
    qtype, threads = GGMLQuantizationType(qtype), _threads(threads)
    if qtype == GGMLQuantizationType.F32:
        return data.astype(np.float32, copy=False)
    if qtype == GGMLQuantizationType.F16:
        return data.astype(np.float16, copy=False)
    if not _CAPS[qtype][1]:
        raise NotImplementedError(f"Quantization for {qtype.name} is not yet implemented")
    if _CAPS[qtype][2] and imatrix is None:
        raise QuantError(f"{qtype.name} needs an importance matrix (imatrix=)")
    shape = tuple(data.shape)
    if not shape or shape[-1] % GGML_QUANT_SIZES[qtype][0] != 0:
        raise QuantError(f"Can't quantize tensor with shape {shape} to {qtype.name}")
    values = np.ascontiguousarray(data, dtype=np.float32)
    out = _core.quantize(values.reshape(-1), int(qtype), shape[-1], imatrix, threads)
    return out.reshape(quant_shape_to_byte_shape(shape, qtype))


def can_quantize(qtype: GGMLQuantizationType) -> bool:
    return bool(_CAPS[GGMLQuantizationType(qtype)][1])


__all__ = ["QuantError", "dequantize", "quantize", "quant_shape_to_byte_shape", "quant_shape_from_byte_shape"]
