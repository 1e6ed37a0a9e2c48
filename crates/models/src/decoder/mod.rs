//! A decoder-only transformer: GPT-2 and LLaMA layouts (RMSNorm, rotary embeddings, SwiGLU,
//! grouped-query attention), a KV cache, and generation.
//!
//! - [`config`]: [`DecoderConfig`] from `config.json` or GGUF metadata.
//! - [`model`]: [`Decoder`], its weights (Hugging Face safetensors, sharded or not, and GGUF),
//!   the forward pass and the cache.
//! - [`sampler`]: [`Sampler`] (greedy, temperature, top-k, top-p, seeded).
//! - [`generate`]: generation, [`Decoder::generate`].
//! - [`batch`]: [`Sequence`] (one sequence's KV cache and length), [`Decoder::prefill`] and
//!   [`Decoder::decode_batch`]: several sequences decoded together (continuous batching).
//! - [`slots`]: [`Slots`] (KV cache slots for several sequences in one buffer per block),
//!   [`Decoder::prefill_slot`] and [`Decoder::decode_slots`]: continuous batching whose rows
//!   also attend together.
//! - `attention` (private): the per-row parts of the forward — where the tokens sit, the KV
//!   caches they write and attend over, the rotary and position rows, the attention.

mod attention;
pub mod batch;
pub mod config;
pub mod generate;
pub mod model;
pub mod sampler;
pub mod slots;

pub use batch::Sequence;
pub use config::{Arch, DecoderConfig};
pub use generate::Generation;
pub use model::Decoder;
pub use sampler::{Sampler, SamplingOptions};
pub use slots::Slots;
