//! A GGUF file's own tokenizer: the vocabulary, merges, scores, token types and special token
//! ids that llama.cpp's converters store as `tokenizer.ggml.*` metadata, assembled into a
//! `tokenizer.json` for Hugging Face's `tokenizers` crate — the tokenizer transformers builds from
//! the same file (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`), so the ids are
//! transformers'.
//!
//! - `tokenizer.ggml.model = "gpt2"`: byte-level BPE from the file's merges; the text is split as
//!   `tokenizer.ggml.pre` names (LLaMA 3, Qwen2, GPT-4o and their kin have regexes of their own;
//!   any other name keeps GPT-2's). Tokens spelled outside the byte alphabet are respelled in it.
//! - `tokenizer.ggml.model = "llama"`: SentencePiece as BPE with byte fallback (`▁` for spaces, a
//!   `▁` prepended to the text), merges from the file or rebuilt from the scores; Gemma's files
//!   (`general.architecture` `gemma*`) take Gemma's normalizer and splitting, with merges in the
//!   file's token order.
//! - Tokens of type CONTROL (3) are special tokens, matched whole in the text; USER_DEFINED (4)
//!   are added tokens (matched whole, not special). BOS/EOS are added as
//!   `tokenizer.ggml.add_bos_token`/`add_eos_token` say (BOS by default for `llama` files).

use indexmap::IndexMap;
use serde_json::{Value, json};
use tinygrad_tensor::nn::gguf::GgufValue;

use crate::error::{ModelError, Result};

/// Token type CONTROL (`llama_token_type`): a special token.
const CONTROL: i64 = 3;
/// Token type USER_DEFINED: an added token that is not special.
const USER_DEFINED: i64 = 4;

/// Splitting regexes of byte-level vocabularies, by `tokenizer.ggml.pre` (transformers'
/// `GGUF_PRE_TOKENIZER_SPLITS`, from llama.cpp's pre-tokenizer types). Other names split as
/// GPT-2 does (the `ByteLevel` pre-tokenizer's own regex).
fn pre_split(pre: &str) -> Option<&'static str> {
    const LLAMA3: &str = concat!(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    );
    const QWEN2: &str = concat!(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}",
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    );
    const TEKKEN: &str = concat!(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
        r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    );
    const GPT4O: &str = concat!(
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    );
    Some(match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" | "dbrx" | "smaug-bpe" => LLAMA3,
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" => QWEN2,
        "tekken" => TEKKEN,
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => GPT4O,
        _ => return None,
    })
}

/// GPT-2's byte-to-character table: printable bytes stand for themselves, the others for
/// characters from U+0100 on (in byte order).
fn byte_alphabet() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for (b, slot) in table.iter_mut().enumerate() {
        let printable = (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
        let code = if printable {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        *slot = char::from_u32(code).expect("U+0000..U+0143 are characters");
    }
    table
}

/// The metadata a tokenizer is built from, with errors naming the file and key.
struct Meta<'a> {
    meta: &'a IndexMap<String, GgufValue>,
    path: &'a str,
}

impl Meta<'_> {
    fn error(&self, key: &str, message: impl Into<String>) -> ModelError {
        ModelError::Config {
            path: self.path.to_string(),
            field: key.to_string(),
            message: message.into(),
        }
    }

    fn array(&self, key: &str) -> Result<Option<&[GgufValue]>> {
        match self.meta.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_array()
                .map(Some)
                .ok_or_else(|| self.error(key, "expected an array")),
        }
    }

    fn strings(&self, key: &str) -> Result<Option<Vec<&str>>> {
        let Some(a) = self.array(key)? else {
            return Ok(None);
        };
        a.iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str()
                    .ok_or_else(|| self.error(key, format!("entry {i}: expected a string")))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    fn str(&self, key: &str) -> Result<Option<&str>> {
        match self.meta.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(Some)
                .ok_or_else(|| self.error(key, "expected a string")),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>> {
        match self.meta.get(key) {
            None => Ok(None),
            Some(GgufValue::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.error(key, "expected a bool")),
        }
    }

    /// A token id key: `None` when absent; an error when it is not an id of the vocabulary.
    fn token_id(&self, key: &str, vocab: usize) -> Result<Option<usize>> {
        let Some(v) = self.meta.get(key) else {
            return Ok(None);
        };
        match v.as_u64() {
            Some(id) if (id as usize) < vocab => Ok(Some(id as usize)),
            _ => Err(self.error(
                key,
                format!("{v:?} is not a token id of the {vocab}-token vocabulary"),
            )),
        }
    }
}

/// The `tokenizer.json` (as JSON) and the chat template of a GGUF file's metadata.
///
/// # Errors
/// A missing vocabulary or tokenizer kind, a kind other than `gpt2` or `llama`, a byte-level
/// vocabulary without merges, a merge that is not two tokens, a token type, score or special
/// token id that does not fit the vocabulary: a [`ModelError::Config`] naming the file and key.
pub(crate) fn tokenizer_json(meta: &IndexMap<String, GgufValue>, path: &str) -> Result<Value> {
    let m = Meta { meta, path };
    let kind_key = "tokenizer.ggml.model";
    let kind = m
        .str(kind_key)?
        .ok_or_else(|| m.error(kind_key, "missing: the file carries no tokenizer"))?;
    let tokens_key = "tokenizer.ggml.tokens";
    let tokens = m
        .strings(tokens_key)?
        .filter(|t| !t.is_empty())
        .ok_or_else(|| m.error(tokens_key, "missing or empty: the vocabulary"))?;
    let n = tokens.len();
    let types_key = "tokenizer.ggml.token_type";
    let types: Vec<i64> = match m.array(types_key)? {
        None => vec![1; n],
        Some(a) if a.len() == n => a
            .iter()
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| m.error(types_key, "expected integers"))
            })
            .collect::<Result<_>>()?,
        Some(a) => {
            return Err(m.error(
                types_key,
                format!("{} entries for a vocabulary of {n} tokens", a.len()),
            ));
        }
    };
    let arch = m.str("general.architecture")?.unwrap_or("");
    let add_bos = m
        .bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(kind == "llama");
    let add_eos = m.bool("tokenizer.ggml.add_eos_token")?.unwrap_or(false);
    let bos = m.token_id("tokenizer.ggml.bos_token_id", n)?;
    let eos = m.token_id("tokenizer.ggml.eos_token_id", n)?;
    let mut tokenizer = match kind {
        "gpt2" => byte_level(&m, &tokens)?,
        "llama" if arch.starts_with("gemma") => gemma(&m, &tokens)?,
        "llama" => sentencepiece(&m, &tokens)?,
        other => {
            return Err(ModelError::Unsupported {
                path: path.to_string(),
                message: format!(
                    "{kind_key} = {other:?}: this tokenizer kind is not supported (expected \
                     \"gpt2\" or \"llama\")"
                ),
            });
        }
    };
    // Special tokens: the control tokens (in a byte-level vocabulary, only those spelled in its
    // alphabet: another is a converter's mislabel), BOS/EOS/UNK/PAD, and the SentencePiece
    // defaults; user-defined tokens are added, not special.
    let alphabet: Option<std::collections::HashSet<char>> =
        (kind == "gpt2").then(|| byte_alphabet().into_iter().collect());
    let spelled = |t: &str| {
        alphabet
            .as_ref()
            .is_none_or(|a| t.chars().all(|c| a.contains(&c)))
    };
    let mut special = vec![false; n];
    for (i, (t, ty)) in tokens.iter().zip(&types).enumerate() {
        special[i] = *ty == CONTROL && spelled(t);
    }
    for key in [
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.padding_token_id",
    ] {
        if let Some(id) = m.token_id(key, n)? {
            special[id] = true;
        }
    }
    // (a user-defined token only where the vocabulary spells it as the file does: Gemma's
    // whitespace tokens are respelled with `▁`, and transformers skips them there too)
    let spelled_in_vocab = |t: &str| tokenizer["model"]["vocab"].get(t).is_some();
    let mut added = Vec::new();
    for (i, (t, ty)) in tokens.iter().zip(&types).enumerate() {
        if special[i] || (*ty == USER_DEFINED && spelled_in_vocab(t)) {
            added.push(json!({
                "id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                "normalized": false, "special": special[i],
            }));
        }
    }
    tokenizer["added_tokens"] = Value::Array(added);
    // BOS/EOS around the text, as transformers' `update_post_processor`
    let piece = |id: usize| json!({"SpecialToken": {"id": tokens[id], "type_id": 0}});
    let mut single = Vec::new();
    let mut specials = serde_json::Map::new();
    let mut with = |id: Option<usize>, on: bool, single: &mut Vec<Value>| {
        if let Some(id) = id.filter(|_| on) {
            single.push(piece(id));
            specials.insert(
                tokens[id].to_string(),
                json!({"id": tokens[id], "ids": [id], "tokens": [tokens[id]]}),
            );
        }
    };
    with(bos, add_bos, &mut single);
    single.push(json!({"Sequence": {"id": "A", "type_id": 0}}));
    with(eos, add_eos, &mut single);
    tokenizer["post_processor"] = json!({
        "type": "TemplateProcessing",
        "single": single,
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": specials,
    });
    tokenizer["version"] = json!("1.0");
    tokenizer["truncation"] = Value::Null;
    tokenizer["padding"] = Value::Null;
    Ok(tokenizer)
}

/// The merges of `tokenizer.ggml.merges` (`"left right"` strings), if the file has them.
fn file_merges(m: &Meta<'_>) -> Result<Option<Vec<Value>>> {
    let key = "tokenizer.ggml.merges";
    let Some(merges) = m.strings(key)? else {
        return Ok(None);
    };
    merges
        .iter()
        .enumerate()
        .map(|(i, s)| match s.split_once(' ') {
            Some((l, r)) if !l.is_empty() && !r.is_empty() && !r.contains(' ') => Ok(json!([l, r])),
            _ => Err(m.error(key, format!("entry {i} ({s:?}) is not two tokens"))),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// The vocabulary as a JSON object (a token listed twice keeps its last id, as a Python dict).
fn vocab_object(tokens: impl Iterator<Item = (String, usize)>) -> Value {
    let mut vocab = serde_json::Map::new();
    for (t, i) in tokens {
        vocab.insert(t, json!(i));
    }
    Value::Object(vocab)
}

/// `tokenizer.ggml.model = "gpt2"`.
fn byte_level(m: &Meta<'_>, tokens: &[&str]) -> Result<Value> {
    let merges = file_merges(m)?.ok_or_else(|| {
        m.error(
            "tokenizer.ggml.merges",
            "missing: a byte-level BPE vocabulary (gpt2) needs its merges",
        )
    })?;
    let table = byte_alphabet();
    let alphabet: std::collections::HashSet<char> = table.iter().copied().collect();
    let vocab = vocab_object(tokens.iter().enumerate().map(|(i, t)| {
        let t = if t.chars().all(|c| alphabet.contains(&c)) {
            t.to_string()
        } else {
            t.bytes().map(|b| table[b as usize]).collect()
        };
        (t, i)
    }));
    let byte_level = |regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": regex});
    let pre_tokenizer = match m.str("tokenizer.ggml.pre")?.and_then(pre_split) {
        Some(split) => json!({
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": false},
                byte_level(false),
            ],
        }),
        None => byte_level(true),
    };
    Ok(json!({
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
            "ignore_merges": false, "vocab": vocab, "merges": merges,
        },
    }))
}

/// The scores of `tokenizer.ggml.scores` (one per token).
fn scores(m: &Meta<'_>, n: usize) -> Result<Vec<f64>> {
    let key = "tokenizer.ggml.scores";
    let a = m.array(key)?.ok_or_else(|| {
        m.error(
            key,
            "missing: a SentencePiece vocabulary without merges needs its scores",
        )
    })?;
    if a.len() != n {
        return Err(m.error(key, format!("{} scores for {n} tokens", a.len())));
    }
    a.iter()
        .map(|v| v.as_f64().ok_or_else(|| m.error(key, "expected floats")))
        .collect()
}

/// Merges rebuilt from a vocabulary (transformers' `generate_merges`): every split of a token
/// into two tokens, ordered by `order` (best first: highest) and then by the lengths of the
/// halves; splits of one token by the halves' ids.
fn derived_merges(tokens: &[&str], order: &IndexMap<&str, f64>) -> Vec<Value> {
    let mut ids: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, t) in tokens.iter().enumerate() {
        ids.insert(t, i);
    }
    let mut merges: Vec<(&str, &str, f64)> = Vec::new();
    for (&token, &score) in order {
        let mut local = Vec::new();
        for (cut, _) in token.char_indices().skip(1) {
            let (l, r) = token.split_at(cut);
            if let (Some(&li), Some(&ri)) = (ids.get(l), ids.get(r)) {
                local.push((l, r, score, li, ri));
            }
        }
        local.sort_by_key(|&(_, _, _, li, ri)| (li, ri));
        merges.extend(local.into_iter().map(|(l, r, s, _, _)| (l, r, s)));
    }
    // descending and stable, as Python's `sorted(..., reverse=True)`
    let key = |&(l, r, s): &(&str, &str, f64)| (s, l.chars().count(), r.chars().count());
    merges.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        kb.0.total_cmp(&ka.0)
            .then(kb.1.cmp(&ka.1))
            .then(kb.2.cmp(&ka.2))
    });
    merges.into_iter().map(|(l, r, _)| json!([l, r])).collect()
}

/// A SentencePiece BPE model: the file's merges, or merges rebuilt with `order`.
fn sentencepiece_model<'t>(
    m: &Meta<'_>,
    tokens: &[&'t str],
    order: impl FnOnce() -> Result<IndexMap<&'t str, f64>>,
    unk: Option<&str>,
) -> Result<Value> {
    let merges = match file_merges(m)? {
        Some(merges) => merges,
        None => derived_merges(tokens, &order()?),
    };
    Ok(json!({
        "type": "BPE", "dropout": null, "unk_token": unk, "continuing_subword_prefix": null,
        "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true,
        "ignore_merges": false,
        "vocab": vocab_object(tokens.iter().enumerate().map(|(i, t)| (t.to_string(), i))),
        "merges": merges,
    }))
}

/// `tokenizer.ggml.model = "llama"` (transformers' `LlamaTokenizer`).
fn sentencepiece(m: &Meta<'_>, tokens: &[&str]) -> Result<Value> {
    let order = || {
        let s = scores(m, tokens.len())?;
        Ok(tokens.iter().copied().zip(s).collect())
    };
    Ok(json!({
        "normalizer": null,
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u{2581}", "prepend_scheme": "first", "split": false},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0},
        ]},
        "model": sentencepiece_model(m, tokens, order, None)?,
    }))
}

/// Gemma's SentencePiece vocabulary (transformers' `GemmaTokenizer`): tokens of two or more
/// spaces are stored as spaces and looked up as `▁`s; merges come from the tokens' order in the
/// file (Gemma's scores do not follow its merge order).
fn gemma(m: &Meta<'_>, tokens: &[&str]) -> Result<Value> {
    let respelled: Vec<String> = tokens
        .iter()
        .map(|t| {
            if t.contains(' ') && t.trim().is_empty() {
                "\u{2581}".repeat(t.chars().count())
            } else {
                t.to_string()
            }
        })
        .collect();
    let refs: Vec<&str> = respelled.iter().map(String::as_str).collect();
    let order = || {
        let mut o = IndexMap::new();
        for (i, t) in refs.iter().enumerate() {
            o.insert(*t, -(i as f64));
        }
        Ok(o)
    };
    Ok(json!({
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
        ]},
        "model": sentencepiece_model(m, &refs, order, Some("<unk>"))?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_alphabet_is_gpt2s() {
        // (the characters transformers' `bytes_to_unicode` gives these bytes)
        let t = byte_alphabet();
        assert_eq!((t[b'a' as usize], t[b' ' as usize], t[0]), ('a', 'Ġ', 'Ā'));
        assert_eq!((t[b'\n' as usize], t[0xad]), ('Ċ', 'Ń'));
        let distinct: std::collections::HashSet<char> = t.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }

    #[test]
    fn merges_are_derived_best_first() {
        // transformers' generate_merges on this vocabulary with these scores gives
        // [("a", "b"), ("ab", "c"), ("a", "bc"), ("b", "c")]
        let tokens = ["a", "b", "c", "ab", "bc", "abc"];
        let scores = [0.0, 0.0, 0.0, -1.0, -3.0, -2.0];
        let order: IndexMap<&str, f64> = tokens.iter().copied().zip(scores).collect();
        let got = derived_merges(&tokens, &order);
        assert_eq!(
            got,
            vec![
                json!(["a", "b"]),
                json!(["ab", "c"]),
                json!(["a", "bc"]),
                json!(["b", "c"])
            ]
        );
    }
}
