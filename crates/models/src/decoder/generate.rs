//! Token generation: the loop that prefills the prompt, then decodes one token at a time
//! through the KV cache, drawing each with a [`Sampler`]. The decode step
//! runs under a [`Jit`] over a [`Variable`] length, so after its first two steps it replays the
//! same kernels without scheduling or compiling.

use std::cell::RefCell;
use std::time::Instant;

use tinygrad_tensor::{BoundVar, DType, Jit, JitError, SInt, Tensor, Variable};

use super::attention::{Place, Span};
use super::model::Decoder;
use super::sampler::{Sampler, SamplingOptions};
use crate::chat::Message;
use crate::error::{ModelError, Result};
use crate::tokenizer::Tokenizer;

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
