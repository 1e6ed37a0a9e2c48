//! Text to token ids and back: Hugging Face's `tokenizers` crate (pure Rust: its `fancy-regex`
//! feature instead of the C oniguruma) reading a model directory's `tokenizer.json`.

use std::path::Path;

use crate::error::{ModelError, Result};

/// A `tokenizer.json` tokenizer. Padding and truncation configured in the file are turned off:
/// the models pad batches themselves (with an attention mask) and refuse inputs longer than their
/// context rather than cutting them silently.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: String,
    pad_id: Option<u32>,
}

impl Tokenizer {
    /// Reads `tokenizer.json`.
    ///
    /// # Errors
    /// If the file can't be read or does not parse as a tokenizer.
    pub fn from_file(path: &Path) -> Result<Tokenizer> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Io {
            path: name.clone(),
            message: e.to_string(),
        })?;
        Tokenizer::from_bytes(&bytes, &name)
    }

    /// Parses a `tokenizer.json` held in memory (errors name it `path`).
    ///
    /// # Errors
    /// If it does not parse as a tokenizer.
    pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Tokenizer> {
        let mut inner =
            tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| ModelError::Tokenizer {
                path: path.to_string(),
                message: e.to_string(),
            })?;
        let pad_id = inner.get_padding().map(|p| p.pad_id);
        inner.with_padding(None);
        inner
            .with_truncation(None)
            .map_err(|e| ModelError::Tokenizer {
                path: path.to_string(),
                message: e.to_string(),
            })?;
        Ok(Tokenizer {
            inner,
            path: path.to_string(),
            pad_id,
        })
    }

    fn error(&self, message: impl std::fmt::Display) -> ModelError {
        ModelError::Tokenizer {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    /// The token ids of `text`; with `special`, the special tokens the tokenizer's template adds
    /// (`[CLS] ... [SEP]` for BERT, a BOS token for LLaMA).
    ///
    /// # Errors
    /// If the tokenizer fails on the text.
    pub fn encode(&self, text: &str, special: bool) -> Result<Vec<u32>> {
        let enc = self
            .inner
            .encode(text, special)
            .map_err(|e| self.error(format!("encoding {text:?}: {e}")))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The text of `ids`, leaving special tokens out with `skip_special`.
    ///
    /// # Errors
    /// If an id is outside the vocabulary or the decoder fails.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        self.inner
            .decode(ids, skip_special)
            .map_err(|e| self.error(format!("decoding {ids:?}: {e}")))
    }

    /// The id of token `token`, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The vocabulary's size, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id padding uses: the file's padding id if it sets one, else `[PAD]`'s, else 0.
    pub fn pad_id(&self) -> u32 {
        self.pad_id
            .or_else(|| self.token_to_id("[PAD]"))
            .or_else(|| self.token_to_id("<pad>"))
            .unwrap_or(0)
    }
}
