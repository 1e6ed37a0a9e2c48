"""Tiny Qwen2, Qwen3, Phi-3 and Mistral decoders and their reference outputs, as `gen_decoders.py` makes for
GPT-2 and Llama (same prompt, weight draws, checks and reference layout; its helpers are imported).

Usage: python3 crates/models/tests/data/gen_qwen.py
Needs PyPI's torch, transformers, numpy, safetensors and gguf.

Writes next to this script:
  qwen2_tiny/        Qwen2ForCausalLM (biases on q/k/v), f32, one model.safetensors
  qwen3_tiny/        Qwen3ForCausalLM (RMSNorm of each query and key head; head_dim 24, wider
                     than hidden / heads = 16), f32, one model.safetensors
  phi3_tiny/         Phi3ForCausalLM (fused qkv_proj and gate_up_proj; a sliding window of 3 in
                     every layer), f32, one model.safetensors
  mistral_tiny/      MistralForCausalLM with a sliding window of 3 in every layer, f32
  qwen2_tiny_f32.gguf, qwen3_tiny_f32.gguf, phi3_tiny_f32.gguf
                     the same weights in llama.cpp's GGUF layout for architectures `qwen2` and
                     `qwen3`: no row permutation of attn_q/attn_k (llama.cpp runs these with NeoX
                     rotary, Hugging Face's halves), biases `blk.N.attn_{q,k,v}.bias`, head norms
                     `blk.N.attn_{q,k}_norm.weight`; Phi-3's fused `attn_qkv` and `ffn_up`
                     (gate rows first) and `phi3.attention.sliding_window`
  qwen_ref.json      reference logits / greedy generations computed with transformers in float32
"""
import json
import os

import numpy as np
import torch

import gguf
import transformers
from gguf import GGUFWriter, LlamaFileType
from transformers import MistralConfig, MistralForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from gen_decoders import HERE, INIT_STD, check_reload, fresh_dir, init_weights, reference

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              rms_norm_eps=1e-6, hidden_act="silu", tie_word_embeddings=False, use_sliding_window=False,
              initializer_range=INIT_STD, bos_token_id=1, eos_token_id=2)
ROPE_THETA = 1000000.0


def build(cls, cfg_cls, seed, **extra):
    cfg = cfg_cls(**COMMON, **extra)
    cfg.rope_parameters = {**(cfg.rope_parameters or {}), "rope_type": "default", "rope_theta": ROPE_THETA}
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = cls(cfg).to(torch.float32)
    init_weights(model, seed=seed)
    model.eval()
    return model


def gguf_tensors(state, cfg):
    """HF state dict -> [(gguf name, f32 array)] in llama.cpp's qwen2/qwen3 layout."""
    out = [("token_embd.weight", state["model.embed_tokens.weight"])]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        pairs = [
            ("attn_norm.weight", "input_layernorm.weight"),
            ("attn_qkv.weight", "self_attn.qkv_proj.weight"),
            ("attn_q.weight", "self_attn.q_proj.weight"),
            ("attn_q.bias", "self_attn.q_proj.bias"),
            ("attn_k.weight", "self_attn.k_proj.weight"),
            ("attn_k.bias", "self_attn.k_proj.bias"),
            ("attn_v.weight", "self_attn.v_proj.weight"),
            ("attn_v.bias", "self_attn.v_proj.bias"),
            ("attn_q_norm.weight", "self_attn.q_norm.weight"),
            ("attn_k_norm.weight", "self_attn.k_norm.weight"),
            ("attn_output.weight", "self_attn.o_proj.weight"),
            ("ffn_norm.weight", "post_attention_layernorm.weight"),
            ("ffn_gate.weight", "mlp.gate_proj.weight"),
            ("ffn_up.weight", "mlp.up_proj.weight"),
            ("ffn_up.weight", "mlp.gate_up_proj.weight"),
            ("ffn_down.weight", "mlp.down_proj.weight"),
        ]
        out += [(f"blk.{i}.{g}", state[p + h]) for g, h in pairs if p + h in state]
    out += [("output_norm.weight", state["model.norm.weight"]), ("output.weight", state["lm_head.weight"])]
    return out


def write_gguf(path, arch, model):
    cfg = model.config
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    w = GGUFWriter(path, arch)
    w.add_name(os.path.basename(path))
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    if getattr(cfg, "sliding_window", None) and arch == "phi3":
        w.add_sliding_window(cfg.sliding_window)
    w.add_file_type(int(LlamaFileType.ALL_F32))
    names = []
    for gname, arr in gguf_tensors(state, cfg):
        w.add_tensor(gname, np.ascontiguousarray(arr, dtype=np.float32))
        names.append(gname)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert [t.name for t in gguf.GGUFReader(path).tensors] == names
    return names


def main():
    models = {}
    for key, cls, cfg_cls, seed, extra, arch in (
        ("qwen2_tiny", Qwen2ForCausalLM, Qwen2Config, 2, {}, "qwen2"),
        ("qwen3_tiny", Qwen3ForCausalLM, Qwen3Config, 3, {"head_dim": 24, "attention_bias": False}, "qwen3"),
        ("phi3_tiny", Phi3ForCausalLM, Phi3Config, 5, {"sliding_window": 3, "pad_token_id": 0}, "phi3"),
        ("mistral_tiny", MistralForCausalLM, MistralConfig, 6, {"sliding_window": 3}, None),
    ):
        print(key)
        model = build(cls, cfg_cls, seed, **extra)
        d = fresh_dir(key)
        model.save_pretrained(d, safe_serialization=True)
        ref = reference(model)
        check_reload(cls, d, ref)
        entry = {"format": "hf_safetensors", "dir": key, "weights_dtype": "float32", "compute_dtype": "float32"}
        if arch is not None:  # (Mistral: the safetensors directory only)
            names = write_gguf(os.path.join(HERE, f"{key}_f32.gguf"), arch, model)
            entry.update({"gguf": f"{key}_f32.gguf", "gguf_arch": arch, "gguf_tensors": names})
        models[key] = {**entry, **ref}
    out = {
        "generator": "gen_qwen.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "gguf": __import__("importlib.metadata").metadata.version("gguf"), "numpy": np.__version__},
        "layout": "as decoders_ref.json: logits_all is row-major [T, vocab]; decode_logits is [n_decode, vocab]",
        "models": models,
    }
    with open(os.path.join(HERE, "qwen_ref.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
