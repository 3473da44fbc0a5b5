"""GGUFWriter with gguf-py's names and call sequence, written by the library, atomically.

The two ways gguf-py scripts write work unchanged:
  * add_* keys, add_tensor(name, array) ..., then write_header_to_file(), write_kv_data_to_file(),
    write_tensors_to_file(), close();
  * add_tensor_info(...) ..., then the header, the keys, write_ti_data_to_file(), one
    write_tensor_data(array) per tensor in order, close().
The bytes go to a temporary file next to the target, renamed over it by close() once every tensor's
data is written: the target is never half written, and a writer abandoned half way (an exception,
a killed process) leaves no file behind. Keys and tensor infos are checked as the library checks
them (alignment a power of two, names unique and shorter than 64 bytes, shapes whole blocks...).
"""
from __future__ import annotations

import logging
import os
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, auto
from string import ascii_letters, digits
from typing import Any

import numpy as np

from . import _core
from .constants import (GGUF_DEFAULT_ALIGNMENT, SAMPLING_FIELDS, SOURCE_FIELDS, GGMLQuantizationType, GGUFEndian,
                        GGUFValueType, Keys)
from .quants import quant_shape_from_byte_shape

logger = logging.getLogger(__name__)


class WriterState(Enum):
    NO_FILE = auto()
    EMPTY = auto()
    HEADER = auto()
    KV_DATA = auto()
    TI_DATA = auto()
    WEIGHTS = auto()


@dataclass
class TensorInfo:
    shape: Sequence[int]
    dtype: GGMLQuantizationType
    nbytes: int
    tensor: np.ndarray | None = None


@dataclass
class GGUFValue:
    value: Any
    type: GGUFValueType
    sub_type: GGUFValueType | None = None


_DTYPE_TYPES = {
    np.dtype(np.float16): GGMLQuantizationType.F16,
    np.dtype(np.float32): GGMLQuantizationType.F32,
    np.dtype(np.float64): GGMLQuantizationType.F64,
    np.dtype(np.int8): GGMLQuantizationType.I8,
    np.dtype(np.int16): GGMLQuantizationType.I16,
    np.dtype(np.int32): GGMLQuantizationType.I32,
    np.dtype(np.int64): GGMLQuantizationType.I64,
}


def _host_endian() -> GGUFEndian:
    return GGUFEndian.BIG if sys.byteorder == "big" else GGUFEndian.LITTLE


class GGUFWriter:
    def __init__(self, path: os.PathLike[str] | str | None, arch: str, use_temp_file: bool = False,
                 endianess: GGUFEndian = GGUFEndian.LITTLE, split_max_tensors: int = 0, split_max_size: int = 0,
                 dry_run: bool = False, small_first_shard: bool = False):
        if split_max_tensors or split_max_size or small_first_shard:
            raise ValueError("ggufkit.GGUFWriter writes one file; split it afterwards with ggufkit.split "
                             "(or `gguf split`)")
        self.path = os.fspath(path) if path else None
        self.arch = arch
        self.endianess = endianess
        self.data_alignment = GGUF_DEFAULT_ALIGNMENT
        self.use_temp_file = use_temp_file  # accepted; tensors are never copied to a temporary file
        self.dry_run = dry_run
        self.tensors: list[dict[str, TensorInfo]] = [{}]
        self.kv_data: list[dict[str, GGUFValue]] = [{}]
        self.state = WriterState.NO_FILE
        self._writer: _core.Writer | None = None
        self._pending: deque[str] = deque()  # tensors whose data is still to be written, in order
        self._failed = False  # a write failed: the file was abandoned (close() says so)
        self.add_architecture()

    # --- the file, in gguf-py's order ------------------------------------------------------------

    def open_output_file(self, path: os.PathLike[str] | str | None = None) -> None:
        if self.state is WriterState.EMPTY and (path is None or os.fspath(path) == self.path):
            return
        if self.state is not WriterState.NO_FILE:
            raise ValueError(f"Expected output file to be not yet opened, got {self.state}")
        if path is not None:
            self.path = os.fspath(path)
        if self.path is None:
            raise ValueError("GGUFWriter has no output path")
        if self.dry_run:
            print(self.path)  # gguf-py prints the file names and exits
            sys.exit()
        self.state = WriterState.EMPTY

    def write_header_to_file(self, path: os.PathLike[str] | str | None = None) -> None:
        self.open_output_file(path)
        if self.state is not WriterState.EMPTY:
            raise ValueError(f"Expected output file to be empty, got {self.state}")
        self.state = WriterState.HEADER

    def write_kv_data_to_file(self) -> None:
        if self.state is not WriterState.HEADER:
            raise ValueError(f"Expected output file to contain the header, got {self.state}")
        self.state = WriterState.KV_DATA

    def write_ti_data_to_file(self) -> None:
        if self.state is not WriterState.KV_DATA:
            raise ValueError(f"Expected output file to contain KV data, got {self.state}")
        writer = _core.Writer(self.path, self.endianess == GGUFEndian.BIG)
        try:
            for key, v in self.kv_data[0].items():
                vtype, value, sub_type = int(v.type), v.value, None
                if v.type == GGUFValueType.ARRAY:
                    if isinstance(value, np.ndarray):  # its elements as Python values, as a list of them
                        value = value.tolist()
                    sub_type = int(self._array_type(key, value, v.sub_type))
                writer.add_kv(key, vtype, value, sub_type)
            for name, ti in self.tensors[0].items():
                writer.add_tensor_info(name, int(ti.dtype), [int(d) for d in reversed(ti.shape)], int(ti.nbytes))
            writer.write_header()
        except BaseException:
            writer.abort()
            raise
        self._writer = writer
        self._pending = deque(self.tensors[0])
        self.state = WriterState.TI_DATA

    def write_tensor_data(self, tensor: np.ndarray, tensor_endianess: GGUFEndian | None = None) -> None:
        if self.state is not WriterState.TI_DATA and self.state is not WriterState.WEIGHTS:
            raise ValueError(f"Expected output file to contain tensor info or weights, got {self.state}")
        if not self._pending:
            raise ValueError("more tensor data than tensor infos")
        if (tensor_endianess or _host_endian()) != self.endianess:
            tensor = tensor.byteswap(inplace=False)
        self._pending.popleft()
        self._write(tensor)
        self.state = WriterState.WEIGHTS

    def write_tensors_to_file(self, *, progress: bool = False) -> None:
        self.write_ti_data_to_file()
        if not self._pending:  # no tensors: the header padded, as gguf-py pads it here
            self._writer.pad_header()
        for name in list(self._pending):
            ti = self.tensors[0][name]
            if ti.tensor is None:
                self._abandon()
                raise ValueError(f"tensor {name!r} has no data (add_tensor_info without add_tensor: "
                                 "write it with write_tensor_data)")
            self._write(ti.tensor)
            ti.tensor = None
            self._pending.popleft()
        self.state = WriterState.WEIGHTS

    def _write(self, tensor: np.ndarray) -> None:
        if self._writer is None:
            raise ValueError("the file was abandoned after an earlier error; nothing was written")
        try:
            self._writer.write_tensor(np.ascontiguousarray(tensor))
        except BaseException:
            self._abandon()
            raise

    def _abandon(self) -> None:
        """Drops the temporary file after a failure: the target keeps what it had."""
        if self._writer is not None:
            self._writer.abort()
            self._writer = None
        self._failed = True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Finishes the file: the temporary file is flushed, synced and renamed over the target once
        every tensor's data is written. A writer whose keys were written but no tensor infos
        (gguf-py's vocabulary-only files: header, keys, close) writes them first. One closed before
        its header was asked for writes nothing, as gguf-py's; one abandoned after an error raises."""
        if self._failed:
            raise ValueError(f"{self.path}: the file was abandoned after an error; nothing was written")
        if self.state in (WriterState.HEADER, WriterState.KV_DATA):
            if self.state is WriterState.HEADER:
                self.write_kv_data_to_file()
            self.write_ti_data_to_file()
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        try:
            writer.close()
        except BaseException:
            self._failed = True
            writer.abort()
            raise

    def __enter__(self) -> "GGUFWriter":
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:
            self._abandon()

    def __del__(self) -> None:
        # gguf-py's file is complete once the writer is collected even without close(): so is this
        # one when every tensor was written; an unfinished one leaves no file.
        try:
            complete = self._writer is not None and not self._pending
            keys_only = self._writer is None and self.state is WriterState.KV_DATA and not self.tensors[0]
            if not self._failed and (complete or keys_only):
                self.close()
            else:
                self._abandon()
        except Exception:  # noqa: BLE001 (nothing can be raised from a finaliser)
            pass

    # --- keys --------------------------------------------------------------------------------------

    @staticmethod
    def _array_type(key: str, val: Any, sub_type: GGUFValueType | None) -> GGUFValueType:
        """gguf-py's typing of an array: any Sequence (list, tuple, range, array.array, bytes...);
        bytes are uint8, else the type of the first element, which every element must have."""
        if not isinstance(val, Sequence):
            raise ValueError(f"{key}: Invalid GGUF metadata array, expecting sequence")
        if len(val) == 0:
            raise ValueError(f"{key}: Invalid GGUF metadata array. Empty array")
        if sub_type is not None:
            return sub_type
        if isinstance(val, bytes):
            return GGUFValueType.UINT8
        first = GGUFValueType.get_type(val[0])
        if not all(GGUFValueType.get_type(i) is first for i in val[1:]):
            raise ValueError(f"{key}: All items in a GGUF array should be of the same type")
        return first

    def add_key_value(self, key: str, val: Any, vtype: GGUFValueType, sub_type: GGUFValueType | None = None) -> None:
        if any(key in kv for kv in self.kv_data):
            logger.warning(f"Duplicated key name {key!r}, overwriting it with new value {val!r} of type {vtype.name}")
        self.kv_data[0][key] = GGUFValue(value=val, type=vtype, sub_type=sub_type)

    def remove_key(self, key: str) -> None:
        for kv in self.kv_data:
            kv.pop(key, None)

    def add_uint8(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.UINT8)

    def add_int8(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.INT8)

    def add_uint16(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.UINT16)

    def add_int16(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.INT16)

    def add_uint32(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.UINT32)

    def add_int32(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.INT32)

    def add_float32(self, key: str, val: float) -> None:
        self.add_key_value(key, val, GGUFValueType.FLOAT32)

    def add_uint64(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.UINT64)

    def add_int64(self, key: str, val: int) -> None:
        self.add_key_value(key, val, GGUFValueType.INT64)

    def add_float64(self, key: str, val: float) -> None:
        self.add_key_value(key, val, GGUFValueType.FLOAT64)

    def add_bool(self, key: str, val: bool) -> None:
        self.add_key_value(key, val, GGUFValueType.BOOL)

    def add_string(self, key: str, val: str) -> None:
        if not val:  # as gguf-py: an empty string is not written
            return
        self.add_key_value(key, val, GGUFValueType.STRING)

    def add_array(self, key: str, val: Sequence[Any]) -> None:
        if len(val) == 0:  # as gguf-py: an empty array is not written
            return
        self.add_key_value(key, val, GGUFValueType.ARRAY)

    def add_architecture(self) -> None:
        self.add_string(Keys.General.ARCHITECTURE, self.arch)

    def add_custom_alignment(self, alignment: int) -> None:
        if alignment <= 0 or (alignment & (alignment - 1)) != 0:
            raise ValueError("Invalid alignment: must be a non-zero power of two")
        self.data_alignment = alignment
        self.add_uint32(Keys.General.ALIGNMENT, alignment)

    def add_rope_scaling_type(self, value) -> None:
        self.add_string(Keys.Rope.SCALING_TYPE.format(arch=self.arch), value.value if isinstance(value, Enum) else value)

    def add_pooling_type(self, value) -> None:
        self.add_uint32(Keys.LLM.POOLING_TYPE.format(arch=self.arch), int(value.value if isinstance(value, Enum) else value))

    def add_chat_template(self, value: str | Sequence[Mapping[str, str]] | None) -> None:
        if value is None:
            self.remove_key(Keys.Tokenizer.CHAT_TEMPLATE)
            return
        if not isinstance(value, str):
            default = None
            names: list[str] = []
            for choice in value:
                name = "".join(c if c in ascii_letters + digits else "_" for c in choice.get("name", ""))
                template = choice.get("template")
                if name and template is not None:
                    if name == "default":
                        default = template
                    else:
                        if name not in names:
                            names.append(name)
                        self.add_string(Keys.Tokenizer.CHAT_TEMPLATE_N.format(name=name), template)
            if names:
                self.add_array(Keys.Tokenizer.CHAT_TEMPLATES, names)
            if default is None:
                return
            value = default
        self.add_string(Keys.Tokenizer.CHAT_TEMPLATE, value)

    # --- tensors -----------------------------------------------------------------------------------

    def add_tensor_info(self, name: str, tensor_shape: Sequence[int], tensor_dtype: np.dtype, tensor_nbytes: int,
                        raw_dtype: GGMLQuantizationType | None = None) -> None:
        if self.state is not WriterState.NO_FILE:
            raise ValueError(f"Expected output file to be not yet opened, got {self.state}")
        if name in self.tensors[0]:
            raise ValueError(f"Duplicated tensor name {name!r}")
        if raw_dtype is None:
            dtype = _DTYPE_TYPES.get(np.dtype(tensor_dtype).newbyteorder("="))
            if dtype is None:
                raise ValueError("Only F16, F32, F64, I8, I16, I32, I64 tensors are supported for now")
        else:
            dtype = GGMLQuantizationType(raw_dtype)
            if np.dtype(tensor_dtype) == np.uint8:
                tensor_shape = quant_shape_from_byte_shape(tensor_shape, dtype)
        self.tensors[0][name] = TensorInfo(shape=tuple(int(d) for d in tensor_shape), dtype=dtype, nbytes=int(tensor_nbytes))

    def add_tensor(self, name: str, tensor: np.ndarray, raw_shape: Sequence[int] | None = None,
                   raw_dtype: GGMLQuantizationType | None = None, tensor_endianess: GGUFEndian | None = None) -> None:
        if (tensor_endianess or _host_endian()) != self.endianess:
            tensor = tensor.byteswap(inplace=False)
        shape = raw_shape if raw_shape is not None else tensor.shape
        self.add_tensor_info(name, shape, tensor.dtype, tensor.nbytes, raw_dtype=raw_dtype)
        self.tensors[0][name].tensor = tensor

    @staticmethod
    def ggml_pad(x: int, n: int) -> int:
        return ((x + n - 1) // n) * n


# The standard keys' helpers: (method, kind, key). The kind is the add_* method that writes the
# value; "uint32|array" writes a list as an array (per-layer values), as gguf-py does.
_HELPERS = [
    ("add_type", "string", Keys.General.TYPE),
    ("add_quantization_version", "uint32", Keys.General.QUANTIZATION_VERSION),
    ("add_file_type", "uint32", Keys.General.FILE_TYPE),
    ("add_name", "string", Keys.General.NAME),
    ("add_author", "string", Keys.General.AUTHOR),
    ("add_version", "string", Keys.General.VERSION),
    ("add_organization", "string", Keys.General.ORGANIZATION),
    ("add_finetune", "string", Keys.General.FINETUNE),
    ("add_basename", "string", Keys.General.BASENAME),
    ("add_description", "string", Keys.General.DESCRIPTION),
    ("add_quantized_by", "string", Keys.General.QUANTIZED_BY),
    ("add_size_label", "string", Keys.General.SIZE_LABEL),
    ("add_license", "string", Keys.General.LICENSE),
    ("add_license_name", "string", Keys.General.LICENSE_NAME),
    ("add_license_link", "string", Keys.General.LICENSE_LINK),
    ("add_url", "string", Keys.General.URL),
    ("add_doi", "string", Keys.General.DOI),
    ("add_uuid", "string", Keys.General.UUID),
    ("add_repo_url", "string", Keys.General.REPO_URL),
    ("add_source_url", "string", Keys.General.SOURCE_URL),
    ("add_source_doi", "string", Keys.General.SOURCE_DOI),
    ("add_source_uuid", "string", Keys.General.SOURCE_UUID),
    ("add_source_repo_url", "string", Keys.General.SOURCE_REPO_URL),
    ("add_base_model_count", "uint32", Keys.General.BASE_MODEL_COUNT),
    ("add_dataset_count", "uint32", Keys.General.DATASET_COUNT),
    ("add_tags", "array", Keys.General.TAGS),
    ("add_languages", "array", Keys.General.LANGUAGES),
    ("add_vocab_size", "uint32", Keys.LLM.VOCAB_SIZE),
    ("add_context_length", "uint32", Keys.LLM.CONTEXT_LENGTH),
    ("add_embedding_length", "uint32", Keys.LLM.EMBEDDING_LENGTH),
    ("add_block_count", "uint32", Keys.LLM.BLOCK_COUNT),
    ("add_leading_dense_block_count", "uint32", Keys.LLM.LEADING_DENSE_BLOCK_COUNT),
    ("add_feed_forward_length", "uint32|array", Keys.LLM.FEED_FORWARD_LENGTH),
    ("add_expert_feed_forward_length", "uint32|array", Keys.LLM.EXPERT_FEED_FORWARD_LENGTH),
    ("add_expert_shared_feed_forward_length", "uint32", Keys.LLM.EXPERT_SHARED_FEED_FORWARD_LENGTH),
    ("add_parallel_residual", "bool", Keys.LLM.USE_PARALLEL_RESIDUAL),
    ("add_tensor_data_layout", "string", Keys.LLM.TENSOR_DATA_LAYOUT),
    ("add_expert_count", "uint32", Keys.LLM.EXPERT_COUNT),
    ("add_expert_used_count", "uint32|array", Keys.LLM.EXPERT_USED_COUNT),
    ("add_expert_shared_count", "uint32", Keys.LLM.EXPERT_SHARED_COUNT),
    ("add_expert_weights_scale", "float32", Keys.LLM.EXPERT_WEIGHTS_SCALE),
    ("add_expert_weights_norm", "bool", Keys.LLM.EXPERT_WEIGHTS_NORM),
    ("add_logit_scale", "float32", Keys.LLM.LOGIT_SCALE),
    ("add_final_logit_softcapping", "float32", Keys.LLM.FINAL_LOGIT_SOFTCAPPING),
    ("add_attn_logit_softcapping", "float32", Keys.LLM.ATTN_LOGIT_SOFTCAPPING),
    ("add_head_count", "uint32|array", Keys.Attention.HEAD_COUNT),
    ("add_head_count_kv", "uint32|array", Keys.Attention.HEAD_COUNT_KV),
    ("add_max_alibi_bias", "float32", Keys.Attention.MAX_ALIBI_BIAS),
    ("add_clamp_kqv", "float32", Keys.Attention.CLAMP_KQV),
    ("add_key_length", "uint32", Keys.Attention.KEY_LENGTH),
    ("add_value_length", "uint32", Keys.Attention.VALUE_LENGTH),
    ("add_layer_norm_eps", "float32", Keys.Attention.LAYERNORM_EPS),
    ("add_layer_norm_rms_eps", "float32", Keys.Attention.LAYERNORM_RMS_EPS),
    ("add_causal_attention", "bool", Keys.Attention.CAUSAL),
    ("add_sliding_window", "uint32", Keys.Attention.SLIDING_WINDOW),
    ("add_rope_dimension_count", "uint32", Keys.Rope.DIMENSION_COUNT),
    ("add_rope_freq_base", "float32", Keys.Rope.FREQ_BASE),
    ("add_rope_scaling_factor", "float32", Keys.Rope.SCALING_FACTOR),
    ("add_rope_scaling_attn_factors", "float32", Keys.Rope.SCALING_ATTN_FACTOR),
    ("add_rope_scaling_orig_ctx_len", "uint32", Keys.Rope.SCALING_ORIG_CTX_LEN),
    ("add_rope_scaling_finetuned", "bool", Keys.Rope.SCALING_FINETUNED),
    ("add_tokenizer_model", "string", Keys.Tokenizer.MODEL),
    ("add_tokenizer_pre", "string", Keys.Tokenizer.PRE),
    ("add_token_list", "array", Keys.Tokenizer.LIST),
    ("add_token_merges", "array", Keys.Tokenizer.MERGES),
    ("add_token_types", "array", Keys.Tokenizer.TOKEN_TYPE),
    ("add_token_type_count", "uint32", Keys.Tokenizer.TOKEN_TYPE_COUNT),
    ("add_token_scores", "array", Keys.Tokenizer.SCORES),
    ("add_bos_token_id", "uint32", Keys.Tokenizer.BOS_ID),
    ("add_eos_token_id", "uint32", Keys.Tokenizer.EOS_ID),
    ("add_eot_token_id", "uint32", Keys.Tokenizer.EOT_ID),
    ("add_eom_token_id", "uint32", Keys.Tokenizer.EOM_ID),
    ("add_unk_token_id", "uint32", Keys.Tokenizer.UNK_ID),
    ("add_sep_token_id", "uint32", Keys.Tokenizer.SEP_ID),
    ("add_pad_token_id", "uint32", Keys.Tokenizer.PAD_ID),
    ("add_mask_token_id", "uint32", Keys.Tokenizer.MASK_ID),
    ("add_fim_pre_token_id", "uint32", Keys.Tokenizer.FIM_PRE_ID),
    ("add_fim_suf_token_id", "uint32", Keys.Tokenizer.FIM_SUF_ID),
    ("add_fim_mid_token_id", "uint32", Keys.Tokenizer.FIM_MID_ID),
    ("add_fim_pad_token_id", "uint32", Keys.Tokenizer.FIM_PAD_ID),
    ("add_fim_rep_token_id", "uint32", Keys.Tokenizer.FIM_REP_ID),
    ("add_fim_sep_token_id", "uint32", Keys.Tokenizer.FIM_SEP_ID),
    ("add_add_bos_token", "bool", Keys.Tokenizer.ADD_BOS),
    ("add_add_eos_token", "bool", Keys.Tokenizer.ADD_EOS),
    ("add_add_sep_token", "bool", Keys.Tokenizer.ADD_SEP),
    ("add_add_space_prefix", "bool", Keys.Tokenizer.ADD_PREFIX),
    ("add_remove_extra_whitespaces", "bool", Keys.Tokenizer.REMOVE_EXTRA_WS),
    ("add_precompiled_charsmap", "array", Keys.Tokenizer.PRECOMPILED_CHARSMAP),
]


def _helper(kind: str, key: str):
    def add(self: GGUFWriter, value) -> None:
        name = key.format(arch=self.arch)
        if kind == "uint32|array":
            if isinstance(value, int):
                self.add_uint32(name, value)
            else:
                self.add_array(name, value)
        else:
            getattr(self, "add_" + kind)(name, value)
    return add


# The sampler settings: integers are int32, the sequence a string, the rest float32.
_HELPERS += [(f"add_sampling_{f}", "string" if f == "sequence" else "int32" if f in ("top_k", "penalty_last_n", "mirostat")
              else "float32", f"general.sampling.{f}") for f in SAMPLING_FIELDS]


def _source_helper(kind: str, field: str):
    def add(self: GGUFWriter, source_id: int, value: str) -> None:
        self.add_string(f"general.{kind}.{source_id}.{field}", value)
    add.__name__ = f"add_{kind}_{field}"
    add.__doc__ = f"Sets general.{kind}.{{source_id}}.{field} (string)."
    return add


# add_base_model_name(source_id, name), add_dataset_url(source_id, url), ...
for _kind in ("base_model", "dataset"):
    for _field in SOURCE_FIELDS:
        setattr(GGUFWriter, f"add_{_kind}_{_field}", _source_helper(_kind, _field))

for _method, _kind, _key in _HELPERS:
    _f = _helper(_kind, _key)
    _f.__name__ = _method
    _f.__doc__ = f"Sets {_key} ({_kind})."
    setattr(GGUFWriter, _method, _f)

__all__ = ["GGUFWriter", "GGUFValue", "TensorInfo", "WriterState"]
