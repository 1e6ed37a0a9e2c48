//! Text generation with a GPT-2 or LLaMA-family model: a Hugging Face directory (`config.json`,
//! safetensors, `tokenizer.json`) or a GGUF file (with `--tokenizer tokenizer.json`, or prompt
//! token ids with `--tokens`). Streams the tokens as they are chosen and prints tokens/s.
//!
//! `cargo run --release --example generate -- MODEL "prompt" --max-tokens N [--temperature T]
//! [--top-k K] [--top-p P] [--seed S] [--tokenizer FILE] [--tokens 1,2,3]` (any device: `DEV=`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

mod common;

use tinygrad_models::{Decoder, SamplingOptions, Tokenizer};
use tinygrad_tensor::default_device;

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

fn main() {
    let usage = "usage: generate MODEL \"prompt\" [--max-tokens N] [--temperature T] [--top-k K] \
                 [--top-p P] [--seed S] [--tokenizer FILE] [--tokens 1,2,3]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let (mut max_tokens, mut opts) = (32usize, SamplingOptions::default());
    let (mut tokenizer_path, mut token_ids) = (None::<PathBuf>, None::<Vec<u32>>);
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some(flag) = a.strip_prefix("--") {
            let value = args
                .get(i + 1)
                .unwrap_or_else(|| fail(format!("--{flag} needs a value\n{usage}")));
            macro_rules! parse {
                () => {
                    value
                        .parse()
                        .unwrap_or_else(|_| fail(format!("--{flag}: cannot parse {value:?}")))
                };
            }
            match flag {
                "max-tokens" => max_tokens = parse!(),
                "temperature" => opts.temperature = parse!(),
                "top-k" => opts.top_k = parse!(),
                "top-p" => opts.top_p = parse!(),
                "seed" => opts.seed = parse!(),
                "tokenizer" => tokenizer_path = Some(PathBuf::from(value)),
                "tokens" => {
                    token_ids = Some(
                        value
                            .split(',')
                            .map(|t| {
                                t.trim().parse().unwrap_or_else(|_| {
                                    fail(format!("--tokens: {t:?} is not a token id"))
                                })
                            })
                            .collect(),
                    )
                }
                _ => fail(format!("unknown option --{flag}\n{usage}")),
            }
            i += 2;
        } else {
            positional.push(a.clone());
            i += 1;
        }
    }
    let Some(model) = positional.first().map(PathBuf::from) else {
        fail(usage)
    };
    let prompt_text = positional.get(1).cloned().unwrap_or_default();
    let device = default_device();
    let t0 = Instant::now();
    let mut m = common::with_spinner(
        &format!("loading {} onto {device}", model.display()),
        || Decoder::load(&model, &device),
    )
    .unwrap_or_else(|e| fail(e));
    let c = &m.config;
    eprintln!(
        "loaded in {:.2} s: {:?}, {} layers, hidden {}, {} heads ({} kv), vocab {}, context {}",
        t0.elapsed().as_secs_f64(),
        c.arch,
        c.num_layers,
        c.hidden_size,
        c.num_heads,
        c.num_kv_heads,
        c.vocab_size,
        m.context()
    );
    let tok_file = tokenizer_path.or_else(|| {
        let f = if model.is_dir() {
            model.join("tokenizer.json")
        } else {
            model.with_file_name("tokenizer.json")
        };
        f.is_file().then_some(f)
    });
    let tokenizer = tok_file.map(|f| Tokenizer::from_file(&f).unwrap_or_else(|e| fail(e)));
    let prompt = match (&token_ids, &tokenizer) {
        (Some(ids), _) => ids.clone(),
        (None, Some(t)) => t.encode(&prompt_text, true).unwrap_or_else(|e| fail(e)),
        (None, None) => {
            fail("no tokenizer.json next to the model: pass --tokenizer FILE or --tokens IDS")
        }
    };
    let eos = m.config.eos_token_id;
    print!("{prompt_text}");
    let mut all = prompt.clone();
    let mut shown = tokenizer
        .as_ref()
        .map(|t| t.decode(&all, true).unwrap_or_default().len())
        .unwrap_or(0);
    let generation = m
        .generate(&prompt, max_tokens, &opts, eos, &mut |tok| {
            all.push(tok);
            match &tokenizer {
                // print what the new token adds to the decoded text (tokens may be parts of
                // characters: the text grows only once they complete)
                Some(t) => {
                    let text = t.decode(&all, true).unwrap_or_default();
                    if text.len() > shown && text.is_char_boundary(shown) {
                        print!("{}", &text[shown..]);
                        shown = text.len();
                    }
                }
                None => print!(" {tok}"),
            }
            let _ = std::io::stdout().flush();
            true
        })
        .unwrap_or_else(|e| fail(e));
    println!();
    eprintln!(
        "{} tokens; first after {:.1} ms (prompt of {} tokens), then {:.1} tokens/s",
        generation.tokens.len(),
        generation.first_token_secs * 1e3,
        prompt.len(),
        generation.decode_tokens_per_sec()
    );
}
