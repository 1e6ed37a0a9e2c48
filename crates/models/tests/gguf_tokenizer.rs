//! The tokenizer and chat template a GGUF file carries, against transformers' (`data/
//! smollm2-tokenizer.json`, written by `data/gen_gguf_tokenizer.py` with
//! `AutoTokenizer.from_pretrained(dir, gguf_file=...)` from SmolLM2-135M-Instruct's real GGUF;
//! `data/smollm2-vocab.gguf` is that file's `tokenizer.*` metadata without the tensors): the ids
//! of every test text with and without the special tokens, their decoding, and the chat
//! template's renderings. Then the metadata broken one key at a time: each an error naming the
//! file and key.

use std::path::PathBuf;

use indexmap::IndexMap;
use serde_json::Value;
use tinygrad_models::{Message, Tokenizer};
use tinygrad_tensor::nn::gguf::{GgufValue, gguf_metadata};

mod tokenizer_cases;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn reference() -> Value {
    let text = std::fs::read_to_string(data("smollm2-tokenizer.json")).expect("the reference");
    serde_json::from_str(&text).expect("the reference parses")
}

#[test]
fn smollm2_ids_and_texts_equal_transformers() {
    let r = reference();
    let t = Tokenizer::from_gguf(&data("smollm2-vocab.gguf")).unwrap();
    assert_eq!(t.bos_token(), r["bos_token"].as_str());
    assert_eq!(t.eos_token(), r["eos_token"].as_str());
    let n = tokenizer_cases::check_cases(&t, &r);
    println!("{n} texts: ids and decodings equal transformers'");
}

#[test]
fn smollm2_chat_template_renders_as_transformers() {
    let r = reference();
    let t = Tokenizer::from_gguf(&data("smollm2-vocab.gguf")).unwrap();
    let chats = r["chats"].as_array().unwrap();
    for chat in chats {
        let messages = tokenizer_cases::messages(&chat["messages"]);
        let generation_prompt = chat["add_generation_prompt"].as_bool().unwrap();
        assert_eq!(
            t.apply_chat_template(&messages, generation_prompt).unwrap(),
            chat["text"].as_str().unwrap(),
            "{messages:?}, add_generation_prompt {generation_prompt}"
        );
    }
}

/// The vocabulary-only file's metadata with `change` applied, loaded: the error's text.
fn broken(change: impl FnOnce(&mut IndexMap<String, GgufValue>)) -> String {
    let mut meta = gguf_metadata(data("smollm2-vocab.gguf")).unwrap();
    change(&mut meta);
    match Tokenizer::from_gguf_metadata(&meta, "model.gguf") {
        Ok(_) => panic!("a broken tokenizer loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn broken_tokenizer_metadata_is_an_error_naming_the_key() {
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no merges",
            broken(|m| {
                m.shift_remove("tokenizer.ggml.merges");
            }),
            "tokenizer.ggml.merges",
        ),
        (
            "no tokenizer",
            broken(|m| {
                m.shift_remove("tokenizer.ggml.model");
            }),
            "tokenizer.ggml.model",
        ),
        (
            "unknown kind",
            broken(|m| {
                m.insert(
                    "tokenizer.ggml.model".into(),
                    GgufValue::String("rwkv".into()),
                );
            }),
            "\"rwkv\"",
        ),
        (
            "no vocabulary",
            broken(|m| {
                m.insert("tokenizer.ggml.tokens".into(), GgufValue::Array(vec![]));
            }),
            "tokenizer.ggml.tokens",
        ),
        (
            "a token that is not a string",
            broken(|m| {
                if let Some(GgufValue::Array(a)) = m.get_mut("tokenizer.ggml.tokens") {
                    a[5] = GgufValue::U32(5);
                }
            }),
            "entry 5",
        ),
        (
            "a merge of one token",
            broken(|m| {
                if let Some(GgufValue::Array(a)) = m.get_mut("tokenizer.ggml.merges") {
                    a[3] = GgufValue::String("abc".into());
                }
            }),
            "entry 3",
        ),
        (
            "token types of another length",
            broken(|m| {
                if let Some(GgufValue::Array(a)) = m.get_mut("tokenizer.ggml.token_type") {
                    a.pop();
                }
            }),
            "tokenizer.ggml.token_type",
        ),
        (
            "an EOS id outside the vocabulary",
            broken(|m| {
                m.insert(
                    "tokenizer.ggml.eos_token_id".into(),
                    GgufValue::U32(1 << 20),
                );
            }),
            "tokenizer.ggml.eos_token_id",
        ),
        (
            "a chat template that is not a string",
            broken(|m| {
                m.insert("tokenizer.chat_template".into(), GgufValue::U8(1));
            }),
            "tokenizer.chat_template",
        ),
    ];
    for (what, e, needle) in cases {
        assert!(
            e.contains("model.gguf") && e.contains(needle),
            "{what}: {e:?} should name the file and {needle}"
        );
    }
    // a template that fails to render is an error when it is rendered
    let mut meta = gguf_metadata(data("smollm2-vocab.gguf")).unwrap();
    meta.insert(
        "tokenizer.chat_template".into(),
        GgufValue::String("{{ raise_exception('only user messages') }}".into()),
    );
    let t = Tokenizer::from_gguf_metadata(&meta, "model.gguf").unwrap();
    let e = t
        .apply_chat_template(&[Message::new("system", "x")], true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("only user messages") && e.contains("model.gguf"),
        "{e}"
    );
    // a file that is not GGUF
    let e = Tokenizer::from_gguf(&data("smollm2-tokenizer.json"))
        .err()
        .expect("a JSON file is not GGUF")
        .to_string();
    assert!(
        e.contains("smollm2-tokenizer.json") && e.contains("GGUF"),
        "{e}"
    );
}

/// A vocabulary that lists a token twice (the later id wins, as in transformers' dict) has fewer
/// distinct tokens than ids: `vocab_size` is the id space, so every id `encode` returns is below
/// it (found by the `gguf_tokenizer` fuzz target: id 10 of a "9-token" vocabulary).
#[test]
fn a_token_listed_twice_keeps_every_id_below_vocab_size() {
    let mut meta = IndexMap::new();
    let s = |v: &str| GgufValue::String(v.into());
    meta.insert("tokenizer.ggml.model".to_string(), s("llama"));
    let tokens = ["<unk>", "<s>", "</s>", "\u{2581}", "a", "b", "ab", "x", "b"];
    meta.insert(
        "tokenizer.ggml.tokens".to_string(),
        GgufValue::Array(tokens.iter().map(|t| s(t)).collect()),
    );
    meta.insert(
        "tokenizer.ggml.scores".to_string(),
        GgufValue::Array(
            (0..tokens.len())
                .map(|i| GgufValue::F32(-(i as f32)))
                .collect(),
        ),
    );
    let t = Tokenizer::from_gguf_metadata(&meta, "dup.gguf").unwrap();
    assert_eq!(t.vocab_size(), tokens.len());
    let ids = t.encode("b ab", true).unwrap();
    assert!(ids.contains(&8), "{ids:?}: the later id of b");
    assert!(
        ids.iter().all(|&id| (id as usize) < t.vocab_size()),
        "{ids:?}"
    );
}

/// A Hugging Face directory's `tokenizer_config.json` brings its chat template and BOS/EOS
/// tokens (here SmolLM2's template, taken from its GGUF file, rendered as transformers renders
/// it); a template of the wrong type is an error naming the field.
#[test]
fn a_hugging_face_directory_brings_its_chat_template() {
    let dir = std::env::temp_dir().join(format!("tinygrad-hf-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokenizer_json = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "hi": 1}, "unk_token": "[UNK]"},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer_json.to_string()).unwrap();
    let meta = gguf_metadata(data("smollm2-vocab.gguf")).unwrap();
    let template = meta["tokenizer.chat_template"].as_str().unwrap();
    let config = serde_json::json!({
        "chat_template": template,
        "bos_token": {"content": "<|im_start|>", "special": true},
        "eos_token": "<|im_end|>",
    });
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).unwrap();
    let t = Tokenizer::from_file(&dir.join("tokenizer.json")).unwrap();
    assert_eq!(
        (t.bos_token(), t.eos_token()),
        (Some("<|im_start|>"), Some("<|im_end|>"))
    );
    assert_eq!(t.encode("hi", false).unwrap(), vec![1]);
    let r = reference();
    for chat in r["chats"].as_array().unwrap() {
        let messages = tokenizer_cases::messages(&chat["messages"]);
        let generation_prompt = chat["add_generation_prompt"].as_bool().unwrap();
        assert_eq!(
            t.apply_chat_template(&messages, generation_prompt).unwrap(),
            chat["text"].as_str().unwrap()
        );
    }
    std::fs::write(dir.join("tokenizer_config.json"), r#"{"chat_template": 5}"#).unwrap();
    let e = Tokenizer::from_file(&dir.join("tokenizer.json"))
        .err()
        .expect("a template that is a number")
        .to_string();
    assert!(
        e.contains("tokenizer_config.json") && e.contains("chat_template"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
