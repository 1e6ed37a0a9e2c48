//! The decoder's layers, weight loading (one checkpoint-name table per source), the forward pass
//! and the KV cache.
//!
//! The KV cache is one `(batch, kv_heads, cache_len, head_dim)` float32 tensor per block for keys
//! and one for values. A forward over tokens at positions `start..start + len` writes their keys
//! and values at those positions, in place (a kernel over those positions only, whatever the
//! context), and attends over `0..start + len`. In the decode step that
//! length is a bound [`Variable`](tinygrad_tensor::Variable), so every step runs the same
//! kernels (and, under [`Jit`](tinygrad_tensor::Jit), replays without scheduling). The forward
//! pass (`Decoder::run`) also serves [`Decoder::decode_batch`], where each batch row has a cache
//! and a position of its own: where the tokens sit and which caches they use is a `Place`
//! (`attention.rs`, with the KV writes, the attention and the rotary embedding).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use tinygrad_tensor::nn::gguf::{GgufValue, gguf_load_quantized_on};
use tinygrad_tensor::nn::{Embedding, LayerNorm, Linear, Module, RMSNorm};
use tinygrad_tensor::{DType, Tensor};

use super::attention::{Place, Span, apply_rope, rope_tables};
use super::batch::{BatchStep, Layout};
use super::config::{Arch, DecoderConfig};
use crate::config::JsonConfig;
use crate::error::{ModelError, Result, check_token_ids};
use crate::weights::{Proj, ProjStack, Weights, as_f32};

/// A normalization layer of either family.
enum Norm {
    Layer(LayerNorm),
    Rms(RMSNorm),
}

impl Norm {
    fn forward(&self, x: &Tensor) -> Tensor {
        match self {
            Norm::Layer(n) => n.forward(x),
            Norm::Rms(n) => n.forward(x),
        }
    }
}

/// The MLP of either family.
enum Mlp {
    /// GPT-2: `proj(gelu_tanh(fc(x)))`.
    Gelu { fc: Proj, proj: Proj },
    /// LLaMA: `down(silu(gate(x)) * up(x))` (`gate_up`: the two projections of `x`).
    SwiGlu { gate_up: ProjStack, down: Proj },
    /// Gemma: `down(gelu_tanh(gate(x)) * up(x))`.
    GeGlu { gate_up: ProjStack, down: Proj },
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Mlp::Gelu { fc, proj } => proj.forward(&fc.forward(x)?.gelu()),
            // gate and up are their own (GEMM or quantized) kernels, not one kernel of two
            // reductions
            Mlp::SwiGlu { gate_up, down } => {
                let [gate, up] = two(gate_up.forward_own(x)?);
                down.forward(&(gate.silu() * up))
            }
            Mlp::GeGlu { gate_up, down } => {
                let [gate, up] = two(gate_up.forward_own(x)?);
                down.forward(&(gate.gelu() * up))
            }
        }
    }

    /// Whether its first projection reads a realized input (see [`Proj::reads_realized_input`]).
    fn reads_realized_input(&self) -> bool {
        match self {
            Mlp::Gelu { fc, .. } => fc.reads_realized_input(),
            Mlp::SwiGlu { gate_up, .. } | Mlp::GeGlu { gate_up, .. } => {
                gate_up.reads_realized_input()
            }
        }
    }
}

/// The two outputs of a gate/up [`ProjStack`] (built with two parts).
fn two(parts: Vec<Tensor>) -> [Tensor; 2] {
    let n = parts.len();
    parts
        .try_into()
        .unwrap_or_else(|_| unreachable!("a gate/up stack of {n} parts"))
}

/// One transformer block.
struct Block {
    attn_norm: Norm,
    /// The query, key and value projections, in that order.
    qkv: ProjStack,
    o: Proj,
    /// Qwen3's and Gemma's RMSNorm of each query and key head (over `head_dim`).
    qk_norm: Option<(RMSNorm, RMSNorm)>,
    /// Gemma's norms of the attention's and the MLP's outputs.
    post_attn_norm: Option<Norm>,
    mlp_norm: Norm,
    mlp: Mlp,
    post_mlp_norm: Option<Norm>,
    /// Whether the block attends over the sliding window (and takes the local rotary table).
    sliding: bool,
}

/// A decoder-only transformer (GPT-2 or LLaMA layout) with a KV cache.
pub struct Decoder {
    /// The configuration.
    pub config: DecoderConfig,
    /// The device it runs on.
    pub device: String,
    /// The layers and tables the forward pass reads (shared with the batched decode steps kept
    /// under a `Jit`).
    pub(super) net: Arc<Net>,
    /// Per block, keys and values `(batch, kv_heads, cache_len, head_dim)`.
    pub(super) cache: Vec<(Tensor, Tensor)>,
    pub(super) cache_len: usize,
    /// Positions `0..filled` of the cache hold keys and values; a forward may start at most
    /// here (beyond, it would attend over empty positions).
    pub(super) filled: Cell<usize>,
    /// The batched steps ([`Decoder::decode_batch`], [`Decoder::decode_slots`]), captured and
    /// replayed by a `Jit`, by layout and batch size (`None`: that one runs without a `Jit`).
    pub(super) batch_steps: RefCell<HashMap<(Layout, usize), Option<BatchStep>>>,
}

/// What the forward pass reads: the layers and the per-position tables.
pub(super) struct Net {
    embed: Embedding,
    positions: Option<Embedding>,
    blocks: Vec<Block>,
    norm: Norm,
    /// The output projection (the embedding's weight when tied).
    lm_head: Proj,
    /// Rotary tables `(cache_len, head_dim)`: cos and sin (LLaMA).
    rope: Option<(Tensor, Tensor)>,
    /// The sliding-window layers' rotary tables (Gemma 3's local base).
    rope_local: Option<(Tensor, Tensor)>,
}

/// The HF names of GGUF's LLaMA tensors (`{i}`: the block).
const LLAMA_GGUF_NAMES: &[(&str, &str)] = &[
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("output_norm.weight", "model.norm.weight"),
    ("output.weight", "lm_head.weight"),
    (
        "blk.{i}.attn_norm.weight",
        "model.layers.{i}.input_layernorm.weight",
    ),
    (
        "blk.{i}.attn_q.weight",
        "model.layers.{i}.self_attn.q_proj.weight",
    ),
    (
        "blk.{i}.attn_k.weight",
        "model.layers.{i}.self_attn.k_proj.weight",
    ),
    (
        "blk.{i}.attn_v.weight",
        "model.layers.{i}.self_attn.v_proj.weight",
    ),
    (
        "blk.{i}.attn_output.weight",
        "model.layers.{i}.self_attn.o_proj.weight",
    ),
    // Qwen2's biases, Qwen3's head norms
    (
        "blk.{i}.attn_q.bias",
        "model.layers.{i}.self_attn.q_proj.bias",
    ),
    (
        "blk.{i}.attn_k.bias",
        "model.layers.{i}.self_attn.k_proj.bias",
    ),
    (
        "blk.{i}.attn_v.bias",
        "model.layers.{i}.self_attn.v_proj.bias",
    ),
    (
        "blk.{i}.attn_q_norm.weight",
        "model.layers.{i}.self_attn.q_norm.weight",
    ),
    (
        "blk.{i}.attn_k_norm.weight",
        "model.layers.{i}.self_attn.k_norm.weight",
    ),
    (
        "blk.{i}.ffn_norm.weight",
        "model.layers.{i}.post_attention_layernorm.weight",
    ),
    (
        "blk.{i}.ffn_gate.weight",
        "model.layers.{i}.mlp.gate_proj.weight",
    ),
    (
        "blk.{i}.ffn_up.weight",
        "model.layers.{i}.mlp.up_proj.weight",
    ),
    (
        "blk.{i}.ffn_down.weight",
        "model.layers.{i}.mlp.down_proj.weight",
    ),
];

/// Gemma 3's names where they differ from LLaMA's (its four norms per block).
const GEMMA3_GGUF_NAMES: &[(&str, &str)] = &[
    (
        "blk.{i}.post_attention_norm.weight",
        "model.layers.{i}.post_attention_layernorm.weight",
    ),
    (
        "blk.{i}.ffn_norm.weight",
        "model.layers.{i}.pre_feedforward_layernorm.weight",
    ),
    (
        "blk.{i}.post_ffw_norm.weight",
        "model.layers.{i}.post_feedforward_layernorm.weight",
    ),
];

/// Phi-3's fused projections.
const PHI3_GGUF_NAMES: &[(&str, &str)] = &[
    (
        "blk.{i}.attn_qkv.weight",
        "model.layers.{i}.self_attn.qkv_proj.weight",
    ),
    (
        "blk.{i}.ffn_up.weight",
        "model.layers.{i}.mlp.gate_up_proj.weight",
    ),
];

/// The HF name of GGUF tensor `name` of a file of architecture `arch`, with its block, if the
/// tables (the architecture's own first) have it.
fn gguf_to_hf(name: &str, arch: Option<&str>) -> Option<(String, Option<usize>)> {
    let tables: &[&[(&str, &str)]] = match arch {
        Some("gemma3") => &[GEMMA3_GGUF_NAMES, LLAMA_GGUF_NAMES],
        Some("phi3") => &[PHI3_GGUF_NAMES, LLAMA_GGUF_NAMES],
        _ => &[LLAMA_GGUF_NAMES],
    };
    for (g, h) in tables.iter().flat_map(|t| t.iter()) {
        if let Some((pre, post)) = g.split_once("{i}") {
            let Some(rest) = name.strip_prefix(pre).and_then(|r| r.strip_suffix(post)) else {
                continue;
            };
            if let Ok(i) = rest.parse::<usize>()
                && rest == i.to_string()
            {
                return Some((h.replace("{i}", rest), Some(i)));
            }
        } else if name == *g {
            return Some((h.to_string(), None));
        }
    }
    None
}

impl Decoder {
    /// Loads a model: a Hugging Face directory (`config.json` + safetensors, sharded or not) or
    /// a `.gguf` file, onto `device`.
    ///
    /// # Errors
    /// If a file is missing or malformed, the architecture is not supported, or a weight is
    /// missing or of another shape than the configuration implies.
    pub fn load(path: &Path, device: &str) -> Result<Decoder> {
        if path.is_file() {
            return Decoder::load_gguf(path, device);
        }
        let config = DecoderConfig::from_hf(&JsonConfig::read(&path.join("config.json"))?)?;
        let weights = Weights::from_hf_dir(path, device)?;
        let decoder = Decoder::from_weights(config, &weights, device);
        drop(weights);
        // the copies the weights went through (converted, permuted, stacked) go back to the OS
        tinygrad_tensor::release_free_memory();
        decoder
    }

    /// Loads a GGUF file (architectures `llama`, `qwen2`, `qwen3`, `phi3`, `gemma3`; f32/f16/bf16 and the quantized
    /// types `tinygrad_tensor::nn::gguf` dequantizes). Its tensors are renamed to the Hugging Face
    /// names, and for `llama` llama.cpp's rotary row order of the query and key projections is
    /// undone (Qwen's files keep Hugging Face's order: llama.cpp runs them with NeoX rotary).
    ///
    /// # Errors
    /// As [`Decoder::load`]; also if the file has a tensor this decoder does not know (a
    /// `rope_freqs` table, say), rather than ignoring what would change the results.
    pub fn load_gguf(path: &Path, device: &str) -> Result<Decoder> {
        let name = path.display().to_string();
        // quantized matrices stay blocks: read as blocks by the projections (the CPU's native
        // products, the IR's fused dequantization elsewhere), dequantized row by row by the
        // embedding
        let mut g = gguf_load_quantized_on(path, device).map_err(|e| ModelError::Weight {
            path: name.clone(),
            tensor: e.tensor.clone().unwrap_or_default(),
            message: e.message,
        })?;
        let config = DecoderConfig::from_gguf(&g.metadata, &name)?;
        let arch = g
            .metadata
            .get("general.architecture")
            .and_then(GgufValue::as_str);
        let interleaved_rope = arch == Some("llama");
        let gemma = arch == Some("gemma3");
        let (heads, kv, hd) = (config.num_heads, config.num_kv_heads, config.head_dim);
        let mut tensors = BTreeMap::new();
        let mut quantized = BTreeMap::new();
        for gname in &g.tensor_order {
            let Some((hf, block)) = gguf_to_hf(gname, arch) else {
                return Err(ModelError::Unsupported {
                    path: name,
                    message: format!("tensor `{gname}` is not one the decoder uses"),
                });
            };
            if block.is_some_and(|b| b >= config.num_layers) {
                return Err(ModelError::Weight {
                    path: name,
                    tensor: gname.clone(),
                    message: format!(
                        "block beyond {}.block_count = {}",
                        arch.unwrap_or("llama"),
                        config.num_layers
                    ),
                });
            }
            // llama.cpp orders each head's rows as rotary pairs (2i, 2i+1); Hugging Face as
            // halves (i, i + d/2): row h*d + 2i + j of the file is row h*d + j*d/2 + i
            let n = if !interleaved_rope {
                None
            } else if hf.ends_with("q_proj.weight") {
                Some(heads)
            } else if hf.ends_with("k_proj.weight") {
                Some(kv)
            } else {
                None
            };
            // (lazy: the float tensor and the blocks are each made contiguous once)
            let reorder = |t: &Tensor, n: usize| {
                let inp = t.shape()[1] as isize;
                let (n, hd) = (n as isize, hd as isize);
                t.reshape(&[n, hd / 2, 2, inp])
                    .transpose(1, 2)
                    .reshape(&[n * hd, inp])
            };
            if let Some(q) = g.quantized.remove(gname) {
                let q = match n {
                    Some(n) if q.rows == n * hd => q.map_rows(|b| reorder(b, n)),
                    _ => q,
                };
                quantized.insert(hf, q);
                continue;
            }
            let Some(t) = g.tensors.remove(gname) else {
                continue;
            };
            let t = match n {
                Some(n) if t.ndim() == 2 && t.shape()[0] == n * hd => reorder(&t, n).contiguous(),
                _ => t,
            };
            // llama.cpp stores Gemma's norm weights plus one (ggml's RMSNorm multiplies by the
            // weight); the Hugging Face weight is the stored one minus one, as transformers
            // loads it
            let t = if gemma && hf.ends_with("norm.weight") {
                (as_f32(&t) - 1.0).contiguous()
            } else {
                t
            };
            tensors.insert(hf, t);
        }
        let mut config = config;
        config.tie_word_embeddings =
            !tensors.contains_key("lm_head.weight") && !quantized.contains_key("lm_head.weight");
        let refs: Vec<&Tensor> = tensors.values().collect();
        Tensor::try_realize_all(&refs)?;
        let weights = Weights::new(name, tensors).with_quantized(quantized);
        let decoder = Decoder::from_weights(config, &weights, device);
        drop(weights);
        // the copies the weights went through (permuted, stacked) go back to the OS
        tinygrad_tensor::release_free_memory();
        decoder
    }

    /// Builds the decoder from checkpoint weights with Hugging Face's names, checking every
    /// shape against `config`; the KV cache is for batch 1 and the whole context.
    ///
    /// # Errors
    /// If a weight is missing or misshapen.
    pub fn from_weights(config: DecoderConfig, w: &Weights, device: &str) -> Result<Decoder> {
        let c = &config;
        let (h, hd) = (c.hidden_size, c.head_dim);
        let (qd, kvd) = (c.num_heads * hd, c.num_kv_heads * hd);
        let (embed, positions, blocks, norm, lm_head) = match c.arch {
            Arch::Gpt2 => {
                let p = if w.contains("transformer.wte.weight") {
                    "transformer."
                } else {
                    ""
                };
                let embed = w.embedding(&format!("{p}wte.weight"), c.vocab_size, h)?;
                let pos = w.embedding(&format!("{p}wpe.weight"), c.max_context, h)?;
                let mut blocks = Vec::new();
                for i in 0..c.num_layers {
                    let b = format!("{p}h.{i}");
                    let qkv = w.conv1d(&format!("{b}.attn.c_attn"), h, 3 * h)?;
                    let bias = qkv.bias.clone().expect("conv1d has a bias");
                    let part = |j: usize| {
                        Proj::Dense(Linear {
                            weight: qkv.weight.shrink(&[(j * h, (j + 1) * h), (0, h)]),
                            bias: Some(bias.shrink(&[(j * h, (j + 1) * h)])),
                        })
                    };
                    blocks.push(Block {
                        attn_norm: Norm::Layer(w.layer_norm(
                            &format!("{b}.ln_1"),
                            h,
                            c.norm_eps,
                        )?),
                        qkv: ProjStack::Parts(vec![part(0), part(1), part(2)]),
                        o: w.conv1d(&format!("{b}.attn.c_proj"), h, h)?.into(),
                        qk_norm: None,
                        post_attn_norm: None,
                        post_mlp_norm: None,
                        sliding: false,
                        mlp_norm: Norm::Layer(w.layer_norm(&format!("{b}.ln_2"), h, c.norm_eps)?),
                        mlp: Mlp::Gelu {
                            fc: w
                                .conv1d(&format!("{b}.mlp.c_fc"), h, c.intermediate_size)?
                                .into(),
                            proj: w
                                .conv1d(&format!("{b}.mlp.c_proj"), c.intermediate_size, h)?
                                .into(),
                        },
                    });
                }
                let norm = Norm::Layer(w.layer_norm(&format!("{p}ln_f"), h, c.norm_eps)?);
                let head = if w.contains("lm_head.weight") && !c.tie_word_embeddings {
                    w.get("lm_head.weight", &[c.vocab_size, h])?
                } else {
                    embed.weight.clone()
                };
                let head = Proj::Dense(Linear {
                    weight: head,
                    bias: None,
                });
                (embed, Some(pos), blocks, norm, head)
            }
            Arch::Llama => {
                let embed = w.embedding("model.embed_tokens.weight", c.vocab_size, h)?;
                let mut blocks = Vec::new();
                for i in 0..c.num_layers {
                    let b = format!("model.layers.{i}");
                    let lin = |name: &str, inp: usize, out: usize| {
                        w.proj(&format!("{b}.{name}"), inp, out, false)
                    };
                    let qkv =
                        |name: &str, out: usize| w.proj(&format!("{b}.{name}"), h, out, c.qkv_bias);
                    // Phi-3 fuses q/k/v into one projection and gate/up into another: each
                    // part is a row range of the fused weight
                    let qkv_stack = if w.contains(&format!("{b}.self_attn.qkv_proj.weight")) {
                        let f = lin("self_attn.qkv_proj", h, qd + 2 * kvd)?;
                        ProjStack::from_fused(f, vec![qd, kvd, kvd])
                    } else {
                        ProjStack::new(vec![
                            qkv("self_attn.q_proj", qd)?,
                            qkv("self_attn.k_proj", kvd)?,
                            qkv("self_attn.v_proj", kvd)?,
                        ])?
                    };
                    let m = c.intermediate_size;
                    let gate_up = if w.contains(&format!("{b}.mlp.gate_up_proj.weight")) {
                        let f = lin("mlp.gate_up_proj", h, 2 * m)?;
                        ProjStack::from_fused(f, vec![m, m])
                    } else {
                        ProjStack::new(vec![
                            lin("mlp.gate_proj", h, m)?,
                            lin("mlp.up_proj", h, m)?,
                        ])?
                    };
                    let head_norm = |name: &str| {
                        w.rms_norm(&format!("{b}.self_attn.{name}.weight"), hd, c.norm_eps)
                    };
                    blocks.push(Block {
                        attn_norm: Norm::Rms(w.rms_norm(
                            &format!("{b}.input_layernorm.weight"),
                            h,
                            c.norm_eps,
                        )?),
                        qkv: qkv_stack,
                        o: lin("self_attn.o_proj", qd, h)?,
                        qk_norm: if c.qk_norm {
                            Some((head_norm("q_norm")?, head_norm("k_norm")?))
                        } else {
                            None
                        },
                        post_attn_norm: None,
                        post_mlp_norm: None,
                        sliding: c.sliding_layers.get(i).copied().unwrap_or(false),
                        mlp_norm: Norm::Rms(w.rms_norm(
                            &format!("{b}.post_attention_layernorm.weight"),
                            h,
                            c.norm_eps,
                        )?),
                        mlp: Mlp::SwiGlu {
                            gate_up,
                            down: lin("mlp.down_proj", m, h)?,
                        },
                    });
                }
                let norm = Norm::Rms(w.rms_norm("model.norm.weight", h, c.norm_eps)?);
                let head = output_head(w, c, &embed)?;
                (embed, None, blocks, norm, head)
            }
            Arch::Gemma3 => {
                let embed = w.embedding("model.embed_tokens.weight", c.vocab_size, h)?;
                // Gemma's RMSNorm scales by 1 + weight
                let norm = |name: &str, dim: usize| -> Result<RMSNorm> {
                    let n = w.rms_norm(name, dim, c.norm_eps)?;
                    Ok(RMSNorm {
                        weight: (n.weight + 1.0).contiguous(),
                        eps: n.eps,
                    })
                };
                let mut blocks = Vec::new();
                for i in 0..c.num_layers {
                    let b = format!("model.layers.{i}");
                    let lin = |name: &str, inp: usize, out: usize| {
                        w.proj(&format!("{b}.{name}"), inp, out, false)
                    };
                    let block_norm = |name: &str| {
                        Ok::<_, ModelError>(Norm::Rms(norm(&format!("{b}.{name}.weight"), h)?))
                    };
                    blocks.push(Block {
                        attn_norm: block_norm("input_layernorm")?,
                        qkv: ProjStack::new(vec![
                            lin("self_attn.q_proj", h, qd)?,
                            lin("self_attn.k_proj", h, kvd)?,
                            lin("self_attn.v_proj", h, kvd)?,
                        ])?,
                        o: lin("self_attn.o_proj", qd, h)?,
                        qk_norm: Some((
                            norm(&format!("{b}.self_attn.q_norm.weight"), hd)?,
                            norm(&format!("{b}.self_attn.k_norm.weight"), hd)?,
                        )),
                        post_attn_norm: Some(block_norm("post_attention_layernorm")?),
                        mlp_norm: block_norm("pre_feedforward_layernorm")?,
                        mlp: Mlp::GeGlu {
                            gate_up: ProjStack::new(vec![
                                lin("mlp.gate_proj", h, c.intermediate_size)?,
                                lin("mlp.up_proj", h, c.intermediate_size)?,
                            ])?,
                            down: lin("mlp.down_proj", c.intermediate_size, h)?,
                        },
                        post_mlp_norm: Some(block_norm("post_feedforward_layernorm")?),
                        sliding: c.sliding_layers.get(i).copied().unwrap_or(false),
                    });
                }
                let final_norm = Norm::Rms(norm("model.norm.weight", h)?);
                let head = output_head(w, c, &embed)?;
                (embed, None, blocks, final_norm, head)
            }
        };
        let net = Net {
            embed,
            positions,
            blocks,
            norm,
            lm_head,
            rope: None,
            rope_local: None,
        };
        let mut d = Decoder {
            config: config.clone(),
            device: device.to_string(),
            net: Arc::new(net),
            cache: Vec::new(),
            cache_len: 0,
            filled: Cell::new(0),
            batch_steps: RefCell::new(HashMap::new()),
        };
        d.set_context(config.max_context.min(4096))?;
        Ok(d)
    }

    /// The KV cache's length: the longest prompt plus generated tokens.
    pub fn context(&self) -> usize {
        self.cache_len
    }

    /// Sizes the KV cache (batch 1) for sequences of up to `len` tokens (at most the model's
    /// `max_context`; `load` picks `min(max_context, 4096)`), and empties it.
    ///
    /// # Errors
    /// If `len` is 0 or beyond `max_context`, or the device fails.
    pub fn set_context(&mut self, len: usize) -> Result<()> {
        if len == 0 || len > self.config.max_context {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::set_context: {len} tokens; the model takes 1 to {}",
                    self.config.max_context
                ),
            });
        }
        self.cache_len = len;
        // the batched steps read the tables (and their kernels the context): made anew
        self.batch_steps.get_mut().clear();
        let net = Arc::get_mut(&mut self.net).expect("only the batched steps share the layers");
        if self.config.arch != Arch::Gpt2 {
            net.rope = Some(rope_tables(
                len,
                self.config.head_dim,
                self.config.rope_theta,
                &self.device,
            ));
        }
        if self.config.sliding_layers.iter().any(|&s| s) {
            net.rope_local = Some(rope_tables(
                len,
                self.config.head_dim,
                self.config.rope_local_theta,
                &self.device,
            ));
        }
        self.reset_cache(1)
    }

    /// Empties the KV cache, sized for `batch` sequences. A cache of that size already there is
    /// kept and only marked empty: a forward attends over the positions it wrote since, never
    /// beyond (a new one is zeroed).
    ///
    /// # Errors
    /// If the device fails.
    pub fn reset_cache(&mut self, batch: usize) -> Result<()> {
        let c = &self.config;
        let shape = [batch, c.num_kv_heads, self.cache_len, c.head_dim];
        if self.cache.len() == c.num_layers && self.cache.iter().all(|(k, _)| k.shape() == shape) {
            self.filled.set(0);
            return Ok(());
        }
        self.cache = self.new_cache(batch)?;
        self.filled.set(0);
        Ok(())
    }

    /// A zeroed KV cache for `batch` sequences of the context's length: per block, keys and
    /// values in buffers of their own.
    ///
    /// # Errors
    /// If the device fails.
    pub(super) fn new_cache(&self, batch: usize) -> Result<Vec<(Tensor, Tensor)>> {
        let c = &self.config;
        let shape = [batch, c.num_kv_heads, self.cache_len, c.head_dim];
        let zeros = Tensor::zeros_on(&shape, DType::FLOAT32, &self.device);
        let mut cache = Vec::with_capacity(c.num_layers);
        // each its own buffer, written in place (`zeros.contiguous()` realized together would
        // be one buffer: equal graphs are computed once)
        let fresh = || -> Result<Tensor> {
            let t = Tensor::empty_like(&zeros);
            t.assign_in_place(&zeros)?;
            Ok(t)
        };
        for _ in 0..c.num_layers {
            cache.push((fresh()?, fresh()?));
        }
        Ok(cache)
    }

    /// The logits after tokens `(batch, len)` (integers) at positions `start..start + len`,
    /// whose keys and values are written to the cache (earlier positions must already be there;
    /// a `start` before the end of what is there rewinds to it): `(batch, vocab)` for the last
    /// position, or with `all` `(batch, len, vocab)` for every one. Tokens on another device are
    /// moved to the model's.
    ///
    /// # Errors
    /// If the tokens aren't a 2-D integer tensor of the cache's batch, an id is outside the
    /// vocabulary, `start` is past the positions the cache holds, `start + len` exceeds the
    /// context, or the device fails.
    pub fn forward(&self, tokens: &Tensor, start: usize, all: bool) -> Result<Tensor> {
        // tokens made on another device are moved to the model's
        let tokens = &tokens.try_to(&self.device)?;
        let s = tokens.shape();
        let batch = self.cache.first().map_or(0, |c| c.0.shape()[0]);
        if s.len() != 2 || s[0] != batch || s[1] == 0 || !tokens.dtype().is_int() {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::forward: expected integer tokens (batch {batch}, len >= 1), got {} \
                     {s:?}",
                    tokens.dtype()
                ),
            });
        }
        if start + s[1] > self.cache_len {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::forward: positions {start}..{} exceed the context of {} tokens",
                    start + s[1],
                    self.cache_len
                ),
            });
        }
        if start > self.filled.get() {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::forward: start {start} is past the {} positions the KV cache holds",
                    self.filled.get()
                ),
            });
        }
        check_token_ids(tokens, self.config.vocab_size, "Decoder::forward")?;
        let place = Place::Shared {
            cache: &self.cache,
            span: Span::Concrete { start },
        };
        let out = self.run(tokens, &place, all)?;
        out.try_realize()?;
        self.filled.set(start + s[1]);
        Ok(out)
    }

    /// The forward pass of tokens `(batch, len)` at the positions `place` gives, writing to and
    /// attending over its caches (no checks: `forward`, the decode steps and `prefill` check
    /// their inputs).
    ///
    /// # Errors
    /// If the device fails realizing a block's input or the cache.
    pub(super) fn run(&self, tokens: &Tensor, place: &Place, all: bool) -> Result<Tensor> {
        self.net
            .run(&self.config, self.cache_len, tokens, place, all)
    }
}

impl Net {
    /// [`Decoder::run`] of a decoder of configuration `c` and context `cache_len`.
    ///
    /// # Errors
    /// As [`Decoder::run`].
    pub(super) fn run(
        &self,
        c: &DecoderConfig,
        cache_len: usize,
        tokens: &Tensor,
        place: &Place,
        all: bool,
    ) -> Result<Tensor> {
        let ts = tokens.shape();
        let (b, len) = (ts[0], ts[1]);
        let mut x = as_f32(&self.embed.forward(tokens));
        if c.embed_scale != 1.0 {
            // (transformers multiplies by the scale rounded to the weights' dtype)
            x *= f64::from(c.embed_scale as f32);
        }
        if let Some(p) = &self.positions {
            x += place.table_rows(&p.weight, len);
        }
        let rows = |table: &Option<(Tensor, Tensor)>| {
            table
                .as_ref()
                .map(|(cos, sin)| (place.table_rows(cos, len), place.table_rows(sin, len)))
        };
        let (rope, rope_local) = (rows(&self.rope), rows(&self.rope_local));
        let (heads, kvh, hd) = (
            c.num_heads as isize,
            c.num_kv_heads as isize,
            c.head_dim as isize,
        );
        let (bi, li) = (b as isize, len as isize);
        for (layer, block) in self.blocks.iter().enumerate() {
            // 125M LLaMA: prefill 2304 -> 358 ms, decode 131 -> 38 ms (see docs/performance.md)
            // the block's input is realized first: everything built from it below would
            // otherwise recompute it from the embeddings, through every earlier block, at each
            // realization (the cache's, and the next block's)
            x.try_realize()?;
            let h = block.attn_norm.forward(&x);
            if block.qkv.reads_realized_input() {
                // the quantized products read their input from a buffer: computed once here,
                // not once per projection
                h.try_realize()?;
            }
            // each projection is its own (GEMM) kernel: fused into the rotary or attention
            // kernels that read it twice, it would be recomputed there, outside the GEMM path
            let split = |t: Tensor, n: isize, norm: Option<&RMSNorm>| {
                let t = t.reshape(&[bi, li, n, hd]);
                match norm {
                    Some(norm) => norm.forward(&t),
                    None => t,
                }
                .transpose(1, 2)
            };
            let (q_norm, k_norm) = match &block.qk_norm {
                Some((qn, kn)) => (Some(qn), Some(kn)),
                None => (None, None),
            };
            let [q, k, v]: [Tensor; 3] = block
                .qkv
                .forward_own(&h)?
                .try_into()
                .unwrap_or_else(|_| unreachable!("a qkv stack of three parts"));
            let mut q = split(q, heads, q_norm);
            let mut k = split(k, kvh, k_norm);
            let v = split(v, kvh, None);
            let table = if block.sliding { &rope_local } else { &rope };
            if let Some((cos, sin)) = table {
                q = apply_rope(&q, cos, sin);
                k = apply_rope(&k, cos, sin);
            }
            let window = c.sliding_window.filter(|_| block.sliding);
            let attn = place.attend(layer, &q, &k, &v, window, c.attn_scale, cache_len)?;
            let attn = attn.transpose(1, 2).reshape(&[bi, li, heads * hd]);
            let out = block.o.forward(&attn)?;
            x += match &block.post_attn_norm {
                Some(n) => n.forward(&out),
                None => out,
            };
            let h = block.mlp_norm.forward(&x);
            if block.mlp.reads_realized_input() {
                h.try_realize()?;
            }
            let out = block.mlp.forward(&h)?;
            x = &x
                + match &block.post_mlp_norm {
                    Some(n) => n.forward(&out),
                    None => out,
                };
        }
        let x = if all {
            x
        } else {
            x.shrink(&[(0, b), (len - 1, len), (0, c.hidden_size)])
                .reshape(&[bi, c.hidden_size as isize])
        };
        let x = self.norm.forward(&x);
        self.lm_head.forward(&x)
    }
}

/// The output projection of a LLaMA-family model: `lm_head.weight`, or with tied embeddings
/// the embedding's table — read as blocks when the checkpoint keeps it quantized.
fn output_head(w: &Weights, c: &DecoderConfig, embed: &Embedding) -> Result<Proj> {
    let (vocab, h) = (c.vocab_size, c.hidden_size);
    if !c.tie_word_embeddings {
        return w.proj("lm_head", h, vocab, false);
    }
    match w.quantized.get("model.embed_tokens.weight") {
        Some(q) => Ok(Proj::Quantized {
            weight: q.clone(),
            bias: None,
        }),
        None => Ok(Proj::Dense(Linear {
            weight: embed.weight.clone(),
            bias: None,
        })),
    }
}
