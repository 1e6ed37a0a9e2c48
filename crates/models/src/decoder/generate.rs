//! Token generation: a seeded sampler (greedy, temperature, top-k, top-p) and the loop that
//! prefills the prompt, then decodes one token at a time through the KV cache. The decode step
//! runs under a [`Jit`] over a [`Variable`] length, so after its first two steps it replays the
//! same kernels without scheduling or compiling.

use std::cell::RefCell;
use std::time::Instant;

use tinygrad_tensor::{BoundVar, DType, Jit, JitError, SInt, Tensor, Variable};

use super::attention::{Place, Span};
use super::model::Decoder;
use crate::chat::Message;
use crate::error::{ModelError, Result};
use crate::tokenizer::Tokenizer;

/// How the next token is chosen from the logits.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingOptions {
    /// 0 picks the most likely token (greedy; ties go to the lowest id, as `argmax`); above 0
    /// the logits are divided by it before the softmax.
    pub temperature: f64,
    /// Keep only the `top_k` most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p` (1: all).
    pub top_p: f64,
    /// The random generator's seed: the same seed, prompt and options give the same tokens.
    pub seed: u64,
}

impl Default for SamplingOptions {
    fn default() -> Self {
        SamplingOptions {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

/// A seeded sampler over logits (on the host: one row of `vocab` floats per token).
pub struct Sampler {
    opts: SamplingOptions,
    state: u64,
}

impl Sampler {
    /// A sampler with `opts`.
    ///
    /// # Errors
    /// If the temperature is negative or not finite, or `top_p` is outside `(0, 1]`.
    pub fn new(opts: SamplingOptions) -> Result<Sampler> {
        if !(opts.temperature.is_finite() && opts.temperature >= 0.0) {
            return Err(ModelError::Input {
                message: format!("temperature {} must be a number >= 0", opts.temperature),
            });
        }
        if !(opts.top_p > 0.0 && opts.top_p <= 1.0) {
            return Err(ModelError::Input {
                message: format!("top_p {} must be in (0, 1]", opts.top_p),
            });
        }
        let state = opts.seed ^ 0x9e37_79b9_7f4a_7c15;
        Ok(Sampler { opts, state })
    }

    /// A uniform draw in `[0, 1)` (SplitMix64).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The probabilities the sampler draws from: softmax of `logits / temperature`, cut to the
    /// top-k and top-p set and renormalized, as `(token, probability)` most likely first.
    /// Greedy (temperature 0) gives the single argmax with probability 1.
    pub fn distribution(&self, logits: &[f32]) -> Vec<(u32, f64)> {
        let argmax = || {
            let mut best = 0;
            for (i, &l) in logits.iter().enumerate() {
                if l > logits[best] || logits[best].is_nan() {
                    best = i;
                }
            }
            vec![(best as u32, 1.0)]
        };
        if self.opts.temperature == 0.0 || logits.len() <= 1 {
            return argmax();
        }
        let t = self.opts.temperature;
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        // most likely first; ties by id (a stable sort of ids)
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
        if self.opts.top_k > 0 {
            order.truncate(self.opts.top_k);
        }
        let top = logits[order[0] as usize] as f64;
        let mut probs: Vec<(u32, f64)> = order
            .iter()
            .map(|&i| (i, ((logits[i as usize] as f64 - top) / t).exp()))
            .collect();
        let total: f64 = probs.iter().map(|p| p.1).sum();
        let mut cum = 0.0;
        let all = probs.len();
        let mut keep = all;
        for (n, p) in probs.iter_mut().enumerate() {
            p.1 /= total;
            cum += p.1;
            if cum >= self.opts.top_p && keep == all {
                keep = n + 1;
            }
        }
        probs.truncate(keep);
        let total: f64 = probs.iter().map(|p| p.1).sum();
        for p in &mut probs {
            p.1 /= total;
        }
        probs
    }

    /// The next token for one row of logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let dist = self.distribution(logits);
        if dist.len() == 1 {
            return dist[0].0;
        }
        let u = self.uniform();
        let mut cum = 0.0;
        for &(tok, p) in &dist {
            cum += p;
            if u < cum {
                return tok;
            }
        }
        dist[dist.len() - 1].0
    }
}

/// What [`Decoder::generate`] produced, with its timings.
#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    /// The new tokens (the prompt not included).
    pub tokens: Vec<u32>,
    /// Seconds from the call to the first new token (prefill included).
    pub first_token_secs: f64,
    /// Seconds spent on the tokens after the first.
    pub decode_secs: f64,
}

impl Generation {
    /// Tokens per second after the first (0 when only one was generated).
    pub fn decode_tokens_per_sec(&self) -> f64 {
        let n = self.tokens.len().saturating_sub(1);
        if n == 0 || self.decode_secs <= 0.0 {
            0.0
        } else {
            n as f64 / self.decode_secs
        }
    }
}

impl Decoder {
    /// Generates up to `max_new_tokens` after `prompt` (batch 1): the prompt is prefilled in one
    /// forward, then each token is decoded through the KV cache. `on_token` sees each new token
    /// as it is chosen and may stop the generation by returning `false`; generation also stops
    /// at `eos` when it is given. The cache is reset first.
    ///
    /// # Errors
    /// If the prompt is empty, has a token outside the vocabulary, or prompt plus new tokens
    /// exceed the context; if the sampling options are invalid; if the device fails.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        max_new_tokens: usize,
        sampling: &SamplingOptions,
        eos: Option<u32>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<Generation> {
        let t0 = Instant::now();
        let vocab = self.config.vocab_size;
        if prompt.is_empty() {
            return Err(ModelError::Input {
                message: "Decoder::generate: the prompt has no tokens".to_string(),
            });
        }
        if let Some(bad) = prompt.iter().find(|&&t| t as usize >= vocab) {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::generate: token {bad} is outside the vocabulary of {vocab}"
                ),
            });
        }
        if prompt.len() + max_new_tokens > self.context() {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::generate: a prompt of {} tokens plus {max_new_tokens} new ones \
                     exceeds the context of {} tokens",
                    prompt.len(),
                    self.context()
                ),
            });
        }
        let mut sampler = Sampler::new(sampling.clone())?;
        self.reset_cache(1)?;
        let mut out = Generation {
            tokens: Vec::new(),
            first_token_secs: 0.0,
            decode_secs: 0.0,
        };
        if max_new_tokens == 0 {
            return Ok(out);
        }
        let ids: Vec<i32> = prompt.iter().map(|&t| t as i32).collect();
        let tokens = Tensor::from_slice_on(&ids, &[1, ids.len()], &self.device);
        let logits = self.forward(&tokens, 0, false)?.to_vec::<f32>();
        let mut next = sampler.sample(&logits);
        out.first_token_secs = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        out.tokens.push(next);
        if !on_token(next) || Some(next) == eos {
            return Ok(out);
        }
        let this: &Decoder = self;
        let len = Variable::new("kv_len", 1, this.context());
        // a device error inside the step is kept here (the step returns no output, which the
        // Jit refuses) and reported instead of the Jit's error
        let failed = RefCell::new(None);
        let mut step = Jit::with_vars(|io: &[Tensor], vars: &[BoundVar]| {
            let place = Place::Shared {
                cache: &this.cache,
                span: Span::Symbolic {
                    pos: io[1].clone(),
                    end: SInt::from(&vars[0]),
                },
            };
            match this.run(&io[0], &place, false) {
                Ok(logits) => vec![logits],
                Err(e) => {
                    *failed.borrow_mut() = Some(e);
                    Vec::new()
                }
            }
        });
        for pos in prompt.len()..prompt.len() + max_new_tokens - 1 {
            let tok = Tensor::from_slice_on(&[next as i32], &[1, 1], &this.device);
            let at = Tensor::from_slice_on(&[pos as i32], &[1], &this.device);
            let outs = step
                .call_vars(&[tok, at], &[len.bind(pos + 1)])
                .map_err(|e| match (failed.borrow_mut().take(), e) {
                    (Some(inner), _) => inner,
                    (None, JitError::Device(d)) => ModelError::Device(d),
                    (None, e) => ModelError::Input {
                        message: format!("Decoder::generate: the decode step failed: {e}"),
                    },
                })?;
            this.filled.set(pos + 1);
            let logits = outs[0].cast(DType::FLOAT32).try_to_vec::<f32>()?;
            next = sampler.sample(&logits);
            out.tokens.push(next);
            if !on_token(next) || Some(next) == eos {
                break;
            }
        }
        out.decode_secs = t1.elapsed().as_secs_f64();
        Ok(out)
    }

    /// Answers a conversation: `messages` rendered with the tokenizer's chat template (the
    /// assistant's turn opened), then [`Decoder::generate`] until the tokenizer's EOS token
    /// (the model's end of turn) or `max_new_tokens`. `on_text` sees the reply's text as it
    /// completes (see [`Tokenizer::stream`]) and may stop it by returning `false`. Returns the
    /// reply (special tokens left out) and the generation.
    ///
    /// # Errors
    /// If the tokenizer has no chat template or the template fails, or as
    /// [`Decoder::generate`].
    pub fn chat(
        &mut self,
        tokenizer: &Tokenizer,
        messages: &[Message],
        max_new_tokens: usize,
        sampling: &SamplingOptions,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<(String, Generation)> {
        let prompt = tokenizer.apply_chat_template(messages, true)?;
        // the template writes every special token itself
        let ids = tokenizer.encode(&prompt, false)?;
        let eos = tokenizer
            .eos_token()
            .and_then(|t| tokenizer.token_to_id(t))
            .or(self.config.eos_token_id);
        let mut stream = tokenizer.stream(true);
        let (mut reply, mut failed) = (String::new(), None);
        let generation = self.generate(&ids, max_new_tokens, sampling, eos, &mut |tok| {
            if Some(tok) == eos {
                return false;
            }
            match stream.push(tok) {
                Ok(text) => {
                    reply.push_str(&text);
                    on_text(&text)
                }
                Err(e) => {
                    failed = Some(e);
                    false
                }
            }
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok((reply, generation)),
        }
    }

    /// The logits `(1, vocab)` of one decode step without the JIT: token `token` at position
    /// `pos` (the cache holding positions `0..pos`; a `pos` before their end rewinds to it),
    /// attending over a symbolic length as [`Decoder::generate`] does. For tests and for callers
    /// running their own loop.
    ///
    /// # Errors
    /// If the token is outside the vocabulary, `pos` is beyond the context or past the positions
    /// the cache holds, or the device fails.
    pub fn decode_step(&self, token: u32, pos: usize) -> Result<Tensor> {
        if token as usize >= self.config.vocab_size || pos >= self.context() {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::decode_step: token {token} at position {pos}; the vocabulary has {} \
                     tokens and the context {}",
                    self.config.vocab_size,
                    self.context()
                ),
            });
        }
        if pos > self.filled.get() {
            return Err(ModelError::Input {
                message: format!(
                    "Decoder::decode_step: position {pos} is past the {} positions the KV cache \
                     holds",
                    self.filled.get()
                ),
            });
        }
        let len = Variable::new("kv_len", 1, self.context());
        let tok = Tensor::from_slice_on(&[token as i32], &[1, 1], &self.device);
        let at = Tensor::from_slice_on(&[pos as i32], &[1], &self.device);
        let place = Place::Shared {
            cache: &self.cache,
            span: Span::Symbolic {
                pos: at,
                end: SInt::from(&len.bind(pos + 1)),
            },
        };
        let out = self.run(&tok, &place, false)?;
        out.try_realize()?;
        self.filled.set(pos + 1);
        Ok(out)
    }
}
