//! Several sequences decoded together ([`Decoder::decode_batch`]) against each run alone: the
//! same greedy tokens as a batch of one and as [`Decoder::generate`], logits within 1e-4, with
//! sequences of different lengths joining, leaving and being reused (each batch size's first two
//! steps run the forward, later ones replay its Jit: both are compared); a batch size's kernels
//! are compiled once and then replayed without scheduling; bad input is an error. The same for
//! [`Slots`] ([`Decoder::decode_slots`]: the rows attend together), with sequences moved
//! between slots as a server compacts them. Models: the tiny LLaMA (GGUF f32 and Q4_0), Gemma 3
//! (sliding window of 3, local rotary base), GPT-2 (learned positions) and Qwen3 (head norms).

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use tinygrad_models::{Decoder, ModelError, SamplingOptions, Sequence, Slots};
use tinygrad_tensor::{compile_count, default_device, schedule_cache_hits};

const MODELS: &[&str] = &[
    "llama_tiny_f32.gguf",
    "llama_tiny_q4_0.gguf",
    "gemma3_tiny_f32.gguf",
    "gpt2_tiny",
    "qwen3_tiny_f32.gguf",
];

/// Prompts of 3, 7 and 1 tokens, and one of 5 (ids below every tiny model's vocabulary).
const PROMPTS: &[&[u32]] = &[
    &[5, 17, 42],
    &[9, 3, 77, 21, 60, 8, 33],
    &[50],
    &[12, 88, 40, 2, 64],
];

/// The tests one at a time: the compile counter is process-wide (a test compiling at the same
/// time would count in another's steps).
fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn load(name: &str) -> Decoder {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    Decoder::load(&path, &default_device()).unwrap()
}

/// The greedy choice (the first of equal maxima, as `Sampler`).
fn argmax(l: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in l.iter().enumerate() {
        if x > l[best] {
            best = i;
        }
    }
    best as u32
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A greedy run: the tokens chosen (after the prompt's and each step's logits) and each
/// step's logits.
#[derive(Default)]
struct Run {
    tokens: Vec<u32>,
    logits: Vec<Vec<f32>>,
}

impl Run {
    /// Records the prompt's logits (their greedy token).
    fn start(logits: Vec<f32>) -> Run {
        Run {
            tokens: vec![argmax(&logits)],
            logits: Vec::new(),
        }
    }

    fn next(&self) -> u32 {
        *self.tokens.last().unwrap()
    }

    fn push(&mut self, logits: Vec<f32>) {
        self.tokens.push(argmax(&logits));
        self.logits.push(logits);
    }
}

/// `prompt` alone: prefilled, then `steps` decode steps of a batch of one.
fn solo(m: &Decoder, prompt: &[u32], steps: usize) -> Run {
    let mut seq = m.new_sequence().unwrap();
    let mut run = Run::start(m.prefill(&mut seq, prompt).unwrap());
    for _ in 0..steps {
        let out = m.decode_batch(&mut [&mut seq], &[run.next()]).unwrap();
        run.push(out.into_iter().next().unwrap());
    }
    assert_eq!(seq.len(), prompt.len() + steps);
    run
}

/// One decode step of the sequences `which` (indices into `seqs` and `runs`).
fn step(m: &Decoder, seqs: &mut [Sequence], runs: &mut [Run], which: &[usize]) {
    let tokens: Vec<u32> = which.iter().map(|&i| runs[i].next()).collect();
    let mut slots: Vec<Option<&mut Sequence>> = seqs.iter_mut().map(Some).collect();
    let mut batch: Vec<&mut Sequence> = which.iter().map(|&i| slots[i].take().unwrap()).collect();
    let out = m.decode_batch(&mut batch, &tokens).unwrap();
    assert_eq!(out.len(), which.len());
    for (&i, logits) in which.iter().zip(out) {
        runs[i].push(logits);
    }
}

/// `run` equals `reference` token for token and in logits (within 1e-4), naming `what`.
fn check(run: &Run, reference: &Run, what: &str) {
    assert_eq!(run.tokens, reference.tokens, "{what}: tokens");
    assert_eq!(run.logits.len(), reference.logits.len(), "{what}: steps");
    for (s, (a, b)) in run.logits.iter().zip(&reference.logits).enumerate() {
        let d = max_abs_diff(a, b);
        assert!(d <= 1e-4, "{what}: step {s}: logits differ by {d}");
    }
}

#[test]
fn three_sequences_decode_as_each_alone() {
    let _one = serial();
    const STEPS: usize = 8;
    for name in MODELS {
        let mut m = load(name);
        let mut seqs: Vec<Sequence> = (0..3).map(|_| m.new_sequence().unwrap()).collect();
        let mut runs: Vec<Run> = seqs
            .iter_mut()
            .zip(PROMPTS)
            .map(|(s, p)| Run::start(m.prefill(s, p).unwrap()))
            .collect();
        for _ in 0..STEPS {
            step(&m, &mut seqs, &mut runs, &[0, 1, 2]);
        }
        for (i, (run, prompt)) in runs.iter().zip(PROMPTS).enumerate() {
            assert_eq!(seqs[i].len(), prompt.len() + STEPS);
            let what = format!("{name}: sequence {i}");
            check(run, &solo(&m, prompt, STEPS), &what);
            let g = m
                .generate(
                    prompt,
                    STEPS + 1,
                    &SamplingOptions::default(),
                    None,
                    &mut |_| true,
                )
                .unwrap();
            assert_eq!(run.tokens, g.tokens, "{what}: against generate");
        }
    }
}

#[test]
fn sequences_join_and_leave() {
    let _one = serial();
    for name in ["llama_tiny_q4_0.gguf", "gemma3_tiny_f32.gguf", "gpt2_tiny"] {
        let m = load(name);
        let mut seqs: Vec<Sequence> = (0..4).map(|_| m.new_sequence().unwrap()).collect();
        let mut runs: Vec<Run> = (0..4).map(|_| Run::default()).collect();
        for i in 0..3 {
            runs[i] = Run::start(m.prefill(&mut seqs[i], PROMPTS[i]).unwrap());
        }
        let mut steps = [0usize; 4];
        let mut go = |seqs: &mut [Sequence], runs: &mut [Run], which: &[usize]| {
            step(&m, seqs, runs, which);
            for &i in which {
                steps[i] += 1;
            }
        };
        for _ in 0..3 {
            go(&mut seqs, &mut runs, &[0, 1, 2]);
        }
        // a fourth joins (first in the batch: rows need not follow the sequences' order)
        runs[3] = Run::start(m.prefill(&mut seqs[3], PROMPTS[3]).unwrap());
        for _ in 0..2 {
            go(&mut seqs, &mut runs, &[3, 0, 1, 2]);
        }
        // the second leaves
        for _ in 0..3 {
            go(&mut seqs, &mut runs, &[0, 3, 2]);
        }
        assert_eq!(steps, [8, 5, 8, 5]);
        for i in 0..4 {
            let what = format!("{name}: sequence {i}");
            check(&runs[i], &solo(&m, PROMPTS[i], steps[i]), &what);
        }
    }
}

#[test]
fn a_cleared_sequence_is_reused_without_stale_data() {
    let _one = serial();
    for name in ["llama_tiny_f32.gguf", "gemma3_tiny_f32.gguf"] {
        let m = load(name);
        let (mut a, mut b) = (m.new_sequence().unwrap(), m.new_sequence().unwrap());
        let mut ra = Run::start(m.prefill(&mut a, PROMPTS[1]).unwrap());
        for _ in 0..5 {
            let out = m.decode_batch(&mut [&mut a], &[ra.next()]).unwrap();
            ra.push(out.into_iter().next().unwrap());
        }
        assert_eq!(a.len(), 12);
        a.clear();
        assert!(a.is_empty());
        assert_eq!(a.context(), m.context());
        // reused for a shorter prompt, next to a longer sequence (a's cache still holds the
        // old prompt's keys past its new length: they must not count)
        let mut runs = [
            Run::start(m.prefill(&mut a, PROMPTS[0]).unwrap()),
            Run::start(m.prefill(&mut b, PROMPTS[1]).unwrap()),
        ];
        for _ in 0..6 {
            let tokens = [runs[0].next(), runs[1].next()];
            let out = m.decode_batch(&mut [&mut a, &mut b], &tokens).unwrap();
            for (r, l) in runs.iter_mut().zip(out) {
                r.push(l);
            }
        }
        check(
            &runs[0],
            &solo(&m, PROMPTS[0], 6),
            &format!("{name}: reused"),
        );
        check(
            &runs[1],
            &solo(&m, PROMPTS[1], 6),
            &format!("{name}: beside"),
        );
    }
}

#[test]
fn steps_of_one_batch_size_compile_nothing_and_replay_without_scheduling() {
    let _one = serial();
    let m = load("llama_tiny_q4_0.gguf");
    let mut seqs: Vec<Sequence> = (0..3).map(|_| m.new_sequence().unwrap()).collect();
    let mut runs: Vec<Run> = seqs
        .iter_mut()
        .zip(PROMPTS)
        .map(|(s, p)| Run::start(m.prefill(s, p).unwrap()))
        .collect();
    // the first step compiles, the second captures the Jit
    for _ in 0..2 {
        step(&m, &mut seqs, &mut runs, &[0, 1, 2]);
    }
    let (compiled, scheduled) = (compile_count(), schedule_cache_hits());
    for _ in 0..5 {
        step(&m, &mut seqs, &mut runs, &[2, 0, 1]);
    }
    assert_eq!(
        compile_count(),
        compiled,
        "decode steps compiled new kernels"
    );
    // (a step run without the Jit schedules each realize again, from the schedule cache;
    // `JIT=0` turns the Jit off, `JIT_CHECK=1` runs each replay again without it)
    let flag = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty() && v != "0")
    };
    if std::env::var("JIT").as_deref() != Ok("0") && flag("JIT_CHECK").is_none() {
        assert_eq!(
            schedule_cache_hits(),
            scheduled,
            "decode steps were scheduled, not replayed"
        );
    }
}

/// The message of an input error.
fn message<T: std::fmt::Debug>(r: tinygrad_models::Result<T>) -> String {
    match r {
        Err(ModelError::Input { message }) => message,
        other => panic!("expected an input error, got {other:?}"),
    }
}

#[test]
fn bad_input_is_an_error() {
    let _one = serial();
    let mut m = load("llama_tiny_f32.gguf");
    let vocab = m.config.vocab_size as u32;
    let mut s = m.new_sequence().unwrap();
    let e = message(m.prefill(&mut s, &[]));
    assert!(e.contains("Decoder::prefill: no tokens"), "{e}");
    let e = message(m.prefill(&mut s, &[1, vocab]));
    assert!(
        e.contains(&format!(
            "token {vocab} is outside the vocabulary of {vocab}"
        )),
        "{e}"
    );
    assert!(s.is_empty());
    m.prefill(&mut s, &[1, 2]).unwrap();
    let e = message(m.decode_batch(&mut [], &[]));
    assert!(e.contains("Decoder::decode_batch: no sequences"), "{e}");
    let e = message(m.decode_batch(&mut [&mut s], &[1, 2]));
    assert!(e.contains("1 sequences but 2 tokens"), "{e}");
    let e = message(m.decode_batch(&mut [&mut s], &[vocab + 3]));
    assert!(
        e.contains(&format!("token {} is outside the vocabulary", vocab + 3)),
        "{e}"
    );
    assert_eq!(s.len(), 2);

    // a context of 8: 6 held, 3 more do not fit
    m.set_context(8).unwrap();
    let e = message(m.prefill(&mut s, &[1]));
    assert!(e.contains("made for a context of"), "{e}");
    assert!(e.contains("now 8"), "{e}");
    let mut s = m.new_sequence().unwrap();
    assert_eq!(s.context(), 8);
    m.prefill(&mut s, &[1, 2, 3, 4, 5, 6]).unwrap();
    let e = message(m.prefill(&mut s, &[1, 2, 3]));
    assert!(
        e.contains("holds 6 tokens; 3 more exceed its context of 8 tokens"),
        "{e}"
    );
    let mut t = m.new_sequence().unwrap();
    m.prefill(&mut t, &[1]).unwrap();
    m.decode_batch(&mut [&mut s, &mut t], &[1, 1]).unwrap();
    m.decode_batch(&mut [&mut s, &mut t], &[1, 1]).unwrap();
    assert_eq!((s.len(), t.len()), (8, 3));
    let e = message(m.decode_batch(&mut [&mut t, &mut s], &[1, 1]));
    assert!(
        e.contains("sequence 1 holds 8 tokens; 1 more exceed its context of 8 tokens"),
        "{e}"
    );
    assert_eq!((s.len(), t.len()), (8, 3));
}

#[test]
fn decoder_and_sequence_are_send() {
    fn send<T: Send>() {}
    send::<Decoder>();
    send::<Sequence>();
}

/// One decode step of slots `0..runs.len()`, each pushing to its run.
fn slot_step(m: &Decoder, slots: &mut Slots, runs: &mut [&mut Run]) {
    let tokens: Vec<u32> = runs.iter().map(|r| r.next()).collect();
    let out = m.decode_slots(slots, &tokens).unwrap();
    assert_eq!(out.len(), runs.len());
    for (r, logits) in runs.iter_mut().zip(out) {
        r.push(logits);
    }
}

#[test]
fn slots_decode_as_each_alone_as_sequences_join_move_and_leave() {
    let _one = serial();
    const FIRST: usize = 3;
    for name in MODELS {
        let m = load(name);
        let mut slots = m.new_slots(4).unwrap();
        assert_eq!((slots.count(), slots.context()), (4, m.context()));
        // three prompts of different lengths in slots 0..3 (the third first: any order)
        let mut runs: Vec<Run> = (0..4).map(|_| Run::default()).collect();
        for i in [2, 0, 1] {
            runs[i] = Run::start(m.prefill_slot(&mut slots, i, PROMPTS[i]).unwrap());
        }
        let mut steps = [0usize; 4];
        for _ in 0..FIRST {
            let [a, b, c, _] = &mut runs[..] else {
                unreachable!()
            };
            slot_step(&m, &mut slots, &mut [a, b, c]);
        }
        for s in &mut steps[..3] {
            *s += FIRST;
        }
        // the fourth joins in slot 3; two steps of four rows
        runs[3] = Run::start(m.prefill_slot(&mut slots, 3, PROMPTS[3]).unwrap());
        for _ in 0..2 {
            let [a, b, c, d] = &mut runs[..] else {
                unreachable!()
            };
            slot_step(&m, &mut slots, &mut [a, b, c, d]);
        }
        for s in &mut steps {
            *s += 2;
        }
        // the second (slot 1) leaves: the fourth moves into its slot
        slots.move_slot(3, 1).unwrap();
        assert_eq!((slots.len(1), slots.len(3)), (PROMPTS[3].len() + 2, 0));
        for _ in 0..3 {
            let [a, _, c, d] = &mut runs[..] else {
                unreachable!()
            };
            slot_step(&m, &mut slots, &mut [a, d, c]);
        }
        for i in [0, 2, 3] {
            steps[i] += 3;
        }
        assert_eq!(steps, [8, 5, 8, 5]);
        for i in 0..4 {
            let what = format!("{name}: slots: sequence {i}");
            check(&runs[i], &solo(&m, PROMPTS[i], steps[i]), &what);
        }
        // a cleared slot is reused for a short prompt beside longer ones (its old keys past
        // its new length must not count)
        slots.clear(0);
        let mut fresh = Run::start(m.prefill_slot(&mut slots, 0, PROMPTS[2]).unwrap());
        for _ in 0..4 {
            let [_, _, c, d] = &mut runs[..] else {
                unreachable!()
            };
            slot_step(&m, &mut slots, &mut [&mut fresh, d, c]);
        }
        check(
            &fresh,
            &solo(&m, PROMPTS[2], 4),
            &format!("{name}: reused slot"),
        );
        check(
            &runs[3],
            &solo(&m, PROMPTS[3], 9),
            &format!("{name}: moved, beside"),
        );
    }
}

#[test]
fn slot_steps_compile_nothing_new_whatever_the_slot_or_positions() {
    let _one = serial();
    let m = load("llama_tiny_q4_0.gguf");
    let mut slots = m.new_slots(3).unwrap();
    let mut runs: Vec<Run> = (0..3)
        .map(|i| Run::start(m.prefill_slot(&mut slots, i, PROMPTS[1]).unwrap()))
        .collect();
    // the first step compiles, the second captures the Jit; a move compiles its kernels once
    for _ in 0..2 {
        let [a, b, c] = &mut runs[..] else {
            unreachable!()
        };
        slot_step(&m, &mut slots, &mut [a, b, c]);
    }
    slots.move_slot(2, 1).unwrap();
    slots.move_slot(1, 2).unwrap();
    slots.move_slot(2, 1).unwrap();
    let (compiled, scheduled) = (compile_count(), schedule_cache_hits());
    for _ in 0..5 {
        let [a, b, c] = &mut runs[..] else {
            unreachable!()
        };
        slot_step(&m, &mut slots, &mut [a, b, c]);
    }
    // other slots, other lengths: the same kernels
    slots.move_slot(0, 2).unwrap();
    slots.clear(0);
    m.prefill_slot(&mut slots, 0, PROMPTS[1]).unwrap();
    assert_eq!(
        compile_count(),
        compiled,
        "slot steps, moves or a prefill compiled anew"
    );
    let replaying = std::env::var("JIT").as_deref() != Ok("0")
        && std::env::var("JIT_CHECK").map_or(true, |v| v.is_empty() || v == "0");
    if replaying {
        let before = schedule_cache_hits();
        for _ in 0..3 {
            let [a, b, c] = &mut runs[..] else {
                unreachable!()
            };
            slot_step(&m, &mut slots, &mut [a, b, c]);
        }
        assert_eq!(
            schedule_cache_hits(),
            before,
            "slot steps were scheduled, not replayed"
        );
    }
    let _ = scheduled;
}

#[test]
fn bad_slot_input_is_an_error() {
    let _one = serial();
    let mut m = load("llama_tiny_f32.gguf");
    let vocab = m.config.vocab_size as u32;
    let e = message(m.new_slots(0));
    assert!(e.contains("Decoder::new_slots: 0 slots"), "{e}");
    let mut slots = m.new_slots(2).unwrap();
    let e = message(m.prefill_slot(&mut slots, 2, &[1]));
    assert!(
        e.contains("Decoder::prefill_slot: slot 2 of 2 slots"),
        "{e}"
    );
    let e = message(m.prefill_slot(&mut slots, 0, &[]));
    assert!(e.contains("Decoder::prefill_slot: no tokens"), "{e}");
    let e = message(m.decode_slots(&mut slots, &[]));
    assert!(
        e.contains("Decoder::decode_slots: 0 tokens for 2 slots"),
        "{e}"
    );
    let e = message(m.decode_slots(&mut slots, &[1, 2, 3]));
    assert!(e.contains("3 tokens for 2 slots"), "{e}");
    let e = message(m.decode_slots(&mut slots, &[vocab]));
    assert!(
        e.contains(&format!("token {vocab} is outside the vocabulary")),
        "{e}"
    );
    let e = message(slots.move_slot(0, 5));
    assert!(
        e.contains("Slots::move_slot: slots 0 -> 5 of 2 slots"),
        "{e}"
    );
    assert_eq!((slots.len(0), slots.len(1)), (0, 0));
    m.set_context(4).unwrap();
    let e = message(m.decode_slots(&mut slots, &[1]));
    assert!(e.contains("made for a context of"), "{e}");
    let mut slots = m.new_slots(1).unwrap();
    m.prefill_slot(&mut slots, 0, &[1, 2, 3]).unwrap();
    m.decode_slots(&mut slots, &[1]).unwrap();
    let e = message(m.decode_slots(&mut slots, &[1]));
    assert!(
        e.contains("slot 0 holds 4 tokens; 1 more exceed its context of 4 tokens"),
        "{e}"
    );
}
