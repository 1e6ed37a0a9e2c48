//! A BERT-family encoder (BERT, MiniLM, all-MiniLM-L6-v2 and the other sentence-transformers
//! BERT models) and sentence embeddings: mean (or CLS / max) pooling over the attention mask,
//! then L2 normalization, as sentence-transformers computes them.
//!
//! The layers follow Hugging Face's `BertModel`: embeddings (word + position + token type,
//! LayerNorm), then per layer self-attention (a padding mask on the keys), dense + residual +
//! LayerNorm, an intermediate dense with GELU in its erf form, dense + residual + LayerNorm.
//! The checkpoint's names map onto the modules through [`impl_parameters!`]'s `as` names, so
//! [`get_state_dict`](tinygrad_tensor::nn::get_state_dict) of a loaded model gives the
//! checkpoint's own keys.

use std::path::Path;

use tinygrad_tensor::nn::{Embedding, LayerNorm, Linear, Module};
use tinygrad_tensor::{DType, Tensor, impl_parameters};

use crate::config::JsonConfig;
use crate::encode_jit::EncodeJits;
use crate::error::{ModelError, Result, check_token_ids};
use crate::tokenizer::Tokenizer;
use crate::weights::{Weights, as_f32, linear_f32};

/// Largest size accepted for any dimension of a configuration (beyond it a hostile
/// `config.json` would make us allocate without bound before any weight is checked).
const MAX_DIM: usize = 1 << 24;

/// A BERT configuration (`config.json`'s fields of the same names).
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of every layer.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads (dividing `hidden_size`).
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// Longest input, in tokens.
    pub max_position_embeddings: usize,
    /// Token types (segments).
    pub type_vocab_size: usize,
    /// LayerNorm's epsilon.
    pub layer_norm_eps: f64,
}

impl BertConfig {
    /// The configuration in `config.json` (already parsed).
    ///
    /// # Errors
    /// If `model_type` is not a BERT-family one, a field is missing or out of range, the
    /// activation is not GELU (erf), positions are not absolute, or the heads don't divide the
    /// width.
    pub fn from_json(c: &JsonConfig) -> Result<BertConfig> {
        let kind = c.model_type();
        if !matches!(
            kind.as_deref(),
            Some("bert" | "BertModel" | "BertForMaskedLM")
        ) {
            return Err(ModelError::Unsupported {
                path: c.path.clone(),
                message: format!(
                    "model_type {kind:?} is not supported by the BERT encoder (expected \"bert\")"
                ),
            });
        }
        let act = c.opt_str("hidden_act")?.unwrap_or("gelu");
        if act != "gelu" {
            return Err(c.error(
                "hidden_act",
                format!("{act:?} is not supported (expected \"gelu\", the erf form)"),
            ));
        }
        let pos = c.opt_str("position_embedding_type")?.unwrap_or("absolute");
        if pos != "absolute" {
            return Err(c.error(
                "position_embedding_type",
                format!("{pos:?} is not supported (expected \"absolute\")"),
            ));
        }
        let cfg = BertConfig {
            vocab_size: c.usize("vocab_size", MAX_DIM)?,
            hidden_size: c.usize("hidden_size", MAX_DIM)?,
            num_hidden_layers: c.usize("num_hidden_layers", 1024)?,
            num_attention_heads: c.usize("num_attention_heads", 1024)?,
            intermediate_size: c.usize("intermediate_size", MAX_DIM)?,
            max_position_embeddings: c.usize("max_position_embeddings", MAX_DIM)?,
            type_vocab_size: c.opt_usize("type_vocab_size", MAX_DIM)?.unwrap_or(2),
            layer_norm_eps: c.f64_or("layer_norm_eps", 1e-12)?,
        };
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(c.error(
                "num_attention_heads",
                format!(
                    "{} heads don't divide hidden_size {}",
                    cfg.num_attention_heads, cfg.hidden_size
                ),
            ));
        }
        Ok(cfg)
    }
}

/// BERT's self-attention: query, key and value projections.
pub struct BertSelfAttention {
    /// Query projection.
    pub query: Linear,
    /// Key projection.
    pub key: Linear,
    /// Value projection.
    pub value: Linear,
}
impl_parameters!(BertSelfAttention { query, key, value });

/// A dense layer, then the residual and a LayerNorm (`BertSelfOutput` / `BertOutput`).
pub struct BertResidual {
    /// The projection.
    pub dense: Linear,
    /// The normalization after the residual.
    pub layer_norm: LayerNorm,
}
impl_parameters!(BertResidual { dense, layer_norm as "LayerNorm" });

impl BertResidual {
    fn forward(&self, x: &Tensor, residual: &Tensor) -> Tensor {
        self.layer_norm
            .forward(&(linear_f32(&self.dense, x) + residual))
    }
}

/// Attention and its output block (`BertAttention`).
pub struct BertAttention {
    /// The projections.
    pub attention: BertSelfAttention,
    /// Output projection, residual, LayerNorm.
    pub output: BertResidual,
}
impl_parameters!(BertAttention { attention as "self", output });

/// The feed-forward's first dense layer (`BertIntermediate`).
pub struct BertIntermediate {
    /// `hidden -> intermediate`.
    pub dense: Linear,
}
impl_parameters!(BertIntermediate { dense });

/// One encoder layer.
pub struct BertLayer {
    /// Self-attention.
    pub attention: BertAttention,
    /// Feed-forward, first half.
    pub intermediate: BertIntermediate,
    /// Feed-forward, second half with residual and LayerNorm.
    pub output: BertResidual,
}
impl_parameters!(BertLayer {
    attention,
    intermediate,
    output
});

/// The embeddings block.
pub struct BertEmbeddings {
    /// Token embeddings.
    pub word_embeddings: Embedding,
    /// Absolute position embeddings.
    pub position_embeddings: Embedding,
    /// Segment embeddings.
    pub token_type_embeddings: Embedding,
    /// The normalization of their sum.
    pub layer_norm: LayerNorm,
}
impl_parameters!(BertEmbeddings {
    word_embeddings,
    position_embeddings,
    token_type_embeddings,
    layer_norm as "LayerNorm"
});

/// The encoder stack.
pub struct BertEncoder {
    /// The layers, in order.
    pub layer: Vec<BertLayer>,
}
impl_parameters!(BertEncoder { layer });

/// A BERT encoder (without pooler or heads).
pub struct Bert {
    /// Its configuration.
    pub config: BertConfig,
    /// The embeddings.
    pub embeddings: BertEmbeddings,
    /// The layers.
    pub encoder: BertEncoder,
}
impl_parameters!(Bert {
    embeddings,
    encoder
});

/// `x * Φ(x)`, GELU in its exact erf form (Hugging Face's `"gelu"`; tinygrad's `gelu` is the
/// tanh approximation).
pub fn gelu_erf(x: &Tensor) -> Tensor {
    x * 0.5 * ((x * std::f64::consts::FRAC_1_SQRT_2).erf() + 1.0)
}

impl Bert {
    /// Builds the encoder from checkpoint weights (`bert.` prefixes, as in `BertForMaskedLM`
    /// checkpoints, are accepted), checking every weight's shape against `config`.
    ///
    /// # Errors
    /// If a weight is missing or of another shape than the configuration implies.
    pub fn from_weights(config: BertConfig, w: &Weights) -> Result<Bert> {
        let p = if w.contains("bert.embeddings.word_embeddings.weight") {
            "bert."
        } else {
            ""
        };
        let (h, eps) = (config.hidden_size, config.layer_norm_eps);
        let inter = config.intermediate_size;
        let embeddings = BertEmbeddings {
            word_embeddings: w.embedding(
                &format!("{p}embeddings.word_embeddings.weight"),
                config.vocab_size,
                h,
            )?,
            position_embeddings: w.embedding(
                &format!("{p}embeddings.position_embeddings.weight"),
                config.max_position_embeddings,
                h,
            )?,
            token_type_embeddings: w.embedding(
                &format!("{p}embeddings.token_type_embeddings.weight"),
                config.type_vocab_size,
                h,
            )?,
            layer_norm: w.layer_norm(&format!("{p}embeddings.LayerNorm"), h, eps)?,
        };
        let mut layer = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let l = format!("{p}encoder.layer.{i}");
            layer.push(BertLayer {
                attention: BertAttention {
                    attention: BertSelfAttention {
                        query: w.linear(&format!("{l}.attention.self.query"), h, h, true)?,
                        key: w.linear(&format!("{l}.attention.self.key"), h, h, true)?,
                        value: w.linear(&format!("{l}.attention.self.value"), h, h, true)?,
                    },
                    output: BertResidual {
                        dense: w.linear(&format!("{l}.attention.output.dense"), h, h, true)?,
                        layer_norm: w.layer_norm(
                            &format!("{l}.attention.output.LayerNorm"),
                            h,
                            eps,
                        )?,
                    },
                },
                intermediate: BertIntermediate {
                    dense: w.linear(&format!("{l}.intermediate.dense"), h, inter, true)?,
                },
                output: BertResidual {
                    dense: w.linear(&format!("{l}.output.dense"), inter, h, true)?,
                    layer_norm: w.layer_norm(&format!("{l}.output.LayerNorm"), h, eps)?,
                },
            });
        }
        Ok(Bert {
            config,
            embeddings,
            encoder: BertEncoder { layer },
        })
    }

    /// Loads `config.json` and the safetensors weights of a Hugging Face model directory onto
    /// `device`.
    ///
    /// # Errors
    /// As [`BertConfig::from_json`], [`Weights::from_hf_dir`] and [`Bert::from_weights`].
    pub fn load(dir: &Path, device: &str) -> Result<Bert> {
        let config = BertConfig::from_json(&JsonConfig::read(&dir.join("config.json"))?)?;
        let weights = Weights::from_hf_dir(dir, device)?;
        Bert::from_weights(config, &weights)
    }

    /// The last layer's hidden states `(batch, len, hidden)` for token ids `(batch, len)`
    /// (integers) and an attention mask of the same shape (1 for tokens, 0 for padding; any
    /// numeric or bool dtype), moved to the model's device if they are elsewhere. Token types are
    /// all 0 (single-segment input).
    ///
    /// # Errors
    /// If the shapes differ or aren't 2-D, the input is longer than `max_position_embeddings`,
    /// the ids aren't integers or one is outside the vocabulary, or the device fails.
    pub fn forward(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Result<Tensor> {
        // inputs made on another device are moved to the model's
        let device = self.embeddings.word_embeddings.weight.device();
        let (input_ids, attention_mask) =
            (&input_ids.try_to(device)?, &attention_mask.try_to(device)?);
        let cfg = &self.config;
        let s = input_ids.shape();
        if s.len() != 2 || attention_mask.shape() != s || !input_ids.dtype().is_int() {
            return Err(ModelError::Input {
                message: format!(
                    "Bert::forward: expected integer input_ids (batch, len) and an attention_mask \
                     of the same shape, got {} {s:?} and {:?}",
                    input_ids.dtype(),
                    attention_mask.shape()
                ),
            });
        }
        let len = s[1];
        if len == 0 || len > cfg.max_position_embeddings {
            return Err(ModelError::Input {
                message: format!(
                    "Bert::forward: {len} tokens; the model takes 1 to {}",
                    cfg.max_position_embeddings
                ),
            });
        }
        check_token_ids(input_ids, cfg.vocab_size, "Bert::forward")?;
        Ok(self.forward_unchecked(input_ids, attention_mask))
    }

    /// [`Bert::forward`] of ids and a mask already on the model's device, of the same 2-D
    /// shape, at most `max_position_embeddings` long, the ids in the vocabulary (not checked:
    /// the caller did), lazily.
    fn forward_unchecked(&self, input_ids: &Tensor, attention_mask: &Tensor) -> Tensor {
        let cfg = &self.config;
        let s = input_ids.shape();
        let (b, len) = (s[0], s[1]);
        let h = cfg.hidden_size;
        let emb = &self.embeddings;
        let pos = as_f32(&emb.position_embeddings.weight).shrink(&[(0, len), (0, h)]);
        let tok_type = as_f32(&emb.token_type_embeddings.weight).shrink(&[(0, 1), (0, h)]);
        let words = as_f32(&emb.word_embeddings.forward(input_ids));
        let mut x = emb.layer_norm.forward(&(words + pos + tok_type));
        // padding keys get -inf before the softmax: (batch, 1, 1, len), an additive float
        // mask made once (a bool mask would be turned into one inside every layer's softmax
        // kernels, lane by lane)
        let keep = attention_mask
            .cast(DType::FLOAT32)
            .gt(0.0)
            .where_(0.0, f64::NEG_INFINITY)
            .cast(DType::FLOAT32)
            .reshape(&[b as isize, 1, 1, len as isize])
            .contiguous();
        let (heads, hd) = (cfg.num_attention_heads, h / cfg.num_attention_heads);
        let split = |t: Tensor| {
            t.reshape(&[b as isize, len as isize, heads as isize, hd as isize])
                .transpose(1, 2)
        };
        for layer in &self.encoder.layer {
            let a = &layer.attention.attention;
            let q = split(linear_f32(&a.query, &x));
            let k = split(linear_f32(&a.key, &x));
            let v = split(linear_f32(&a.value, &x));
            let ctx = q
                .scaled_dot_product_attention(&k, &v, Some(&keep), 0.0, false)
                .transpose(1, 2)
                .reshape(&[b as isize, len as isize, h as isize]);
            let attn = layer.attention.output.forward(&ctx, &x);
            let inter = gelu_erf(&linear_f32(&layer.intermediate.dense, &attn));
            x = layer.output.forward(&inter, &attn);
        }
        x
    }
}

/// How token states become one sentence vector (sentence-transformers' `Pooling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the tokens (padding excluded).
    Mean,
    /// The first token's state (`[CLS]`).
    Cls,
    /// The maximum over the tokens, per feature (padding excluded).
    Max,
}

/// A sentence-transformers model: tokenizer, BERT encoder, pooling, and (optionally) L2
/// normalization, as in a sentence-transformers model directory.
pub struct SentenceEncoder {
    /// The encoder.
    pub bert: Bert,
    /// The tokenizer.
    pub tokenizer: Tokenizer,
    /// The pooling mode (`1_Pooling/config.json`; mean when absent).
    pub pooling: Pooling,
    /// Whether vectors are L2-normalized (a `Normalize` module in `modules.json`).
    pub normalize: bool,
    /// Longer inputs are truncated to this many tokens, as sentence-transformers does
    /// (`sentence_bert_config.json`'s `max_seq_length`, capped by the model's positions).
    pub max_seq_length: usize,
    /// The device the model runs on.
    pub device: String,
    /// Captured runs of [`SentenceEncoder::encode_ids`], one per input shape.
    jits: EncodeJits,
}

impl SentenceEncoder {
    /// Loads a sentence-transformers model directory (`config.json`, `model.safetensors`,
    /// `tokenizer.json`, and when present `modules.json`, `1_Pooling/config.json`,
    /// `sentence_bert_config.json`) onto `device`.
    ///
    /// # Errors
    /// If a file is missing or malformed, the architecture or pooling mode is not supported, or
    /// a weight is missing or misshapen.
    pub fn load(dir: &Path, device: &str) -> Result<SentenceEncoder> {
        let bert = Bert::load(dir, device)?;
        let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json"))?;
        let mut pooling = Pooling::Mean;
        let pool_cfg = dir.join("1_Pooling").join("config.json");
        if pool_cfg.is_file() {
            let c = JsonConfig::read(&pool_cfg)?;
            let modes = [
                ("pooling_mode_mean_tokens", Pooling::Mean),
                ("pooling_mode_cls_token", Pooling::Cls),
                ("pooling_mode_max_tokens", Pooling::Max),
            ];
            let mut on = Vec::new();
            for (field, mode) in modes {
                if c.bool_or(field, false)? {
                    on.push(mode);
                }
            }
            for field in [
                "pooling_mode_mean_sqrt_len_tokens",
                "pooling_mode_weightedmean_tokens",
            ] {
                if c.bool_or(field, false)? {
                    return Err(c.error(field, "not supported (mean, cls and max are)"));
                }
            }
            pooling = match on[..] {
                [mode] => mode,
                _ => {
                    return Err(c.error(
                        "",
                        "exactly one of pooling_mode_mean_tokens, pooling_mode_cls_token and \
                         pooling_mode_max_tokens must be true",
                    ));
                }
            };
        }
        // a `Normalize` module among modules.json's entries
        let modules = dir.join("modules.json");
        let normalize = if modules.is_file() {
            let path = modules.display().to_string();
            let text = std::fs::read_to_string(&modules).map_err(|e| ModelError::Io {
                path: path.clone(),
                message: e.to_string(),
            })?;
            let list: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| ModelError::Config {
                    path: path.clone(),
                    field: String::new(),
                    message: format!("not valid JSON: {e}"),
                })?;
            let entries = list.as_array().ok_or_else(|| ModelError::Config {
                path,
                field: String::new(),
                message: "expected a list of modules".to_string(),
            })?;
            entries.iter().any(|m| {
                m.get("type").and_then(|t| t.as_str())
                    == Some("sentence_transformers.models.Normalize")
            })
        } else {
            false
        };
        let mut max_seq_length = bert.config.max_position_embeddings;
        let st_cfg = dir.join("sentence_bert_config.json");
        if st_cfg.is_file() {
            let c = JsonConfig::read(&st_cfg)?;
            if let Some(m) = c.opt_usize("max_seq_length", MAX_DIM)? {
                max_seq_length = m.min(max_seq_length);
            }
        }
        Ok(SentenceEncoder {
            bert,
            tokenizer,
            pooling,
            normalize,
            max_seq_length,
            device: device.to_string(),
            jits: EncodeJits::default(),
        })
    }

    /// How many [`SentenceEncoder::encode_ids`] calls replayed captured kernels (from the third
    /// call of one input shape on, the kernels are replayed without building the graph; counted
    /// over the shapes whose captures are held: the last 8).
    pub fn jit_replays(&self) -> usize {
        self.jits.replays()
    }

    /// The token ids of each sentence (special tokens added, truncated to `max_seq_length`
    /// keeping the final `[SEP]`).
    ///
    /// # Errors
    /// If the tokenizer fails.
    pub fn tokenize(&self, sentences: &[&str]) -> Result<Vec<Vec<u32>>> {
        sentences
            .iter()
            .map(|s| {
                let mut ids = self.tokenizer.encode(s, true)?;
                if ids.len() > self.max_seq_length {
                    let last = *ids.last().expect("non-empty: longer than max_seq_length");
                    ids.truncate(self.max_seq_length.max(1) - 1);
                    ids.push(last);
                }
                Ok(ids)
            })
            .collect()
    }

    /// The embeddings `(sentences, hidden)` of `sentences`, encoded as one batch padded to the
    /// longest.
    ///
    /// # Errors
    /// If `sentences` is empty, tokenization fails, or the device fails.
    pub fn encode(&self, sentences: &[&str]) -> Result<Tensor> {
        if sentences.is_empty() {
            return Err(ModelError::Input {
                message: "SentenceEncoder::encode: no sentences".to_string(),
            });
        }
        let ids = self.tokenize(sentences)?;
        self.encode_ids(&ids)
    }

    /// The embeddings of already tokenized sentences (one batch, padded to the longest).
    ///
    /// # Errors
    /// If `ids` is empty, a sentence is empty or longer than the model's positions, an id is
    /// outside the vocabulary, or the device fails.
    pub fn encode_ids(&self, ids: &[Vec<u32>]) -> Result<Tensor> {
        let vocab = self.bert.config.vocab_size;
        let len = ids.iter().map(Vec::len).max().unwrap_or(0);
        if ids.is_empty() || ids.iter().any(Vec::is_empty) {
            return Err(ModelError::Input {
                message: "SentenceEncoder::encode_ids: expected at least one non-empty sentence"
                    .to_string(),
            });
        }
        if let Some(bad) = ids.iter().flatten().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::Input {
                message: format!("token id {bad} is outside the vocabulary of {vocab}"),
            });
        }
        let positions = self.bert.config.max_position_embeddings;
        if len > positions {
            return Err(ModelError::Input {
                message: format!(
                    "SentenceEncoder::encode_ids: a sentence of {len} tokens; the model takes 1 \
                     to {positions}"
                ),
            });
        }
        let pad = self.tokenizer.pad_id() as i32;
        let mut flat = Vec::with_capacity(ids.len() * len);
        let mut mask = Vec::with_capacity(ids.len() * len);
        for s in ids {
            flat.extend(s.iter().map(|&t| t as i32));
            flat.extend(std::iter::repeat_n(pad, len - s.len()));
            mask.extend(std::iter::repeat_n(1.0f32, s.len()));
            mask.extend(std::iter::repeat_n(0.0f32, len - s.len()));
        }
        let b = ids.len();
        // on the weights' device (`self.device` is a public field that could say otherwise)
        let device = self.bert.embeddings.word_embeddings.weight.device();
        let input = Tensor::from_slice_on(&flat, &[b, len], device);
        let mask = Tensor::from_slice_on(&mask, &[b, len], device);
        let how = Pooled {
            pooling: self.pooling,
            normalize: self.normalize,
        };
        if let Some(out) = self.jits.run(&self.bert, &how, &input, &mask) {
            return out;
        }
        let out = how.embed(&self.bert, &input, &mask);
        out.try_realize()?;
        Ok(out)
    }
}

/// How [`SentenceEncoder`] turns token states into sentence vectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pooled {
    pooling: Pooling,
    normalize: bool,
}

impl Pooled {
    /// The (lazy) embeddings of checked ids and mask on `bert`'s device.
    pub(crate) fn embed(&self, bert: &Bert, input: &Tensor, mask: &Tensor) -> Tensor {
        let s = input.shape();
        let (b, len) = (s[0], s[1]);
        let hidden = bert.forward_unchecked(input, mask);
        let m = mask.reshape(&[b as isize, len as isize, 1]);
        let pooled = match self.pooling {
            Pooling::Mean => (&hidden * &m).sum(1isize) / m.sum(1isize).maximum(1e-9),
            Pooling::Cls => hidden
                .shrink(&[(0, b), (0, 1), (0, bert.config.hidden_size)])
                .reshape(&[b as isize, -1]),
            Pooling::Max => m.gt(0.0).where_(&hidden, f64::NEG_INFINITY).max(1isize),
        };
        if self.normalize {
            pooled.normalize(2.0, -1, 1e-12)
        } else {
            pooled
        }
    }
}

/// The cosine similarity of two vectors.
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(1e-12)
}
