// llama.cpp's GGUF layout of a tiny family checkpoint (family_checkpoint.h), written by hand as
// convert_hf_to_gguf.py lays it out (80fb11a: conversion/gemma.py, phi.py, granite.py, olmo.py,
// llama.py, qwen.py, mistral3.py): tensor names, the +1 of Gemma's norm weights, the q/k row
// permutation of the llama-rope families (Granite, SmolLM3, Mixtral, Mistral 3, Ministral 3), Phi-3's
// fused tensors kept fused and its rope factor tensors, the multimodal tensors left out, each
// layer's experts stacked into one 3-D tensor per kind in the order of their indices (fused ones:
// down_proj as it is, gate_up_proj split into its gate and up halves per expert), the keys
// llama.cpp reads. All tensors F32.
//
// Two uses: llama.cpp's logits of this file validate the float64 reference (family_reference.h)
// independently of `gguf convert`, and a converted file's tensors are compared with it one by one,
// so that a layout mistake is named by tensor.
#pragma once

#include <filesystem>
#include <string>

#include "family_checkpoint.h"

namespace ggufkit::test {

// The shared corpus vocabulary a BPE family's hand-laid file takes its tokenizer.* keys from
// (ggml-vocab-llama-bpe.gguf for the llama 3 tokenizer files, ggml-vocab-llama-spm.gguf for llama
// 2's, ggml-vocab-qwen2.gguf for Qwen3's), or an empty path for the SentencePiece families (their keys are built from the pieces).
std::filesystem::path family_vocab_gguf(const TinyHfModel& model);

// The GGUF architecture name ("gemma2", "phi3", ...).
std::string family_gguf_arch(TinyFamily family);

// Writes the file; empty string, or what went wrong.
std::string write_family_gguf_by_hand(const TinyHfModel& model, const std::filesystem::path& out);

}  // namespace ggufkit::test
