#!/usr/bin/env python3
"""Writes src/convert/pre_tokenizer.inc, the data behind gguf convert's tokenizer.ggml.pre for BPE
tokenizers (src/convert/pre_tokenizer.cpp), from llama.cpp's conversion/base.py
(get_vocab_base_pre). The .inc is committed; rerun after a llama.cpp update:
  python3 scripts/gen-pre-tokenizer-table.py LLAMA_CPP_SOURCE_DIR

llama.cpp's converter names the pre-tokenizer by the SHA-256 of str(tokenizer.encode(chktxt)) with
Hugging Face's tokenizer, looked up in a run of plain `if`s (the last match wins). The .inc holds:
  - chktxt itself;
  - the pre-tokenizer shapes gguf convert recognises in tokenizer.json: the Split regexes exactly
    as the files have them (decoded JSON), in order;
  - for each shape (and for the added tokens a vocabulary may have that occur in chktxt), chktxt as
    Hugging Face's tokenizers pre-tokenize it: the byte-level words BPE then runs on, and the added
    tokens cut out before; computed here with Python's `regex` module, so that the C++ side needs
    no regex engine and no Unicode tables;
  - the chkhsh -> name table, the last `if` of a hash kept.
Needs Python's `regex` module (Debian: python3-regex).

With --check-subset TOKENIZER_DIR OUT.json it also writes a test fixture: TOKENIZER_DIR's
tokenizer.json with only the part of model.vocab and model.merges the check uses (the tokens BPE
goes through on chktxt, with their ids, and the merges it applies, in their order), which gives
the same check hash, so the same name, as the whole vocabulary."""
import ast
import json
import pathlib
import re
import subprocess
import sys
import unicodedata

import regex

root = pathlib.Path(__file__).resolve().parent.parent
args = sys.argv[1:]
subset = None
if "--check-subset" in args:
    at = args.index("--check-subset")
    subset = (pathlib.Path(args[at + 1]), pathlib.Path(args[at + 2]))
    del args[at:at + 3]
src = pathlib.Path(args[0] if args else root / ".oracle/llama.cpp")
base_py = (src / "conversion/base.py").read_text(encoding="utf-8")
function = re.search(r"\n    def get_vocab_base_pre\(self, tokenizer\).*?# Marker: End get_vocab_base_pre", base_py, re.S)
if function is None:
    sys.exit(f"{src}/conversion/base.py: get_vocab_base_pre not found")
body = function.group(0)

# chktxt, as the function assigns it, and what the function hashes.
assignment = re.search(r"\n\s*chktxt = (.*)\n", body)
chktxt = ast.literal_eval(assignment.group(1))
if "chkhsh = sha256(str(chktok).encode()).hexdigest()" not in body or "chktok = tokenizer.encode(chktxt)" not in body:
    sys.exit("get_vocab_base_pre no longer hashes str(tokenizer.encode(chktxt)): review pre_tokenizer.cpp")
# The NFC normalizer is accepted because it leaves chktxt as it is.
assert unicodedata.is_normalized("NFC", chktxt)

# hash -> name: plain ifs, so the last one of a hash wins (mpt's hash is olmo's).
entries = re.findall(r'if chkhsh == "([0-9a-f]{64})":\s*\n(?:\s*#.*\n)*\s*res = "([^"]+)"', body)
if len(entries) < 50 or len(entries) != body.count("if chkhsh =="):
    sys.exit("the chkhsh table was not parsed: review the pattern above")
table = {}
for chkhsh, name in entries:
    table[chkhsh] = name

try:
    commit = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
except (OSError, subprocess.CalledProcessError):
    commit = "unknown"

# ---- the shapes: the Split regexes of Hugging Face tokenizer.json files, decoded ----
LLAMA3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
         r"\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
TEKKEN = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
          r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
          r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# DeepSeek-V3's third Split has real CR and LF characters (JSON escapes) where the others have \r \n.
DEEPSEEK_V3 = ["\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+",
               "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
               " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]
# ByteLevel's own regex (use_regex: true).
GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# name, kind, Split regexes. Kinds: byte_level = a lone ByteLevel with its regex; digits_byte_level =
# Digits (individual) then ByteLevel with its regex; splits = the Splits then ByteLevel without regex.
SHAPES = [
    ("gpt2", "byte_level", []),
    ("digits-gpt2", "digits_byte_level", []),
    ("llama3", "splits", [LLAMA3]),
    ("qwen2", "splits", [QWEN2]),
    ("o200k", "splits", [O200K]),
    ("tekken", "splits", [TEKKEN]),
    ("deepseek-v3", "splits", DEEPSEEK_V3),
]
# Added tokens that occur in chktxt, per shape: GPT-NeoX's whitespace runs (MPT, OLMo 1, Pythia),
# which are cut out of the text before it is pre-tokenized.
NEOX_SPACES = ["  ", "   ", "    ", "     "]
ENTRIES = [(name, []) for name, _, _ in SHAPES] + [("gpt2", sorted(NEOX_SPACES))]  # added tokens sorted (code points)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


B2U = bytes_to_unicode()


def split_isolated(pieces, pattern):
    """tokenizers' Split with behavior Isolated: every match and every text between matches a piece."""
    out = []
    rx = regex.compile(pattern)
    for p in pieces:
        pos = 0
        for m in rx.finditer(p):
            if m.start() > pos:
                out.append(p[pos:m.start()])
            if m.end() > m.start():
                out.append(m.group())
            pos = m.end()
        if pos < len(p):
            out.append(p[pos:])
    return out


def pretokenize(shape, text):
    _, kind, splits = next(s for s in SHAPES if s[0] == shape)
    if kind == "byte_level":
        pieces = split_isolated([text], GPT2)
    elif kind == "digits_byte_level":
        pieces = split_isolated(split_isolated([text], r"\p{N}"), GPT2)
    else:
        pieces = [text]
        for pattern in splits:
            pieces = split_isolated(pieces, pattern)
    return ["".join(B2U[b] for b in p.encode("utf-8")) for p in pieces]


def split_added(text, added):
    """tokenizers' AddedVocabulary: the leftmost, then longest, occurrence of an added token first."""
    out, pos, start = [], 0, 0
    while pos < len(text):
        best = max((a for a in added if text.startswith(a, pos)), key=len, default=None)
        if best is None:
            pos += 1
            continue
        if start < pos:
            out.append((text[start:pos], False))
        out.append((best, True))
        pos += len(best)
        start = pos
    if start < len(text):
        out.append((text[start:], False))
    return out


def c_string(text, raw_unicode=False):
    """A C++ string literal of text's UTF-8: simple escapes for quotes, backslashes, tabs and line
    ends, octal escapes (never greedy past three digits) for other control characters and, unless
    raw_unicode, for every byte above ASCII."""
    simple = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}
    out = []
    for ch in text:
        if ch in simple:
            out.append(simple[ch])
        elif 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        elif raw_unicode and ord(ch) > 0x9F and unicodedata.category(ch)[0] in "LNPS":
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


lines = [
    f"// Generated by scripts/gen-pre-tokenizer-table.py from llama.cpp {commit} (conversion/base.py,",
    "// get_vocab_base_pre). Do not edit. Included by src/convert/pre_tokenizer.cpp.",
    "// clang-format off",
    "",
    "// chktxt, the text whose token ids llama.cpp's converter hashes.",
    f"constexpr std::string_view kCheckText = {c_string(chktxt)};",
    "",
    "// The pre-tokenizer shapes: the Split regexes of tokenizer.json, decoded, in order.",
]
for i, (name, kind, splits) in enumerate(SHAPES):
    if splits:
        lines.append(f"constexpr std::string_view kShape{i}Splits[] = {{")
        lines += [f"    {c_string(p)}," for p in splits]
        lines.append("};")
lines.append("constexpr CheckShape kCheckShapes[] = {")
for i, (name, kind, splits) in enumerate(SHAPES):
    span = f"kShape{i}Splits" if splits else "{}"
    lines.append(f'    {{"{name}", ShapeKind::{kind}, {span}}},')
lines.append("};")
lines += ["", "// chktxt pre-tokenized per shape (and added tokens found in it): byte-level words, added tokens."]
for i, (shape, added) in enumerate(ENTRIES):
    if added:
        lines.append(f"constexpr std::string_view kWords{i}Added[] = {{{', '.join(c_string(a) for a in added)}}};")
    lines.append(f"constexpr CheckItem kWords{i}Items[] = {{")
    for segment, is_added in split_added(chktxt, added):
        if is_added:
            lines.append(f"    {{true, {c_string(segment)}}},")
        else:
            lines += [f"    {{false, {c_string(w, raw_unicode=True)}}}," for w in pretokenize(shape, segment)]
    lines.append("};")
lines.append("constexpr CheckWords kCheckWords[] = {")
for i, (shape, added) in enumerate(ENTRIES):
    lines.append(f'    {{"{shape}", {f"kWords{i}Added" if added else "{}"}, kWords{i}Items}},')
lines.append("};")
lines += ["", "// chkhsh -> tokenizer.ggml.pre, sorted by hash; of a hash listed twice, the last name."]
lines.append("constexpr KnownHash kKnownHashes[] = {")
lines += [f'    {{"{h}", "{table[h]}"}},' for h in sorted(table)]
lines += ["};", "// clang-format on"]
(root / "src/convert/pre_tokenizer.inc").write_text("\n".join(lines) + "\n", encoding="utf-8")
print(f"llama.cpp {commit}: {len(table)} hashes, {len(SHAPES)} shapes, {len(ENTRIES)} word lists", file=sys.stderr)


def write_check_subset(tokenizer_dir, out):
    """tokenizer.json cut down to what BPE uses on chktxt (a lone ByteLevel pre-tokenizer; no added
    token may occur in chktxt)."""
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text(encoding="utf-8"))
    model = tok["model"]
    shape = {"ByteLevel": "gpt2"}[tok["pre_tokenizer"]["type"]]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    ranks = {}
    for i, m in enumerate(merges):
        ranks[m] = i
    vocab, used = {}, set()
    for word in pretokenize(shape, chktxt):
        symbols = list(word)
        vocab.update((c, model["vocab"][c]) for c in symbols)
        while len(symbols) > 1:
            best = min(((ranks[p], i) for i, p in enumerate(zip(symbols, symbols[1:])) if p in ranks), default=None)
            if best is None:
                break
            rank, i = best
            used.add(rank)
            symbols[i:i + 2] = [symbols[i] + symbols[i + 1]]
            vocab[symbols[i]] = model["vocab"][symbols[i]]
    model["vocab"] = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
    model["merges"] = [" ".join(merges[r]) for r in sorted(used)]
    out.write_text(json.dumps(tok, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(vocab)} tokens, {len(used)} merges", file=sys.stderr)


if subset:
    write_check_subset(*subset)
