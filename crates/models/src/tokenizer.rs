//! Text to token ids and back: Hugging Face's `tokenizers` crate (pure Rust: its `fancy-regex`
//! feature instead of the C oniguruma) reading a model directory's `tokenizer.json`, or the
//! tokenizer a GGUF file carries in its metadata (see `gguf_tokenizer.rs`), with its chat
//! template (see [`crate::chat`]).

use std::path::Path;

use indexmap::IndexMap;
use tinygrad_tensor::nn::gguf::{GgufValue, gguf_metadata};

use crate::chat::Message;
use crate::error::{ModelError, Result};

/// A `tokenizer.json` tokenizer. Padding and truncation configured in the file are turned off:
/// the models pad batches themselves (with an attention mask) and refuse inputs longer than their
/// context rather than cutting them silently.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: String,
    pad_id: Option<u32>,
    /// The chat template (Jinja), when the file has one.
    chat_template: Option<String>,
    /// The BOS and EOS tokens' text, when the file names them.
    bos: Option<String>,
    eos: Option<String>,
    /// One past the largest id (see [`Tokenizer::vocab_size`]).
    id_space: usize,
}

impl Tokenizer {
    /// Reads `tokenizer.json`, and the chat template and BOS/EOS tokens of the
    /// `tokenizer_config.json` next to it when there is one (a Hugging Face directory).
    ///
    /// # Errors
    /// If the file can't be read or does not parse as a tokenizer, or the
    /// `tokenizer_config.json` next to it is not JSON or has a chat template or BOS/EOS token of
    /// the wrong type.
    pub fn from_file(path: &Path) -> Result<Tokenizer> {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ModelError::Io {
            path: name.clone(),
            message: e.to_string(),
        })?;
        let mut t = Tokenizer::from_bytes(&bytes, &name)?;
        let config = path.with_file_name("tokenizer_config.json");
        if config.is_file() {
            t.read_config(&config)?;
        }
        Ok(t)
    }

    /// Takes the chat template and the BOS/EOS tokens of a Hugging Face `tokenizer_config.json`
    /// (`chat_template` a string, or a list of named templates of which `default` is taken;
    /// the tokens as strings or `{"content": ...}` objects).
    fn read_config(&mut self, path: &Path) -> Result<()> {
        let c = crate::config::JsonConfig::read(path)?;
        let token = |field: &str| -> Result<Option<String>> {
            match c.get(field) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(v) => v
                    .as_str()
                    .or_else(|| v.get("content").and_then(|x| x.as_str()))
                    .map(|s| Some(s.to_string()))
                    .ok_or_else(|| c.error(field, format!("expected a token, got {v}"))),
            }
        };
        self.bos = token("bos_token")?;
        self.eos = token("eos_token")?;
        self.chat_template = match c.get("chat_template") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(t)) => Some(t.clone()),
            Some(serde_json::Value::Array(named)) => named
                .iter()
                .find(|n| n.get("name").and_then(|x| x.as_str()) == Some("default"))
                .and_then(|n| n.get("template").and_then(|x| x.as_str()))
                .map(|t| Some(t.to_string()))
                .ok_or_else(|| c.error("chat_template", "no template named \"default\""))?,
            Some(v) => {
                return Err(c.error(
                    "chat_template",
                    format!("expected a string or a list of named templates, got {v}"),
                ));
            }
        };
        Ok(())
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
        let id_space = inner
            .get_vocab(true)
            .values()
            .max()
            .map_or(0, |&id| id as usize + 1);
        Ok(Tokenizer {
            inner,
            path: path.to_string(),
            pad_id,
            chat_template: None,
            bos: None,
            eos: None,
            id_space,
        })
    }

    /// The tokenizer a GGUF file carries (`tokenizer.ggml.*`: byte-level BPE or SentencePiece,
    /// as transformers builds it from the same file) and its chat template
    /// (`tokenizer.chat_template`). Reads the file's header only.
    ///
    /// # Errors
    /// If the file can't be read or is not GGUF, or as [`Tokenizer::from_gguf_metadata`].
    pub fn from_gguf(path: &Path) -> Result<Tokenizer> {
        let name = path.display().to_string();
        let meta = gguf_metadata(path).map_err(|e| ModelError::Config {
            path: name.clone(),
            field: String::new(),
            message: e.message,
        })?;
        Tokenizer::from_gguf_metadata(&meta, &name)
    }

    /// [`Tokenizer::from_gguf`] from metadata already read (errors name it `path`).
    ///
    /// # Errors
    /// If the metadata has no tokenizer or one of another kind than `gpt2` or `llama`, a
    /// byte-level vocabulary lacks its merges, or a key has a value of the wrong type or out of
    /// the vocabulary: an error naming the file and key.
    pub fn from_gguf_metadata(meta: &IndexMap<String, GgufValue>, path: &str) -> Result<Tokenizer> {
        let json = crate::gguf_tokenizer::tokenizer_json(meta, path)?;
        let bytes = serde_json::to_vec(&json).map_err(|e| ModelError::Tokenizer {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        let mut t = Tokenizer::from_bytes(&bytes, path)?;
        drop((json, bytes));
        // the JSON built on the way (hundreds of MB of small allocations for a vocabulary of
        // 262k tokens) goes back to the OS
        tinygrad_tensor::release_free_memory();
        let token = |key: &str| {
            let id = meta.get(key)?.as_u64()?;
            t.inner.id_to_token(u32::try_from(id).ok()?)
        };
        (t.bos, t.eos) = (
            token("tokenizer.ggml.bos_token_id"),
            token("tokenizer.ggml.eos_token_id"),
        );
        let key = "tokenizer.chat_template";
        t.chat_template = match meta.get(key) {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| ModelError::Config {
                        path: path.to_string(),
                        field: key.into(),
                        message: "expected a string".into(),
                    })?
                    .to_string(),
            ),
        };
        t.pad_id = meta
            .get("tokenizer.ggml.padding_token_id")
            .and_then(GgufValue::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .or(t.pad_id);
        Ok(t)
    }

    /// The chat template (Jinja), when the tokenizer's file has one.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// The BOS token's text, when the file names one.
    pub fn bos_token(&self) -> Option<&str> {
        self.bos.as_deref()
    }

    /// The EOS token's text, when the file names one (a chat model's end of turn).
    pub fn eos_token(&self) -> Option<&str> {
        self.eos.as_deref()
    }

    /// `messages` rendered with the chat template, as transformers' `apply_chat_template(...,
    /// tokenize=False)`; `add_generation_prompt` opens the assistant's turn.
    ///
    /// # Errors
    /// If the tokenizer has no chat template, or the template fails to parse or raises.
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self
            .chat_template
            .as_deref()
            .ok_or_else(|| self.error("no chat template (tokenizer.chat_template)"))?;
        crate::chat::render(
            template,
            messages,
            add_generation_prompt,
            self.bos.as_deref().unwrap_or(""),
            self.eos.as_deref().unwrap_or(""),
        )
        .map_err(|e| self.error(e))
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

    /// A decoder of generated ids into text as it completes: each [`TextStream::push`] returns
    /// the text the new id adds, holding back the bytes of a character that is not complete
    /// yet (a byte-level token may be a part of one), so what a program prints as it goes is
    /// exactly the decoded text.
    pub fn stream(&self, skip_special: bool) -> TextStream<'_> {
        TextStream {
            inner: self.inner.decode_stream(skip_special),
            tokenizer: self,
        }
    }

    /// The id of token `token`, if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The number of ids: one past the largest id of the vocabulary, added tokens included
    /// (every id `encode` returns is below it; a vocabulary that lists a token twice has fewer
    /// distinct tokens than ids).
    pub fn vocab_size(&self) -> usize {
        self.id_space
    }

    /// The id padding uses: the file's padding id if it sets one, else `[PAD]`'s, else 0.
    pub fn pad_id(&self) -> u32 {
        self.pad_id
            .or_else(|| self.token_to_id("[PAD]"))
            .or_else(|| self.token_to_id("<pad>"))
            .unwrap_or(0)
    }
}

/// Ids decoded into text as they come (see [`Tokenizer::stream`]).
pub struct TextStream<'a> {
    inner: tokenizers::DecodeStream<
        'a,
        tokenizers::ModelWrapper,
        tokenizers::NormalizerWrapper,
        tokenizers::PreTokenizerWrapper,
        tokenizers::PostProcessorWrapper,
        tokenizers::DecoderWrapper,
    >,
    tokenizer: &'a Tokenizer,
}

impl TextStream<'_> {
    /// The text `id` adds to what the stream returned so far (empty while a character is
    /// incomplete).
    ///
    /// # Errors
    /// If the id is outside the vocabulary or the decoder fails.
    pub fn push(&mut self, id: u32) -> Result<String> {
        self.inner
            .step(id)
            .map(Option::unwrap_or_default)
            .map_err(|e| self.tokenizer.error(format!("decoding id {id}: {e}")))
    }
}
