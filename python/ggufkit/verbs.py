"""The CLI's verbs as functions: check, quantize_model, convert, set / remove / rename, hash, split
and merge, each doing what ``gguf VERB`` does (the same library calls, the same bytes written).

    from ggufkit import verbs
    report = verbs.check("model.gguf")
    verbs.quantize_model("model-f16.gguf", "model-q4_k_m.gguf", "Q4_K_M",
                         progress=lambda done, total: print(done, "of", total))

Long operations run in C++ with the GIL released. ``progress`` is a callable called with
``(done, total)`` as the work moves (tensors written for quantize_model, convert and merge; shards
for split; bytes digested for hash), the last call being ``(total, total)``. ``cancel`` is a
``threading.Event`` (or anything with ``is_set()``) or a callable returning a truth value; it is
polled as the work moves, and once it is set the operation stops and raises ``GGUFError`` with code
``"cancelled"``, leaving no output file (every output is written under a temporary name and renamed
into place only when complete). An exception raised by ``progress`` or ``cancel`` stops the
operation the same way and is raised again once the C++ call has returned.

Every failure the library reports raises ``ggufkit.GGUFError`` (``code``, ``offset``, ``record``,
``file``). Outputs replace existing files (as ``open(path, "wb")`` does) unless ``overwrite=False``;
an output is never one of the inputs.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _core
from .quants import _threads
from .constants import GGMLQuantizationType, GGUFValueType, LlamaFileType

__all__ = ["CheckReport", "EditResult", "Finding", "check", "convert", "hash", "merge", "quantize_model", "remove",
           "rename", "set", "split"]

Progress = Callable[[int, int], Any]


# ---- shared helpers ----------------------------------------------------------------------------

def _path(p) -> str:
    return os.fspath(p)


def _opt_path(p) -> str | None:
    return None if p is None else os.fspath(p)


def _progress(progress):
    if progress is not None and not callable(progress):
        raise TypeError("progress must be a callable (done, total) or None")
    return progress


def _cancel(cancel):
    """A threading.Event-like object (is_set) or a callable, as a callable; None stays None."""
    if cancel is None:
        return None
    is_set = getattr(cancel, "is_set", None)
    if callable(is_set):
        return is_set
    if callable(cancel):
        return cancel
    raise TypeError("cancel must be a threading.Event (anything with is_set()), a callable returning a bool, or None")


# ---- check -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One finding of check: ``severity`` ("error", "warning", "info"), ``code`` (stable,
    "<area>.<name>"), ``subject`` (the key or tensor, or ""), ``offset`` (byte offset in the file, or
    None), ``message``, and ``file`` (the shard or base file concerned, "" for the checked file)."""

    severity: str
    code: str
    subject: str
    offset: int | None
    message: str
    file: str = ""

    def to_dict(self) -> dict:
        """The finding as ``gguf check --json`` prints it."""
        d = {"severity": self.severity, "code": self.code, "subject": self.subject, "offset": self.offset}
        if self.file:
            d["file"] = self.file
        d["message"] = self.message
        return d

    def __str__(self) -> str:
        where = [] if self.offset is None else [f"at offset {self.offset}"]
        if self.subject:
            where.append(f"'{self.subject}'")
        return f"{self.severity} {self.code}{' ' + ', '.join(where) if where else ''}: {self.message}"


def _finding(t: tuple) -> Finding:
    severity, code, subject, offset, file, message = t
    return Finding(severity, code, subject, offset, message, file)


@dataclass(frozen=True)
class CheckReport:
    """What check found: ``findings`` in the order found (structure first), ``kind`` (what the file
    was checked as: "model", "adapter", "projector", "vocabulary", "shard"), ``complete`` (False
    when a structural break stopped the checks), and the verdict: ``passed`` (no errors, and under
    ``strict`` no warnings), with the counts ``errors``, ``warnings``, ``infos``."""

    file: str
    kind: str
    complete: bool
    strict: bool
    findings: list[Finding] = field(default_factory=list)

    def _count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> int:
        return self._count("error")

    @property
    def warnings(self) -> int:
        return self._count("warning")

    @property
    def infos(self) -> int:
        return self._count("info")

    @property
    def passed(self) -> bool:
        return self.errors == 0 and (not self.strict or self.warnings == 0)

    def __bool__(self) -> bool:
        return self.passed

    def to_dict(self) -> dict:
        """The report as ``gguf check --json [--strict]`` prints it (the same members, in order)."""
        return {"findings": [f.to_dict() for f in self.findings], "file": self.file, "kind": self.kind,
                "passed": self.passed, "strict": self.strict, "complete": self.complete, "errors": self.errors,
                "warnings": self.warnings, "infos": self.infos}


def check(path, *, strict: bool = False, base=None) -> CheckReport:
    """``gguf check``: validate a file (or a split model from its first shard) before an engine
    loads it: structure, metadata conventions, architecture, tokenizer, RoPE, LoRA adapters (against
    ``base``, the model they apply to), engine compatibility.

    Problems are findings, not exceptions; only a file that cannot be opened at all raises
    GGUFError. ``strict`` makes warnings fail the verdict (``report.passed``).
    """
    path = _path(path)
    r = _core.check(path, _opt_path(base))
    return CheckReport(file=path, kind=r["kind"], complete=r["complete"], strict=bool(strict),
                       findings=[_finding(t) for t in r["findings"]])


# ---- estimate ----------------------------------------------------------------------------------

def estimate(path, *, ctx_size: int = 512, batch_size: int = 2048, ubatch_size: int = 512, parallel: int = 1,
             kv_unified: bool = False, swa_full: bool = False, cache_type_k: str = "f16", cache_type_v: str = "f16",
             flash_attn: str = "auto", assume_dense: bool = False) -> dict:
    """``gguf estimate``: what llama.cpp allocates for the model and a context on the CPU, from the
    header alone. The options are llama-cli's (``ctx_size`` 0: the model's context_length); the
    result is ``gguf estimate --json``'s object: ``model_bytes``, ``caches``, ``context_bytes``,
    ``output_bytes``, ``compute_bytes`` (estimated), ``total_bytes``, and the resolved context.
    Raises GGUFError (``unknown_architecture``, ``bad_hyperparameter``, ``invalid_argument``...).
    """
    return _core.estimate(_path(path), int(ctx_size), int(batch_size), int(ubatch_size), int(parallel),
                          bool(kv_unified), bool(swa_full), str(cache_type_k), str(cache_type_v), str(flash_attn),
                          bool(assume_dense))


# ---- quantize ----------------------------------------------------------------------------------

def _quantize_type(t) -> str:
    if isinstance(t, LlamaFileType):
        return str(int(t))
    if isinstance(t, GGMLQuantizationType):
        return t.name
    if isinstance(t, bool):
        raise TypeError("type_or_preset: a preset name (Q4_K_M), a tensor type (q4_K), a llama_ftype number or COPY")
    if isinstance(t, int):
        return str(t)
    if isinstance(t, str):
        return t
    raise TypeError(f"type_or_preset: {t!r} is not a preset name (Q4_K_M), a tensor type (q4_K), a number or COPY")


def _type_text(t) -> str | None:
    if t is None:
        return None
    if isinstance(t, GGMLQuantizationType):
        return t.name
    if isinstance(t, int) and not isinstance(t, bool):
        return GGMLQuantizationType(t).name
    return str(t)


def _tensor_type_overrides(tensor_types) -> list[str]:
    if tensor_types is None:
        return []
    items = tensor_types.items() if isinstance(tensor_types, Mapping) else tensor_types
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        else:
            pattern, t = item
            out.append(f"{pattern}={_type_text(t)}")
    return out


def _kv_override(key: str, value) -> str:
    if isinstance(value, bool):
        return f"{key}=bool:{'true' if value else 'false'}"
    if isinstance(value, int):
        return f"{key}=int:{value}"
    if isinstance(value, float):
        return f"{key}=float:{value!r}"
    if isinstance(value, str):
        return f"{key}=str:{value}"
    raise TypeError(f"override_kv {key}: a bool, int, float or str, not {value.__class__.__name__}")


def _kv_overrides(override_kv) -> list[str]:
    if override_kv is None:
        return []
    if isinstance(override_kv, Mapping):
        return [_kv_override(k, v) for k, v in override_kv.items()]
    return [str(o) for o in override_kv]


def _names(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else [str(x) for x in v]


def quantize_model(input, output, type_or_preset, *, imatrix=None, threads: int | None = None,
                   progress: Progress | None = None, cancel=None, dry_run: bool = False, pure: bool = False,
                   output_tensor_type=None, token_embedding_type=None, leave_output_tensor: bool = False,
                   tensor_types=None, override_kv=None, allow_requantize: bool = False, keep_split: bool = False,
                   include_weights=None, exclude_weights=None, overwrite: bool = True, sync: bool = True) -> dict:
    """``gguf quantize``: quantize a model (a file, or a split model from its first shard) as
    llama-quantize does, byte for byte.

    ``type_or_preset`` is what the CLI's TYPE takes: a preset name (``"Q4_K_M"``, ``"mostly_q4_k_m"``),
    a tensor type name (``"q4_K"`` is llama-quantize's alias for Q4_K_M; a GGMLQuantizationType
    works too), a llama_ftype number (15, or a LlamaFileType) or ``"COPY"``. Without ``pure`` the
    preset's rules choose each tensor's type, as llama-quantize does.

    ``imatrix``: an importance matrix file from llama-imatrix (GGUF or legacy .dat), narrowed by
    ``include_weights`` / ``exclude_weights`` (names or lists of name parts). ``output_tensor_type``,
    ``token_embedding_type`` (type names or GGMLQuantizationType), ``leave_output_tensor``,
    ``tensor_types`` (``["attn_q=q8_0", ...]``, pairs, or a ``{regex: type}`` dict; the first match
    wins), ``override_kv`` (``["general.name=str:x", ...]`` or a ``{key: value}`` dict),
    ``allow_requantize`` and ``keep_split`` are llama-quantize's options of the same names.

    Returns the plan: ``tensors`` (name, type, target, bytes, converted, note, shard, in write
    order), ``sizes`` (llama-quantize's closing figures), ``tensor_bytes``, ``file_type``,
    ``file_type_name``, ``outputs`` (the files written) and ``importance_entries``. ``dry_run`` only
    plans; nothing is written. ``progress(done, total)`` counts tensors written.
    """
    return _core.quantize_model(
        _path(input), _path(output), _quantize_type(type_or_preset), _opt_path(imatrix), _threads(threads),
        _progress(progress), _cancel(cancel), bool(dry_run), bool(pure), _type_text(output_tensor_type),
        _type_text(token_embedding_type), bool(leave_output_tensor), _tensor_type_overrides(tensor_types),
        _kv_overrides(override_kv), bool(allow_requantize), bool(keep_split), _names(include_weights),
        _names(exclude_weights), bool(overwrite), bool(sync))


# ---- convert -----------------------------------------------------------------------------------

def convert(model_dir, output, *, outtype="f16", tokenizer: bool = True, threads: int | None = None,
            progress: Progress | None = None, cancel=None, dry_run: bool = False, overwrite: bool = True,
            sync: bool = True) -> dict:
    """``gguf convert``: a Hugging Face safetensors checkpoint directory (config.json, safetensors,
    tokenizer files) to one GGUF file, as llama.cpp's convert_hf_to_gguf.py writes it.

    ``outtype``: the type of the weight matrices (``"f32"``, ``"f16"``, ``"bf16"``, ``"q8_0"``, or
    another type quantized without an importance matrix; a GGMLQuantizationType works too).
    ``tokenizer=False`` leaves the tokenizer keys out.

    Returns the plan, as ``gguf convert --dry-run --json`` prints it (``hf_architecture``,
    ``architecture``, ``file_type``, ``parameter_count``, ``tensor_bytes``, ``metadata_keys``,
    ``tensors``, ``skipped``) plus ``metadata`` (every key's value). ``dry_run`` only plans.
    ``progress(done, total)`` counts tensors written.
    """
    return _core.convert(_path(model_dir), _path(output), _type_text(outtype), bool(tokenizer), _threads(threads),
                         _progress(progress), _cancel(cancel), bool(dry_run), bool(overwrite), bool(sync))


# ---- metadata edits ----------------------------------------------------------------------------

@dataclass(frozen=True)
class EditResult:
    """What an edit changed: ``changes`` (one dict per key touched, in the new metadata's order:
    ``key``, ``renamed_from``, ``before``, ``before_type``, ``after``, ``after_type``; None where a
    key is new or removed), ``mode`` ("in_place", "rewrite", "unchanged", or "new_file" when
    written to ``output``), ``reason`` (why a rewrite), ``output`` (the file written), ``problems``
    (findings gguf check makes in the edited metadata that it did not make before) and ``written``
    (False for a dry run or an edit that changes nothing)."""

    changes: list[dict]
    mode: str
    reason: str
    output: str
    problems: list[Finding]
    written: bool


def _value_type_name(t) -> str:
    if t is None:
        return ""
    if isinstance(t, GGUFValueType):
        return t.name.lower()
    if isinstance(t, int) and not isinstance(t, bool):
        return GGUFValueType(t).name.lower()
    return str(t).lower()


def _set_op(key: str, value, type) -> tuple:
    """("set", key, text, is_json, type, the type a new key gets from the Python value)."""
    tname = _value_type_name(type)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return ("set", key, json.dumps(list(value), ensure_ascii=False), True, tname, "")
    if isinstance(value, bool):
        return ("set", key, "true" if value else "false", False, tname, "bool")
    if isinstance(value, int):
        return ("set", key, str(value), False, tname, "")  # a new key: uint32, int32 or 64 bits, as the CLI infers
    if isinstance(value, float):
        return ("set", key, repr(value), False, tname, "float32")
    if isinstance(value, str):
        return ("set", key, value, False, tname, "string")
    raise TypeError(f"{key}: a metadata value is a bool, int, float, str or a list of them, not {value.__class__.__name__}")


def _edit(path, ops, output, dry_run, rewrite, overwrite, sync, strict, progress, cancel, new=False) -> EditResult:
    r = _core.edit(_path(path), ops, _opt_path(output), bool(dry_run), bool(rewrite), bool(overwrite), bool(sync),
                   bool(strict), bool(new), _progress(progress), _cancel(cancel))
    return EditResult(changes=r["changes"], mode=r["mode"], reason=r["reason"], output=r["output"],
                      problems=[_finding(t) for t in r["problems"]], written=r["written"])


def set(path, key: str, value, *, type=None, output=None, new: bool = False, dry_run: bool = False,
        rewrite: bool = False, strict: bool = False, progress: Progress | None = None, cancel=None,
        overwrite: bool = True, sync: bool = True) -> EditResult:
    """``gguf set``: set one metadata key, in place when the new header fits (one write within a
    page), else by an atomic rewrite; tensors are never touched. The file is locked (flock) for the
    whole edit, as every gguf edit locks it.

    ``value``: a bool, int, float, str, or a list of them (an array; nested lists for arrays of
    arrays). ``type`` (a GGUFValueType or its name, "uint32"; for lists the element type) fixes the
    type; without it an existing key keeps its type, and a new key gets the value's own (str:
    string, bool: bool, float: float32, int: uint32, int32 when negative, 64 bits when it does not
    fit). ``new=True`` allows a key llama.cpp and gguf-py do not know in a namespace they define
    (refused otherwise as a likely misspelling, as the CLI does). ``output``: write the edited
    model there and leave ``path`` as it is. ``rewrite``: never in place. ``strict``: refuse an edit
    after which gguf check finds a new error or warning (they are in ``problems`` otherwise).
    ``progress(done, total)`` counts the data section's bytes copied by a rewrite (an in-place
    write, one short write, neither reports nor stops).
    """
    return _edit(path, [_set_op(key, value, type)], output, dry_run, rewrite, overwrite, sync, strict, progress,
                 cancel, new)


def remove(path, key, *, output=None, dry_run: bool = False, rewrite: bool = False, strict: bool = False,
           progress: Progress | None = None, cancel=None, overwrite: bool = True, sync: bool = True) -> EditResult:
    """``gguf rm``: remove a metadata key (or each key of a list of keys). See set for the rest."""
    keys = [key] if isinstance(key, str) else list(key)
    return _edit(path, [("remove", k) for k in keys], output, dry_run, rewrite, overwrite, sync, strict, progress,
                 cancel)


def rename(path, old: str, new: str, *, output=None, dry_run: bool = False, rewrite: bool = False,
           strict: bool = False, progress: Progress | None = None, cancel=None, overwrite: bool = True,
           sync: bool = True) -> EditResult:
    """``gguf rename``: rename a metadata key, keeping its value and place. See set for the rest."""
    return _edit(path, [("rename", old, new)], output, dry_run, rewrite, overwrite, sync, strict, progress, cancel)


# ---- hash --------------------------------------------------------------------------------------

def hash(path, *, algorithm: str = "sha256", per_tensor: bool = False, threads: int | None = None,
         progress: Progress | None = None, cancel=None) -> dict:
    """``gguf hash``: digests of a model's files (every shard of a split model) and, with
    ``per_tensor``, of every tensor's bytes as stored.

    ``algorithm``: "sha256", "sha1" or "xxh64". Returns ``{"algorithm", "files", "tensors",
    "manifest"}``: files and tensors as lists of ``{"name", "bytes", "digest"}`` (``gguf hash
    --json``; ``tensors`` empty without ``per_tensor``) and ``manifest``, the manifest text ``gguf
    hash`` prints (``gguf hash --check`` reads it). ``progress(done, total)`` counts bytes digested.
    The digests cannot be stopped midway: a ``cancel`` set while they run raises "cancelled" when
    they end.
    """
    return _core.hash(_path(path), str(algorithm), bool(per_tensor), _threads(threads), _progress(progress),
                      _cancel(cancel))


# ---- split and merge ---------------------------------------------------------------------------

def split(input, output_prefix, *, max_size=None, max_tensors: int | None = None, dry_run: bool = False,
          progress: Progress | None = None, cancel=None, overwrite: bool = True, sync: bool = True) -> dict:
    """``gguf split``: llama-gguf-split's shards, ``PREFIX-00001-of-0000N.gguf`` ..., which llama.cpp
    loads as one model.

    ``max_size``: the most tensor bytes per shard, as bytes (int) or text (``"2G"``, ``"500M"``:
    powers of 1000 as llama-gguf-split; ``"1GiB"``); or ``max_tensors``: the most tensors per shard.
    Returns the plan as ``gguf split --json`` prints it (``input``, ``shards`` with ``path``,
    ``tensors``, ``tensor_bytes``, ``file_bytes``, ``first_tensor``, ``last_tensor``;
    ``tensor_count``, ``total_file_bytes``). The shards are renamed into place together, only when
    all are written. ``progress(done, total)`` counts shards written.
    """
    if max_size is not None and max_tensors is not None:
        raise ValueError("give max_size or max_tensors, not both")
    if max_size is not None and not isinstance(max_size, str):
        max_size = int(max_size)
    return _core.split(_path(input), _path(output_prefix), max_size, int(max_tensors or 0), bool(dry_run),
                       _progress(progress), _cancel(cancel), bool(overwrite), bool(sync))


def merge(first_shard, output, *, dry_run: bool = False, progress: Progress | None = None, cancel=None,
          overwrite: bool = True, sync: bool = True) -> dict:
    """``gguf merge``: one file from a split model (every shard checked first); merge(split(X)) is X
    byte for byte. Returns ``gguf merge --json``'s document (``shards`` with ``path``, ``tensors``,
    ``file_bytes``; ``output``, ``tensor_count``, ``file_bytes``). ``progress(done, total)`` counts
    tensors written.
    """
    return _core.merge(_path(first_shard), _path(output), bool(dry_run), _progress(progress), _cancel(cancel),
                       bool(overwrite), bool(sync))
