//! Rows of real models through `tinygrad-models`: the pretrained all-MiniLM-L6-v2
//! (`SentenceEncoder`, when `scripts/fetch_minilm.sh` has fetched it) and a ~100M-parameter
//! LLaMA-shaped `Decoder` with random weights (prefill, decode, time to first token), each vs
//! PyTorch eager running the same weights (passed to it through files) in the same run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tinygrad_models::decoder::Arch;
use tinygrad_models::{Decoder, DecoderConfig, SamplingOptions, SentenceEncoder, Weights};
use tinygrad_tensor::DType;
use tinygrad_tensor::nn::get_state_dict;

use super::*;

fn minilm_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/models/all-MiniLM-L6-v2"));
    dir.join("model.safetensors").is_file().then_some(dir)
}

/// Shapes as a Python list's items: `(384,), (1536, 384,)`.
fn py_shapes(shapes: &[Vec<usize>]) -> String {
    let tuples: Vec<String> = shapes
        .iter()
        .map(|s| {
            let dims: Vec<String> = s.iter().map(ToString::to_string).collect();
            format!("({},)", dims.join(", "))
        })
        .collect();
    tuples.join(", ")
}

/// PyTorch's all-MiniLM-L6-v2 forward: the checkpoint's tensors as inputs 1.. in the order of
/// [`minilm_names`], token ids as input 0 (no padding), mean pooling, L2 normalization.
fn torch_minilm(b: usize, t: usize, shapes: &[Vec<usize>]) -> String {
    let shapes = py_shapes(shapes);
    format!(
        "\
import torch.nn.functional as F
torch.set_grad_enabled(False)
ids = inp(0, {b}, {t}).long()
shapes = [{shapes}]
W = [inp(1 + i, *s) for i, s in enumerate(shapes)]
we, pe, te, elw, elb = W[:5]
L = [W[5 + 16 * l: 5 + 16 * (l + 1)] for l in range(6)]
def layer(x, w):
    qw, qb, kw, kb, vw, vb, ow, ob, l1w, l1b, uw, ub, dw, db, l2w, l2b = w
    B, T = x.shape[0], x.shape[1]
    heads = lambda y: y.view(B, T, 12, 32).transpose(1, 2)
    q, k, v = heads(F.linear(x, qw, qb)), heads(F.linear(x, kw, kb)), heads(F.linear(x, vw, vb))
    a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, 384)
    x = F.layer_norm(x + F.linear(a, ow, ob), (384,), l1w, l1b, 1e-12)
    h = F.linear(F.gelu(F.linear(x, uw, ub)), dw, db)
    return F.layer_norm(x + h, (384,), l2w, l2b, 1e-12)
def op():
    T = ids.shape[1]
    x = F.layer_norm(we[ids] + pe[:T][None] + te[0][None, None], (384,), elw, elb, 1e-12)
    for w in L:
        x = layer(x, w)
    return F.normalize(x.mean(1), dim=-1)
",
        shapes = shapes
    )
}

/// The checkpoint names in the order [`torch_minilm`] takes them.
fn minilm_names() -> Vec<String> {
    let mut n: Vec<String> = [
        "word_embeddings.weight",
        "position_embeddings.weight",
        "token_type_embeddings.weight",
        "LayerNorm.weight",
        "LayerNorm.bias",
    ]
    .iter()
    .map(|s| format!("embeddings.{s}"))
    .collect();
    for l in 0..6 {
        for s in [
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
        ] {
            n.push(format!("encoder.layer.{l}.{s}.weight"));
            n.push(format!("encoder.layer.{l}.{s}.bias"));
        }
    }
    n
}

pub(super) fn bench_minilm(batch: usize, o: &Opts) -> Option<Row> {
    let name = format!("all-MiniLM-L6-v2 (pretrained), {batch} sentence(s)");
    let Some(dir) = minilm_dir() else {
        println!("{name}: skipped, the model is not fetched (scripts/fetch_minilm.sh)");
        return None;
    };
    let enc = SentenceEncoder::load(&dir, &tinygrad_tensor::default_device()).ok()?;
    // one real sentence; a batch of 32 sequences of its length (no padding, so PyTorch's
    // unmasked mean is the same pooling)
    let sentence = "The quick brown fox jumps over the lazy dog near the river bank.";
    let first = enc.tokenize(&[sentence]).ok()?.remove(0);
    let t = first.len();
    let mut ids = vec![first];
    for i in 1..batch {
        let mut s = ids[0].clone();
        for (j, tok) in s.iter_mut().enumerate().skip(1).take(t - 2) {
            *tok = 1000 + ((i * 7919 + j * 104_729) % 28_000) as u32;
        }
        ids.push(s);
    }
    let got = enc.encode_ids(&ids).ok()?.to_vec::<f32>();
    let runs = reps(o.quick, if batch == 1 { 30 } else { 10 });
    let sd = get_state_dict(&enc.bert);
    let names = minilm_names();
    let data: Vec<Vec<f32>> = names.iter().map(|n| sd[n].to_vec::<f32>()).collect();
    let shapes: Vec<Vec<usize>> = names.iter().map(|n| sd[n].shape()).collect();
    let idv: Vec<f32> = ids.iter().flatten().map(|&t| t as f32).collect();
    let mut inputs: Vec<&[f32]> = vec![&idv];
    inputs.extend(data.iter().map(Vec::as_slice));
    let (ours, pt) = bracketed(
        4,
        2 * runs,
        budget(o.quick, 15),
        || {
            black_box(enc.encode_ids(&ids).expect("encodes").to_vec::<f32>());
        },
        || {
            torch(
                &torch_minilm(batch, t, &shapes),
                &inputs,
                3,
                runs,
                budget(o.quick, 15),
            )
        },
    );
    Some(Row {
        name,
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |w| {
            max_abs_err(&got, w) < 1e-5
        })],
        note: format!("{t} tokens each; tokenized outside the timing; incl. read-back"),
    })
}

/// The LLaMA-shaped decoder of the decoder rows: ~124M parameters (hidden 768, 12 layers, 12
/// heads over 4 key/value heads, MLP 2048, vocab 32000); `--quick` shrinks it.
fn llama_config(quick: bool) -> DecoderConfig {
    let (hidden, layers, vocab, mlp) = if quick {
        (256, 2, 4096, 512)
    } else {
        (768, 12, 32000, 2048)
    };
    DecoderConfig {
        arch: Arch::Llama,
        vocab_size: vocab,
        hidden_size: hidden,
        num_layers: layers,
        num_heads: 12.min(hidden / 64).max(4),
        num_kv_heads: 4,
        head_dim: 64,
        intermediate_size: mlp,
        max_context: 512,
        norm_eps: 1e-5,
        rope_theta: 10000.0,
        tie_word_embeddings: false,
        eos_token_id: None,
        qkv_bias: false,
        qk_norm: false,
        sliding_window: None,
        sliding_layers: Vec::new(),
        rope_local_theta: 10000.0,
        attn_scale: 1.0 / 8.0,
        embed_scale: 1.0,
    }
}

/// Its weights (HF names, deterministic values) in the order PyTorch's code takes them.
fn llama_weights(c: &DecoderConfig) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let (h, hd) = (c.hidden_size, c.head_dim);
    let (qd, kvd, m) = (c.num_heads * hd, c.num_kv_heads * hd, c.intermediate_size);
    let mut seed = 5000;
    let mut w = |name: String, shape: Vec<usize>, scale: f32, offset: f32| {
        seed += 1;
        let n: usize = shape.iter().product();
        let data = rand_vec(n, seed)
            .iter()
            .map(|v| v * scale + offset)
            .collect();
        (name, shape, data)
    };
    let mut all = vec![w(
        "model.embed_tokens.weight".into(),
        vec![c.vocab_size, h],
        0.5,
        0.0,
    )];
    let s = fan_in_scale;
    for l in 0..c.num_layers {
        // the order PyTorch's code unpacks: n1, q, k, v, o, n2, gate, up, down
        let layer = [
            ("input_layernorm", vec![h], 0.1, 1.0),
            ("self_attn.q_proj", vec![qd, h], s(h), 0.0),
            ("self_attn.k_proj", vec![kvd, h], s(h), 0.0),
            ("self_attn.v_proj", vec![kvd, h], s(h), 0.0),
            ("self_attn.o_proj", vec![h, qd], s(qd), 0.0),
            ("post_attention_layernorm", vec![h], 0.1, 1.0),
            ("mlp.gate_proj", vec![m, h], s(h), 0.0),
            ("mlp.up_proj", vec![m, h], s(h), 0.0),
            ("mlp.down_proj", vec![h, m], s(m), 0.0),
        ];
        for (name, shape, scale, offset) in layer {
            all.push(w(
                format!("model.layers.{l}.{name}.weight"),
                shape,
                scale,
                offset,
            ));
        }
    }
    all.push(w("model.norm.weight".into(), vec![h], 0.1, 1.0));
    all.push(w(
        "lm_head.weight".into(),
        vec![c.vocab_size, h],
        fan_in_scale(h),
        0.0,
    ));
    all
}

/// The scale of a weight's values for `fan_in` inputs (activations stay of order 1).
fn fan_in_scale(fan_in: usize) -> f32 {
    1.7 / (fan_in as f32).sqrt()
}

/// PyTorch eager LLaMA (HF's layout and rotary form) over the weights of [`llama_weights`]:
/// `op()` prefills `prompt` (input 0) and, with `decode > 0`, greedily decodes that many tokens
/// over a KV cache (`torch.cat`), returning the new tokens; else the last position's logits.
fn torch_llama(c: &DecoderConfig, prompt: usize, decode: usize, shapes: &[Vec<usize>]) -> String {
    let shapes = py_shapes(shapes);
    let (h, hd, nh, nkv) = (c.hidden_size, c.head_dim, c.num_heads, c.num_kv_heads);
    format!(
        "\
import torch.nn.functional as F
torch.set_grad_enabled(False)
prompt = inp(0, 1, {prompt}).long()
shapes = [{shapes}]
W = [inp(1 + i, *s) for i, s in enumerate(shapes)]
emb, norm, head = W[0], W[-2], W[-1]
L = [W[1 + 9 * l: 1 + 9 * (l + 1)] for l in range({layers})]
inv = 1.0 / ({theta} ** (torch.arange(0, {hd}, 2, dtype=torch.int64).float() / {hd}))
ang = torch.arange(512).float()[:, None] * inv[None]
ang = torch.cat([ang, ang], -1)
COS, SIN = ang.cos(), ang.sin()
def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + {eps}) * w
def rope(x, c, s):
    x1, x2 = x[..., :{half}], x[..., {half}:]
    return x * c + torch.cat([-x2, x1], -1) * s
def forward(ids, start, cache):
    T = ids.shape[1]
    x = emb[ids]
    c, s = COS[start:start + T], SIN[start:start + T]
    for l, (n1, q, k, v, o, n2, g, u, d) in enumerate(L):
        y = rms(x, n1)
        qh = rope(F.linear(y, q).view(1, T, {nh}, {hd}).transpose(1, 2), c, s)
        kh = rope(F.linear(y, k).view(1, T, {nkv}, {hd}).transpose(1, 2), c, s)
        vh = F.linear(y, v).view(1, T, {nkv}, {hd}).transpose(1, 2)
        if cache[l] is not None:
            kh, vh = torch.cat([cache[l][0], kh], 2), torch.cat([cache[l][1], vh], 2)
        cache[l] = (kh, vh)
        a = F.scaled_dot_product_attention(qh, kh, vh, is_causal=T > 1, enable_gqa=True)
        x = x + F.linear(a.transpose(1, 2).reshape(1, T, {h}), o)
        y = rms(x, n2)
        x = x + F.linear(F.silu(F.linear(y, g)) * F.linear(y, u), d)
    return F.linear(rms(x[:, -1], norm), head)
def op():
    cache = [None] * {layers}
    logits = forward(prompt, 0, cache)
    if {decode} == 0:
        return logits
    toks = [int(logits.argmax(-1))]
    for i in range({decode} - 1):
        logits = forward(torch.tensor([[toks[-1]]]), {prompt} + i, cache)
        toks.append(int(logits.argmax(-1)))
    return torch.tensor(toks).float()
",
        shapes = shapes,
        layers = c.num_layers,
        theta = c.rope_theta,
        eps = c.norm_eps,
        half = hd / 2,
    )
}

struct LlamaSetup {
    config: DecoderConfig,
    weights: Vec<(String, Vec<usize>, Vec<f32>)>,
    prompt: Vec<u32>,
}

fn llama_setup(quick: bool, prompt_len: usize) -> LlamaSetup {
    let config = llama_config(quick);
    let weights = llama_weights(&config);
    let prompt = (0..prompt_len)
        .map(|i| ((i * 7919 + 13) % config.vocab_size) as u32)
        .collect();
    LlamaSetup {
        config,
        weights,
        prompt,
    }
}

fn llama_decoder(s: &LlamaSetup) -> Decoder {
    let tensors: BTreeMap<String, Tensor> = s
        .weights
        .iter()
        .map(|(n, shape, d)| (n.clone(), input(d, shape)))
        .collect();
    let dev = tinygrad_tensor::default_device();
    Decoder::from_weights(s.config.clone(), &Weights::new("bench", tensors), &dev)
        .expect("the bench's weights fit its config")
}

fn params(s: &LlamaSetup) -> f64 {
    s.weights.iter().map(|w| w.2.len()).sum::<usize>() as f64
}

fn torch_inputs(s: &LlamaSetup) -> (Vec<f32>, Vec<Vec<usize>>) {
    let idv = s.prompt.iter().map(|&t| t as f32).collect();
    (idv, s.weights.iter().map(|w| w.1.clone()).collect())
}

pub(super) fn bench_llama_prefill(o: &Opts) -> Row {
    let s = llama_setup(o.quick, 128);
    let mut m = llama_decoder(&s);
    let ids: Vec<i32> = s.prompt.iter().map(|&t| t as i32).collect();
    let tokens = input(
        &ids.iter().map(|&t| t as f32).collect::<Vec<_>>(),
        &[1, ids.len()],
    )
    .cast(DType::INT32);
    tokens.realize();
    let mut run = || {
        m.reset_cache(1).expect("the cache resets");
        m.forward(&tokens, 0, false)
            .expect("prefills")
            .to_vec::<f32>()
    };
    let got = run();
    let runs = reps(o.quick, 10);
    let (idv, shapes) = torch_inputs(&s);
    let mut inputs: Vec<&[f32]> = vec![&idv];
    inputs.extend(s.weights.iter().map(|w| w.2.as_slice()));
    let (ours, pt) = bracketed(
        4,
        2 * runs,
        budget(o.quick, 20),
        || {
            black_box(run());
        },
        || {
            torch(
                &torch_llama(&s.config, 128, 0, &shapes),
                &inputs,
                2,
                runs,
                budget(o.quick, 20),
            )
        },
    );
    Row {
        name: format!(
            "LLaMA-shaped decoder ({:.0}M params), prefill 128 tokens",
            params(&s) / 1e6
        ),
        secs: ours,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |w| {
            max_rel_err(&got, w) < 1e-3
        })],
        note: "random weights, GQA 12/4 heads; last position's logits; incl. cache reset".into(),
    }
}

pub(super) fn bench_llama_decode(o: &Opts) -> Row {
    const NEW: usize = 33;
    let s = llama_setup(o.quick, 16);
    let mut m = llama_decoder(&s);
    let greedy = SamplingOptions::default();
    let mut generate = || {
        m.generate(&s.prompt, NEW, &greedy, None, &mut |_| true)
            .expect("generates")
    };
    let warm = generate();
    let runs = reps(o.quick, 3);
    let mut per_token = Vec::new();
    for _ in 0..runs {
        let g = generate();
        per_token.push(g.decode_secs / (g.tokens.len() - 1) as f64);
    }
    let (idv, shapes) = torch_inputs(&s);
    let mut inputs: Vec<&[f32]> = vec![&idv];
    inputs.extend(s.weights.iter().map(|w| w.2.as_slice()));
    // PyTorch's run is prefill + NEW - 1 decode steps; per token, its prefill (timed by the
    // prefill-only run) is taken out
    let pt_all = torch(
        &torch_llama(&s.config, 16, NEW, &shapes),
        &inputs,
        2,
        runs,
        budget(o.quick, 30),
    );
    let pt_pre = torch(
        &torch_llama(&s.config, 16, 0, &shapes),
        &inputs,
        2,
        5,
        budget(o.quick, 10),
    );
    let pt = match (pt_all, pt_pre) {
        (Ok(mut all), Ok(pre)) => {
            all.secs = (all.secs - pre.secs).max(0.0) / (NEW - 1) as f64;
            Ok(all)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    };
    let want: Vec<f32> = warm.tokens.iter().map(|&t| t as f32).collect();
    let secs = median(per_token);
    Row {
        name: format!(
            "LLaMA-shaped decoder ({:.0}M params), greedy decode, per token",
            params(&s) / 1e6
        ),
        secs,
        unit: Unit::Ms,
        refs: vec![Reference::torch(pt, Unit::Ms, |w| {
            w.len() >= 4 && w[..4] == want[..4]
        })],
        note: format!(
            "{NEW} tokens after a 16-token prompt, Jit + Variable KV length: {:.1} tokens/s; \
             check: the first 4 greedy tokens equal",
            1.0 / secs
        ),
    }
}

pub(super) fn bench_llama_first_token(o: &Opts) -> Row {
    let s = llama_setup(o.quick, 16);
    let mut m = llama_decoder(&s);
    let greedy = SamplingOptions::default();
    // the first generation of the process's first decoder of this shape: its kernels compile
    let cold = m
        .generate(&s.prompt, 1, &greedy, None, &mut |_| true)
        .expect("generates")
        .first_token_secs;
    let warm: Vec<f64> = (0..reps(o.quick, 5))
        .map(|_| {
            m.generate(&s.prompt, 1, &greedy, None, &mut |_| true)
                .expect("generates")
                .first_token_secs
        })
        .collect();
    Row {
        name: format!(
            "LLaMA-shaped decoder ({:.0}M params), time to first token, cold",
            params(&s) / 1e6
        ),
        secs: cold,
        unit: Unit::Ms,
        refs: vec![Reference::timed(
            "warm (same run)",
            median(warm),
            Unit::Ms,
            true,
        )],
        note: "16-token prompt; cold: the first call, kernel compilation included".into(),
    }
}
