//! Rows of real quantized LLMs from GGUF files, as a user runs them (`Decoder::load` of the one
//! file, its default context), next to llama.cpp's `llama-bench -t <threads>` on the same file in
//! the same run (half of our runs before it, half after).
//!
//! The models (skipped, saying why, when the file is missing):
//! - SmolLM2-135M-Instruct Q4_1: `SMOLLM2_GGUF`, else `target/models/SmolLM2-135M-Instruct.Q4_1.gguf`
//!   (`scripts/fetch_smollm2.sh`);
//! - Gemma-3-270M Q4_K_M: `GEMMA3_GGUF`, else `target/models/gemma-3-270m-q4_k_m.gguf`
//!   (`scripts/fetch_gemma3.sh`).
//!
//! llama.cpp's `llama-bench`: `LLAMA_BENCH`, else `target/llama.cpp/bin/llama-bench`
//! (`scripts/build_llama_bench.sh` builds it from the source PyPI's `llama-cpp-python` sdist
//! vendors), else `llama-bench` on the `PATH`; `n/a` with the reason otherwise. Where that
//! `llama-bench` takes `--repack`, a second reference runs it with `--repack 0`: llama.cpp's
//! default repacks the weights at load into layouts of its CPU backend (on a CPU with AMX,
//! tiles multiplied with int8-quantized activations), `--repack 0` reads the file's blocks as
//! ours do (with its int8-quantized activations still).
//!
//! For each model three rows:
//! - `decode`: tokens/s of greedy decoding (Jit + symbolic KV length), 48 tokens after the first
//!   prompt of `crates/models/tests/data/<model>-greedy.json`; checked: the tokens equal
//!   transformers' greedy run recorded there. llama.cpp: `-p 0 -n 48` (its `tg48`).
//! - `prefill`: tokens/s of a 128-token prompt's forward (the KV cache emptied first) up to the
//!   last position's logits. llama.cpp: `-p 128 -n 0` (`pp128`).
//! - `ttft`: time to the first token of a warm model for a 16-token prompt (the same forward,
//!   the token picked), ms. llama.cpp: its `pp16` time.
//!
//! And `gguf_smollm2_batch8` ([`bench_batch`]): continuous batching's aggregate rate.
//!
//! Each note also gives the process's resident memory after the row's runs (`VmRSS`: this model,
//! plus what earlier rows left in the buffer pool) next to the file's size and the KV cache's.

use std::path::{Path, PathBuf};
use std::process::Command;

use tinygrad_models::{Decoder, SamplingOptions};

use super::*;

/// One of the real models.
#[derive(Clone, Copy)]
pub(super) enum Model {
    SmolLm2,
    Gemma3,
}

impl Model {
    fn label(self) -> &'static str {
        match self {
            Model::SmolLm2 => "SmolLM2-135M Q4_1 (GGUF)",
            Model::Gemma3 => "Gemma-3-270M Q4_K_M (GGUF)",
        }
    }

    /// The file, or why there is none.
    fn file(self) -> Result<PathBuf, String> {
        let (var, name, fetch) = match self {
            Model::SmolLm2 => (
                "SMOLLM2_GGUF",
                "SmolLM2-135M-Instruct.Q4_1.gguf",
                "fetch_smollm2.sh",
            ),
            Model::Gemma3 => ("GEMMA3_GGUF", "gemma-3-270m-q4_k_m.gguf", "fetch_gemma3.sh"),
        };
        let path = std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new("target/models").join(name));
        if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{} is not a file (set {var}, or bash scripts/{fetch})",
                path.display()
            ))
        }
    }

    /// transformers' greedy run on the file: the first prompt's ids and its 48 new tokens.
    fn reference(self) -> Result<(Vec<u32>, Vec<u32>), String> {
        let name = match self {
            Model::SmolLm2 => "smollm2-greedy.json",
            Model::Gemma3 => "gemma3-270m-greedy.json",
        };
        let path = Path::new("crates/models/tests/data").join(name);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let ids = |v: &serde_json::Value| -> Option<Vec<u32>> {
            v.as_array()?
                .iter()
                .map(|x| x.as_u64().map(|x| x as u32))
                .collect()
        };
        let case = &json["plain"][0];
        match (ids(&case["ids"]), ids(&case["new_tokens"])) {
            (Some(p), Some(t)) => Ok((p, t)),
            _ => Err(format!("{}: no plain[0].ids/new_tokens", path.display())),
        }
    }
}

/// What a row measures.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Phase {
    Decode,
    Prefill,
    FirstToken,
}

/// llama.cpp's `llama-bench`, or why there is none.
fn llama_bench() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("LLAMA_BENCH") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("LLAMA_BENCH={} is not a file", p.display()))
        };
    }
    let local = Path::new("target/llama.cpp/bin/llama-bench");
    if local.is_file() {
        return Ok(local.to_path_buf());
    }
    match Command::new("llama-bench").arg("--help").output() {
        Ok(_) => Ok(PathBuf::from("llama-bench")),
        Err(_) => Err(
            "no llama-bench (set LLAMA_BENCH, or bash scripts/build_llama_bench.sh)".to_string(),
        ),
    }
}

/// Whether this `llama-bench` takes `--repack` (llama.cpp builds whose CPU backend repacks
/// weights at load into layouts of its own: AMX tiles on CPUs with AMX, interleaved rows
/// elsewhere).
fn llama_bench_repacks() -> bool {
    llama_bench().is_ok_and(|exe| {
        Command::new(exe)
            .arg("--help")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--repack"))
    })
}

/// llama.cpp's median tokens/s for a prompt of `prompt` tokens (`generated` 0) or `generated`
/// tokens (`prompt` 0) on `file`, `reps` repetitions on `threads` threads; `repack: false`
/// passes `--repack 0` (the weights read as the file's blocks, as ours are).
fn llama_cpp_rate(
    file: &Path,
    prompt: usize,
    generated: usize,
    reps: usize,
    threads: usize,
    repack: bool,
) -> Result<f64, String> {
    let exe = llama_bench()?;
    let mut cmd = Command::new(&exe);
    cmd.arg("-m")
        .arg(file)
        .args(["-t", &threads.to_string()])
        .args(["-p", &prompt.to_string(), "-n", &generated.to_string()])
        .args(["-r", &reps.to_string(), "-o", "json"]);
    if !repack {
        cmd.args(["--repack", "0"]);
    }
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", exe.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "llama-bench failed ({}): {}",
            out.status,
            tail.join(" / ")
        ));
    }
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("llama-bench's JSON output: {e}"))?;
    let test = json
        .as_array()
        .and_then(|a| a.first())
        .ok_or("llama-bench printed no test")?;
    let samples: Option<Vec<f64>> = test["samples_ts"]
        .as_array()
        .and_then(|a| a.iter().map(serde_json::Value::as_f64).collect());
    match (samples, test["avg_ts"].as_f64()) {
        (Some(s), _) if !s.is_empty() => Ok(median(s)),
        (_, Some(avg)) => Ok(avg),
        _ => Err("llama-bench's JSON has no samples_ts or avg_ts".into()),
    }
}

/// The process's resident memory, in MB (`VmRSS` of `/proc/self/status`), if readable.
fn resident_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024.0 / 1e6)
}

/// Deterministic token ids in `1..vocab`, `n` of them (the prefill and first-token prompts; the
/// timing of a forward does not depend on which ids it reads).
fn prompt_ids(n: usize, vocab: usize) -> Vec<u32> {
    (0..n)
        .map(|i| (1 + (i * 7919 + 104_729) % (vocab - 1)) as u32)
        .collect()
}

/// `model`'s file and the model loaded from it on the default device; `None` after saying why
/// the row `name` is skipped (no file, or it does not load).
fn load(model: Model, name: &str) -> Option<(PathBuf, Decoder)> {
    let file = match model.file() {
        Ok(f) => f,
        Err(why) => {
            println!("{name}: skipped: {why}");
            return None;
        }
    };
    match Decoder::load(&file, &tinygrad_tensor::default_device()) {
        Ok(m) => Some((file, m)),
        Err(e) => {
            println!("{name}: skipped: the model does not load: {e}");
            None
        }
    }
}

/// The row of `phase` on `model`: `None` (after saying why) when the file is missing.
pub(super) fn bench(model: Model, phase: Phase, o: &Opts) -> Option<Row> {
    let what = match phase {
        Phase::Decode => "greedy decode",
        Phase::Prefill => "prefill 128 tokens",
        Phase::FirstToken => "time to first token (warm), 16-token prompt",
    };
    let name = format!("{}, {what}", model.label());
    let (ref_prompt, ref_tokens) = match model.reference() {
        Ok(r) => r,
        Err(why) => {
            println!("{name}: skipped: {why}");
            return None;
        }
    };
    let (file, mut m) = load(model, &name)?;
    let threads = threads();
    let greedy = SamplingOptions::default();
    let (prompt, new, runs) = match phase {
        Phase::Decode => (ref_prompt, ref_tokens.len(), reps(o.quick, 6)),
        Phase::Prefill => (prompt_ids(128, m.config.vocab_size), 1, reps(o.quick, 10)),
        Phase::FirstToken => (prompt_ids(16, m.config.vocab_size), 1, reps(o.quick, 10)),
    };
    let mut generate = || {
        m.generate(&prompt, new, &greedy, None, &mut |_| true)
            .expect("the model generates")
    };
    // the warm-up run compiles the kernels; its tokens are the ones checked
    let warm = generate();
    let tokens_ok = phase != Phase::Decode || warm.tokens == ref_tokens;
    let seconds = |g: tinygrad_models::Generation| match phase {
        // per decoded token (the first token comes from the prefill)
        Phase::Decode => g.decode_secs / g.tokens.len().saturating_sub(1).max(1) as f64,
        Phase::Prefill | Phase::FirstToken => g.first_token_secs,
    };
    let (llama_prompt, llama_gen) = match phase {
        Phase::Decode => (0, ref_tokens.len()),
        Phase::Prefill => (128, 0),
        Phase::FirstToken => (16, 0),
    };
    let mut times = Vec::new();
    let half = runs.div_ceil(2);
    for _ in 0..half {
        times.push(seconds(generate()));
    }
    let llama = llama_cpp_rate(&file, llama_prompt, llama_gen, 5, threads, true);
    // llama.cpp without its repacked layouts (on a CPU with AMX its default multiplies int8
    // activations on AMX tiles), where the build has the option
    let unpacked = llama_bench_repacks()
        .then(|| llama_cpp_rate(&file, llama_prompt, llama_gen, 5, threads, false));
    for _ in 0..half {
        times.push(seconds(generate()));
    }
    let secs = median(times);
    // per-token units: a decode row's secs are one token's; a prefill's, 128 tokens'
    let (unit, per_run) = match phase {
        Phase::Decode => (Unit::TokensPerSec(1.0), 1.0),
        Phase::Prefill => (Unit::TokensPerSec(128.0), 128.0),
        Phase::FirstToken => (Unit::Ms, 16.0),
    };
    let reference = |name: &str, rate: Result<f64, String>| match rate {
        Ok(rate) => Reference::timed(name, per_run / rate, unit, tokens_ok),
        Err(why) => Reference {
            name: name.into(),
            measured: None,
            note: format!(
                "n/a: {why}{}",
                if tokens_ok {
                    String::new()
                } else {
                    "; WRONG RESULT: the greedy tokens differ from transformers'".into()
                }
            ),
        },
    };
    let mut refs = vec![reference("llama.cpp", llama)];
    if let Some(rate) = unpacked {
        refs.push(reference("llama.cpp --repack 0", rate));
    }
    let c = &m.config;
    let kv_mb = (2 * c.num_layers * c.num_kv_heads * m.context() * c.head_dim * 4) as f64 / 1e6;
    let file_mb = std::fs::metadata(&file).map_or(0.0, |md| md.len() as f64 / 1e6);
    let rss = resident_mb().map_or("n/a".into(), |mb| format!("{mb:.0} MB"));
    let check = match phase {
        Phase::Decode => format!(
            "{} greedy tokens {} transformers'; ",
            ref_tokens.len(),
            if tokens_ok { "equal" } else { "DIFFER from" }
        ),
        _ => String::new(),
    };
    Some(Row {
        name,
        secs,
        unit,
        refs,
        note: format!(
            "{check}context {} tokens; process resident {rss} (file {file_mb:.0} MB, KV cache {kv_mb:.0} \
             MB); llama-bench -t {threads} -p {llama_prompt} -n {llama_gen}",
            m.context()
        ),
    })
}

/// Sequences decoded together in the batch row.
const BATCH: usize = 8;

/// Steps of one timed round of the batch row.
const BATCH_STEPS: usize = 32;

/// The continuous-batching row (what `tinygrad-serve` runs per step): aggregate tokens/s of
/// [`BATCH`] sequences decoded together with `Decoder::decode_slots` (rows in KV cache slots,
/// attending together), against one sequence decoded alone by the same call for the same
/// number of tokens (the reference; rounds of the two interleaved, each from freshly prefilled
/// 10-token prompts, so both decode at the same positions). Above 1: the batch's speed-up.
/// Checked: the batch's first row picks the same greedy tokens as that sequence alone.
pub(super) fn bench_batch(model: Model, o: &Opts) -> Option<Row> {
    let name = format!(
        "{}, {BATCH} sequences decoded together (decode_slots)",
        model.label()
    );
    let (_, mut m) = load(model, &name)?;
    m.set_context(256).expect("a context of 256 tokens");
    let vocab = m.config.vocab_size;
    let argmax = |l: &[f32]| {
        (0..l.len())
            .max_by(|&a, &b| l[a].total_cmp(&l[b]).then(b.cmp(&a)))
            .unwrap_or(0) as u32
    };
    let mut slots = m.new_slots(BATCH).expect("KV cache slots");
    // one round: the first `rows` slots prefilled anew, then BATCH_STEPS steps timed;
    // returns the seconds and the first row's tokens
    let mut round = |rows: usize| -> (f64, Vec<u32>) {
        let mut next: Vec<u32> = (0..rows)
            .map(|i| {
                slots.clear(i);
                let prompt: Vec<u32> = prompt_ids(10 + i, vocab)[i..].to_vec();
                let logits = m.prefill_slot(&mut slots, i, &prompt);
                argmax(&logits.expect("the prompt prefills"))
            })
            .collect();
        let mut first_row = vec![next[0]];
        let t0 = std::time::Instant::now();
        for _ in 0..BATCH_STEPS {
            let logits = m
                .decode_slots(&mut slots, &next)
                .expect("the batch decodes");
            next = logits.iter().map(|l| argmax(l)).collect();
            first_row.push(next[0]);
        }
        (t0.elapsed().as_secs_f64(), first_row)
    };
    // warm-up: both sizes compile, capture and replay their steps
    let (_, alone_tokens) = round(1);
    let (_, batch_tokens) = round(BATCH);
    let tokens_ok = alone_tokens == batch_tokens;
    let (mut one, mut many) = (Vec::new(), Vec::new());
    for _ in 0..reps(o.quick, 6) {
        one.push(round(1).0);
        many.push(round(BATCH).0);
    }
    let unit = Unit::TokensPerSec((BATCH * BATCH_STEPS) as f64);
    // one sequence's time for the batch's tokens
    let alone = median(one) * BATCH as f64;
    Some(Row {
        name,
        secs: median(many),
        unit,
        refs: vec![Reference::timed("1 sequence", alone, unit, tokens_ok)],
        note: format!(
            "{BATCH_STEPS} steps per round after 10-token prompts, medians of interleaved \
             rounds; the first row's greedy tokens {} the sequence's alone; the ratio is the \
             batch's speed-up over one sequence (tinygrad-serve's continuous batching)",
            if tokens_ok { "equal" } else { "DIFFER from" }
        ),
    })
}
