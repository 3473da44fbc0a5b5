"""GGUFReader against gguf-py's on every file of the corpus (and big-endian copies): the same
fields (offsets, types, parts, data indices, contents), the same tensors (names, types, shapes,
sizes, offsets, the data views' shapes, dtypes and bytes), zero-copy views, and the library's
errors for bad files."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

import ggufkit
from conftest import corpus_files

FILES = corpus_files("tiny-llama") + corpus_files("vocab")


def assert_same_fields(ref_reader, reader):
    assert list(ref_reader.fields) == list(reader.fields)
    for name, ref in ref_reader.fields.items():
        ours = reader.fields[name]
        assert (ours.offset, ours.name) == (ref.offset, ref.name)
        assert [int(t) for t in ours.types] == [int(t) for t in ref.types], name
        assert list(ours.data) == list(ref.data), name
        assert len(ours.parts) == len(ref.parts), name
        # Every part of small fields; the first and last 40 of large arrays.
        indices = range(len(ref.parts)) if len(ref.parts) <= 100 else [*range(40), *range(len(ref.parts) - 40, len(ref.parts))]
        for i in indices:
            a, b = ref.parts[i], ours.parts[i]
            assert b.dtype.newbyteorder("=") == a.dtype.newbyteorder("=") and b.tolist() == a.tolist(), (name, i)
        assert ours.contents() == ref.contents(), name
        if ref.types[0] == ggufkit.GGUFValueType.ARRAY and len(ref.data) > 2:
            assert ours.contents(1) == ref.contents(1) and ours.contents(slice(0, 2)) == ref.contents(slice(0, 2))
            assert ours.contents(-1) == ref.contents(-1)


def assert_same_tensors(ref_reader, reader):
    assert (reader.alignment, reader.data_offset, reader.byte_order, int(reader.endianess)) == \
           (ref_reader.alignment, ref_reader.data_offset, ref_reader.byte_order, int(ref_reader.endianess))
    assert len(reader.tensors) == len(ref_reader.tensors)
    for ref, ours in zip(ref_reader.tensors, reader.tensors):
        assert (ours.name, int(ours.tensor_type), ours.tensor_type.name) == (ref.name, int(ref.tensor_type), ref.tensor_type.name)
        assert ours.shape.tolist() == ref.shape.tolist() and ours.shape.dtype == np.uint64
        assert (ours.n_elements, ours.n_bytes, ours.data_offset) == (ref.n_elements, ref.n_bytes, ref.data_offset)
        assert ours.data.shape == ref.data.shape and ours.data.dtype == ref.data.dtype, ref.name
        assert ours.data.tobytes() == ref.data.tobytes(), ref.name
        assert ours.field.offset == ref.field.offset and ours.field.name == ref.field.name
        assert [p.tolist() for p in ours.field.parts] == [p.tolist() for p in ref.field.parts]
        assert list(ours.field.data) == list(ref.field.data)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_reads_what_gguf_py_reads(shared, ggufpy, path):
    ref, ours = ggufpy.GGUFReader(path), ggufkit.GGUFReader(path)
    assert_same_fields(ref, ours)
    assert_same_tensors(ref, ours)
    assert ours.get_field("general.architecture").contents() == ref.get_field("general.architecture").contents()
    assert ours.get_field("no.such.key") is None


def test_the_corpus_is_there(shared):
    assert len(corpus_files("tiny-llama")) >= 20 and len(corpus_files("vocab")) >= 8


@pytest.mark.parametrize("name", ["tiny-llama-q8_0.gguf", "tiny-llama-f32.gguf", "tiny-llama-f16.gguf"])
def test_big_endian_files(shared, ggufpy, cli, tmp_path, name):
    big = tmp_path / ("big-" + name)
    run = subprocess.run([cli, "convert-endian", "--to", "big", str(shared / "corpus/tiny-llama" / name), str(big)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    ref, ours = ggufpy.GGUFReader(big), ggufkit.GGUFReader(big)
    assert ours.byte_order == "S" and ours.endianess == ggufkit.GGUFEndian.BIG
    assert_same_fields(ref, ours)
    assert_same_tensors(ref, ours)
    # The values are the little-endian file's: typed tensor views carry the big-endian dtype (block
    # types are bytes, with their scales swapped, as gguf-py gives them).
    little = ggufkit.GGUFReader(shared / "corpus/tiny-llama" / name)
    for a, b in zip(little.tensors, ours.tensors):
        if b.data.dtype == np.uint8:
            continue
        assert b.data.dtype.byteorder == ">"
        assert np.array_equal(a.data.astype(a.data.dtype.newbyteorder("=")), b.data.astype(b.data.dtype.newbyteorder("=")))


def test_tensor_data_is_a_read_only_view_of_the_mapping(shared):
    reader = ggufkit.GGUFReader(shared / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf")
    for t in reader.tensors:
        assert np.shares_memory(t.data, reader.data)
        assert not t.data.flags.writeable
        with pytest.raises(ValueError, match="^assignment destination is read-only$"):
            t.data.reshape(-1)[0] = 0
    # The views keep the mapping alive after the reader is gone.
    data = reader.tensors[-1].data
    expected = data.tobytes()
    del reader
    assert data.tobytes() == expected


def test_read_only(shared):
    with pytest.raises(ValueError, match="read-only"):
        ggufkit.GGUFReader(shared / "corpus/tiny-llama/tiny-llama-f16.gguf", "r+")


def test_errors_name_the_code_offset_and_record(shared, tmp_path):
    source = (shared / "corpus/tiny-llama/tiny-llama-f16.gguf").read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(source[:100])
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.GGUFReader(truncated)
    assert isinstance(e.value, ValueError)
    assert (e.value.code, e.value.offset, e.value.record, e.value.file) == ("truncated", 8, "", str(truncated))
    assert str(e.value) == (f"{truncated}: offset 8: the header announces 20 tensors, which need at least 480 bytes, "
                            "but the file ends 76 bytes later (file size 100): is it truncated?")
    # Cut inside the token list: the record is the key.
    vocab = (shared / "corpus/vocab/ggml-vocab-gpt-2.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(vocab[:len(vocab) // 2])
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.GGUFReader(cut)
    assert (e.value.code, e.value.record) == ("truncated", "tokenizer.ggml.token_type")
    assert str(e.value).startswith(f"{cut}: offset {e.value.offset}: 'tokenizer.ggml.token_type': ")

    bad_magic = tmp_path / "magic.gguf"
    bad_magic.write_bytes(b"GGUX" + source[4:])
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.GGUFReader(bad_magic)
    assert (e.value.code, e.value.offset, e.value.record) == ("bad_magic", 0, "")

    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.GGUFReader(tmp_path / "missing.gguf")
    assert e.value.code == "io_error" and e.value.offset is None


def test_quantization_types_match_gguf_py(ggufpy):
    ours = {t.name: int(t) for t in ggufkit.GGMLQuantizationType}
    ref = {t.name: int(t) for t in ggufpy.GGMLQuantizationType}
    assert ours == ref
    assert {t.name: int(t) for t in ggufkit.GGUFValueType} == {t.name: int(t) for t in ggufpy.GGUFValueType}
    # ggml's sizes; gguf-py's table says 40 bytes for Q8_1's block, ggml's block_q8_1 is 36 (two
    # halves and 32 int8): the one difference, and ggml is what files are made of.
    ref_sizes = {int(k): v for k, v in ggufpy.GGML_QUANT_SIZES.items()}
    assert ref_sizes[int(ggufkit.GGMLQuantizationType.Q8_1)] == (32, 40)
    ref_sizes[int(ggufkit.GGMLQuantizationType.Q8_1)] = (32, 36)
    assert {int(k): v for k, v in ggufkit.GGML_QUANT_SIZES.items()} == ref_sizes
    ref_ftypes = {t.name: int(t) for t in ggufpy.LlamaFileType}
    assert all(ref_ftypes[t.name] == int(t) for t in ggufkit.LlamaFileType)
    for group in ("General", "LLM", "Attention", "Rope", "Split", "Tokenizer"):
        ours_keys, ref_keys = vars(getattr(ggufkit.Keys, group)), vars(getattr(ggufpy.Keys, group))
        for name, value in ours_keys.items():
            if not name.startswith("_"):
                assert ref_keys[name] == value, (group, name)


def test_split_models_read_as_one(shared, ggufpy, cli, tmp_path):
    original = shared / "corpus/tiny-llama/tiny-llama-q4_k_m.gguf"
    run = subprocess.run([cli, "split", "--max-tensors", "7", str(original), str(tmp_path / "m")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    shards = [tmp_path / f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    model = ggufkit.GGUFReader(shards[0], split=True)
    assert model.paths == [str(p) for p in shards]
    # The fields are the first shard's, as gguf-py reads that file.
    first = ggufpy.GGUFReader(shards[0])
    assert_same_fields(first, model)
    # The tensors are the whole model's: the original file's, each a view of its own shard.
    whole = ggufkit.GGUFReader(original)
    assert [(t.name, t.tensor_type, t.shape.tolist(), t.n_bytes) for t in model.tensors] == \
           [(t.name, t.tensor_type, t.shape.tolist(), t.n_bytes) for t in whole.tensors]
    assert all(a.data.tobytes() == b.data.tobytes() for a, b in zip(model.tensors, whole.tensors))
    assert [t.shard for t in model.tensors] == [0] * 7 + [1] * 7 + [2] * 6
    by_shard = [ggufpy.GGUFReader(p) for p in shards]
    assert [t.data_offset for t in model.tensors] == [t.data_offset for r in by_shard for t in r.tensors]
    # Without split=True a shard is read as gguf-py reads it: that file alone.
    assert_same_tensors(first, ggufkit.GGUFReader(shards[0]))
    shards[1].unlink()
    with pytest.raises(ggufkit.GGUFError) as e:
        ggufkit.GGUFReader(shards[0], split=True)
    assert e.value.code == "io_error" and str(shards[1]) in str(e.value)
