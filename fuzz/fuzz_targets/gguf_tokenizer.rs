//! A GGUF tokenizer assembled from fuzzed metadata (kind, pre-tokenizer, architecture, tokens,
//! token types, scores, merges, special ids, chat template), then text encoded and decoded and
//! the template rendered: an `Err` naming the key, or ids inside the vocabulary, never a panic,
//! a crash or a hang. The input is split at 0xFF bytes into: selectors, tokens (0x00-separated),
//! merges (0x00-separated), the chat template, the text.
#![no_main]

use indexmap::IndexMap;
use libfuzzer_sys::fuzz_target;
use tinygrad_models::{Message, Tokenizer};
use tinygrad_tensor::nn::gguf::GgufValue;

fn strings(bytes: &[u8]) -> Vec<GgufValue> {
    bytes
        .split(|&b| b == 0)
        .map(|s| GgufValue::String(String::from_utf8_lossy(s).into_owned()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|&b| b == 0xff);
    let sel = parts.next().unwrap_or_default();
    let byte = |i: usize| sel.get(i).copied().unwrap_or(0);
    let tokens = strings(parts.next().unwrap_or_default());
    let merges = strings(parts.next().unwrap_or_default());
    let template = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let text = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let n = tokens.len();
    let mut meta = IndexMap::new();
    let kind = ["gpt2", "llama", "rwkv"][byte(0) as usize % 3];
    meta.insert("tokenizer.ggml.model".to_string(), GgufValue::String(kind.into()));
    let arch = ["llama", "gemma3"][byte(1) as usize % 2];
    meta.insert("general.architecture".to_string(), GgufValue::String(arch.into()));
    let pre = ["default", "llama-bpe", "qwen2", "gpt-4o", "tekken"][byte(2) as usize % 5];
    meta.insert("tokenizer.ggml.pre".to_string(), GgufValue::String(pre.into()));
    meta.insert("tokenizer.ggml.tokens".to_string(), GgufValue::Array(tokens));
    if byte(3) & 1 == 1 {
        meta.insert("tokenizer.ggml.merges".to_string(), GgufValue::Array(merges));
    }
    // token types and scores from the selector bytes (cycled), sometimes of the wrong length
    let extra = usize::from(byte(3) & 2 == 2);
    let types = (0..n + extra)
        .map(|i| GgufValue::I32(i32::from(byte(8 + i % 8) % 6)))
        .collect();
    meta.insert("tokenizer.ggml.token_type".to_string(), GgufValue::Array(types));
    let scores = (0..n).map(|i| GgufValue::F32(-(i as f32) * f32::from(byte(4)))).collect();
    meta.insert("tokenizer.ggml.scores".to_string(), GgufValue::Array(scores));
    for (key, at) in [("bos", 5), ("eos", 6)] {
        meta.insert(
            format!("tokenizer.ggml.{key}_token_id"),
            GgufValue::U32(u32::from(byte(at))),
        );
    }
    meta.insert(
        "tokenizer.ggml.add_bos_token".to_string(),
        GgufValue::Bool(byte(7) & 1 == 1),
    );
    meta.insert("tokenizer.chat_template".to_string(), GgufValue::String(template));
    let Ok(t) = Tokenizer::from_gguf_metadata(&meta, "fuzz.gguf") else {
        return;
    };
    let vocab = t.vocab_size();
    if let Ok(ids) = t.encode(&text, true) {
        assert!(ids.iter().all(|&id| (id as usize) < vocab), "{ids:?} / {vocab}");
        let _ = t.decode(&ids, false);
        let mut stream = t.stream(true);
        for &id in &ids {
            let _ = stream.push(id);
        }
    }
    let messages = [Message::new("system", "s"), Message::new("user", text)];
    let _ = t.apply_chat_template(&messages, true);
});
