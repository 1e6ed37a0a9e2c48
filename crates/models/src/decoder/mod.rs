//! A decoder-only transformer: GPT-2 and LLaMA layouts (RMSNorm, rotary embeddings, SwiGLU,
//! grouped-query attention), a KV cache, and generation.
//!
//! - [`config`]: [`DecoderConfig`] from `config.json` or GGUF metadata.
//! - [`model`]: [`Decoder`], its weights (Hugging Face safetensors, sharded or not, and GGUF),
//!   the forward pass and the cache.
//! - [`generate`]: [`Sampler`] (greedy, temperature, top-k, top-p, seeded) and
//!   [`Decoder::generate`].

pub mod config;
pub mod generate;
pub mod model;

pub use config::{Arch, DecoderConfig};
pub use generate::{Generation, Sampler, SamplingOptions};
pub use model::Decoder;
