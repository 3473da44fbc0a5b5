"""export_to_gguf: a PyTorch module or a state dict (torch or numpy tensors) to a GGUF file."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _core
from .constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from .quants import QuantError, _threads, can_quantize, quantize as _quantize
from .writer import GGUFWriter

Q = GGMLQuantizationType


def _as_numpy(name: str, tensor) -> tuple[np.ndarray, GGMLQuantizationType]:
    """A tensor's values as a numpy array and the GGUF float type that keeps them exactly
    (bfloat16 as its raw bits). Integer and other non-float tensors are refused."""
    if hasattr(tensor, "detach"):  # torch
        import torch
        t = tensor.detach().cpu()
        if t.dtype == torch.bfloat16:
            bits = t.contiguous().view(torch.int16).numpy().view(np.uint16)
            return (bits.reshape(1) if bits.ndim == 0 else bits), Q.BF16
        if not t.is_floating_point():
            raise ValueError(f"{name}: a {t.dtype} tensor; export_to_gguf writes float tensors only "
                             "(cast it, or write it with GGUFWriter.add_tensor)")
        tensor = t.contiguous().numpy()
    array = np.asarray(tensor)
    if array.ndim == 0:  # a scalar: one value (GGUF has no 0-d tensors)
        array = array.reshape(1)
    kinds = {np.dtype(np.float32): Q.F32, np.dtype(np.float16): Q.F16, np.dtype(np.float64): Q.F64}
    if array.dtype not in kinds:
        raise ValueError(f"{name}: a {array.dtype} array; export_to_gguf writes float tensors only "
                         "(float16, bfloat16, float32, float64)")
    return array, kinds[array.dtype]


def _floats(array: np.ndarray, kind: GGMLQuantizationType) -> np.ndarray:
    if kind == Q.BF16:
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array.astype(np.float32, copy=False)


def _target(quantize) -> GGMLQuantizationType | None:
    if quantize is None:
        return None
    if isinstance(quantize, str):
        try:
            return Q[quantize.upper()]
        except KeyError:
            raise ValueError(f"unknown type {quantize!r} (one of: {', '.join(t.name.lower() for t in Q)})") from None
    return Q(quantize)


def _value_type(key: str, value) -> tuple[Any, GGUFValueType, GGUFValueType | None]:
    """A metadata value's GGUF type: (value, type) tuples as given; str, bool, float, int (uint32 or
    int32 when it fits, else 64-bit) and lists of them inferred."""
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], GGUFValueType):
        return value[0], value[1], None
    if isinstance(value, (str, bytes)):
        return value, GGUFValueType.STRING, None
    if isinstance(value, bool):
        return value, GGUFValueType.BOOL, None
    if isinstance(value, float):
        return value, GGUFValueType.FLOAT32, None
    if isinstance(value, int):
        if 0 <= value < 2**32:
            return value, GGUFValueType.UINT32, None
        if -(2**31) <= value < 0:
            return value, GGUFValueType.INT32, None
        return value, (GGUFValueType.UINT64 if value > 0 else GGUFValueType.INT64), None
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError(f"metadata {key}: an empty list has no element type")
        items = [_value_type(key, v) for v in value]
        types = {t for _v, t, _s in items}
        if types == {GGUFValueType.UINT32, GGUFValueType.INT32}:
            types = {GGUFValueType.INT32}
        if len(types) != 1:
            raise ValueError(f"metadata {key}: the list mixes {sorted(t.name for t in types)}")
        return list(value), GGUFValueType.ARRAY, types.pop()
    raise ValueError(f"metadata {key}: cannot store a {type(value).__name__}")


def export_to_gguf(model_or_state_dict, path: os.PathLike[str] | str, quantize=None,
                   metadata: Mapping[str, Any] | None = None, model_name: str | None = None,
                   *, imatrix: Mapping[str, np.ndarray] | None = None, threads: int | None = None) -> None:
    """Writes a PyTorch module's state dict, or a mapping of names to tensors (torch or numpy), to
    ``path`` as GGUF, atomically.

    * Shapes are reversed at the boundary, as GGUF stores them (a torch [out, in] weight is
      ne = [in, out]); names are kept (at most 63 bytes, as llama.cpp requires).
    * ``quantize``: None keeps every tensor's own float type (F32, F16, BF16, F64); a type name
      ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "iq4_xs" ...) or a GGMLQuantizationType
      converts the 2-D float tensors whose rows are whole blocks of it (byte-identical to ggml's
      quantizer); the others are kept. Types that need an importance matrix take it from
      ``imatrix`` (tensor name -> one weight per column).
    * Keys: general.architecture ("custom"), general.name (``model_name``, else the module's
      class name, else the file's stem), general.file_type (when the type has one),
      general.quantization_version; then ``metadata``, which overrides them: values typed as
      str -> string, bool, float -> float32, int -> uint32/int32 (64-bit when needed), lists ->
      arrays, or (value, GGUFValueType) to choose.
    * Non-float tensors are refused with an error naming the tensor; nothing is written then.
    """
    threads = _threads(threads)  # checked before anything else, quantizing or not
    if hasattr(model_or_state_dict, "state_dict") and callable(model_or_state_dict.state_dict):
        default_name = type(model_or_state_dict).__name__
        tensors = model_or_state_dict.state_dict()
    elif isinstance(model_or_state_dict, Mapping):
        default_name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
        tensors = model_or_state_dict
    else:
        raise TypeError("export_to_gguf takes a torch.nn.Module or a mapping of names to tensors")
    target = _target(quantize)
    if target is not None and target not in (Q.F32, Q.F16, Q.BF16) and not can_quantize(target):
        raise ValueError(f"cannot quantize to {target.name}")

    # Plan first (every tensor checked before a byte is written): name, source, kind, output type.
    plan = []
    for name, tensor in tensors.items():
        array, kind = _as_numpy(name, tensor)
        out = kind
        if target is not None and array.ndim == 2 and array.shape[-1] % GGML_QUANT_SIZES[target][0] == 0:
            out = target
        plan.append((name, array, kind, out))

    metadata = dict(metadata or {})
    writer = GGUFWriter(path, str(metadata.pop("general.architecture", "custom")))
    writer.add_name(model_name or default_name)
    if target is not None:
        file_type = _core.file_type_for_type(int(target))
        if file_type is not None:
            writer.add_file_type(file_type)
    writer.add_quantization_version(2)
    for key, value in metadata.items():
        v, vtype, sub = _value_type(key, value)
        writer.add_key_value(key, v, vtype, sub)
    for name, array, _kind, out in plan:
        shape = array.shape
        block, size = GGML_QUANT_SIZES[out]
        nbytes = int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // block * size) if shape else size
        writer.add_tensor_info(name, shape, np.float32, nbytes, raw_dtype=out)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    try:
        # One tensor converted at a time: memory is the largest tensor, not the model.
        for name, array, kind, out in plan:
            if out == kind:
                data = array
            elif out == Q.F32:
                data = _floats(array, kind)
            elif out == Q.F16:
                data = _floats(array, kind).astype(np.float16)
            elif out == Q.BF16 and kind != Q.BF16:
                data = _quantize(_floats(array, kind), Q.BF16, threads=threads)
            else:
                weights = None if imatrix is None else imatrix.get(name)
                try:
                    data = _quantize(_floats(array, kind), out, imatrix=weights, threads=threads)
                except QuantError as e:
                    raise QuantError(f"{name}: {e}") from None
            writer.write_tensor_data(np.ascontiguousarray(data))
        writer.close()
    except BaseException:
        writer._abandon()  # a failure half way: no file
        raise


__all__ = ["export_to_gguf"]
