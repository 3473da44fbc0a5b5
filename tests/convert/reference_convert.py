#!/usr/bin/env python3
"""Runs llama.cpp's own Hugging Face converter (convert_hf_to_gguf.py, its conversion/ package and
gguf-py) on a checkpoint, as the reference `gguf convert` is compared with.

    python3 reference_convert.py LLAMA_CPP_DIR CHECKPOINT_DIR OUT.gguf --outtype f32|f16|bf16|q8_0
                                 [--no-vocab] [--verbose]

Only Debian 12 packages are needed: python3-torch (1.13), python3-numpy, python3-yaml (a
dependency of python3-torch) and, for a tokenizer.model, python3-sentencepiece. Debian packages
neither `transformers` nor `safetensors` nor `tokenizers`, so a small stand-in for the one part of
`transformers` the converter always uses (AutoConfig: config.json completed with the defaults of the
config classes the tests use, as to_dict() has them) is installed first; safetensors files are read
by gguf-py itself. torch 1.13 lacks the float8 dtypes the converter names in its tables; they get
placeholders no real tensor ever has (a checkpoint with float8 tensors is refused).

--no-vocab makes the model class's set_vocab a no-op: no tokenizer.* keys are written. Checkpoints
whose tokenizer needs AutoTokenizer (a BPE tokenizer.json) convert only with it.

The converter runs in this process through its own main(), with the options given here and
--outfile OUT.gguf. Exit status: 0 written; 1 the converter failed (one line on stderr); 2 usage;
3 a Debian package the converter needs is missing (one line on stderr naming it).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import types
from pathlib import Path

DEBIAN_PYTHON = "/usr/bin/python3"
# Module -> the Debian 12 package that provides it.
PACKAGES = {"numpy": "python3-numpy", "yaml": "python3-yaml", "torch": "python3-torch",
            "sentencepiece": "python3-sentencepiece"}


def fail(status: int, message: str) -> None:
    print(f"reference_convert: {message}", file=sys.stderr)
    sys.exit(status)


def require(module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        # The Debian packages are importable only by Debian's python; another python3 (a pyenv
        # one first on PATH) hands over to it.
        if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.access(DEBIAN_PYTHON, os.X_OK) \
                and not os.environ.get("REFERENCE_CONVERT_REEXEC"):
            os.environ["REFERENCE_CONVERT_REEXEC"] = "1"
            os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
        fail(3, f"Python module '{module}' is missing: apt-get install {PACKAGES[module]} "
                f"(and run with {DEBIAN_PYTHON})")


class _Config:
    """What the converter uses of a transformers PretrainedConfig: attributes and to_dict()."""

    def __init__(self, values: dict):
        self.__dict__["_values"] = values

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def to_dict(self) -> dict:
        return json.loads(json.dumps(self._values))


# What transformers' config classes (4.57) add to config.json in to_dict(): for the model types the
# tests convert, the attributes a converter reads, with their defaults ("kv" = num_key_value_heads
# from num_attention_heads when absent or null; "head_dim" = hidden_size // num_attention_heads).
_LLAMA_LIKE = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
               "num_attention_heads": 32, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}
_CLASSES = {
    "llama": (_LLAMA_LIKE, {"kv", "head_dim"}),
    "mistral": ({**_LLAMA_LIKE, "intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                 "sliding_window": 4096}, {"kv"}),
    "qwen2": ({**_LLAMA_LIKE, "vocab_size": 151936, "intermediate_size": 22016, "max_position_embeddings": 32768}, {"kv"}),
    "qwen3": ({**_LLAMA_LIKE, "vocab_size": 151936, "intermediate_size": 22016, "max_position_embeddings": 32768,
               "head_dim": 128}, {"kv"}),
    "gemma": ({"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
               "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "max_position_embeddings": 8192,
               "rms_norm_eps": 1e-6, "rope_theta": 10000.0}, set()),
    "gemma2": ({"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
                "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}, set()),
    "gemma3_text": ({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                     "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                     "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
                     "rope_local_base_freq": 10000.0, "query_pre_attn_scalar": 256, "sliding_window": 4096,
                     "final_logit_softcapping": None, "attn_logit_softcapping": None, "rope_scaling": None}, set()),
    "phi3": ({"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
              "num_attention_heads": 32, "max_position_embeddings": 4096, "original_max_position_embeddings": 4096,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 1.0, "sliding_window": None},
             {"kv", "longrope"}),
    "granite": ({**_LLAMA_LIKE, "embedding_multiplier": 1.0, "logits_scaling": 1.0, "residual_multiplier": 1.0,
                 "attention_multiplier": 1.0}, {"kv"}),
    "smollm3": ({"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 11008, "num_hidden_layers": 36,
                 "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 32768,
                 "rms_norm_eps": 1e-6, "rope_theta": 2000000.0}, {"kv"}),
    "olmo2": ({**_LLAMA_LIKE, "vocab_size": 50304, "rms_norm_eps": 1e-5}, {"kv"}),
    # The mixtures of experts: MixtralConfig leaves head_dim None; Qwen2MoeConfig and Qwen3MoeConfig
    # have fixed kv head defaults (no fallback to the heads) and no head_dim attribute.
    "mixtral": ({**_LLAMA_LIKE, "intermediate_size": 14336, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                 "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "num_experts_per_tok": 2, "num_local_experts": 8},
                {"kv"}),
    "qwen2_moe": ({"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24,
                   "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 32768,
                   "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "moe_intermediate_size": 1408,
                   "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60}, set()),
    "qwen3_moe": ({"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24,
                   "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 32768,
                   "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "moe_intermediate_size": 768,
                   "num_experts_per_tok": 8, "num_experts": 128}, set()),
}


def _complete(values: dict, model_type: str) -> None:
    defaults, rules = _CLASSES[model_type]
    for key, value in defaults.items():
        values.setdefault(key, value)
    if "kv" in rules and values.get("num_key_value_heads") is None:
        values["num_key_value_heads"] = values["num_attention_heads"]
    if "head_dim" in rules and values.get("head_dim") is None:
        values["head_dim"] = values["hidden_size"] // values["num_attention_heads"]
    rope = values.get("rope_scaling")
    if "longrope" in rules and isinstance(rope, dict) and rope.get("type") in ("su", "yarn"):
        rope["type"] = "longrope"


class _AutoConfig:
    @staticmethod
    def from_pretrained(path, **_kwargs) -> _Config:
        # The converter falls back to reading config.json itself when this raises (as transformers
        # does for a model_type it does not know).
        with open(Path(path) / "config.json", encoding="utf-8") as f:
            values = json.load(f)
        model_type = values.get("model_type")
        if model_type == "gemma3":  # Gemma3Config: text_config is a whole Gemma3TextConfig
            text = values.get("text_config") or {}
            _complete(text, "gemma3_text")
            values["text_config"] = text
        elif model_type == "mistral3":  # Mistral3Config: text_config is a whole config of its model_type
            text = values.get("text_config") or {}
            text_type = text.setdefault("model_type", "mistral")  # (MistralConfig when not given)
            if text_type not in _CLASSES:  # (ministral3: no stand-in; config.json is read as it is)
                raise ValueError(f"no stand-in config class for a mistral3 text_config of model_type {text_type!r}")
            _complete(text, text_type)
            values["text_config"] = text
        elif model_type in _CLASSES:
            _complete(values, model_type)
        else:
            raise ValueError(f"no stand-in config class for model_type {model_type!r}")
        return _Config(values)


class _AutoTokenizer:
    @staticmethod
    def from_pretrained(*_args, **_kwargs):
        raise ImportError("this tokenizer needs Hugging Face transformers' AutoTokenizer, which Debian 12 does "
                          "not package (convert with --no-vocab)")


class _AbsentDtype:
    """A torch dtype this torch lacks. The converter only uses these as dictionary keys and values
    and in `dtype in (...)` tests: a distinct object equal to no real dtype."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"<torch.{self.name}: absent from this torch>"


def install_shims() -> None:
    transformers = types.ModuleType("transformers")
    transformers.__doc__ = "reference_convert.py's stand-in: AutoConfig reads config.json; nothing else"
    transformers.AutoConfig = _AutoConfig
    transformers.AutoTokenizer = _AutoTokenizer
    sys.modules["transformers"] = transformers

    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, _AbsentDtype(name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("llama_cpp_dir", type=Path)
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--outtype", choices=["f32", "f16", "bf16", "q8_0"], required=True)
    parser.add_argument("--no-vocab", action="store_true", help="write no tokenizer.* keys")
    parser.add_argument("--verbose", action="store_true", help="show the converter's log")
    args = parser.parse_args()

    for module in ("numpy", "yaml", "torch"):
        require(module)
    if not args.no_vocab and (args.checkpoint / "tokenizer.model").is_file():
        require("sentencepiece")

    llama_cpp = args.llama_cpp_dir.resolve()
    if not (llama_cpp / "convert_hf_to_gguf.py").is_file() or not (llama_cpp / "conversion").is_dir() \
            or not (llama_cpp / "gguf-py" / "gguf").is_dir():
        fail(3, f"{llama_cpp} has no convert_hf_to_gguf.py, conversion/ and gguf-py/ (scripts/install-oracle.sh)")
    if not args.checkpoint.is_dir():
        fail(1, f"{args.checkpoint} is not a directory")

    install_shims()
    sys.path.insert(0, str(llama_cpp / "gguf-py"))
    sys.path.insert(0, str(llama_cpp))
    os.environ.pop("NO_LOCAL_GGUF", None)

    # The converter's log (and its progress bar) go to a buffer, shown only with --verbose; a
    # failure prints its last line.
    log = io.StringIO()
    handler = logging.StreamHandler(sys.stderr if args.verbose else log)
    if not args.verbose:
        handler.setFormatter(logging.Formatter("%(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])  # main()'s own basicConfig is then a no-op
    existed = args.output.exists()

    def failed(message: str) -> None:
        if not existed:  # no half-written file is left behind
            with contextlib.suppress(OSError):
                args.output.unlink()
        fail(1, message)

    import warnings
    warnings.simplefilter("ignore")  # torch 1.13: "The given NumPy array is not writable" for mmapped data

    try:
        with contextlib.redirect_stderr(sys.stderr if args.verbose else log):
            import convert_hf_to_gguf as converter
            if args.no_vocab:
                get_model_class = converter.get_model_class

                def without_vocab(*a, **kw):
                    cls = get_model_class(*a, **kw)
                    cls.set_vocab = lambda self: None  # this process converts one model
                    return cls

                converter.get_model_class = without_vocab
            sys.argv = ["convert_hf_to_gguf.py", str(args.checkpoint), "--outfile", str(args.output),
                        "--outtype", args.outtype]
            converter.main()
    except SystemExit as e:
        if e.code not in (None, 0):
            lines = [line for line in log.getvalue().splitlines() if line.strip()]
            failed(lines[-1] if lines else f"the converter exited with status {e.code}")
    except Exception as e:  # noqa: BLE001 - any converter failure is one line
        if isinstance(e, ModuleNotFoundError) and e.name in PACKAGES:
            fail(3, f"Python module '{e.name}' is missing: apt-get install {PACKAGES[e.name]}")
        message = str(e).strip().splitlines()
        failed(f"{type(e).__name__}: {message[0] if message else ''}")
    if not args.output.is_file():
        fail(1, f"the converter wrote no {args.output}")


if __name__ == "__main__":
    main()
