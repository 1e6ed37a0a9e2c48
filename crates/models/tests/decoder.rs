//! GPT-2, LLaMA, Mistral (sliding window), Qwen2, Qwen3, Phi-3 and Gemma 3 decoders against `transformers`
//! (`data/decoders_ref.json`, `data/qwen_ref.json` and `data/gemma3_ref.json`, written by
//! `data/gen_decoders.py`, `data/gen_qwen.py` and `data/gen_gemma3.py` from tiny seeded models; the
//! Qwen and Gemma models from safetensors and from GGUF files of architectures `qwen2`, `qwen3` and
//! `gemma3`): logits of every prompt position within 1e-4,
//! the KV-cache path (prefill, then one token at a time over a symbolic length), and greedy
//! generation token for token. The same LLaMA loads from a sharded safetensors directory, a bf16
//! one, and GGUF files (f32, Q8_0, Q4_0; the quantized references ran transformers on `gguf`'s
//! own dequantization).

use std::path::PathBuf;
use std::sync::OnceLock;

mod common;

use common::{floats, max_abs_diff};
use serde_json::Value;
use tinygrad_models::{Decoder, SamplingOptions};
use tinygrad_tensor::{Tensor, default_device};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The reference file `name` (in `data/`), read once into `cell`.
fn read_once(cell: &'static OnceLock<Value>, name: &str) -> &'static Value {
    cell.get_or_init(|| {
        serde_json::from_str(&std::fs::read_to_string(data(name)).unwrap()).unwrap()
    })
}

fn reference() -> &'static Value {
    static REF: OnceLock<Value> = OnceLock::new();
    read_once(&REF, "decoders_ref.json")
}

/// The Qwen2/Qwen3/Phi-3/Mistral references (`data/qwen_ref.json`, written by `data/gen_qwen.py`).
fn qwen_reference() -> &'static Value {
    static REF: OnceLock<Value> = OnceLock::new();
    read_once(&REF, "qwen_ref.json")
}

/// The Gemma 3 references (`data/gemma3_ref.json`, written by `data/gen_gemma3.py`).
fn gemma3_reference() -> &'static Value {
    static REF: OnceLock<Value> = OnceLock::new();
    read_once(&REF, "gemma3_ref.json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Runs every check of `refname`'s reference (in `decoders_ref.json`) on the model at `path`.
fn check_model(path: &str, refname: &str) {
    check_against(path, &reference()["models"][refname], refname);
}

/// Runs every check of the reference `r` (named `refname`) on the model at `path`.
fn check_against(path: &str, r: &Value, refname: &str) {
    let mut m = Decoder::load(&data(path), &default_device()).unwrap();
    let prompt = ids(&r["prompt"]);
    let toks: Vec<i32> = prompt.iter().map(|&t| t as i32).collect();
    let input = Tensor::from_slice(&toks, &[1, toks.len()]);

    let all = m.forward(&input, 0, true).unwrap();
    assert_eq!(all.shape(), vec![1, prompt.len(), m.config.vocab_size]);
    let d_all = max_abs_diff(&all.to_vec::<f32>(), &floats(&r["logits_all"]));
    m.reset_cache(1).unwrap();
    let last = m.forward(&input, 0, false).unwrap();
    let d_last = max_abs_diff(&last.to_vec::<f32>(), &floats(&r["logits_last"]));

    // the cache path: 4 tokens prefilled, then one at a time (symbolic length)
    let kv = &r["kv_cache"];
    m.reset_cache(1).unwrap();
    let pre: Vec<i32> = ids(&kv["prefill_tokens"])
        .iter()
        .map(|&t| t as i32)
        .collect();
    let pre_logits = m
        .forward(&Tensor::from_slice(&pre, &[1, pre.len()]), 0, false)
        .unwrap();
    let d_pre = max_abs_diff(
        &pre_logits.to_vec::<f32>(),
        &floats(&kv["prefill_last_logits"]),
    );
    let mut steps = Vec::new();
    for (tok, pos) in ids(&kv["decode_tokens"])
        .into_iter()
        .zip(ids(&kv["decode_positions"]))
    {
        steps.extend(m.decode_step(tok, pos as usize).unwrap().to_vec::<f32>());
    }
    let d_dec = max_abs_diff(&steps, &floats(&kv["decode_logits"]));
    // and the same positions with concrete spans
    m.reset_cache(1).unwrap();
    m.forward(&Tensor::from_slice(&pre, &[1, pre.len()]), 0, false)
        .unwrap();
    let mut concrete = Vec::new();
    for (tok, pos) in ids(&kv["decode_tokens"])
        .into_iter()
        .zip(ids(&kv["decode_positions"]))
    {
        let t = Tensor::from_slice(&[tok as i32], &[1, 1]);
        concrete.extend(m.forward(&t, pos as usize, false).unwrap().to_vec::<f32>());
    }
    let d_con = max_abs_diff(&concrete, &floats(&kv["decode_logits"]));

    println!(
        "{refname} ({path}) on {}: max abs diff all {d_all:e}, last {d_last:e}, prefill {d_pre:e}, \
         decode (symbolic) {d_dec:e}, decode (concrete) {d_con:e}",
        default_device()
    );
    for (what, d) in [
        ("all", d_all),
        ("last", d_last),
        ("prefill", d_pre),
        ("decode", d_dec),
        ("concrete decode", d_con),
    ] {
        assert!(d <= 1e-4, "{refname}: {what} logits differ by {d:e} > 1e-4");
    }

    let g = &r["greedy"];
    let n = g["max_new_tokens"].as_u64().unwrap() as usize;
    let mut streamed = Vec::new();
    let generated = m
        .generate(&prompt, n, &SamplingOptions::default(), None, &mut |t| {
            streamed.push(t);
            true
        })
        .unwrap();
    assert_eq!(
        generated.tokens,
        ids(&g["new_tokens"]),
        "{refname}: greedy tokens"
    );
    assert_eq!(streamed, generated.tokens);
}

#[test]
fn gpt2_matches_transformers() {
    check_model("gpt2_tiny", "gpt2_tiny");
}

#[test]
fn llama_from_sharded_safetensors_matches_transformers() {
    check_model("llama_tiny", "llama_tiny");
}

#[test]
fn llama_bf16_matches_transformers() {
    check_model("llama_tiny_bf16", "llama_tiny_bf16");
}

#[test]
fn llama_from_gguf_f32_matches_transformers() {
    check_model("llama_tiny_f32.gguf", "llama_tiny");
}

#[test]
fn llama_from_gguf_q8_0_matches_transformers_on_the_dequantized_weights() {
    check_model("llama_tiny_q8_0.gguf", "llama_tiny_q8_0");
}

#[test]
fn llama_from_gguf_q4_0_matches_transformers_on_the_dequantized_weights() {
    check_model("llama_tiny_q4_0.gguf", "llama_tiny_q4_0");
}

/// Qwen2: biases on the query, key and value projections; rope base 1e6.
#[test]
fn qwen2_from_safetensors_and_gguf_matches_transformers() {
    let r = &qwen_reference()["models"]["qwen2_tiny"];
    check_against("qwen2_tiny", r, "qwen2_tiny");
    check_against("qwen2_tiny_f32.gguf", r, "qwen2_tiny (gguf)");
}

/// Qwen3: an RMSNorm of each query and key head, heads wider than hidden / heads.
#[test]
fn qwen3_from_safetensors_and_gguf_matches_transformers() {
    let r = &qwen_reference()["models"]["qwen3_tiny"];
    check_against("qwen3_tiny", r, "qwen3_tiny");
    check_against("qwen3_tiny_f32.gguf", r, "qwen3_tiny (gguf)");
}

/// Phi-3: fused query/key/value and gate/up projections, a sliding window of 3 in every layer
/// (the 7-token prompt reaches past it).
#[test]
fn phi3_from_safetensors_and_gguf_matches_transformers() {
    let r = &qwen_reference()["models"]["phi3_tiny"];
    check_against("phi3_tiny", r, "phi3_tiny");
    check_against("phi3_tiny_f32.gguf", r, "phi3_tiny (gguf)");
}

/// Mistral with a sliding window (of 3, in every layer: Mistral 7B v0.1's is 4096).
#[test]
fn mistral_with_a_sliding_window_matches_transformers() {
    let r = &qwen_reference()["models"]["mistral_tiny"];
    check_against("mistral_tiny", r, "mistral_tiny");
}

/// Gemma 3: four norms per block, GeGLU, scaled embeddings, head norms, five sliding-window
/// layers (window 3: the 7-token prompt and the decode steps reach past it) with their own
/// rotary base, then a global one; the GGUF file against transformers' own loading of it.
#[test]
fn gemma3_from_safetensors_and_gguf_matches_transformers() {
    let r = &gemma3_reference()["models"];
    check_against("gemma3_tiny", &r["gemma3_tiny"], "gemma3_tiny");
    check_against(
        "gemma3_tiny_f32.gguf",
        &r["gemma3_tiny_gguf"],
        "gemma3_tiny (gguf)",
    );
}

#[test]
fn sampling_is_seeded_and_follows_temperature_top_k_and_top_p() {
    use tinygrad_models::Sampler;
    let logits = [1.0f32, 3.0, 2.0, 3.0, -1.0];
    // greedy: the first of the maxima
    let mut s = Sampler::new(SamplingOptions::default()).unwrap();
    assert_eq!(s.sample(&logits), 1);
    // the distribution is softmax(logits / T), most likely first, ties by id
    let t = SamplingOptions {
        temperature: 2.0,
        ..SamplingOptions::default()
    };
    let d = Sampler::new(t.clone()).unwrap().distribution(&logits);
    let z: f64 = logits.iter().map(|&l| (l as f64 / 2.0).exp()).sum();
    let order: Vec<u32> = d.iter().map(|p| p.0).collect();
    assert_eq!(order, [1, 3, 2, 0, 4]);
    // (the weights are float32 exponentials, as a float32 softmax's: within 1e-6 of the exact)
    for (tok, p) in &d {
        let exact = (logits[*tok as usize] as f64 / 2.0).exp() / z;
        assert!(
            (p - exact).abs() < 1e-6 * exact,
            "token {tok}: {p} vs {exact}"
        );
    }
    // top-k and top-p cut and renormalize
    let k2 = Sampler::new(SamplingOptions {
        top_k: 2,
        ..t.clone()
    })
    .unwrap()
    .distribution(&logits);
    assert_eq!(k2, vec![(1, 0.5), (3, 0.5)]);
    let p = Sampler::new(SamplingOptions {
        top_p: 0.6,
        ..t.clone()
    })
    .unwrap()
    .distribution(&logits);
    assert_eq!(p.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 3]); // 0.35 + 0.35 >= 0.6
    // the same seed draws the same tokens; the frequencies follow the distribution
    let draw = |seed| {
        let mut s = Sampler::new(SamplingOptions { seed, ..t.clone() }).unwrap();
        (0..4000).map(|_| s.sample(&logits)).collect::<Vec<u32>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
    let counts = draw(7).iter().fold([0usize; 5], |mut c, &t| {
        c[t as usize] += 1;
        c
    });
    for (tok, p) in &d {
        let f = counts[*tok as usize] as f64 / 4000.0;
        // 5 standard deviations of a binomial frequency
        assert!(
            (f - p).abs() < 5.0 * (p * (1.0 - p) / 4000.0).sqrt() + 1e-9,
            "token {tok}: {f} vs {p}"
        );
    }
}

#[test]
fn sampled_generation_is_reproducible_and_top_k_1_is_greedy() {
    let mut m = Decoder::load(&data("llama_tiny"), &default_device()).unwrap();
    let r = &reference()["models"]["llama_tiny"];
    let prompt = ids(&r["prompt"]);
    let opts = SamplingOptions {
        temperature: 0.8,
        top_k: 20,
        top_p: 0.9,
        seed: 42,
    };
    let a = m.generate(&prompt, 10, &opts, None, &mut |_| true).unwrap();
    let b = m.generate(&prompt, 10, &opts, None, &mut |_| true).unwrap();
    assert_eq!(a.tokens, b.tokens);
    assert_eq!(a.tokens.len(), 10);
    let one = SamplingOptions {
        temperature: 0.8,
        top_k: 1,
        top_p: 1.0,
        seed: 3,
    };
    let g = m.generate(&prompt, 12, &one, None, &mut |_| true).unwrap();
    assert_eq!(g.tokens, ids(&r["greedy"]["new_tokens"]));
    // eos and the callback stop early
    let first = g.tokens[0];
    let e = m
        .generate(&prompt, 12, &one, Some(first), &mut |_| true)
        .unwrap();
    assert_eq!(e.tokens, vec![first]);
    let mut n = 0;
    let s = m
        .generate(&prompt, 12, &one, None, &mut |_| {
            n += 1;
            n < 3
        })
        .unwrap();
    assert_eq!(s.tokens.len(), 3);
}
