//! Pretrained models on tinygrad-rs's public API: what a user runs, loaded from the files model
//! hubs ship.
//!
//! Module map:
//! - [`error`]: [`ModelError`], the one error type: every failure names the file, tensor or field
//!   and what was expected.
//! - [`config`]: [`JsonConfig`], typed access to `config.json` fields.
//! - [`weights`]: [`Weights`], a checkpoint's tensors (safetensors directories, sharded or not)
//!   and shape-checked layer constructors.
//! - [`tokenizer`]: [`Tokenizer`], Hugging Face's `tokenizers` reading `tokenizer.json` or the
//!   tokenizer a GGUF file carries (assembled in `gguf_tokenizer`, private).
//! - [`chat`]: [`Message`] and chat templates rendered with `minijinja` as transformers does.
//! - [`bert`]: a BERT-family encoder and [`SentenceEncoder`] (sentence-transformers' pooling and
//!   normalization).
//! - `encode_jit` (private): [`SentenceEncoder::encode_ids`] captured per input shape and
//!   replayed through the tensor layer's `Jit`.
//! - [`decoder`]: a GPT-2 / LLaMA decoder with a KV cache, loaded from Hugging Face directories
//!   or GGUF, and [`Decoder::generate`] with a seeded [`Sampler`]; several [`Sequence`]s, each
//!   with its own cache, decoded together by [`Decoder::decode_batch`].
//!
//! The crate sits above `tinygrad-tensor` and uses nothing but its public API.

pub mod bert;
pub mod chat;
pub mod config;
pub mod decoder;
mod encode_jit;
pub mod error;
mod gguf_tokenizer;
pub mod tokenizer;
pub mod weights;

pub use bert::{Bert, BertConfig, Pooling, SentenceEncoder, cosine_similarity};
pub use chat::Message;
pub use config::JsonConfig;
pub use decoder::{
    Arch, Decoder, DecoderConfig, Generation, Sampler, SamplingOptions, Sequence, Slots,
};
pub use error::{ModelError, Result};
pub use tokenizer::{TextStream, Tokenizer};
pub use weights::Weights;
