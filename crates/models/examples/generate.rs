//! Text generation with a GPT-2 or LLaMA-family model: a Hugging Face directory (`config.json`,
//! safetensors, `tokenizer.json`) or a GGUF file, whose own tokenizer and chat template are used
//! (or `--tokenizer tokenizer.json`, or prompt token ids with `--tokens`). Streams the text as it
//! is generated and prints tokens/s; `--chat` answers the prompt as a user message through the
//! model's chat template.
//!
//! `cargo run --release --example generate -- MODEL "prompt" [--chat] [--max-tokens N]
//! [--temperature T] [--top-k K] [--top-p P] [--seed S] [--tokenizer FILE] [--tokens 1,2,3]`

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;

mod common;

use tinygrad_models::{Decoder, Message, SamplingOptions, Tokenizer};
use tinygrad_tensor::{default_device, environment};

/// Generates text with a GPT-2 or LLaMA-family model (a Hugging Face directory or a GGUF file).
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {
    /// The model: a Hugging Face directory or a `.gguf` file.
    model: PathBuf,
    /// The prompt (with `--chat`: the user's message).
    #[arg(default_value = "")]
    prompt: String,
    /// Answer the prompt through the model's chat template (a user message).
    #[arg(long)]
    chat: bool,
    /// New tokens at most.
    #[arg(long, default_value_t = 32)]
    max_tokens: usize,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Sample among the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Sample among the most likely tokens whose probabilities sum to P.
    #[arg(long, default_value_t = 1.0)]
    top_p: f64,
    /// The sampler's seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A `tokenizer.json` to use instead of the model's own tokenizer.
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// The prompt as token ids (`1,2,3`), without a tokenizer.
    #[arg(long, value_delimiter = ',')]
    tokens: Option<Vec<u32>>,
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(1)
}

/// The tokenizer: `--tokenizer`, else `tokenizer.json` next to (or in) the model, else the GGUF
/// file's own; `None` when there is none (then `--tokens` is needed).
fn find_tokenizer(model: &Path, given: Option<PathBuf>) -> Option<Tokenizer> {
    let json = given.or_else(|| {
        let f = if model.is_dir() {
            model.join("tokenizer.json")
        } else {
            model.with_file_name("tokenizer.json")
        };
        f.is_file().then_some(f)
    });
    if let Some(f) = json {
        return Some(Tokenizer::from_file(&f).unwrap_or_else(|e| fail(e)));
    }
    if model.is_file() {
        return match Tokenizer::from_gguf(model) {
            Ok(t) => Some(t),
            // a GGUF without a tokenizer: ids only
            Err(tinygrad_models::ModelError::Config { field, .. })
                if field == "tokenizer.ggml.model" =>
            {
                None
            }
            Err(e) => fail(e),
        };
    }
    None
}

fn main() {
    let args = Args::parse();
    let opts = SamplingOptions {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    };
    let device = default_device();
    let t0 = Instant::now();
    let mut m = common::with_spinner(
        &format!("loading {} onto {device}", args.model.display()),
        || Decoder::load(&args.model, &device),
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
    let tokenizer = find_tokenizer(&args.model, args.tokenizer.clone());
    if args.chat {
        let Some(t) = &tokenizer else {
            fail("--chat needs the model's tokenizer (and its chat template)")
        };
        let messages = [Message::new("user", args.prompt.clone())];
        let (_, generation) = m
            .chat(t, &messages, args.max_tokens, &opts, &mut |text| {
                print!("{text}");
                let _ = std::io::stdout().flush();
                true
            })
            .unwrap_or_else(|e| fail(e));
        println!();
        report(&generation, None);
        return;
    }
    let prompt = match (&args.tokens, &tokenizer) {
        (Some(ids), _) => ids.clone(),
        (None, Some(t)) => t.encode(&args.prompt, true).unwrap_or_else(|e| fail(e)),
        (None, None) => fail(
            "the model has no tokenizer (no tokenizer.json next to it, none in the GGUF \
             file): pass --tokenizer FILE or --tokens IDS",
        ),
    };
    let eos = m.config.eos_token_id;
    print!("{}", args.prompt);
    let mut stream = tokenizer.as_ref().map(|t| t.stream(true));
    let generation = m
        .generate(&prompt, args.max_tokens, &opts, eos, &mut |tok| {
            match &mut stream {
                Some(s) => print!("{}", s.push(tok).unwrap_or_else(|e| fail(e))),
                None => print!(" {tok}"),
            }
            let _ = std::io::stdout().flush();
            true
        })
        .unwrap_or_else(|e| fail(e));
    println!();
    report(&generation, Some(prompt.len()));
}

fn report(g: &tinygrad_models::Generation, prompt: Option<usize>) {
    eprintln!(
        "{} tokens; first after {:.1} ms{}, then {:.1} tokens/s",
        g.tokens.len(),
        g.first_token_secs * 1e3,
        prompt.map_or(String::new(), |n| format!(" (prompt of {n} tokens)")),
        g.decode_tokens_per_sec()
    );
}
