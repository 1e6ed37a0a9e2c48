//! The decoder's configuration, from a Hugging Face `config.json` (GPT-2 and LLaMA-family
//! `model_type`s: `llama`, `mistral`, `qwen2`, `qwen3`, `phi3`; `gemma3_text`) or GGUF metadata
//! (`general.architecture` = `llama`, `qwen2`, `qwen3`, `phi3` or `gemma3`).

use indexmap::IndexMap;
use tinygrad_tensor::nn::gguf::GgufValue;

use crate::config::JsonConfig;
use crate::error::{ModelError, Result};

/// Largest size accepted for a dimension of a configuration.
const MAX_DIM: usize = 1 << 24;

/// The block layout of a decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// GPT-2: learned positions, LayerNorm, fused QKV `Conv1D`s, GELU (tanh form) MLP, biases.
    Gpt2,
    /// LLaMA and its kin: rotary positions, RMSNorm, SwiGLU MLP, grouped-query attention;
    /// Qwen2's biases on the query/key/value projections ([`DecoderConfig::qkv_bias`]), Qwen3's
    /// RMSNorm of each query and key head ([`DecoderConfig::qk_norm`]), Phi-3's fused
    /// projections (split by rows when loaded), Phi-3's and Mistral's sliding window in every
    /// layer.
    Llama,
    /// Gemma 3: LLaMA's layout with four norms per block (before and after attention and MLP;
    /// RMSNorm scaling by `1 + weight`), a GeGLU MLP (tanh GELU), embeddings scaled by
    /// `sqrt(hidden)`, query/key head norms, sliding-window layers ([`DecoderConfig::sliding_window`])
    /// with their own rotary base between global ones, tied embeddings.
    Gemma3,
}

/// A decoder-only transformer's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderConfig {
    /// The block layout.
    pub arch: Arch,
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (dividing `num_heads`; fewer is grouped-query attention).
    pub num_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Width of the MLP's hidden layer.
    pub intermediate_size: usize,
    /// Longest sequence (prompt and generated tokens), the KV cache's length.
    pub max_context: usize,
    /// The norms' epsilon.
    pub norm_eps: f64,
    /// Rotary base (LLaMA).
    pub rope_theta: f64,
    /// Whether the output projection is the token embedding (GPT-2; some LLaMAs).
    pub tie_word_embeddings: bool,
    /// The end-of-sequence token, if the configuration names one.
    pub eos_token_id: Option<u32>,
    /// Biases on the query, key and value projections (Qwen2; not on the output projection).
    pub qkv_bias: bool,
    /// An RMSNorm over each query and key head before the rotary embedding (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// Attention over the last `sliding_window` positions only (each query's own included), in
    /// the layers [`DecoderConfig::sliding_layers`] marks (Gemma 3's local layers).
    pub sliding_window: Option<usize>,
    /// Per layer, whether it attends over the sliding window (empty: none does).
    pub sliding_layers: Vec<bool>,
    /// The rotary base of the sliding-window layers (Gemma 3's local base).
    pub rope_local_theta: f64,
    /// The attention scores' scale: `1 / sqrt(head_dim)`, or `query_pre_attn_scalar^-0.5`
    /// (Gemma 3).
    pub attn_scale: f64,
    /// The token embeddings' scale: 1, or `sqrt(hidden_size)` (Gemma).
    pub embed_scale: f64,
}

impl DecoderConfig {
    /// The configuration in a Hugging Face `config.json`.
    ///
    /// # Errors
    /// If `model_type` is not `gpt2`, `llama` or `mistral`, a field is missing or out of range,
    /// or an option this decoder does not implement is set (rope scaling, biases on LLaMA
    /// projections, an activation other than the architecture's).
    pub fn from_hf(c: &JsonConfig) -> Result<DecoderConfig> {
        let kind = c.model_type();
        let unsupported = |what: String| ModelError::Unsupported {
            path: c.path.clone(),
            message: what,
        };
        match kind.as_deref() {
            Some("gpt2") => {
                let act = c.opt_str("activation_function")?.unwrap_or("gelu_new");
                if act != "gelu_new" {
                    return Err(c.error(
                        "activation_function",
                        format!("{act:?} is not supported (expected \"gelu_new\")"),
                    ));
                }
                for field in ["scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn"] {
                    if c.bool_or(field, false)? {
                        return Err(c.error(field, "not supported (expected false)"));
                    }
                }
                let hidden = c.usize("n_embd", MAX_DIM)?;
                let heads = c.usize("n_head", 4096)?;
                let cfg = DecoderConfig {
                    arch: Arch::Gpt2,
                    vocab_size: c.usize("vocab_size", MAX_DIM)?,
                    hidden_size: hidden,
                    num_layers: c.usize("n_layer", 4096)?,
                    num_heads: heads,
                    num_kv_heads: heads,
                    head_dim: hidden / heads,
                    intermediate_size: c.opt_usize("n_inner", MAX_DIM)?.unwrap_or(4 * hidden),
                    max_context: c.usize("n_positions", MAX_DIM)?,
                    norm_eps: c.f64_or("layer_norm_epsilon", 1e-5)?,
                    rope_theta: 0.0,
                    tie_word_embeddings: c.bool_or("tie_word_embeddings", true)?,
                    eos_token_id: eos(c)?,
                    qkv_bias: false,
                    qk_norm: false,
                    sliding_window: None,
                    sliding_layers: Vec::new(),
                    rope_local_theta: 0.0,
                    attn_scale: 1.0 / ((hidden / heads) as f64).sqrt(),
                    embed_scale: 1.0,
                };
                cfg.check(|f, m| c.error(f, m))
            }
            Some(family @ ("llama" | "mistral" | "qwen2" | "qwen3" | "phi3")) => {
                let act = c.opt_str("hidden_act")?.unwrap_or("silu");
                if act != "silu" {
                    return Err(c.error(
                        "hidden_act",
                        format!("{act:?} is not supported (expected \"silu\")"),
                    ));
                }
                // Qwen2 always has biases on q/k/v (and no `attention_bias` key); LLaMA's
                // `attention_bias` would put them on the output projection too
                for field in ["attention_bias", "mlp_bias"] {
                    if c.bool_or(field, false)? {
                        return Err(c.error(field, "biases are not supported (expected false)"));
                    }
                }
                // Qwen's sliding window is off unless `use_sliding_window` says otherwise
                if c.bool_or("use_sliding_window", false)? {
                    return Err(c.error(
                        "use_sliding_window",
                        "sliding-window attention is not supported (expected false)",
                    ));
                }
                // transformers 5 nests the rotary settings in `rope_parameters`; older configs
                // have `rope_theta` and `rope_scaling` at the top
                let mut theta = c.f64_or("rope_theta", 10000.0)?;
                if let Some(p) = c.get("rope_parameters") {
                    theta = rope_base(c, p, "", theta)?;
                }
                // Phi-3 may rotate only part of each head
                let partial = c
                    .get("rope_parameters")
                    .and_then(|p| p.get("partial_rotary_factor"))
                    .or_else(|| c.get("partial_rotary_factor"));
                if let Some(f) = partial.filter(|f| f.as_f64() != Some(1.0)) {
                    return Err(c.error(
                        "partial_rotary_factor",
                        format!("{f} is not supported (expected 1.0)"),
                    ));
                }
                if let Some(s) = c.get("rope_scaling") {
                    return Err(c.error(
                        "rope_scaling",
                        format!("{s} is not supported (expected null)"),
                    ));
                }
                let hidden = c.usize("hidden_size", MAX_DIM)?;
                let heads = c.usize("num_attention_heads", 4096)?;
                let head_dim = c.opt_usize("head_dim", MAX_DIM)?.unwrap_or(hidden / heads);
                let layers = c.usize("num_hidden_layers", 4096)?;
                // Phi-3 and Mistral attend over a sliding window in every layer when they name
                // one
                let window = if matches!(family, "phi3" | "mistral") {
                    c.opt_usize("sliding_window", MAX_DIM)?
                } else {
                    None
                };
                let cfg = DecoderConfig {
                    arch: Arch::Llama,
                    vocab_size: c.usize("vocab_size", MAX_DIM)?,
                    hidden_size: hidden,
                    num_layers: layers,
                    num_heads: heads,
                    num_kv_heads: c.opt_usize("num_key_value_heads", 4096)?.unwrap_or(heads),
                    head_dim,
                    intermediate_size: c.usize("intermediate_size", MAX_DIM)?,
                    max_context: c.usize("max_position_embeddings", MAX_DIM)?,
                    norm_eps: c.f64_or("rms_norm_eps", 1e-6)?,
                    rope_theta: theta,
                    tie_word_embeddings: c.bool_or("tie_word_embeddings", false)?,
                    eos_token_id: eos(c)?,
                    qkv_bias: family == "qwen2",
                    qk_norm: family == "qwen3",
                    sliding_window: window,
                    sliding_layers: vec![window.is_some(); layers],
                    rope_local_theta: theta,
                    attn_scale: 1.0 / (head_dim as f64).sqrt(),
                    embed_scale: 1.0,
                };
                cfg.check(|f, m| c.error(f, m))
            }
            Some("gemma3_text") => gemma3_from_hf(c),
            other => Err(unsupported(format!(
                "model_type {other:?} is not supported by the decoder (expected \"gpt2\", \
                 \"llama\", \"mistral\", \"qwen2\", \"qwen3\", \"phi3\" or \"gemma3_text\")"
            ))),
        }
    }

    /// The configuration in GGUF metadata (`path` names the file in errors).
    ///
    /// # Errors
    /// If `general.architecture` is not `llama`, `qwen2` or `qwen3`, or a key is missing or out
    /// of range.
    pub fn from_gguf(meta: &IndexMap<String, GgufValue>, path: &str) -> Result<DecoderConfig> {
        let err = |field: &str, message: String| ModelError::Config {
            path: path.to_string(),
            field: field.to_string(),
            message,
        };
        let arch = meta
            .get("general.architecture")
            .and_then(GgufValue::as_str)
            .ok_or_else(|| err("general.architecture", "missing (expected a string)".into()))?;
        if !matches!(arch, "llama" | "qwen2" | "qwen3" | "phi3" | "gemma3") {
            return Err(ModelError::Unsupported {
                path: path.to_string(),
                message: format!(
                    "general.architecture {arch:?} is not supported (expected \"llama\", \
                     \"qwen2\", \"qwen3\", \"phi3\" or \"gemma3\")"
                ),
            });
        }
        let int = |key: &str, max: usize| -> Result<Option<usize>> {
            let k = format!("{arch}.{key}");
            match meta.get(&k) {
                None => Ok(None),
                Some(v) => match v.as_u64() {
                    Some(n) if n >= 1 && n <= max as u64 => Ok(Some(n as usize)),
                    _ => Err(err(
                        &k,
                        format!("expected an integer in 1..={max}, got {v:?}"),
                    )),
                },
            }
        };
        let req = |key: &str, max: usize| -> Result<usize> {
            int(key, max)?.ok_or_else(|| {
                err(
                    &format!("{arch}.{key}"),
                    format!("missing (expected an integer in 1..={max})"),
                )
            })
        };
        let float = |key: &str, default: f64| -> Result<f64> {
            let k = format!("{arch}.{key}");
            match meta.get(&k) {
                None => Ok(default),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| err(&k, format!("expected a number, got {v:?}"))),
            }
        };
        let hidden = req("embedding_length", MAX_DIM)?;
        let heads = req("attention.head_count", 4096)?;
        let vocab = match int("vocab_size", MAX_DIM)? {
            Some(v) => v,
            None => meta
                .get("tokenizer.ggml.tokens")
                .and_then(GgufValue::as_array)
                .map(<[GgufValue]>::len)
                .filter(|&n| n >= 1)
                .ok_or_else(|| {
                    err(
                        &format!("{arch}.vocab_size"),
                        "missing, and no tokenizer.ggml.tokens to count".into(),
                    )
                })?,
        };
        let gemma = arch == "gemma3";
        let layers = req("block_count", 4096)?;
        let theta = float("rope.freq_base", if gemma { 1_000_000.0 } else { 10000.0 })?;
        let head_dim = int("attention.key_length", MAX_DIM)?.unwrap_or(hidden / heads);
        let cfg = DecoderConfig {
            arch: if gemma { Arch::Gemma3 } else { Arch::Llama },
            vocab_size: vocab,
            hidden_size: hidden,
            num_layers: layers,
            num_heads: heads,
            num_kv_heads: int("attention.head_count_kv", 4096)?.unwrap_or(heads),
            // (Qwen3's and Gemma's heads are wider than hidden / heads)
            head_dim,
            intermediate_size: req("feed_forward_length", MAX_DIM)?,
            max_context: req("context_length", MAX_DIM)?,
            norm_eps: float(
                "attention.layer_norm_rms_epsilon",
                if gemma { 1e-6 } else { 1e-5 },
            )?,
            rope_theta: theta,
            tie_word_embeddings: false,
            eos_token_id: meta
                .get("tokenizer.ggml.eos_token_id")
                .and_then(GgufValue::as_u64)
                .and_then(|v| u32::try_from(v).ok()),
            qkv_bias: arch == "qwen2",
            qk_norm: arch == "qwen3" || gemma,
            // Gemma 3 (llama.cpp's defaults for the keys a file may lack: every sixth layer
            // global, local rotary base 10000, scale 1/sqrt(head_dim) but for 27B's sizes)
            // (Phi-3: every layer over the window the file names, if it names one)
            sliding_window: if gemma {
                Some(int("attention.sliding_window", MAX_DIM)?.unwrap_or(4096))
            } else if arch == "phi3" {
                int("attention.sliding_window", MAX_DIM)?
            } else {
                None
            },
            sliding_layers: if gemma {
                gemma3_default_layers(layers)
            } else {
                vec![arch == "phi3" && meta.contains_key("phi3.attention.sliding_window"); layers]
            },
            // (Gemma 3's local base is not in its files: llama.cpp's is 10000)
            rope_local_theta: if gemma { 10000.0 } else { theta },
            // (llama.cpp: Gemma 3 27B, its 62 layers, scales by hidden / heads, as its
            // query_pre_attn_scalar says)
            attn_scale: if gemma && layers == 62 {
                1.0 / ((hidden / heads) as f64).sqrt()
            } else {
                1.0 / (head_dim as f64).sqrt()
            },
            embed_scale: if gemma { (hidden as f64).sqrt() } else { 1.0 },
        };
        cfg.check(|f, m| err(f, m))
    }

    /// Checks the relations between fields.
    fn check(self, err: impl Fn(&str, String) -> ModelError) -> Result<DecoderConfig> {
        if !self.hidden_size.is_multiple_of(self.num_heads) && self.arch == Arch::Gpt2 {
            return Err(err(
                "n_head",
                format!(
                    "{} heads don't divide the width {}",
                    self.num_heads, self.hidden_size
                ),
            ));
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(err(
                "num_key_value_heads",
                format!(
                    "{} key/value heads don't divide the {} query heads",
                    self.num_kv_heads, self.num_heads
                ),
            ));
        }
        if self.head_dim == 0 || (self.arch != Arch::Gpt2 && !self.head_dim.is_multiple_of(2)) {
            return Err(err(
                "head_dim",
                format!(
                    "{} is not a positive even width (rotary pairs)",
                    self.head_dim
                ),
            ));
        }
        Ok(self)
    }
}

/// The rotary base a `rope_parameters` entry gives (`default` when it has none): its
/// `rope_type` must be `default` (`what` prefixes the error: the layer type of Gemma's entries).
fn rope_base(c: &JsonConfig, entry: &serde_json::Value, what: &str, default: f64) -> Result<f64> {
    let rope_type = entry
        .get("rope_type")
        .and_then(|t| t.as_str())
        .unwrap_or("default");
    if rope_type != "default" {
        return Err(c.error(
            "rope_parameters",
            format!("{what}rope_type {rope_type:?} is not supported (expected \"default\")"),
        ));
    }
    match entry.get("rope_theta") {
        None => Ok(default),
        Some(t) => t
            .as_f64()
            .filter(|t| t.is_finite() && *t > 1.0)
            .ok_or_else(|| {
                c.error(
                    "rope_parameters",
                    format!("{what}rope_theta {t} is not a number above 1"),
                )
            }),
    }
}

/// Gemma 3's layer pattern when the configuration lists no `layer_types`: every sixth layer
/// global, the others sliding-window layers (transformers' and llama.cpp's default).
const GEMMA3_PATTERN: usize = 6;

/// Gemma 3's per-layer sliding flags by the default pattern.
fn gemma3_default_layers(n: usize) -> Vec<bool> {
    (0..n)
        .map(|i| !(i + 1).is_multiple_of(GEMMA3_PATTERN))
        .collect()
}

/// A Gemma 3 text model's `config.json` (`model_type` `gemma3_text`).
fn gemma3_from_hf(c: &JsonConfig) -> Result<DecoderConfig> {
    let act = c
        .opt_str("hidden_activation")?
        .unwrap_or("gelu_pytorch_tanh");
    if act != "gelu_pytorch_tanh" {
        return Err(c.error(
            "hidden_activation",
            format!("{act:?} is not supported (expected \"gelu_pytorch_tanh\")"),
        ));
    }
    for field in ["attention_bias", "use_bidirectional_attention"] {
        if c.bool_or(field, false)? {
            return Err(c.error(field, "not supported (expected false)"));
        }
    }
    for field in [
        "final_logit_softcapping",
        "attn_logit_softcapping",
        "rope_scaling",
    ] {
        if let Some(v) = c.get(field).filter(|v| !v.is_null()) {
            return Err(c.error(field, format!("{v} is not supported (expected null)")));
        }
    }
    let layers = c.usize("num_hidden_layers", 4096)?;
    // rotary bases: transformers 5's `rope_parameters` per layer type, or the older top-level
    // `rope_theta` / `rope_local_base_freq`
    let mut global = c.f64_or("rope_theta", 1_000_000.0)?;
    let mut local = c.f64_or("rope_local_base_freq", 10_000.0)?;
    if let Some(p) = c.get("rope_parameters").filter(|v| !v.is_null()) {
        for (kind, theta) in [
            ("full_attention", &mut global),
            ("sliding_attention", &mut local),
        ] {
            if let Some(entry) = p.get(kind) {
                *theta = rope_base(c, entry, &format!("{kind}: "), *theta)?;
            }
        }
    }
    let sliding_layers = match c.get("layer_types").filter(|v| !v.is_null()) {
        None => {
            let pattern = c
                .opt_usize("sliding_window_pattern", 4096)?
                .unwrap_or(GEMMA3_PATTERN);
            (0..layers)
                .map(|i| !(i + 1).is_multiple_of(pattern))
                .collect()
        }
        Some(v) => {
            let kinds = v.as_array().filter(|a| a.len() == layers).ok_or_else(|| {
                c.error(
                    "layer_types",
                    format!("expected {layers} layer types, got {v}"),
                )
            })?;
            kinds
                .iter()
                .map(|k| match k.as_str() {
                    Some("sliding_attention") => Ok(true),
                    Some("full_attention") => Ok(false),
                    _ => Err(c.error(
                        "layer_types",
                        format!("{k} is not \"sliding_attention\" or \"full_attention\""),
                    )),
                })
                .collect::<Result<Vec<bool>>>()?
        }
    };
    let hidden = c.usize("hidden_size", MAX_DIM)?;
    let heads = c.usize("num_attention_heads", 4096)?;
    let head_dim = c.opt_usize("head_dim", MAX_DIM)?.unwrap_or(256);
    let scalar = c.f64_or("query_pre_attn_scalar", 256.0)?;
    if !(scalar.is_finite() && scalar > 0.0) {
        return Err(c.error(
            "query_pre_attn_scalar",
            format!("{scalar} is not a positive number"),
        ));
    }
    let cfg = DecoderConfig {
        arch: Arch::Gemma3,
        vocab_size: c.usize("vocab_size", MAX_DIM)?,
        hidden_size: hidden,
        num_layers: layers,
        num_heads: heads,
        num_kv_heads: c.opt_usize("num_key_value_heads", 4096)?.unwrap_or(heads),
        head_dim,
        intermediate_size: c.usize("intermediate_size", MAX_DIM)?,
        max_context: c.usize("max_position_embeddings", MAX_DIM)?,
        norm_eps: c.f64_or("rms_norm_eps", 1e-6)?,
        rope_theta: global,
        tie_word_embeddings: c.bool_or("tie_word_embeddings", true)?,
        eos_token_id: eos(c)?,
        qkv_bias: false,
        qk_norm: true,
        sliding_window: Some(c.opt_usize("sliding_window", MAX_DIM)?.unwrap_or(4096)),
        sliding_layers,
        rope_local_theta: local,
        attn_scale: 1.0 / scalar.sqrt(),
        embed_scale: (hidden as f64).sqrt(),
    };
    cfg.check(|f, m| c.error(f, m))
}

/// `eos_token_id`: an integer, or the first of a list.
fn eos(c: &JsonConfig) -> Result<Option<u32>> {
    let Some(v) = c.get("eos_token_id") else {
        return Ok(None);
    };
    let first = v.as_array().and_then(|a| a.first()).unwrap_or(v);
    first
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .map(Some)
        .ok_or_else(|| c.error("eos_token_id", format!("expected a token id, got {v}")))
}
