//! The schedule cache: a graph built again with the same structure — on the same or other input
//! buffers of the same sizes — reuses its schedule (with fresh output buffers, reading the
//! inputs it is given), and anything else — other constants, other sizes — is scheduled anew. (Its own test binary: the hit counter is process-wide, and the
//! tests take a lock so they don't count each other's hits.)

use std::sync::Mutex;

use tinygrad_tensor::{Axis, Tensor, compile_count, schedule_cache_hits, schedule_cache_misses};

static SERIAL: Mutex<()> = Mutex::new(());

fn chain(x: &Tensor, c: f64) -> Tensor {
    let y = (x * 0.5 + c).relu();
    (&y * &y).sum(Axis::Some(vec![1])) - 1.0
}

fn expect(xv: &[f32], c: f32) -> Vec<f32> {
    xv.chunks(3)
        .map(|r| {
            r.iter()
                .map(|&v| (v * 0.5 + c).max(0.0).powi(2))
                .sum::<f32>()
                - 1.0
        })
        .collect()
}

#[test]
fn same_graph_again_hits_and_computes_into_fresh_buffers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let xv = [1.0f32, -2.0, 3.0, 4.0, 0.5, -6.0];
    let x = Tensor::from_slice(&xv, &[2, 3]);
    let first = chain(&x, 1.0);
    let before = schedule_cache_hits();
    assert_eq!(first.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(
        schedule_cache_hits(),
        before,
        "the first schedule is a miss"
    );
    // the first graph is gone (realized into a buffer); an equal one is built from scratch
    let second = chain(&x, 1.0);
    assert_eq!(second.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(
        schedule_cache_hits(),
        before + 1,
        "same structure and inputs: a hit"
    );
    // both results live in their own buffers
    let third = chain(&x, 1.0);
    third.realize();
    assert_eq!(first.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(third.to_vec::<f32>(), expect(&xv, 1.0));
    assert_eq!(schedule_cache_hits(), before + 2);
}

#[test]
fn other_input_buffers_hit_other_constants_miss() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let xv = [0.5f32, 1.5, -2.5, 3.5, -4.5, 5.5];
    let x = Tensor::from_slice(&xv, &[2, 3]);
    chain(&x, 2.0).realize();
    let before = schedule_cache_hits();
    // another input buffer with the same shape: a hit, computing from the new input
    let zv = [2.0f32, 2.0, 2.0, -1.0, -1.0, -1.0];
    let z = Tensor::from_slice(&zv, &[2, 3]);
    assert_eq!(chain(&z, 2.0).to_vec::<f32>(), expect(&zv, 2.0));
    assert_eq!(
        schedule_cache_hits(),
        before + 1,
        "same structure on another buffer: a hit"
    );
    // one buffer in both places is another graph than two buffers: a miss, right values
    let y = &x * 0.5 + &z;
    let yy = &x * 0.5 + &x;
    assert_eq!(
        y.to_vec::<f32>(),
        xv.iter()
            .zip(&zv)
            .map(|(a, b)| a * 0.5 + b)
            .collect::<Vec<_>>()
    );
    let hits = schedule_cache_hits();
    assert_eq!(
        yy.to_vec::<f32>(),
        xv.iter().map(|a| a * 0.5 + a).collect::<Vec<_>>()
    );
    assert_eq!(schedule_cache_hits(), hits, "an aliased input must not hit");
    // another constant, another size: misses
    let hits = schedule_cache_hits();
    assert_eq!(chain(&x, 3.0).to_vec::<f32>(), expect(&xv, 3.0));
    let wv = [1.0f32, 2.0, 3.0];
    let w = Tensor::from_slice(&wv, &[1, 3]);
    assert_eq!(chain(&w, 2.0).to_vec::<f32>(), expect(&wv, 2.0));
    assert_eq!(schedule_cache_hits(), hits, "different graphs must not hit");
}

#[test]
fn a_hit_reads_the_inputs_current_contents() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // a parameter updated in place keeps its buffer: the same graph, new values
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    w.realize();
    let out = |w: &Tensor| (w * 2.0 + 1.0).to_vec::<f32>();
    assert_eq!(out(&w), vec![3.0, 5.0, 7.0]);
    w.assign(&(&w + 10.0)).realize();
    let before = schedule_cache_hits();
    assert_eq!(out(&w), vec![23.0, 25.0, 27.0]);
    assert_eq!(out(&w), vec![23.0, 25.0, 27.0]);
    assert!(
        schedule_cache_hits() > before,
        "the repeated graph must hit"
    );
}

/// A transformer block written the plain way (no `Jit`): layer norm, attention with softmax,
/// a GELU MLP and residuals. Its second forward pass, on new input data in a new buffer,
/// schedules nothing new and compiles nothing: every realize is a cache hit (counters, not
/// timings), and the result is the first pass's function of the new input.
#[test]
fn a_repeated_forward_pass_schedules_and_compiles_nothing_new() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (t, d) = (6usize, 16usize);
    let weight = |seed: u64, rows: usize, cols: usize| {
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| (((i as u64 * 7919 + seed * 131) % 97) as f32 / 97.0 - 0.5) * 0.3)
            .collect();
        Tensor::from_slice(&v, &[rows, cols])
    };
    let (wq, wk, wv) = (weight(1, d, d), weight(2, d, d), weight(3, d, d));
    let (w1, w2) = (weight(4, d, 4 * d), weight(5, 4 * d, d));
    let forward = |x: &Tensor| {
        let h = x.layernorm(Axis::Some(vec![-1]), 1e-5);
        let (q, k, v) = (h.matmul(&wq), h.matmul(&wk), h.matmul(&wv));
        let att = (q.matmul(&k.t()) * (1.0 / (d as f64).sqrt())).softmax(-1);
        let x = x + att.matmul(&v);
        let m = x
            .layernorm(Axis::Some(vec![-1]), 1e-5)
            .matmul(&w1)
            .gelu()
            .matmul(&w2);
        x + m
    };
    let input = |seed: u64| {
        let x = weight(seed, t, d) * 4.0;
        x.realize();
        x
    };
    let first = forward(&input(10)).to_vec::<f32>();
    let (misses, hits, compiled) = (
        schedule_cache_misses(),
        schedule_cache_hits(),
        compile_count(),
    );
    let x = input(11);
    let (misses, hits, compiled) = (
        misses.max(schedule_cache_misses()),
        hits.max(schedule_cache_hits()),
        compiled.max(compile_count()),
    );
    let second = forward(&x).to_vec::<f32>();
    assert_eq!(
        schedule_cache_misses(),
        misses,
        "the second forward scheduled anew"
    );
    assert!(
        schedule_cache_hits() > hits,
        "the second forward did not use the cache"
    );
    assert_eq!(
        compile_count(),
        compiled,
        "the second forward compiled a kernel"
    );
    // the same function of another input: the first pass again on that input agrees exactly
    assert_ne!(first, second);
    assert_eq!(forward(&x).to_vec::<f32>(), second);
}
