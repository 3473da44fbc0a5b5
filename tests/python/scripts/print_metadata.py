# Prints a model's key metadata, every field's name and types, and its tensor types counted: a
# script written for gguf-py (import gguf), run unchanged on ggufkit by test_scripts.py.
import sys
from collections import Counter

import gguf

reader = gguf.GGUFReader(sys.argv[1])
for key in ("general.architecture", "general.name", "general.file_type", "llama.context_length",
            "llama.embedding_length", "llama.block_count", "tokenizer.ggml.model", "tokenizer.ggml.bos_token_id"):
    field = reader.get_field(key)
    print(key, "=", field.contents() if field is not None else None)
for name, field in reader.fields.items():
    value = field.contents()
    shown = f"{len(value)} items, first {value[:3]}" if isinstance(value, list) else repr(value)
    print(name, [t.name for t in field.types], field.offset, shown)
print("alignment", reader.alignment, "data offset", reader.data_offset)
counts = Counter(t.tensor_type.name for t in reader.tensors)
for name, n in sorted(counts.items()):
    print(f"{name}: {n}")
for t in reader.tensors[:5]:
    print(t.name, t.tensor_type.name, t.shape.tolist(), t.n_elements, t.n_bytes, t.data.shape, t.data.dtype)
