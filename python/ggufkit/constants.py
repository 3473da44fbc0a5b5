"""gguf-py's constants: the same names and values (gguf.constants), from the library's tables."""
from __future__ import annotations

from enum import IntEnum

from . import _core

GGUF_MAGIC = 0x46554747  # "GGUF"
GGUF_VERSION = 3
GGUF_DEFAULT_ALIGNMENT = 32
GGML_QUANT_VERSION = 2
GGML_MAX_DIMS = 4

_TYPES = _core.tensor_types()

# The tensor types by ggml's ids; names as gguf-py spells them (ggml's, upper case).
GGMLQuantizationType = IntEnum("GGMLQuantizationType", [(name.upper(), id_) for id_, name, *_ in _TYPES])
GGMLQuantizationType.__module__ = __name__

# (elements per block, bytes per block) of every type, as gguf-py's GGML_QUANT_SIZES.
GGML_QUANT_SIZES: dict[GGMLQuantizationType, tuple[int, int]] = {
    GGMLQuantizationType(id_): (block, size) for id_, _name, block, size, *_ in _TYPES
}


class GGUFValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12

    @staticmethod
    def get_type(val) -> "GGUFValueType":
        """The type gguf-py's writer gives a Python value (ints are INT32, floats FLOAT32)."""
        if isinstance(val, (str, bytes, bytearray)):
            return GGUFValueType.STRING
        if isinstance(val, list):
            return GGUFValueType.ARRAY
        if isinstance(val, float):
            return GGUFValueType.FLOAT32
        if isinstance(val, bool):
            return GGUFValueType.BOOL
        if isinstance(val, int):
            return GGUFValueType.INT32
        raise ValueError(f"Unknown type: {type(val)}")


class GGUFEndian(IntEnum):
    LITTLE = 0
    BIG = 1


class TokenType(IntEnum):
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


class LlamaFileType(IntEnum):
    """general.file_type values (llama_ftype)."""
    ALL_F32 = 0
    MOSTLY_F16 = 1
    MOSTLY_Q4_0 = 2
    MOSTLY_Q4_1 = 3
    MOSTLY_Q8_0 = 7
    MOSTLY_Q5_0 = 8
    MOSTLY_Q5_1 = 9
    MOSTLY_Q2_K = 10
    MOSTLY_Q3_K_S = 11
    MOSTLY_Q3_K_M = 12
    MOSTLY_Q3_K_L = 13
    MOSTLY_Q4_K_S = 14
    MOSTLY_Q4_K_M = 15
    MOSTLY_Q5_K_S = 16
    MOSTLY_Q5_K_M = 17
    MOSTLY_Q6_K = 18
    MOSTLY_IQ2_XXS = 19
    MOSTLY_IQ2_XS = 20
    MOSTLY_Q2_K_S = 21
    MOSTLY_IQ3_XS = 22
    MOSTLY_IQ3_XXS = 23
    MOSTLY_IQ1_S = 24
    MOSTLY_IQ4_NL = 25
    MOSTLY_IQ3_S = 26
    MOSTLY_IQ3_M = 27
    MOSTLY_IQ2_S = 28
    MOSTLY_IQ2_M = 29
    MOSTLY_IQ4_XS = 30
    MOSTLY_IQ1_M = 31
    MOSTLY_BF16 = 32
    MOSTLY_TQ1_0 = 36
    MOSTLY_TQ2_0 = 37
    MOSTLY_MXFP4_MOE = 38
    GUESSED = 1024


class Keys:
    """The standard key names the writer's helpers use ({arch} is the architecture)."""

    class General:
        TYPE = "general.type"
        ARCHITECTURE = "general.architecture"
        QUANTIZATION_VERSION = "general.quantization_version"
        ALIGNMENT = "general.alignment"
        FILE_TYPE = "general.file_type"
        NAME = "general.name"
        AUTHOR = "general.author"
        VERSION = "general.version"
        ORGANIZATION = "general.organization"
        FINETUNE = "general.finetune"
        BASENAME = "general.basename"
        DESCRIPTION = "general.description"
        QUANTIZED_BY = "general.quantized_by"
        SIZE_LABEL = "general.size_label"
        LICENSE = "general.license"
        LICENSE_NAME = "general.license.name"
        LICENSE_LINK = "general.license.link"
        URL = "general.url"
        DOI = "general.doi"
        UUID = "general.uuid"
        REPO_URL = "general.repo_url"
        SOURCE_URL = "general.source.url"
        SOURCE_DOI = "general.source.doi"
        SOURCE_UUID = "general.source.uuid"
        SOURCE_REPO_URL = "general.source.repo_url"
        BASE_MODEL_COUNT = "general.base_model.count"
        TAGS = "general.tags"
        LANGUAGES = "general.languages"
        DATASET_COUNT = "general.dataset.count"

    class LLM:
        VOCAB_SIZE = "{arch}.vocab_size"
        CONTEXT_LENGTH = "{arch}.context_length"
        EMBEDDING_LENGTH = "{arch}.embedding_length"
        BLOCK_COUNT = "{arch}.block_count"
        LEADING_DENSE_BLOCK_COUNT = "{arch}.leading_dense_block_count"
        FEED_FORWARD_LENGTH = "{arch}.feed_forward_length"
        EXPERT_FEED_FORWARD_LENGTH = "{arch}.expert_feed_forward_length"
        EXPERT_SHARED_FEED_FORWARD_LENGTH = "{arch}.expert_shared_feed_forward_length"
        USE_PARALLEL_RESIDUAL = "{arch}.use_parallel_residual"
        TENSOR_DATA_LAYOUT = "{arch}.tensor_data_layout"
        EXPERT_COUNT = "{arch}.expert_count"
        EXPERT_USED_COUNT = "{arch}.expert_used_count"
        EXPERT_SHARED_COUNT = "{arch}.expert_shared_count"
        EXPERT_WEIGHTS_SCALE = "{arch}.expert_weights_scale"
        EXPERT_WEIGHTS_NORM = "{arch}.expert_weights_norm"
        POOLING_TYPE = "{arch}.pooling_type"
        LOGIT_SCALE = "{arch}.logit_scale"
        FINAL_LOGIT_SOFTCAPPING = "{arch}.final_logit_softcapping"
        ATTN_LOGIT_SOFTCAPPING = "{arch}.attn_logit_softcapping"

    class Attention:
        HEAD_COUNT = "{arch}.attention.head_count"
        HEAD_COUNT_KV = "{arch}.attention.head_count_kv"
        MAX_ALIBI_BIAS = "{arch}.attention.max_alibi_bias"
        CLAMP_KQV = "{arch}.attention.clamp_kqv"
        KEY_LENGTH = "{arch}.attention.key_length"
        VALUE_LENGTH = "{arch}.attention.value_length"
        LAYERNORM_EPS = "{arch}.attention.layer_norm_epsilon"
        LAYERNORM_RMS_EPS = "{arch}.attention.layer_norm_rms_epsilon"
        CAUSAL = "{arch}.attention.causal"
        SLIDING_WINDOW = "{arch}.attention.sliding_window"

    class Rope:
        DIMENSION_COUNT = "{arch}.rope.dimension_count"
        FREQ_BASE = "{arch}.rope.freq_base"
        SCALING_TYPE = "{arch}.rope.scaling.type"
        SCALING_FACTOR = "{arch}.rope.scaling.factor"
        SCALING_ATTN_FACTOR = "{arch}.rope.scaling.attn_factor"
        SCALING_ORIG_CTX_LEN = "{arch}.rope.scaling.original_context_length"
        SCALING_FINETUNED = "{arch}.rope.scaling.finetuned"

    class Split:
        LLM_KV_SPLIT_NO = "split.no"
        LLM_KV_SPLIT_COUNT = "split.count"
        LLM_KV_SPLIT_TENSORS_COUNT = "split.tensors.count"

    class Tokenizer:
        MODEL = "tokenizer.ggml.model"
        PRE = "tokenizer.ggml.pre"
        LIST = "tokenizer.ggml.tokens"
        TOKEN_TYPE = "tokenizer.ggml.token_type"
        TOKEN_TYPE_COUNT = "tokenizer.ggml.token_type_count"
        SCORES = "tokenizer.ggml.scores"
        MERGES = "tokenizer.ggml.merges"
        BOS_ID = "tokenizer.ggml.bos_token_id"
        EOS_ID = "tokenizer.ggml.eos_token_id"
        EOT_ID = "tokenizer.ggml.eot_token_id"
        EOM_ID = "tokenizer.ggml.eom_token_id"
        UNK_ID = "tokenizer.ggml.unknown_token_id"
        SEP_ID = "tokenizer.ggml.seperator_token_id"
        PAD_ID = "tokenizer.ggml.padding_token_id"
        MASK_ID = "tokenizer.ggml.mask_token_id"
        ADD_BOS = "tokenizer.ggml.add_bos_token"
        ADD_EOS = "tokenizer.ggml.add_eos_token"
        ADD_SEP = "tokenizer.ggml.add_sep_token"
        ADD_PREFIX = "tokenizer.ggml.add_space_prefix"
        REMOVE_EXTRA_WS = "tokenizer.ggml.remove_extra_whitespaces"
        PRECOMPILED_CHARSMAP = "tokenizer.ggml.precompiled_charsmap"
        HF_JSON = "tokenizer.huggingface.json"
        RWKV = "tokenizer.rwkv.world"
        CHAT_TEMPLATE = "tokenizer.chat_template"
        CHAT_TEMPLATE_N = "tokenizer.chat_template.{name}"
        CHAT_TEMPLATES = "tokenizer.chat_templates"
        FIM_PRE_ID = "tokenizer.ggml.fim_pre_token_id"
        FIM_SUF_ID = "tokenizer.ggml.fim_suf_token_id"
        FIM_MID_ID = "tokenizer.ggml.fim_mid_token_id"
        FIM_PAD_ID = "tokenizer.ggml.fim_pad_token_id"
        FIM_REP_ID = "tokenizer.ggml.fim_rep_token_id"
        FIM_SEP_ID = "tokenizer.ggml.fim_sep_token_id"


# The recommended sampler settings and the per-source base model and dataset keys, set on
# Keys.General from their names: SAMPLING_TOP_K = "general.sampling.top_k",
# BASE_MODEL_NAME = "general.base_model.{id}.name", DATASET_URL = "general.dataset.{id}.url", ...
SAMPLING_FIELDS = ("sequence", "top_k", "top_p", "min_p", "xtc_probability", "xtc_threshold", "temp",
                   "penalty_last_n", "penalty_repeat", "mirostat", "mirostat_tau", "mirostat_eta")
SOURCE_FIELDS = ("name", "author", "version", "organization", "description", "url", "doi", "uuid", "repo_url")
for _field in SAMPLING_FIELDS:
    setattr(Keys.General, "SAMPLING_" + _field.upper(), f"general.sampling.{_field}")
for _kind in ("base_model", "dataset"):
    for _field in SOURCE_FIELDS:
        setattr(Keys.General, f"{_kind.upper()}_{_field.upper()}", f"general.{_kind}.{{id}}.{_field}")
