"""Tiny decoder-only reference models (GPT-2, Llama with GQA) and their reference outputs.

Usage: python3 crates/models/tests/data/gen_decoders.py
Needs PyPI's torch, transformers, numpy, safetensors and gguf (see README.md for the versions used).
Runs on the CPU only, with fixed seeds; the outputs are byte-for-byte reproducible.

Writes next to this script:
  gpt2_tiny/        GPT2LMHeadModel, f32, one model.safetensors (lm_head tied to wte: only
                    transformer.wte.weight is stored)
  llama_tiny/       LlamaForCausalLM, f32, sharded: model-0000N-of-0000M.safetensors +
                    model.safetensors.index.json
  llama_tiny_bf16/  the same Llama weights rounded to bfloat16, one model.safetensors
  llama_tiny_f32.gguf, llama_tiny_q8_0.gguf, llama_tiny_q4_0.gguf
                    the same Llama weights in llama.cpp's GGUF layout (see gguf_permute below)
  decoders_ref.json reference logits / greedy generations computed with transformers in float32

Weights are drawn here (not by transformers' initializers, which change between versions):
every >=2-D weight ~ N(0, INIT_STD^2); norm weights ~ 1 + 0.1 N(0,1); biases ~ 0.1 N(0,1);
parameters are visited in named_parameters() order with one torch.Generator per model.
"""
import hashlib
import json
import os
import shutil

import numpy as np
import torch

import gguf
import safetensors
import transformers
from gguf import GGMLQuantizationType, GGUFWriter, LlamaFileType
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
INIT_STD = 0.2
PROMPT = [3, 17, 42, 88, 5, 61, 29]  # 7 tokens, all < 96
N_PREFILL = 4  # KV-cache check: prefill PROMPT[:4], then decode PROMPT[4], PROMPT[5], PROMPT[6]
MAX_NEW_TOKENS = 12

torch.use_deterministic_algorithms(True)
torch.set_num_threads(1)


def init_weights(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied parameters are listed once
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:  # LayerNorm / RMSNorm weights
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(INIT_STD * torch.randn(p.shape, generator=g))


def floats(t):
    """Flattened (row-major) float32 values as Python floats: exact, json writes the shortest repr."""
    return [float(x) for x in t.detach().to(torch.float32).reshape(-1).numpy()]


def reference(model):
    """Reference outputs of a transformers causal LM in float32 on the CPU."""
    model.eval()
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits[0]  # [T, vocab]

        # Greedy generation, with the KV cache, EOS never stops it (eos_token_id is cleared).
        gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                             max_new_tokens=MAX_NEW_TOKENS, use_cache=True,
                             eos_token_id=None, pad_token_id=0, top_k=None, top_p=None, temperature=None)
        new_tokens = gen[0, len(PROMPT):].tolist()
        assert len(new_tokens) == MAX_NEW_TOKENS, new_tokens
        # Cross-check generate() against a plain argmax loop without cache.
        seq, margins = list(PROMPT), []
        for _ in range(MAX_NEW_TOKENS):
            last = model(torch.tensor([seq]), use_cache=False).logits[0, -1]
            top2 = last.topk(2).values
            margins.append(float(top2[0] - top2[1]))
            seq.append(int(last.argmax()))
        assert seq[len(PROMPT):] == new_tokens, (seq, new_tokens)
        print(f"  greedy {new_tokens}, smallest top1-top2 logit gap {min(margins):.3g}")

        # Prefill 4 tokens, then decode 3 tokens one at a time through past_key_values.
        out = model(ids[:, :N_PREFILL], use_cache=True)
        prefill_last = out.logits[0, -1]
        past = out.past_key_values
        decode_logits = []
        for pos in range(N_PREFILL, len(PROMPT)):
            out = model(ids[:, pos:pos + 1], past_key_values=past, use_cache=True,
                        position_ids=torch.tensor([[pos]]))
            past = out.past_key_values
            decode_logits.append(out.logits[0, -1])
        dev = max(float((d - logits[N_PREFILL + i]).abs().max()) for i, d in enumerate(decode_logits))
        print(f"  max |kv decode - full forward| = {dev:.3g}")

    return {
        "prompt": PROMPT,
        "logits_last": floats(logits[-1]),
        "logits_all_shape": list(logits.shape),
        "logits_all": floats(logits),
        "greedy": {"max_new_tokens": MAX_NEW_TOKENS, "use_cache": True, "eos_stops": False,
                   "new_tokens": new_tokens, "sequence": PROMPT + new_tokens,
                   "top1_top2_margins": margins},
        "kv_cache": {
            "prefill_tokens": PROMPT[:N_PREFILL],
            "prefill_last_logits": floats(prefill_last),
            "decode_tokens": PROMPT[N_PREFILL:],
            "decode_positions": list(range(N_PREFILL, len(PROMPT))),
            "decode_logits_shape": [len(decode_logits), logits.shape[1]],
            "decode_logits": [floats(d) for d in decode_logits],
        },
    }


def fresh_dir(name):
    path = os.path.join(HERE, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def config_values(cfg, keys):
    return {k: getattr(cfg, k) for k in keys}


# ---------------------------------------------------------------- GPT-2
def build_gpt2():
    cfg = GPT2Config(vocab_size=96, n_positions=64, n_embd=64, n_layer=2, n_head=4, n_inner=None,
                     layer_norm_epsilon=1e-5, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, initializer_range=INIT_STD,
                     bos_token_id=95, eos_token_id=95, tie_word_embeddings=True)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = GPT2LMHeadModel(cfg).to(torch.float32)
    init_weights(model, seed=0)
    assert model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    model.eval()
    return model


# ---------------------------------------------------------------- Llama
LLAMA_KW = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False,
                attention_bias=False, mlp_bias=False, initializer_range=INIT_STD,
                bos_token_id=1, eos_token_id=2)


def llama_config():
    cfg = LlamaConfig(**LLAMA_KW)
    cfg._attn_implementation = "eager"
    return cfg


def build_llama():
    torch.manual_seed(1)
    model = LlamaForCausalLM(llama_config()).to(torch.float32)
    init_weights(model, seed=1)
    model.eval()
    return model


def llama_with_state(state):
    model = LlamaForCausalLM(llama_config()).to(torch.float32)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    assert not missing and not unexpected, (missing, unexpected)
    model.eval()
    return model


# ---------------------------------------------------------------- GGUF
def gguf_permute(w, n_head, n_head_kv):
    """llama.cpp convert_hf_to_gguf.py, LlamaModel.permute, applied to attn_q (n_head, n_head) and
    attn_k (n_head, n_head_kv); with GQA the k weight is permuted with n_head := n_head_kv:

        def permute(weights, n_head, n_head_kv):
            if n_head_kv is not None and n_head != n_head_kv:
                n_head = n_head_kv
            return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
                    .swapaxes(1, 2)
                    .reshape(weights.shape))

    w is the HF (out_features, in_features) matrix. Within each head (head_dim = d rows), HF's
    rows are [x_0 .. x_{d/2-1}, y_0 .. y_{d/2-1}] (rotate_half / NeoX pairing (i, i+d/2)); GGUF's are
    interleaved [x_0, y_0, x_1, y_1, ...] (llama.cpp's LLAMA rope pairs adjacent dims (2i, 2i+1)):
        gguf_row[h*d + 2*i + j] = hf_row[h*d + j*(d/2) + i]   for i < d/2, j in {0, 1}.
    """
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def gguf_unpermute(w, n_head, n_head_kv):
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2)
            .reshape(w.shape))


def gguf_tensors(state, cfg):
    """HF state dict (numpy f32) -> ordered [(gguf_name, array in GGUF row layout)]."""
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    out = [("token_embd.weight", state["model.embed_tokens.weight"])]
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        out += [
            (f"blk.{i}.attn_norm.weight", state[p + "input_layernorm.weight"]),
            (f"blk.{i}.attn_q.weight", gguf_permute(state[p + "self_attn.q_proj.weight"], nh, nh)),
            (f"blk.{i}.attn_k.weight", gguf_permute(state[p + "self_attn.k_proj.weight"], nh, nkv)),
            (f"blk.{i}.attn_v.weight", state[p + "self_attn.v_proj.weight"]),
            (f"blk.{i}.attn_output.weight", state[p + "self_attn.o_proj.weight"]),
            (f"blk.{i}.ffn_norm.weight", state[p + "post_attention_layernorm.weight"]),
            (f"blk.{i}.ffn_gate.weight", state[p + "mlp.gate_proj.weight"]),
            (f"blk.{i}.ffn_up.weight", state[p + "mlp.up_proj.weight"]),
            (f"blk.{i}.ffn_down.weight", state[p + "mlp.down_proj.weight"]),
        ]
    out += [("output_norm.weight", state["model.norm.weight"]), ("output.weight", state["lm_head.weight"])]
    return out


def hf_name(gguf_name, n_layers):
    inv = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
    per = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
           "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
           "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
           "ffn_down": "mlp.down_proj"}
    if gguf_name in inv:
        return inv[gguf_name]
    _, i, kind, _ = gguf_name.split(".")
    return f"model.layers.{i}.{per[kind]}.weight"


def write_gguf(path, tensors, cfg, qtype, file_type, name):
    """Writes one GGUF; returns {gguf_name: (ggml type name, dequantized f32 array)}."""
    w = GGUFWriter(path, "llama")  # general.architecture = "llama"; general.alignment left at 32
    w.add_name(name)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    w.add_rope_freq_base(float(cfg.rope_theta if hasattr(cfg, "rope_theta") else cfg.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    w.add_file_type(int(file_type))
    if qtype != GGMLQuantizationType.F32:
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    stored = {}
    for gname, arr in tensors:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        t = qtype if arr.ndim == 2 else GGMLQuantizationType.F32  # norms (1-D) stay f32
        if t == GGMLQuantizationType.F32:
            w.add_tensor(gname, arr)
            deq = arr
        else:
            q = gguf.quants.quantize(arr, t)
            w.add_tensor(gname, q, raw_dtype=t)  # shape stored reversed: ne = [in, out]
            deq = gguf.quants.dequantize(q, t).reshape(arr.shape).astype(np.float32)
        stored[gname] = (t.name, deq)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return stored


def check_gguf(path, stored):
    r = gguf.GGUFReader(path)
    names = [t.name for t in r.tensors]
    assert names == list(stored), (names, list(stored))
    for t in r.tensors:
        deq = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(stored[t.name][1].shape)
        assert np.array_equal(deq, stored[t.name][1]), t.name
    return [{"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape]} for t in r.tensors]


def numpy_gguf_forward(w, cfg, ids):
    """Independent check of the layout: a numpy Llama forward on GGUF-layout weights (w: gguf name ->
    (out, in) f32 array) with llama.cpp's LLAMA rope, which rotates adjacent pairs (2i, 2i+1)."""
    nh, nkv, hd = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    T = len(ids)
    f64 = {k: v.astype(np.float64) for k, v in w.items()}
    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + cfg.rms_norm_eps) * g
    inv = 10000.0 ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(T)[:, None] * inv[None, :]  # [T, hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    def rope(x):  # x [T, H, hd], interleaved pairs
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    x = f64["token_embd.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(cfg.num_hidden_layers):
        p = f"blk.{i}."
        h = rms(x, f64[p + "attn_norm.weight"])
        q = rope((h @ f64[p + "attn_q.weight"].T).reshape(T, nh, hd))
        k = rope((h @ f64[p + "attn_k.weight"].T).reshape(T, nkv, hd))
        v = (h @ f64[p + "attn_v.weight"].T).reshape(T, nkv, hd)
        k, v = np.repeat(k, nh // nkv, axis=1), np.repeat(v, nh // nkv, axis=1)
        att = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hts,shd->thd", att, v).reshape(T, nh * hd)
        x = x + o @ f64[p + "attn_output.weight"].T
        h = rms(x, f64[p + "ffn_norm.weight"])
        g = h @ f64[p + "ffn_gate.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ f64[p + "ffn_up.weight"].T)) @ f64[p + "ffn_down.weight"].T
    return rms(x, f64["output_norm.weight"]) @ f64["output.weight"].T


# ---------------------------------------------------------------- main
def safetensors_names(dir_):
    res = {}
    for f in sorted(os.listdir(dir_)):
        if f.endswith(".safetensors"):
            with safetensors.safe_open(os.path.join(dir_, f), "pt") as s:
                res[f] = {k: [str(s.get_slice(k).get_dtype()), list(s.get_slice(k).get_shape())]
                          for k in s.keys()}
    return res


def check_reload(cls, d, ref, dtype=torch.float32):
    m = cls.from_pretrained(d, dtype=dtype, attn_implementation="eager").to(torch.float32).eval()
    with torch.no_grad():
        got = m(torch.tensor([PROMPT]), use_cache=False).logits[0]
    assert floats(got) == ref["logits_all"], f"reload of {d} differs"


def main():
    models = {}
    llama_cfg_keys = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                      "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                      "rms_norm_eps", "hidden_act", "tie_word_embeddings", "attention_bias", "mlp_bias"]

    # GPT-2
    print("gpt2_tiny")
    gpt2 = build_gpt2()
    d = fresh_dir("gpt2_tiny")
    gpt2.save_pretrained(d, safe_serialization=True)
    ref_gpt2 = reference(gpt2)
    check_reload(GPT2LMHeadModel, d, ref_gpt2)
    models["gpt2_tiny"] = {
        "format": "hf_safetensors", "dir": "gpt2_tiny", "weights_dtype": "float32", "compute_dtype": "float32",
        "config": config_values(gpt2.config, ["vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                                              "n_inner", "layer_norm_epsilon", "activation_function",
                                              "tie_word_embeddings", "scale_attn_weights",
                                              "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"]),
        "safetensors": safetensors_names(d),
        "notes": "lm_head.weight is tied to transformer.wte.weight and not stored; Conv1D weights "
                 "(attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are stored (in_features, out_features): "
                 "y = x @ W + b. c_attn's output columns are [q | k | v], each n_embd wide.",
        **ref_gpt2,
    }

    # Llama f32, sharded
    print("llama_tiny")
    llama = build_llama()
    d = fresh_dir("llama_tiny")
    llama.save_pretrained(d, safe_serialization=True, max_shard_size="100KB")
    st = safetensors_names(d)
    assert len(st) >= 2 and os.path.exists(os.path.join(d, "model.safetensors.index.json")), st
    cfg = llama.config
    rope_theta = getattr(cfg, "rope_theta", None) or cfg.rope_parameters["rope_theta"]
    llama_cfg = {**config_values(cfg, llama_cfg_keys), "rope_theta": rope_theta,
                 "head_dim": cfg.hidden_size // cfg.num_attention_heads}
    ref_llama = reference(llama)
    check_reload(LlamaForCausalLM, d, ref_llama)
    models["llama_tiny"] = {"format": "hf_safetensors_sharded", "dir": "llama_tiny", "weights_dtype": "float32",
                            "compute_dtype": "float32", "config": llama_cfg, "safetensors": st, **ref_llama}
    f32_state = {k: v.detach().clone() for k, v in llama.state_dict().items()}

    # Llama bf16 (single file)
    print("llama_tiny_bf16")
    d = fresh_dir("llama_tiny_bf16")
    bf16 = build_llama().to(torch.bfloat16)
    bf16.config.dtype = torch.bfloat16
    bf16.save_pretrained(d, safe_serialization=True)
    assert os.listdir(d).count("model.safetensors") == 1
    up = llama_with_state({k: v.to(torch.float32) for k, v in bf16.state_dict().items()})
    ref_bf16 = reference(up)
    check_reload(LlamaForCausalLM, d, ref_bf16, dtype=torch.bfloat16)
    models["llama_tiny_bf16"] = {
        "format": "hf_safetensors", "dir": "llama_tiny_bf16", "weights_dtype": "bfloat16", "compute_dtype": "float32",
        "config": llama_cfg, "safetensors": safetensors_names(d),
        "notes": "same draws as llama_tiny rounded to bfloat16 (round-to-nearest-even); the reference is "
                 "the bf16 weights upcast exactly to float32 and run entirely in float32",
        **ref_bf16}

    # GGUF
    np_state = {k: v.numpy().astype(np.float32) for k, v in f32_state.items()}
    tensors = gguf_tensors(np_state, cfg)
    # sanity: the inverse permutation restores the HF layout
    for i in range(cfg.num_hidden_layers):
        for kind, kv in (("q", cfg.num_attention_heads), ("k", cfg.num_key_value_heads)):
            w = np_state[f"model.layers.{i}.self_attn.{kind}_proj.weight"]
            assert np.array_equal(gguf_unpermute(gguf_permute(w, cfg.num_attention_heads, kv),
                                                 cfg.num_attention_heads, kv), w)
    gguf_common = {"config": llama_cfg, "gguf_arch": "llama",
                   "gguf_qk_permutation": "llama.cpp LlamaModel.permute: W.reshape(n, 2, head_dim/2, in)"
                                          ".swapaxes(1, 2).reshape(out, in), n = n_head for attn_q, "
                                          "n_head_kv for attn_k"}
    for suffix, qtype, ftype in (("f32", GGMLQuantizationType.F32, LlamaFileType.ALL_F32),
                                 ("q8_0", GGMLQuantizationType.Q8_0, LlamaFileType.MOSTLY_Q8_0),
                                 ("q4_0", GGMLQuantizationType.Q4_0, LlamaFileType.MOSTLY_Q4_0)):
        key = f"llama_tiny_{suffix}"
        print(key)
        path = os.path.join(HERE, key + ".gguf")
        stored = write_gguf(path, tensors, cfg, qtype, ftype, key)
        listing = check_gguf(path, stored)
        entry = {"format": "gguf", "file": key + ".gguf", "weights_dtype": suffix, "compute_dtype": "float32",
                 **gguf_common, "gguf_tensors": listing,
                 "quantized_tensors": [n for n, (t, _) in stored.items() if t != "F32"]}
        np_logits = numpy_gguf_forward({n: a for n, (_, a) in stored.items()}, cfg, PROMPT)
        if qtype == GGMLQuantizationType.F32:
            ref_all = np.array(ref_llama["logits_all"]).reshape(np_logits.shape)
            dev = float(np.abs(np_logits - ref_all).max())
            print(f"  max |numpy GGUF-layout forward - transformers| = {dev:.3g}")
            assert dev < 1e-4, dev
            entry["reference"] = "identical weights to llama_tiny: use models.llama_tiny's outputs"
        else:
            nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
            state = {}
            for gname, (_, deq) in stored.items():
                if ".attn_q." in gname:
                    deq = gguf_unpermute(deq, nh, nh)
                elif ".attn_k." in gname:
                    deq = gguf_unpermute(deq, nh, nkv)
                state[hf_name(gname, cfg.num_hidden_layers)] = torch.from_numpy(np.ascontiguousarray(deq))
            entry["notes"] = ("reference = transformers LlamaForCausalLM in float32 with every weight replaced "
                              "by gguf.quants.dequantize of the stored data (attn_q/attn_k un-permuted back to "
                              "HF layout); all 2-D tensors incl. token_embd and output are quantized, norms are f32")
            entry.update(reference(llama_with_state(state)))
            dev = float(np.abs(np_logits - np.array(entry["logits_all"]).reshape(np_logits.shape)).max())
            print(f"  max |numpy GGUF-layout forward - transformers| = {dev:.3g}")
            assert dev < 1e-4, dev
        models[key] = entry

    out = {
        "generator": "gen_decoders.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "gguf": __import__("importlib.metadata").metadata.version("gguf"),
                     "numpy": np.__version__, "safetensors": safetensors.__version__},
        "init": {"std_2d": INIT_STD, "norm_weight": "1 + 0.1*N(0,1)", "bias": "0.1*N(0,1)",
                 "seeds": {"gpt2_tiny": 0, "llama_tiny": 1}},
        "layout": "logits_all is row-major [T, vocab]; decode_logits is [n_decode, vocab]",
        "models": models,
    }
    with open(os.path.join(HERE, "decoders_ref.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")

    for root, _, files in sorted(os.walk(HERE)):
        for fn in sorted(files):
            p = os.path.join(root, fn)
            if "gen_" in fn or fn.endswith((".md", ".py")) or "minilm" in fn:
                continue
            print(f"{hashlib.sha256(open(p, 'rb').read()).hexdigest()}  {os.path.relpath(p, HERE)}")


if __name__ == "__main__":
    main()
