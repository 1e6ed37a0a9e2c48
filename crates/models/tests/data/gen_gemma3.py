"""A tiny Gemma 3 decoder and its reference outputs, as `gen_decoders.py` makes for GPT-2 and Llama
(same prompt, draws, checks and reference layout; its helpers are imported).

Usage: python3 crates/models/tests/data/gen_gemma3.py
Needs PyPI's torch, transformers, numpy, safetensors, gguf and accelerate.

Writes next to this script:
  gemma3_tiny/        Gemma3ForCausalLM (text): 6 layers, the default pattern (5 sliding-window
                      layers, window 3, local rotary base 1e4; the 6th global, base 1e6), heads of
                      24 (query_pre_attn_scalar 24), 4 query / 2 key-value heads, tied embeddings
  gemma3_tiny_f32.gguf
                      the same weights in llama.cpp's `gemma3` layout (norm weights stored plus
                      one; post_attention_norm / ffn_norm / post_ffw_norm)
  gemma3_ref.json     reference logits / greedy generation computed with transformers in float32;
                      the GGUF's reference is transformers' own loading of that file (which must
                      give the same logits within 1e-5)
"""
import json
import os

import numpy as np
import torch

import gguf
import transformers
from gguf import GGUFWriter, LlamaFileType
from transformers import AutoModelForCausalLM, Gemma3ForCausalLM, Gemma3TextConfig

from gen_decoders import HERE, INIT_STD, PROMPT, check_reload, floats, fresh_dir, init_weights, reference

HEAD_DIM = 24


def build():
    cfg = Gemma3TextConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=6,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=HEAD_DIM,
                           query_pre_attn_scalar=HEAD_DIM, max_position_embeddings=64, rms_norm_eps=1e-6,
                           sliding_window=3, tie_word_embeddings=True, initializer_range=INIT_STD,
                           bos_token_id=2, eos_token_id=1, pad_token_id=0)
    cfg._attn_implementation = "eager"
    torch.manual_seed(4)
    model = Gemma3ForCausalLM(cfg).to(torch.float32)
    init_weights(model, seed=4)
    model.eval()
    return model


def write_gguf(path, model):
    cfg = model.config
    st = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w = GGUFWriter(path, "gemma3")
    w.add_name("gemma3_tiny")
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_sliding_window(cfg.sliding_window)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(int(LlamaFileType.ALL_F32))
    names = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
             "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
             "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "post_attention_norm",
             "pre_feedforward_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "post_feedforward_layernorm": "post_ffw_norm"}
    tensors = [("token_embd.weight", st["model.embed_tokens.weight"])]
    for i in range(cfg.num_hidden_layers):
        for hf, g in names.items():
            tensors.append((f"blk.{i}.{g}.weight", st[f"model.layers.{i}.{hf}.weight"]))
    tensors.append(("output_norm.weight", st["model.norm.weight"]))
    for name, arr in tensors:
        if name.endswith("norm.weight"):
            arr = arr + 1.0  # llama.cpp's convert_hf_to_gguf stores Gemma's norms plus one
        w.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return [n for n, _ in tensors]


def main():
    model = build()
    d = fresh_dir("gemma3_tiny")
    model.save_pretrained(d, safe_serialization=True)
    print("gemma3_tiny")
    ref = reference(model)
    check_reload(Gemma3ForCausalLM, d, ref)
    gguf_path = os.path.join(HERE, "gemma3_tiny_f32.gguf")
    names = write_gguf(gguf_path, model)
    print("gemma3_tiny_f32.gguf (transformers' own GGUF loading)")
    # (transformers' GGUF loader takes query_pre_attn_scalar from its default, 256; llama.cpp
    # scales by head_dim: given here, so both mean the same model; the file has no tokenizer to
    # count the vocabulary from)
    loaded = AutoModelForCausalLM.from_pretrained(HERE, gguf_file="gemma3_tiny_f32.gguf", dtype=torch.float32,
                                                  query_pre_attn_scalar=HEAD_DIM, vocab_size=96,
                                                  attn_implementation="eager")
    loaded.eval()
    assert loaded.config.layer_types == model.config.layer_types, loaded.config.layer_types
    assert loaded.config.sliding_window == model.config.sliding_window
    ref_gguf = reference(loaded)
    dev = float(np.abs(np.array(ref_gguf["logits_all"]) - np.array(ref["logits_all"])).max())
    print(f"  max |GGUF-loaded - original| logits = {dev:.3g}")
    assert dev < 1e-5, dev
    out = {
        "generator": "gen_gemma3.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "gguf": __import__("importlib.metadata").metadata.version("gguf"), "numpy": np.__version__},
        "layout": "as decoders_ref.json: logits_all is row-major [T, vocab]; decode_logits is [n_decode, vocab]",
        "models": {
            "gemma3_tiny": {"format": "hf_safetensors", "dir": "gemma3_tiny",
                            "layer_types": model.config.layer_types, **ref},
            "gemma3_tiny_gguf": {"format": "gguf", "file": "gemma3_tiny_f32.gguf", "gguf_tensors": names,
                                 "reference": "transformers' GGUF loading of the file", **ref_gguf},
        },
    }
    with open(os.path.join(HERE, "gemma3_ref.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
