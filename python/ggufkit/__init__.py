"""ggufkit: GGUF files from Python, with gguf-py's API over the ggufkit C++ library.

    import ggufkit as gguf
    reader = gguf.GGUFReader("model.gguf")
    for name, field in reader.fields.items(): ...
    values = gguf.dequantize(reader.tensors[0].data, reader.tensors[0].tensor_type)

Scripts written for gguf-py's reading, writing and (de)quantizing run unchanged with
``import ggufkit as gguf``. See docs/python.md.
"""
from . import quants
from .constants import (GGML_MAX_DIMS, GGML_QUANT_SIZES, GGML_QUANT_VERSION, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC,
                        GGUF_VERSION, GGMLQuantizationType, GGUFEndian, GGUFValueType, Keys, LlamaFileType, TokenType)
from .errors import GGUFError
from .export import export_to_gguf
from .quants import QuantError, dequantize, quant_shape_from_byte_shape, quant_shape_to_byte_shape, quantize
from .reader import GGUFReader, ReaderField, ReaderTensor
from .writer import GGUFValue, GGUFWriter, TensorInfo, WriterState
# The CLI's verbs as functions: ggufkit.check(...), ggufkit.set(...), ... (`set` and `hash` are left
# out of __all__: `from ggufkit import *` must not shadow Python's built-ins).
from . import verbs
from .verbs import CheckReport, EditResult, Finding, check, convert, estimate, hash, merge, quantize_model, remove, rename, set, split

__version__ = "0.1.0"

__all__ = [
    "GGML_MAX_DIMS", "GGML_QUANT_SIZES", "GGML_QUANT_VERSION", "GGUF_DEFAULT_ALIGNMENT", "GGUF_MAGIC", "GGUF_VERSION",
    "GGMLQuantizationType", "GGUFEndian", "GGUFError", "GGUFReader", "GGUFValue", "GGUFValueType", "GGUFWriter",
    "Keys", "LlamaFileType", "QuantError", "ReaderField", "ReaderTensor", "TensorInfo", "TokenType", "WriterState",
    "dequantize", "export_to_gguf", "quant_shape_from_byte_shape", "quant_shape_to_byte_shape", "quantize", "quants",
    "CheckReport", "EditResult", "Finding", "check", "convert", "estimate", "merge", "quantize_model", "remove", "rename", "split",
    "verbs",
]
