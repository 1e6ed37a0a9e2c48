//! What the tokenizer tests share: a reference's ids, and the check of a tokenizer against the
//! cases `data/gen_gguf_tokenizer.py` writes (transformers' ids of each text with and without
//! special tokens, and both decodings), and a reference chat's messages.

use serde_json::Value;
use tinygrad_models::{Message, Tokenizer};

/// The ids of a JSON array.
pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("an array of ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

/// The messages of a reference chat (`[{"role": .., "content": ..}, ..]`).
pub fn messages(v: &Value) -> Vec<Message> {
    v.as_array()
        .expect("an array of messages")
        .iter()
        .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect()
}

/// Checks `t` on every case of the reference `r` (and its vocabulary size); returns how many.
pub fn check_cases(t: &Tokenizer, r: &Value) -> usize {
    assert_eq!(t.vocab_size() as u64, r["vocab_size"].as_u64().unwrap());
    let cases = r["cases"].as_array().unwrap();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        assert_eq!(t.encode(text, true).unwrap(), want, "ids of {text:?}");
        assert_eq!(
            t.encode(text, false).unwrap(),
            ids(&case["ids_plain"]),
            "ids of {text:?} without special tokens"
        );
        assert_eq!(
            t.decode(&want, false).unwrap(),
            case["decoded"].as_str().unwrap(),
            "decoding {text:?}"
        );
        assert_eq!(
            t.decode(&want, true).unwrap(),
            case["decoded_skip_special"].as_str().unwrap(),
            "decoding {text:?} without special tokens"
        );
    }
    cases.len()
}
