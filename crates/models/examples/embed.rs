//! Sentence embeddings with a sentence-transformers model directory (e.g. all-MiniLM-L6-v2 from
//! `scripts/fetch_minilm.sh`): prints each sentence's embedding (its first values and norm) and
//! the cosine similarities between the sentences.
//!
//! `cargo run --release --example embed -- DIR "sentence" ["sentence" ...]` (any device: `DEV=`).

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;

mod common;

use tinygrad_models::{SentenceEncoder, cosine_similarity};
use tinygrad_tensor::{default_device, environment};

/// Sentence embeddings with a sentence-transformers model directory: each sentence's embedding
/// (its first values and norm) and the cosine similarities between the sentences.
#[derive(Parser)]
#[command(after_help = environment::help())]
struct Args {
    /// The model directory (`config.json`, safetensors, `tokenizer.json`).
    dir: PathBuf,
    /// The sentences to embed.
    #[arg(required = true)]
    sentences: Vec<String>,
}

fn main() {
    let Args { dir, sentences } = Args::parse();
    let dir = dir.display().to_string();
    let device = default_device();
    let t0 = Instant::now();
    let loaded = common::with_spinner(&format!("loading {dir} onto {device}"), || {
        SentenceEncoder::load(&PathBuf::from(&dir), &device)
    });
    let enc = match loaded {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let c = &enc.bert.config;
    eprintln!(
        "loaded in {:.2} s: {} layers, hidden {}, {:?} pooling{}",
        t0.elapsed().as_secs_f64(),
        c.num_hidden_layers,
        c.hidden_size,
        enc.pooling,
        if enc.normalize { ", normalized" } else { "" }
    );
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let t1 = Instant::now();
    let emb = match enc.encode(&refs) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let secs = t1.elapsed().as_secs_f64();
    let dim = c.hidden_size;
    let v = emb.to_vec::<f32>();
    let rows: Vec<&[f32]> = v.chunks(dim).collect();
    for (s, r) in sentences.iter().zip(&rows) {
        let norm = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        let head: Vec<String> = r.iter().take(6).map(|x| format!("{x:+.4}")).collect();
        println!(
            "{s:?}\n  [{} ...] ({dim} values, norm {norm:.4})",
            head.join(", ")
        );
    }
    if rows.len() > 1 {
        println!("cosine similarities:");
        for (i, a) in rows.iter().enumerate() {
            let line: Vec<String> = rows
                .iter()
                .map(|b| format!("{:.4}", cosine_similarity(a, b)))
                .collect();
            println!("  {i}: {}", line.join("  "));
        }
    }
    eprintln!("encoded {} sentences in {:.1} ms", rows.len(), secs * 1e3);
}
