"""GGUFReader with gguf-py's names and behaviour, over the library's validated, memory-mapped file.

Opening reads and checks the header in C++ (every check llama.cpp makes, and more) and creates
nothing per key, per tensor or per token: fields and tensors are made when asked for. A field's ``parts`` (gguf-py's numpy
views of the encoded value) are made when asked for, one at a time; ``contents()`` decodes the
value in C++. Tensor ``data`` are read-only numpy views into the mapping: no copy.
"""
from __future__ import annotations

import bisect
import functools
import operator
import os
import sys
import weakref
from collections.abc import ItemsView, Mapping, Sequence, ValuesView
from typing import Any, Literal

import numpy as np

from . import _core
from .constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFEndian, GGUFValueType
from .quants import quant_shape_to_byte_shape

_SCALAR_DTYPES: dict[int, type[np.generic]] = {
    GGUFValueType.UINT8: np.uint8,
    GGUFValueType.INT8: np.int8,
    GGUFValueType.UINT16: np.uint16,
    GGUFValueType.INT16: np.int16,
    GGUFValueType.UINT32: np.uint32,
    GGUFValueType.INT32: np.int32,
    GGUFValueType.FLOAT32: np.float32,
    GGUFValueType.UINT64: np.uint64,
    GGUFValueType.INT64: np.int64,
    GGUFValueType.FLOAT64: np.float64,
    GGUFValueType.BOOL: np.bool_,
}

# Tensor types whose data gguf-py gives as typed arrays (the others are bytes, rows of blocks).
_TENSOR_DTYPES: dict[int, type[np.generic]] = {
    GGMLQuantizationType.F16: np.float16,
    GGMLQuantizationType.F32: np.float32,
    GGMLQuantizationType.F64: np.float64,
    GGMLQuantizationType.I8: np.int8,
    GGMLQuantizationType.I16: np.int16,
    GGMLQuantizationType.I32: np.int32,
    GGMLQuantizationType.I64: np.int64,
}


def _view(buf: np.ndarray, offset: int, dtype, count: int = 1) -> np.ndarray:
    size = np.dtype(dtype).itemsize
    return buf[offset:offset + size * count].view(dtype)


class _Layout:
    """Where each part of an encoded value is: a list of (offset, dtype, count), the indices of the
    data parts, and the value types, as gguf-py's _get_field_parts lays them out. Computed in
    Python; used for arrays of arrays only (the common shapes are computed arithmetically)."""

    def __init__(self, header: np.ndarray, offset: int, vtype: int):
        self.parts: list[tuple[int, Any, int]] = []
        self.data: list[int] = []
        self.types: list[GGUFValueType] = []
        self._header = header
        self.size = self._walk(offset, vtype, self.types)

    def _u32(self, at: int) -> int:
        return int(_view(self._header, at, np.uint32)[0])

    def _u64(self, at: int) -> int:
        return int(_view(self._header, at, np.uint64)[0])

    def _walk(self, at: int, vtype: int, types: list | None) -> int:
        if types is not None:
            types.append(GGUFValueType(vtype))
        if vtype == GGUFValueType.STRING:
            n = self._u64(at)
            self.parts += [(at, np.uint64, 1), (at + 8, np.uint8, n)]
            self.data.append(len(self.parts) - 1)
            return 8 + n
        if vtype in _SCALAR_DTYPES:
            self.parts.append((at, _SCALAR_DTYPES[vtype], 1))
            self.data.append(len(self.parts) - 1)
            return np.dtype(_SCALAR_DTYPES[vtype]).itemsize
        item, count = self._u32(at), self._u64(at + 4)
        self.parts += [(at, np.uint32, 1), (at + 4, np.uint64, 1)]
        size = 12
        for k in range(count):
            size += self._walk(at + size, item, types if k == 0 else None)
        return size


class _Parts(Sequence):
    """gguf-py's ``ReaderField.parts``: numpy views of the encoded value's pieces, made on access
    by ``part(i)``."""

    __slots__ = ("_length", "_part")

    def __init__(self, length: int, part):
        self._length = length
        self._part = part

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        index = int(index)
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("part index out of range")
        return self._part(index)

    def __repr__(self) -> str:
        return repr(list(self))


class _StringArrayParts(_Parts):
    """The parts of an array of strings: the record's five, then each element's length and bytes.
    An element's bytes are one slice of the header (the walk `bytes(parts[i]) for i in data` is
    gguf-py's classic way of reading a vocabulary): that case skips the general checks."""

    __slots__ = ("_header", "_spans")

    def __init__(self, header: np.ndarray, head: list, spans: np.ndarray):
        spans = spans.tolist()
        super().__init__(5 + 2 * len(spans),
                         lambda i: _view(header, *head[i]) if i < 5 else _string_part(header, spans, i))
        self._header = header
        self._spans = spans

    def __getitem__(self, index):
        if index.__class__ is int and 5 <= index < self._length:
            return _string_part(self._header, self._spans, index)
        return super().__getitem__(index)


def _string_part(header: np.ndarray, spans: list, index: int) -> np.ndarray:
    """Part `index` (5 on) of a string array: element (index - 5) // 2's length, then its bytes."""
    k, bytes_part = divmod(index - 5, 2)
    span = spans[k]
    if bytes_part:
        return header[span[1]:span[2]]
    return header[span[0]:span[1]].view(np.uint64)


class ReaderField:
    """A key/value record (or a tensor info record), as gguf-py's ReaderField: ``offset``, ``name``,
    ``parts``, ``data`` (indices into parts of the data pieces), ``types`` and ``contents()``."""

    __slots__ = ("offset", "name", "_parts", "_data", "types", "_contents", "_make", "__weakref__")

    def __init__(self, offset: int, name: str, parts: Sequence | None = None, data: Sequence[int] | None = None,
                 types: list[GGUFValueType] | None = None, *, _contents=None, _make=None):
        self.offset = offset
        self.name = name
        self._parts = [] if parts is None and _make is None else parts
        self._data = [-1] if data is None and _make is None else data
        self.types = [] if types is None else types
        self._contents = _contents
        self._make = _make

    def _build(self) -> None:
        self._parts, self._data = self._make()
        self._make = None

    @property
    def parts(self) -> Sequence:
        if self._make is not None:
            self._build()
        return self._parts

    @property
    def data(self) -> Sequence[int]:
        if self._make is not None:
            self._build()
        return self._data

    def contents(self, index_or_slice: int | slice = slice(None)) -> Any:
        if not self.types:
            return None
        if self._contents is not None:
            if self.types[0] != GGUFValueType.ARRAY or index_or_slice == slice(None):
                return self._contents()
            return self._contents(index_or_slice)
        # A field made by hand: decode its parts as gguf-py does.
        to_string = lambda x: str(x.tobytes(), encoding="utf-8")  # noqa: E731
        if self.types[0] == GGUFValueType.ARRAY:
            indices = self.data[index_or_slice]
            if self.types[-1] == GGUFValueType.STRING:
                if isinstance(index_or_slice, int):
                    return to_string(self.parts[indices])
                return [to_string(self.parts[i]) for i in indices]
            if isinstance(index_or_slice, int):
                return self.parts[indices].tolist()[0]
            return [v for i in indices for v in self.parts[i].tolist()]
        if self.types[0] == GGUFValueType.STRING:
            return to_string(self.parts[-1])
        return self.parts[-1].tolist()[0]

    def __repr__(self) -> str:
        return f"ReaderField(offset={self.offset}, name={self.name!r}, types={self.types!r})"


class ReaderTensor:
    """A tensor, as gguf-py's ReaderTensor: ``name``, ``tensor_type``, ``shape`` (dimensions as stored,
    ggml order), ``n_elements``, ``n_bytes``, ``data_offset`` (in the file), ``data`` (a read-only numpy
    view: typed for F16/F32/F64/I8..I64, else bytes shaped rows x row bytes; made on access) and
    ``field``."""

    __slots__ = ("name", "tensor_type", "shape", "n_elements", "n_bytes", "data_offset", "_data", "_field", "shard",
                 "_check", "__weakref__")

    def __init__(self, name, tensor_type, shape, n_elements, n_bytes, data_offset, data, field, shard=0, *,
                 _check=None):
        self.name = name
        self.tensor_type = tensor_type
        self.shape = shape
        self.n_elements = n_elements
        self.n_bytes = n_bytes
        self.data_offset = data_offset
        self._data = data
        self._field = field
        self.shard = shard  # which file of a split model (GGUFReader(..., split=True)); data_offset is in it
        self._check = _check  # raises GGUFError when the file no longer holds the data

    @property
    def data(self) -> np.ndarray:
        if self._check is not None:
            self._check()
        if callable(self._data):
            self._data = self._data()
        return self._data

    @data.setter
    def data(self, value) -> None:
        self._data = value

    @property
    def field(self) -> ReaderField:
        if callable(self._field):
            self._field = self._field()
        return self._field

    def __repr__(self) -> str:
        return (f"ReaderTensor(name={self.name!r}, tensor_type={self.tensor_type!r}, shape={self.shape.tolist()}, "
                f"n_bytes={self.n_bytes}, data_offset={self.data_offset})")


def _field_parts(file, header: np.ndarray, index: int, offset: int, value_offset: int, vtype: int):
    """gguf-py's parts and data indices of key/value record `index` (made when first asked for)."""
    # The record's own parts: key length, key bytes, value type.
    key_length = int(_view(header, offset, np.uint64)[0])
    head = [(offset, np.uint64, 1), (offset + 8, np.uint8, key_length), (value_offset - 4, np.uint32, 1)]
    if vtype == GGUFValueType.STRING:
        n = int(_view(header, value_offset, np.uint64)[0])
        layout = head + [(value_offset, np.uint64, 1), (value_offset + 8, np.uint8, n)]
        return _Parts(len(layout), lambda i: _view(header, *layout[i])), [4]
    if vtype != GGUFValueType.ARRAY:
        layout = head + [(value_offset, _SCALAR_DTYPES[vtype], 1)]
        return _Parts(len(layout), lambda i: _view(header, *layout[i])), [3]
    item = int(_view(header, value_offset, np.uint32)[0])
    count = int(_view(header, value_offset + 4, np.uint64)[0])
    head += [(value_offset, np.uint32, 1), (value_offset + 4, np.uint64, 1)]
    first = value_offset + 12
    if item in _SCALAR_DTYPES:  # one part per element
        dtype = _SCALAR_DTYPES[item]
        size = np.dtype(dtype).itemsize

        def part(i: int):
            if i < 5:
                return _view(header, *head[i])
            return _view(header, first + (i - 5) * size, dtype)
        return _Parts(5 + count, part), list(range(5, 5 + count))
    if item == GGUFValueType.STRING:  # two parts per element: length, bytes
        return _StringArrayParts(header, head, file.string_spans(index)), list(range(6, 5 + 2 * count, 2))
    layout = _Layout(header, value_offset, vtype)  # arrays of arrays
    parts = head[:3] + layout.parts
    return _Parts(len(parts), lambda i: _view(header, *parts[i])), [3 + i for i in layout.data]


_HEADER_FIELDS = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")


class _Fields(Mapping):
    """gguf-py's ``GGUFReader.fields`` (an OrderedDict there): name -> ReaderField, in file order,
    the header's three GGUF.* fields first. Read-only, and made on access: a field is built when
    asked for (a lookup is the library's binary search) and kept only while the caller holds it, so
    a file of a million keys opens without a million objects."""

    def __init__(self, file, head: dict, make):
        self._file = file
        self._head = head
        self._make = make  # index -> ReaderField
        self._count = file.key_count()
        # A key of the file named as a header field takes its place (as an OrderedDict assignment).
        self._shadowed = {name: i for name in head if (i := file.find_key(name)) >= 0}
        self._made: weakref.WeakValueDictionary[int, ReaderField] = weakref.WeakValueDictionary()

    def _at(self, index: int) -> ReaderField:
        field = self._made.get(index)
        if field is None:
            field = self._make(index)
            self._made[index] = field
        return field

    def __len__(self) -> int:
        return len(self._head) + self._count - len(self._shadowed)

    def __getitem__(self, name) -> ReaderField:
        if name in self._shadowed:
            return self._at(self._shadowed[name])
        if name in self._head:
            return self._head[name]
        index = self._file.find_key(name) if isinstance(name, str) else -1
        if index < 0:
            raise KeyError(name)
        return self._at(index)

    def __contains__(self, name) -> bool:
        return name in self._head or (isinstance(name, str) and self._file.find_key(name) >= 0)

    def _indexed(self):
        """(name, index or None for a header field) in order."""
        for name in self._head:
            yield name, self._shadowed.get(name)
        key_name, shadowed = self._file.key_name, self._shadowed
        for i in range(self._count):
            name = key_name(i)
            if not shadowed or shadowed.get(name) != i:
                yield name, i

    def __iter__(self):
        return (name for name, _ in self._indexed())

    def items(self):
        return _FieldItems(self)

    def values(self):
        return _FieldValues(self)

    def __repr__(self) -> str:
        return f"<ggufkit fields: {len(self)} (made on access)>"


class _FieldItems(ItemsView):
    def __iter__(self):
        m = self._mapping
        for name, i in m._indexed():
            yield name, (m._head[name] if i is None else m._at(i))


class _FieldValues(ValuesView):
    def __iter__(self):
        m = self._mapping
        for name, i in m._indexed():
            yield m._head[name] if i is None else m._at(i)


class _Tensors(Sequence):
    """gguf-py's ``GGUFReader.tensors`` (a list there): every tensor in order (of every shard, for a
    split model), each ReaderTensor made on access and kept only while the caller holds it."""

    def __init__(self):
        self._parts: list[tuple[int, int, Any]] = []  # (first index, count, make(index in its file))
        self._length = 0
        self._made: weakref.WeakValueDictionary[int, ReaderTensor] = weakref.WeakValueDictionary()

    def _extend(self, count: int, make) -> None:
        self._parts.append((self._length, count, make))
        self._length += count

    def __len__(self) -> int:
        return self._length

    def _at(self, index: int) -> ReaderTensor:
        t = self._made.get(index)
        if t is None:
            first, _, make = self._parts[bisect.bisect_right(self._parts, index, key=lambda p: p[0]) - 1]
            t = make(index - first)
            self._made[index] = t
        return t

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(self._length))]
        index = operator.index(index)
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("list index out of range")
        return self._at(index)

    def __iter__(self):
        return (self._at(i) for i in range(self._length))

    def __repr__(self) -> str:
        return f"<ggufkit tensors: {self._length} (made on access)>"


class GGUFReader:
    """Reads a GGUF file as gguf-py's GGUFReader does (``fields``, ``tensors``, ``get_field``,
    ``get_tensor``, ``alignment``, ``data_offset``, ``byte_order``, ``endianess``), with the
    library's checks: a bad file raises ``ggufkit.GGUFError`` (a ValueError) naming the record, the
    offset and the reason. Big-endian files are read too. Read-only: ``mode`` must be ``'r'``
    (edit with ``ggufkit.set`` and friends, which write atomically).

    Opening costs what the library's validation costs: ``fields`` (a read-only mapping in file
    order) and ``tensors`` (a sequence) make each ReaderField and ReaderTensor when asked for.

    ``split=True`` reads a split model (llama-gguf-split's ``-00001-of-0000N.gguf`` shards, given the
    first) as one: the fields are the first shard's (the model's metadata), ``tensors`` holds every
    shard's tensors in order, each with ``shard`` (its file's index in ``paths``) and ``data`` a view
    of its own file; the set of shards is checked first (all present, numbered, agreeing). Without
    it, a shard reads as gguf-py reads it: that file alone."""

    byte_order: Literal["I", "S"] = "I"
    # gguf-py's table of the scalar value types' numpy types (its scripts read it).
    gguf_scalar_to_np: dict[GGUFValueType, type[np.generic]] = {GGUFValueType(k): v for k, v in _SCALAR_DTYPES.items()}

    def __init__(self, path: os.PathLike[str] | str, mode: Literal["r", "r+", "c"] = "r", *, split: bool = False):
        if mode != "r":
            raise ValueError(f"ggufkit.GGUFReader opens files read-only (mode 'r'), not {mode!r}")
        self.paths = _core.model_files(os.fspath(path)) if split else [os.fspath(path)]
        self._file = _core.File(self.paths[0])
        f = self._file
        self.data = f.bytes()
        self._header = f.header()
        self.byte_order = "S" if f.big_endian else "I"
        host = GGUFEndian.LITTLE if sys.byteorder == "little" else GGUFEndian.BIG
        self.endianess = (GGUFEndian.BIG if host == GGUFEndian.LITTLE else GGUFEndian.LITTLE) if f.big_endian else host
        self.alignment = f.alignment
        # gguf-py pads the end of the tensor infos to the alignment even without tensors.
        self.data_offset = (f.header_size + f.alignment - 1) // f.alignment * f.alignment
        header = self._header
        counts = _view(header, 8, np.uint64, 2)
        head = {
            "GGUF.version": ReaderField(4, "GGUF.version", [_view(header, 4, np.uint32)], [0], [GGUFValueType.UINT32]),
            "GGUF.tensor_count": ReaderField(8, "GGUF.tensor_count", [counts[:1]], [0], [GGUFValueType.UINT64]),
            "GGUF.kv_count": ReaderField(16, "GGUF.kv_count", [counts[1:]], [0], [GGUFValueType.UINT64]),
        }
        self.fields: Mapping[str, ReaderField] = _Fields(f, head, functools.partial(_make_field, f, header))
        self.tensors: Sequence[ReaderTensor] = _Tensors()
        self.tensors._extend(f.tensor_count(), self._tensor_maker(0))
        for shard, shard_path in enumerate(self.paths[1:], start=1):
            other = GGUFReader(shard_path)
            self.tensors._extend(other._file.tensor_count(), other._tensor_maker(shard))

    def get_field(self, key: str) -> ReaderField | None:
        return self.fields.get(key, None)

    def get_tensor(self, idx: int) -> ReaderTensor:
        return self.tensors[idx]

    def _tensor_maker(self, shard: int):
        """index -> ReaderTensor of this file (holding the file's pieces, not the reader: no cycle)."""
        return functools.partial(_make_tensor, self._file, self.data, self._header, self.data_offset,
                                 self.byte_order == "S", shard)


# --- fields ---------------------------------------------------------------------------------------

def _array_types(header: np.ndarray, value_offset: int) -> list[GGUFValueType]:
    """gguf-py's ``types`` of an array: ARRAY, then the first element's types, down the first
    elements of nested arrays (O(depth), not a walk of every element)."""
    types = [GGUFValueType.ARRAY]
    at = value_offset
    while True:
        item = int(_view(header, at, np.uint32)[0])
        if int(_view(header, at + 4, np.uint64)[0]) == 0:
            return types
        types.append(GGUFValueType(item))
        if item != GGUFValueType.ARRAY:
            return types
        at += 12  # the first element, an array: its type and count


def _make_field(file, header: np.ndarray, index: int) -> ReaderField:
    name, offset, value_offset, vtype, _size = file.field(index)
    types = _array_types(header, value_offset) if vtype == GGUFValueType.ARRAY else [GGUFValueType(vtype)]
    # One element alone when the array's elements are its leaves (not arrays of arrays, whose
    # contents() are their leaves flattened, as gguf-py gives them).
    flat = vtype == GGUFValueType.ARRAY and len(types) == 2 and types[1] != GGUFValueType.ARRAY

    def contents(index_or_slice=None):
        if isinstance(index_or_slice, int) and flat:
            count = int(_view(header, value_offset + 4, np.uint64)[0])
            k = index_or_slice + count if index_or_slice < 0 else index_or_slice
            if not 0 <= k < count:
                raise IndexError("list index out of range")
            return file.element(index, k)
        value = file.value(index)
        return value if index_or_slice is None else value[index_or_slice]

    def make():  # the closures hold the file and its header, not the reader (no cycle)
        return _field_parts(file, header, index, offset, value_offset, vtype)

    return ReaderField(offset, name, types=types, _contents=contents, _make=make)


# --- tensors --------------------------------------------------------------------------------------

def _make_tensor(file, data: np.ndarray, header: np.ndarray, data_start: int, big_endian: bool, shard: int,
                 index: int) -> ReaderTensor:
    name, type_id, dims, offset, n_bytes, info_offset = file.tensor(index)
    ggml_type = GGMLQuantizationType(type_id)
    n_elements = 1
    for d in dims:
        n_elements *= int(d)
    np_dims = tuple(reversed(dims))
    data_offset = data_start + offset
    dtype = _TENSOR_DTYPES.get(ggml_type)

    def view() -> np.ndarray:
        if dtype is not None:
            dt = np.dtype(dtype).newbyteorder(">") if big_endian else np.dtype(dtype)
            return data[data_offset:data_offset + n_bytes].view(dt).reshape(np_dims)
        return data[data_offset:data_offset + n_bytes].reshape(quant_shape_to_byte_shape(np_dims, ggml_type))

    def field() -> ReaderField:
        at = info_offset
        name_length = int(_view(header, at, np.uint64)[0])
        layout = [(at, np.uint64, 1), (at + 8, np.uint8, name_length)]
        at += 8 + name_length
        n_dims = int(_view(header, at, np.uint32)[0])
        layout += [(at, np.uint32, 1), (at + 4, np.uint64, n_dims), (at + 4 + 8 * n_dims, np.uint32, 1),
                   (at + 8 + 8 * n_dims, np.uint64, 1)]
        return ReaderField(info_offset, name, [_view(header, *p) for p in layout], [1, 3, 4, 5])

    return ReaderTensor(name=name, tensor_type=ggml_type, shape=np.array(dims, dtype=np.uint64),
                        n_elements=n_elements, n_bytes=n_bytes, data_offset=data_offset, data=view, field=field,
                        shard=shard, _check=functools.partial(file.check_data, data_offset, n_bytes, name))


__all__ = ["GGUFReader", "ReaderField", "ReaderTensor"]
